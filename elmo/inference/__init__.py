"""Using trained models: the embedder, the text classifier, batched class probabilities and the layer cache."""
