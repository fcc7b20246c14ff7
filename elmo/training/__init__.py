"""Training: the loop (:mod:`.trainer`), early stopping (:mod:`.early_stopping`), training checkpoints
and resume (:mod:`.state`), metrics (:mod:`.metrics`) and language-model evaluation (:mod:`.evaluation`)."""
