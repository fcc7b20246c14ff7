"""Pre-trained ELMo in a notebook: contextual vectors of every biLM layer, from our biLM or the published one.

:class:`ElmoEmbedder` has AllenNLP's interface and takes the published ELMo files (bilm-tf's ``options.json`` +
``weights.hdf5``), a models folder holding any biLM the project writes (:meth:`ElmoEmbedder.from_pretrained`) or a
biLM object (examples: docs/published_elmo.md, docs/library.md). Tokens are lower-cased for our biLM (trained
lower-cased) and kept as given for the published models.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence

from ..data.batching import bucket_batches
from ..data.corpus import EncodedCorpus, encode_corpus
from ..data.text import tokenize
from ..data.vocab import Vocabulary
from ..errors import ElmoError
from ..model.bilm import CHUNK_SIZE, BiLM
from ..model.language_model import States
from ..model.serialization import open_bilm
from ..runtime.device import autocast, resolve_device, resolve_precision

#: sentences read (and length-bucketed together) per pass of :meth:`ElmoEmbedder.embed_sentences`, in batches
CHUNK_BATCHES = 16
#: where AllenNLP publishes the ELMo files (``<name>/elmo_<name>_options.json`` and ``_weights.hdf5``)
PUBLISHED_URL = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/"


class ElmoEmbedder:
    """Contextual vectors of every biLM layer for tokenised sentences, with AllenNLP's ``ElmoEmbedder`` interface: h_0
    (token vectors), h_1 .. h_L (LSTM layers), each ``D = bilm.output_dim`` wide (both directions; paper eq. 1).
    Words outside our biLM's vocabulary read as ``<unk>`` for a word biLM; a character biLM (ours with
    ``--token-encoder char``, or a published one) spells them out.

    Args:
        options_file: bilm-tf's ``options.json``, or alone a models folder / ``.pt`` file (:meth:`from_pretrained`);
            weight_file: bilm-tf's ``weights.hdf5``. Neither with ``bilm``.
        cuda_device: AllenNLP's (-1 = CPU, k >= 0 = GPU k) or device: ours (``"auto"``, ``"cpu"``, ``"cuda"``); at
            most one (default: a GPU when present).
        bilm: a :class:`~elmo.model.bilm.BiLM` of either architecture, moved to the device in eval mode; vocab: our
            biLM's :class:`~elmo.data.vocab.Vocabulary` (a published has none).
        stateful: ``False``: every sentence starts from zero LSTM states, so its vectors depend on it alone. ``True``:
            bilm-tf / AllenNLP's states carried row by row from call to call, batches in the given order (the rule:
            docs/published_elmo.md, "Stateless and stateful"); :meth:`reset_states` forgets them.
        precision: ``"fp32"`` (default, AllenNLP's), ``"auto"`` (bf16 where native or on GPUs:
            :func:`elmo.runtime.device.resolve_precision`), ``"bf16"`` or ``"fp16"`` (CUDA); output is float32.
        vocab_to_cache: words whose token vectors are computed once here (as AllenNLP's); others once per distinct
            word per pass of up to :data:`CHUNK_BATCHES` batches.
        max_tokens: padded-token budget per internal batch (stateless mode).
        chunk_size: longer sentences run in chunks of at most this many positions (rows × tokens), carrying the LSTM
            states: the same vectors (to float rounding), in memory bounded by the chunk. Sets ``bilm.chunk_size``
            (default :data:`elmo.model.bilm.CHUNK_SIZE`; ``None``: one pass whatever the length).

    Raises ElmoError: no file; one of bilm-tf's two files without the other; our biLM with a second file; bad files
    (:func:`~elmo.model.serialization.open_bilm`); both files and ``bilm``; our biLM without ``vocab``; a bad device,
    precision or ``chunk_size``.
    """

    def __init__(self, options_file: str | os.PathLike | None = None, weight_file: str | os.PathLike | None = None,
                 cuda_device: int | None = None, *, bilm: BiLM | None = None,
                 vocab: Vocabulary | None = None, device: str | torch.device | None = None, stateful: bool = False,
                 precision: str = "fp32", vocab_to_cache: Sequence[str] | None = None, max_tokens: int = 16384,
                 chunk_size: int | None = CHUNK_SIZE):
        if device is not None and cuda_device is not None:
            raise ElmoError("give cuda_device or device, not both")
        if cuda_device is not None:  # AllenNLP's: -1 = CPU, k = cuda:k
            device = "cpu" if cuda_device < 0 else f"cuda:{cuda_device}"
        if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
            raise ElmoError(f"chunk_size must be a positive number of tokens or None, got {chunk_size!r}",
                            field="chunk_size")
        if bilm is None:
            given = [p for p in (options_file, weight_file) if p is not None]
            if not given:
                raise ElmoError("give options_file and weight_file (the published ELMo files, e.g. from "
                                f"{PUBLISHED_URL}2x4096_512_2048cnn_2xhighway/) or a models folder / bilstm.pt of our "
                                "own biLM")
            ours = [Path(p).is_dir() or Path(p).suffix in (".pt", "") for p in given]  # a models folder (even missing), .pt
            if any(ours) and len(given) == 2 and Path(given[0]) != Path(given[1]):
                raise ElmoError(f"{given[ours.index(True)]} is our own biLM: give it alone, without a second file")
            if not any(ours) and len(given) == 1:
                raise ElmoError(f"a published (bilm-tf) biLM needs both files: options_file and weight_file (got only "
                                f"{given[0]})")
            opened = open_bilm(given[0]) if any(ours) else open_bilm(*given)
            bilm, vocab = opened.bilm, opened.vocab
        elif options_file is not None or weight_file is not None:
            raise ElmoError("give either a biLM object (bilm=...) or its files (options_file, weight_file), not both")
        vocab = vocab if vocab is not None else bilm.vocab
        if not bilm.cased and vocab is None:
            raise ElmoError("our biLM needs its vocabulary (load_bilm returns it)")
        bilm.vocab = vocab
        self.device = resolve_device("auto" if device is None else device)
        self.amp_dtype = resolve_precision(precision, self.device)
        self.bilm = bilm.to(self.device).eval()
        self.bilm.chunk_size = chunk_size
        self.vocab = vocab
        self.max_tokens = max_tokens
        self.stateful = stateful
        self._states: States | None = None
        self._cache_index: dict[str, int] = {}
        self._cache_vectors: torch.Tensor | None = None
        if vocab_to_cache:
            words = list(dict.fromkeys(w if bilm.cased else w.lower() for w in vocab_to_cache))
            self._cache_vectors = self._compute_token_vectors(words)
            self._cache_index = {w: i for i, w in enumerate(words)}

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike = "models", device: str | torch.device = "auto",
                        precision: str = "fp32") -> "ElmoEmbedder":
        """The biLM a models folder (or one of its files) holds, whichever kind (:func:`~elmo.model.serialization.open_bilm`,
        the softmax left out), ``device`` and ``precision`` as above. Raises ElmoError: the folder holds none of them, a
        file is corrupt or not an ELMo biLM; an unknown precision."""
        opened = open_bilm(path)
        return cls(bilm=opened.bilm, vocab=opened.vocab, device=device, precision=precision)

    @property
    def num_layers(self) -> int:
        """L + 1 layers per token."""
        return self.bilm.num_layers

    @property
    def dim(self) -> int:
        """Width D of each layer."""
        return self.bilm.output_dim

    def tokenize(self, text: str) -> list[str]:
        """The project's tokeniser (:func:`elmo.data.text.tokenize`), lower-casing for our biLM only."""
        return tokenize(text, lowercase=not self.bilm.cased)

    def reset_states(self) -> None:
        """Forget the LSTM states carried between calls (stateful mode); the next call starts from zeros."""
        self._states = None

    def encode(self, sentences: Sequence[Sequence[str]]) -> EncodedCorpus:
        """Non-empty token lists as a classifier reads them: ids of ``vocab`` (+ spellings for a character biLM)."""
        config = self.bilm.config
        return encode_corpus(sentences, self.vocab, max_chars=config.chars_per_token, char_scheme=config.char_scheme)

    def batch_tensors(self, sentences: Sequence[Sequence[str]]) -> dict[str, torch.Tensor]:
        """Right-padded model inputs for non-empty token lists (our biLM): ``{"ids": (B, T) int64,
        "lengths": (B,) int64}`` plus ``"chars": (B, T, C)`` for a character biLM."""
        return self.encode(sentences).collate(np.arange(len(sentences)))

    # --- one path for every biLM: each distinct word's token vector once, then the LSTMs ----------
    @torch.no_grad()
    def _compute_token_vectors(self, words: list[str]) -> torch.Tensor:
        """``(len(words), W)`` float32 token vectors on the device (``bilm.word_vectors``, once per word)."""
        with autocast(self.device, self.amp_dtype):
            return self.bilm.word_vectors(words).float()

    def _token_table(self, words: list[str]) -> torch.Tensor:
        """Token vectors of distinct ``words``, ``(len(words), W)``: from ``vocab_to_cache`` where cached."""
        if self._cache_vectors is None:
            return self._compute_token_vectors(words)
        cached = torch.tensor([self._cache_index.get(w, -1) for w in words], dtype=torch.long)
        table = self._cache_vectors[cached.clamp_min(0).to(self.device)]
        missing = (cached < 0).nonzero().flatten()
        if len(missing):
            table[missing.to(self.device)] = self._compute_token_vectors([words[i] for i in missing.tolist()])
        return table

    def _embed(self, sentences: Sequence[Sequence[str]], batch_size: int | None) -> list[np.ndarray]:
        """Vectors of token lists (lower-cased for our biLM: training lower-cases), ``batch_size`` sentences per pass
        (all in one when ``None``). Raises :class:`ElmoError` on input that is not a list of lists of str."""
        if isinstance(sentences, str):
            raise ElmoError("expected a list of token lists, got a str (tokenize it first: e.tokenize(text))")
        for i, sentence in enumerate(sentences):
            if isinstance(sentence, str) or not all(isinstance(t, str) for t in sentence):
                raise ElmoError(f"sentence {i}: expected a list of str tokens, got {type(sentence).__name__} "
                                f"{str(sentence)[:60]!r}")
        sentences = [list(s) if self.bilm.cased else [t.lower() for t in s] for s in sentences]
        out = [np.zeros((self.num_layers, 0, self.dim), dtype=np.float32) for _ in sentences]
        rows = [i for i, s in enumerate(sentences) if s or self.stateful]  # stateful: an empty row still reads <S> </S>
        if not any(sentences):
            return out
        types: dict[str, int] = {}
        ids = [[types.setdefault(w, len(types)) for w in sentences[i]] for i in rows]
        vectors = self._token_table(list(types))
        lengths = np.array([len(x) for x in ids], dtype=np.int64)
        size = batch_size or len(rows)
        batches = ([np.arange(s, min(s + size, len(rows))) for s in range(0, len(rows), size)] if self.stateful
                   else bucket_batches(lengths, size, self.max_tokens if batch_size else None))
        for index in batches:
            layers = self._run(vectors, [ids[j] for j in index], lengths[index])
            for row, j in enumerate(index):  # a batch's only row, when it fills it: no second copy of a long document
                whole = len(index) == 1 and lengths[j] == layers.shape[2]
                out[rows[j]] = layers[:, 0] if whole else layers[:, row, :lengths[j]].copy()  # the copy frees the batch
        return out

    @torch.no_grad()
    def _run(self, vectors: torch.Tensor, ids: list[list[int]], lengths: np.ndarray) -> np.ndarray:
        """``(L + 1, B, T, D)`` float32 layers of one batch of type-id rows (carrying states when stateful)."""
        index = pad_sequence([torch.tensor(row, dtype=torch.long) for row in ids], batch_first=True)
        x = vectors[index.to(self.device)]
        states = self._initial_states(len(ids)) if self.stateful else None
        with autocast(self.device, self.amp_dtype):
            layers, final = self.bilm.contextual(x, torch.from_numpy(lengths), states, carry=self.stateful)
        if final is not None:
            self._keep_states(final)
        return layers.float().cpu().numpy()

    def _initial_states(self, batch: int) -> States | None:
        """Rows ``0..batch-1`` of the carried states; rows never used so far start from zeros (``None``: all)."""
        if self._states is None:
            return None
        have = self._states[0][0].shape[0]
        if have < batch:
            self._states = [tuple(torch.cat([t, t.new_zeros(batch - have, t.shape[1])]) for t in pair)
                            for pair in self._states]
        return [(h[:batch], c[:batch]) for h, c in self._states]

    def _keep_states(self, final: States) -> None:
        """Store a call's final states in its rows; rows beyond the call keep theirs (as bilm-tf)."""
        batch = final[0][0].shape[0]  # the first call has no older rows: final[batch:] is empty
        self._states = [tuple(torch.cat([new.float(), old[batch:]]) for new, old in zip(f, s))
                        for f, s in zip(final, self._states or final)]

    # --- the public interface ----------------------------------------------------------------------

    def embed_batch(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """One float32 array ``(L + 1, n_i, D)`` per token list (``n_i = 0`` for an empty one), in one forward
        pass. Raises ElmoError on input that is not a list of lists of str."""
        return self._embed(sentences, None)

    def embed_sentence(self, tokens: Sequence[str]) -> np.ndarray:
        """Vectors of one tokenised sentence: ``(L + 1, n_tokens, D)`` float32 (layer 0, 1, 2 for L = 2)."""
        return self.embed_batch([tokens])[0]

    def embed_sentences(self, sentences: Iterable[Sequence[str]], batch_size: int = 64) -> Iterator[np.ndarray]:
        """Embed any iterable of token lists lazily, reading ``CHUNK_BATCHES * batch_size`` at a time (memory does not
        grow with their number); up to ``batch_size`` sentences of similar length per forward pass, within the
        ``max_tokens`` budget (stateful mode: consecutive groups of ``batch_size``). Yields ``(L + 1, n_i, D)`` float32
        arrays, one per sentence, in the order given. Raises ElmoError: ``batch_size < 1`` or malformed input."""
        if batch_size < 1:
            raise ElmoError(f"batch_size must be >= 1, got {batch_size}")
        iterator = iter(sentences)
        while chunk := [s for _, s in zip(range(CHUNK_BATCHES * batch_size), iterator)]:
            yield from self._embed(chunk, batch_size)
