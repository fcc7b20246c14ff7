"""Text in, tensors out: AG News reading (:mod:`.agnews`), cleaning and tokenising (:mod:`.text`), the
vocabulary (:mod:`.vocab`), character ids (:mod:`.chars`), corpora as read and encoded (:mod:`.corpus`), which
documents share a batch (:mod:`.batching`) and your own corpus streamed from disk (:mod:`.stream`).
Imports only :mod:`elmo.errors` and :mod:`elmo.artifacts` from the rest of the project."""
