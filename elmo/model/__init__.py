"""The networks: the biLM (:mod:`.bilm`) with its character CNN (:mod:`.char_cnn`), the layer mixes
(:mod:`.mix`), the :class:`~elmo.model.elmo.Elmo` layer (:mod:`.elmo`), the classifier heads
(:mod:`.classifier`), static embeddings (:mod:`.static`) and the model files (:mod:`.serialization`).
Built on :mod:`elmo.data`; knows nothing of training loops, devices or pipelines."""
