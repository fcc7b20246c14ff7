"""Reading and writing the published ELMo files: bilm-tf's ``options.json``, ``weights.hdf5`` and ``vocab.txt``.

:func:`load_published_bilm` turns AllenNLP's published files (e.g. ``elmo_2x4096_512_2048cnn_2xhighway_options.json``
and ``_weights.hdf5``) into a :class:`~elmo.model.published.PublishedBiLM`; :func:`save_published_bilm` writes the
same layout back (``python -m elmo export``), bit for bit for a biLM loaded from a file and unchanged, with bilm-tf's
vocabulary file (:func:`write_vocabulary`). The hdf5 layout (bilm-tf's TensorFlow variable names, d = 0 forward,
1 backward; F = the filters' total, P = ``projection_dim``, H = ``lstm.dim``; ``docs/published_elmo.md``):

=========================================================  ==============================  ===========================
dataset                                                    shape                           becomes
=========================================================  ==============================  ===========================
``char_embed``                                             (261, char_dim)                 rows 1..261 (row 0 = 0)
``CNN/W_cnn_i``, ``CNN/b_cnn_i``                           (1, width, char_dim, n), (n,)   ``Conv1d`` (n, char_dim, width)
``CNN_high_k/W_transform``, ``W_carry``, ``b_*``           (F, F), (F,)                    ``Linear(F, 2F)`` (transposed)
``CNN_proj/W_proj``, ``b_proj``                            (F, P), (P,)                    ``Linear(F, P)`` (transposed)
``RNN_d/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_0``            (P + P, 4H), gates i, j, f, o   input + recurrent weights
``RNN_d/RNN/MultiRNNCell/Cell{l}/LSTMCell/B``              (4H,)                           bias, forget gate + 1.0
``RNN_d/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_P_0``          (H, P)                          projection (transposed)
=========================================================  ==============================  ===========================

Every problem a user can cause (a missing or unreadable file, an unsupported options value, a missing, misshapen or
unexpected dataset) raises :class:`~elmo.errors.ElmoError` naming the file and the key or dataset.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
import torch

from ..artifacts import atomic_hdf5, atomic_write_bytes, write_json
from ..data.chars import TF_BOS, TF_EOS, TF_NUM_CHARS
from ..errors import ElmoError
from .published import PublishedBiLM, PublishedBiLMConfig

#: keys of bilm-tf's options files; "training" ones (written by bilm-tf's trainer) are accepted and ignored
OPTION_KEYS = {
    "lstm": {"dim", "projection_dim", "n_layers", "cell_clip", "proj_clip", "use_skip_connections"},
    "char_cnn": {"embedding", "filters", "n_highway", "n_characters", "max_characters_per_token", "activation"},
}
TRAINING_KEYS = {"bidirectional", "dropout", "all_clip_norm_val", "n_epochs", "n_train_tokens", "batch_size",
                 "n_tokens_vocab", "unroll_steps", "n_negative_samples_batch"}
_TF_GATES, _OUR_GATES = [0, 2, 3, 1], [0, 3, 1, 2]  # TF (i, j, f, o) -> ours (i, f, o, j), and back
#: the first lines of bilm-tf's vocabulary file (its ``Vocabulary`` finds them by name; README: "the first three
#: lines should be the special tokens (<S>, </S> and <UNK>)")
VOCAB_SPECIALS = (TF_BOS, TF_EOS, "<UNK>")


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise ElmoError(f"{path}: options file not found")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ElmoError(f"{path}: cannot read the options file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ElmoError(f"{path}: the options file is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ElmoError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None


def _unknown_keys(options: dict) -> list[str]:
    unknown = [k for k in options if k not in OPTION_KEYS and k not in TRAINING_KEYS]
    for section, known in OPTION_KEYS.items():
        if isinstance(options.get(section), dict):
            unknown += [f"{section}.{k}" for k in options[section] if k not in known]
    embedding = options.get("char_cnn", {}).get("embedding") if isinstance(options.get("char_cnn"), dict) else None
    if isinstance(embedding, dict):
        unknown += [f"char_cnn.embedding.{k}" for k in embedding if k != "dim"]
    return unknown


def _get(options: dict, key: str, kind: type | tuple, default: Any = ...) -> Any:
    """``options[a][b]`` for ``key = "a.b"``, checked to be of ``kind``; ``default`` when absent (else an error)."""
    value: Any = options
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            if default is ...:
                raise ElmoError(f"{key} is missing")
            return default
        value = value[part]
    if value is None and default is None:
        return None
    if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
        raise ElmoError(f"{key} must be {getattr(kind, '__name__', 'a number')}, got {value!r}")
    return value


def config_from_options(options: Any) -> PublishedBiLMConfig:
    """:class:`~elmo.model.published.PublishedBiLMConfig` of a parsed ``options.json``.

    Raises:
        ElmoError: unknown keys (all named), a missing or mistyped key, or a value outside what is supported.
    """
    if not isinstance(options, dict):
        raise ElmoError(f"expected a JSON object, got {type(options).__name__}")
    if unknown := _unknown_keys(options):
        raise ElmoError(f"unknown option(s) {', '.join(unknown)}")
    if "char_cnn" not in options:
        raise ElmoError("no char_cnn section: only character-input biLMs (every published ELMo model) are supported")
    if options.get("bidirectional", True) is not True:
        raise ElmoError("bidirectional must be true (ELMo needs both directions)")
    filters = _get(options, "char_cnn.filters", list)
    if not all(isinstance(f, list) and len(f) == 2 and all(type(v) is int for v in f) for f in filters):
        raise ElmoError(f"char_cnn.filters must be a list of [width, count] integer pairs, got {filters!r}")
    number = (int, float)
    return PublishedBiLMConfig(
        char_dim=_get(options, "char_cnn.embedding.dim", int), filters=tuple(map(tuple, filters)),
        num_highway=_get(options, "char_cnn.n_highway", int, 0),
        max_chars=_get(options, "char_cnn.max_characters_per_token", int),
        activation=_get(options, "char_cnn.activation", str, "relu"),
        n_characters=_get(options, "char_cnn.n_characters", int, 262),
        hidden_size=_get(options, "lstm.dim", int), projection_dim=_get(options, "lstm.projection_dim", int),
        num_layers=_get(options, "lstm.n_layers", int),
        cell_clip=_get(options, "lstm.cell_clip", number, None), proj_clip=_get(options, "lstm.proj_clip", number, None),
        use_skip_connections=_get(options, "lstm.use_skip_connections", bool, False))


def read_options(path: str | os.PathLike) -> PublishedBiLMConfig:
    """Read bilm-tf's ``options.json``.

    Raises:
        ElmoError: the file is missing, unreadable or not JSON; see :func:`config_from_options` (the
            message starts with the file name).
    """
    path = Path(path)
    options = _read_json(path)
    try:
        return config_from_options(options)
    except ElmoError as exc:
        raise ElmoError(f"{path}: {exc}") from None


def options_of(config: PublishedBiLMConfig) -> dict[str, Any]:
    """The ``options.json`` content of ``config`` (inverse of :func:`config_from_options`, every key written, the
    clipping values as ``null`` when off), with ``char_cnn.n_characters`` 262 whatever ``config`` says: bilm-tf's
    inference code refuses any other value (261 is its training value; the weights have 261 rows either way)."""
    return {"lstm": {"dim": config.hidden_size, "projection_dim": config.projection_dim, "n_layers": config.num_layers,
                     "cell_clip": config.cell_clip, "proj_clip": config.proj_clip,
                     "use_skip_connections": config.use_skip_connections},
            "char_cnn": {"embedding": {"dim": config.char_dim}, "filters": [list(f) for f in config.filters],
                         "n_highway": config.num_highway, "n_characters": TF_NUM_CHARS,
                         "max_characters_per_token": config.max_chars, "activation": config.activation}}


def _cell(direction: int, layer: int) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def expected_datasets(config: PublishedBiLMConfig) -> dict[str, tuple[int, ...]]:
    """Name → shape of every dataset the weights file of ``config`` must hold (see the module docstring)."""
    width, proj, cells = config.n_filters, config.projection_dim, config.hidden_size
    shapes: dict[str, tuple[int, ...]] = {"char_embed": (261, config.char_dim)}
    for i, (w, n) in enumerate(config.filters):
        shapes |= {f"CNN/W_cnn_{i}": (1, w, config.char_dim, n), f"CNN/b_cnn_{i}": (n,)}
    for k in range(config.num_highway):
        for part in ("carry", "transform"):
            shapes |= {f"CNN_high_{k}/W_{part}": (width, width), f"CNN_high_{k}/b_{part}": (width,)}
    if width != proj:
        shapes |= {"CNN_proj/W_proj": (width, proj), "CNN_proj/b_proj": (proj,)}
    for d in range(2):
        for layer in range(config.num_layers):
            shapes |= {f"{_cell(d, layer)}/W_0": (2 * proj, 4 * cells), f"{_cell(d, layer)}/B": (4 * cells,)}
            if proj < cells:
                shapes[f"{_cell(d, layer)}/W_P_0"] = (cells, proj)
    return shapes


def _gates(array: np.ndarray, order: list[int]) -> np.ndarray:
    """Reorder the four gate blocks along the first axis."""
    return np.concatenate([array[k * len(array) // 4:(k + 1) * len(array) // 4] for k in order])


def _lstm_from_tf(prefix: str, name: str, array: np.ndarray, config: PublishedBiLMConfig) -> dict[str, np.ndarray]:
    if name == "W_0":
        weight = _gates(array.T, _TF_GATES)
        return {f"{prefix}.input_weight": weight[:, :config.projection_dim],
                f"{prefix}.recurrent_weight": weight[:, config.projection_dim:]}
    if name == "B":
        bias = array.copy()
        bias[2 * config.hidden_size:3 * config.hidden_size] += 1.0  # TF's LSTMCell forget_bias
        return {f"{prefix}.bias": _gates(bias, _TF_GATES)}
    return {f"{prefix}.projection": array.T}


def state_from_tf(name: str, array: np.ndarray, config: PublishedBiLMConfig) -> dict[str, np.ndarray]:
    """The :class:`~elmo.model.published.PublishedBiLM` state-dict entries of one hdf5 dataset (layout conversion)."""
    parts = name.split("/")
    if name == "char_embed":
        return {"token_encoder.char_embedding.weight": np.concatenate([np.zeros_like(array[:1]), array])}
    if parts[0] == "CNN":
        i = parts[1].split("_")[-1]
        key = f"token_encoder.convs.{i}." + ("weight" if parts[1].startswith("W") else "bias")
        return {key: array[0].transpose(2, 1, 0) if array.ndim == 4 else array}
    if parts[0].startswith("CNN_high_"):
        k, (kind, part) = parts[0].split("_")[-1], parts[1].split("_")
        return {f"token_encoder.highways.{k}.{'weight' if kind == 'W' else 'bias'}.{part}": array.T}
    if parts[0] == "CNN_proj":
        return {"token_encoder.projection." + ("weight" if parts[1] == "W_proj" else "bias"): array.T}
    direction = ("forward_layers", "backward_layers")[int(parts[0][-1])]
    return _lstm_from_tf(f"{direction}.{parts[3][4:]}", parts[-1], array, config)


def _join_highways(state: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """Tensors of a converted state dict; each highway layer's ``[transform; carry]`` halves concatenated."""
    out = {}
    for key in sorted(state):
        if key.endswith(".transform"):
            base = key[: -len(".transform")]
            out[base] = torch.from_numpy(np.ascontiguousarray(np.concatenate([state[key], state[base + ".carry"]])))
        elif not key.endswith(".carry"):
            out[key] = torch.from_numpy(np.ascontiguousarray(state[key]))
    return out


def unused_by_options(name: str, config: PublishedBiLMConfig) -> str:
    """Why the options leave no room for the dataset ``name`` (one found in a weights file but not in
    :func:`expected_datasets`), naming the options key and its value."""
    width, proj, cells = config.n_filters, config.projection_dim, config.hidden_size
    if re.fullmatch(r"CNN_high_\d+/.*", name):
        n = config.num_highway
        return f"char_cnn.n_highway is {n}: " + (f"highway layers CNN_high_0 .. CNN_high_{n - 1}" if n else "no highway layer")
    if re.fullmatch(r"CNN/[Wb]_cnn_\d+", name):
        return f"char_cnn.filters has {len(config.filters)} filters: CNN/W_cnn_0 .. CNN/W_cnn_{len(config.filters) - 1}"
    if name.startswith("CNN_proj/") and width == proj:
        return (f"the char_cnn.filters' {width} outputs equal lstm.projection_dim {proj}, so the options have no "
                "CNN_proj layer")
    if match := re.fullmatch(r"RNN_(\d+)/RNN/MultiRNNCell/Cell(\d+)/LSTMCell/(\w+)", name):
        direction, layer, part = int(match[1]), int(match[2]), match[3]
        if direction > 1:
            return "a biLM has two directions, RNN_0 and RNN_1"
        if layer >= config.num_layers:
            return f"lstm.n_layers is {config.num_layers}: cells Cell0 .. Cell{config.num_layers - 1}"
        if part == "W_P_0" and proj >= cells:
            return f"lstm.projection_dim {proj} equals lstm.dim {cells}, so the options have no LSTM projection W_P_0"
    return "no key of the options file accounts for it"


def _datasets(path: Path, config: PublishedBiLMConfig) -> Iterator[tuple[str, np.ndarray]]:
    """``(name, float32 array)`` of every expected dataset, each checked before it is read, after checking
    that the file holds no dataset the options do not account for."""
    import h5py

    if not path.is_file():
        raise ElmoError(f"{path}: weight file not found")
    try:
        handle = h5py.File(path, "r")
    except OSError as exc:
        raise ElmoError(f"{path}: not a readable HDF5 weight file ({str(exc).splitlines()[0]})") from None
    shapes = expected_datasets(config)
    with handle:
        present: list[str] = []
        handle.visititems(lambda name, node: present.append(name) if isinstance(node, h5py.Dataset) else None)
        if extra := [name for name in present if name not in shapes]:
            more = f" (and {len(extra) - 1} more unused dataset(s))" if len(extra) > 1 else ""
            raise ElmoError(f"{path}: dataset {extra[0]} is not used by these options ({unused_by_options(extra[0], config)})"
                            f"{more}: the weights belong to another architecture; use the options file that came "
                            "with them")
        for name, shape in shapes.items():
            node = handle.get(name)
            if not isinstance(node, h5py.Dataset):
                raise ElmoError(f"{path}: dataset {name} is missing (expected shape {shape} for these options)")
            if node.shape != shape:
                raise ElmoError(f"{path}: dataset {name} has shape {node.shape}, but the options need {shape}")
            try:
                yield name, np.asarray(node[...], dtype=np.float32)
            except (OSError, TypeError, ValueError) as exc:
                raise ElmoError(f"{path}: dataset {name} cannot be read as float32: {exc}") from None


def load_published_bilm(options_file: str | os.PathLike, weight_file: str | os.PathLike) -> PublishedBiLM:
    """A :class:`~elmo.model.published.PublishedBiLM` from bilm-tf's ``options.json`` and ``weights.hdf5``.

    Returns:
        The biLM in eval mode on the CPU, float32; its ``config.weights_digest`` identifies the weights.

    Raises:
        ElmoError: see :func:`read_options`; the weight file is missing or not HDF5; a dataset is missing,
            has the wrong shape for the options (both shapes named) or is not numeric; the file holds a dataset
            the options do not account for (named with the options key and value, :func:`unused_by_options`).
    """
    config = read_options(options_file)
    state: dict[str, np.ndarray] = {}
    biases: dict[tuple[int, int], np.ndarray] = {}
    digest = hashlib.sha256()
    for name, array in _datasets(Path(weight_file), config):
        digest.update(f"{name}{array.shape}".encode() + array.reshape(-1)[:4096].tobytes())
        state |= state_from_tf(name, array, config)
        if match := re.fullmatch(r"RNN_(\d)/RNN/MultiRNNCell/Cell(\d+)/LSTMCell/B", name):
            biases[int(match[1]), int(match[2])] = array
    bilm = PublishedBiLM(replace(config, weights_digest=digest.hexdigest()[:16]))
    bilm.load_state_dict(_join_highways(state), assign=True)
    for (direction, layer), array in biases.items():  # TF's B as read, for writing it back exactly (tf_datasets)
        (bilm.forward_layers, bilm.backward_layers)[direction][layer].tf_bias = torch.from_numpy(array)
    bilm.source = (str(Path(options_file).resolve()), str(Path(weight_file).resolve()))
    return bilm.eval()


def tf_bias(bilm: PublishedBiLM, direction: int, layer: int) -> np.ndarray:
    """TF's ``B`` ``(4H,)`` of one LSTM layer (gates i, j, f, o; the forget bias 1.0 not included).

    A layer loaded from a file whose bias is unchanged gives the file's values bit for bit (its ``tf_bias``, kept
    by :func:`load_published_bilm`, as ``B + 1.0`` rounds in float32); any other layer gives ``bias - 1.0`` at the
    forget gate, in float32, which loads back as ``bias`` to within one rounding of 1.0.
    """
    lstm = (bilm.forward_layers, bilm.backward_layers)[direction][layer]
    bias = lstm.bias.detach().cpu().float().numpy()
    if lstm.tf_bias is not None:
        raw = lstm.tf_bias.detach().cpu().float().numpy()
        if np.array_equal(_lstm_from_tf("", "B", raw, bilm.config)[".bias"], bias):
            return raw.copy()
    tf = _gates(bias, _OUR_GATES)
    tf[2 * bilm.config.hidden_size:3 * bilm.config.hidden_size] -= 1.0
    return tf


def tf_datasets(bilm: PublishedBiLM) -> dict[str, np.ndarray]:
    """The hdf5 datasets of ``bilm`` in bilm-tf's layout (inverse of the loading conversion; the module docstring
    lists names and shapes): name → float32 array. A biLM loaded by :func:`load_published_bilm` and not changed
    since gives exactly the file's datasets (:func:`tf_bias`)."""
    config, p = bilm.config, {k: v.detach().cpu().float().numpy() for k, v in bilm.state_dict().items()}
    width = config.n_filters
    out = {"char_embed": p["token_encoder.char_embedding.weight"][1:]}
    for i in range(len(config.filters)):
        out[f"CNN/W_cnn_{i}"] = p[f"token_encoder.convs.{i}.weight"].transpose(2, 1, 0)[None]
        out[f"CNN/b_cnn_{i}"] = p[f"token_encoder.convs.{i}.bias"]
    for k in range(config.num_highway):
        w, b = p[f"token_encoder.highways.{k}.weight"], p[f"token_encoder.highways.{k}.bias"]
        out |= {f"CNN_high_{k}/W_transform": w[:width].T, f"CNN_high_{k}/W_carry": w[width:].T,
                f"CNN_high_{k}/b_transform": b[:width], f"CNN_high_{k}/b_carry": b[width:]}
    if "token_encoder.projection.weight" in p:
        out |= {"CNN_proj/W_proj": p["token_encoder.projection.weight"].T, "CNN_proj/b_proj": p["token_encoder.projection.bias"]}
    for d, direction in enumerate(("forward_layers", "backward_layers")):
        for layer in range(config.num_layers):
            prefix, cell = f"{direction}.{layer}", _cell(d, layer)
            weight = np.concatenate([p[f"{prefix}.input_weight"], p[f"{prefix}.recurrent_weight"]], axis=1)
            out |= {f"{cell}/W_0": _gates(weight, _OUR_GATES).T, f"{cell}/B": tf_bias(bilm, d, layer)}
            if f"{prefix}.projection" in p:
                out[f"{cell}/W_P_0"] = p[f"{prefix}.projection"].T
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()}


def vocabulary_lines(words: Iterable[str]) -> list[str]:
    """bilm-tf's vocabulary: :data:`VOCAB_SPECIALS` (``<S>``, ``</S>``, ``<UNK>``), then ``words`` in their order,
    each once (specials among them are not repeated).

    Raises:
        ElmoError: a word that is empty or holds whitespace (bilm-tf reads one stripped token per line, and
            tokenised text never holds such a token).
    """
    lines = dict.fromkeys(VOCAB_SPECIALS)
    for i, word in enumerate(words):
        if not word or any(c.isspace() for c in word):
            raise ElmoError(f"vocabulary word {i} ({word!r}) is empty or holds whitespace: bilm-tf's vocabulary file "
                            "has one token per line")
        lines[word] = None
    return list(lines)


def read_vocabulary(path: str | os.PathLike) -> list[str]:
    """The tokens of a vocabulary file, one per line (bilm-tf's ``vocab.txt``, or any list of words; a UTF-8 BOM,
    blank lines and the whitespace around each token are ignored), in file order.

    Raises:
        ElmoError: the file is missing, unreadable or not UTF-8; a line holds more than one token (named by its
            number, from 1).
    """
    words = []
    try:
        with open(path, encoding="utf-8-sig") as handle:
            for number, line in enumerate(handle, 1):
                token = line.strip()
                if len(token.split()) > 1:
                    raise ElmoError(f"{path} line {number} holds more than one token ({token[:60]!r}): a vocabulary "
                                    "file has one token per line")
                if token:
                    words.append(token)
    except FileNotFoundError:
        raise ElmoError(f"{path}: vocabulary file not found") from None
    except IsADirectoryError:
        raise ElmoError(f"{path}: a folder, not a vocabulary file") from None
    except UnicodeDecodeError:
        raise ElmoError(f"{path}: the vocabulary file is not UTF-8 text") from None
    except OSError as exc:
        raise ElmoError(f"{path}: cannot read the vocabulary file: {exc.strerror or exc}") from None
    return words


def write_vocabulary(path: str | os.PathLike, words: Iterable[str] = ()) -> int:
    """Write bilm-tf's vocabulary file (:func:`vocabulary_lines`: ``<S>``, ``</S>``, ``<UNK>``, then ``words``), UTF-8,
    one token per line, atomically; returns the number of lines.

    bilm-tf's ``Batcher`` needs this file even for a character-input biLM; the three specials come first because
    without ``<S>`` and ``</S>`` its ``UnicodeCharsVocabulary`` would write their characters over the last word's row.

    Raises:
        ElmoError: see :func:`vocabulary_lines`; the folder cannot be written.
    """
    lines = vocabulary_lines(words)
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode("utf-8"))
    return len(lines)


def save_published_bilm(bilm: PublishedBiLM, options_file: str | os.PathLike, weight_file: str | os.PathLike,
                        vocab_file: str | os.PathLike | None = None, words: Iterable[str] = ()) -> dict[str, int]:
    """Write ``bilm`` as bilm-tf's files: ``weights.hdf5`` (:func:`tf_datasets`, float32, bilm-tf's dataset names),
    then ``vocab.txt`` when ``vocab_file`` is given (:func:`write_vocabulary` with ``words``), then ``options.json``
    (:func:`options_of`); each written atomically (a temporary file moved into place when complete).

    Returns:
        ``{"datasets", "parameters", "vocabulary"}``: how many datasets and numbers were written, and the lines of
        the vocabulary file (0 when none).

    Raises:
        ElmoError: a bad vocabulary word (:func:`vocabulary_lines`); a folder that cannot be written (a part of
            its path that is a file is named).
    """
    datasets = tf_datasets(bilm)
    lines = vocabulary_lines(words) if vocab_file is not None else []  # checked before anything is written
    with atomic_hdf5(weight_file) as out:
        for name, array in datasets.items():
            out.create_dataset(name, data=array)
    if vocab_file is not None:
        write_vocabulary(vocab_file, lines)
    write_json(options_file, options_of(bilm.config))
    return {"datasets": len(datasets), "parameters": sum(a.size for a in datasets.values()), "vocabulary": len(lines)}
