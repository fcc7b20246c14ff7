"""Using trained models: :class:`~.embedder.ElmoEmbedder`, :class:`~.text_classifier.TextClassifier`,
batched class probabilities (:mod:`.class_probabilities`) and the frozen biLM's layers computed once (:mod:`.layer_cache`).
Independent of :mod:`elmo.training`."""
