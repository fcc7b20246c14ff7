"""The networks: the biLMs, the layer mixes, the ELMo layer, the classifiers, static embeddings, model files."""
