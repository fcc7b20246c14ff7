"""Using trained models: :class:`~.embedder.ELMoEmbedder`, :class:`~.text_classifier.TextClassifier`,
batched prediction (:mod:`.prediction`) and the frozen biLM's layers computed once (:mod:`.layer_cache`).
Independent of :mod:`elmo.training`."""
