"""Text in, tensors out: reading, tokenising, vocabularies, character ids, corpora and batching."""
