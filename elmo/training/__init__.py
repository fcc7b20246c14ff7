"""Training: the loop, early stopping, checkpoints and resume, metrics and language-model evaluation."""
