"""Read and write the published ELMo files: bilm-tf's ``options.json``, ``weights.hdf5`` and ``vocab.txt``.

:func:`load_published_bilm` turns AllenNLP's published files (e.g. ``elmo_2x4096_512_2048cnn_2xhighway_options.json``
and ``_weights.hdf5``) into a :class:`~elmo.model.bilm.BiLM`; :func:`save_published_bilm` writes them
back (``python -m elmo export``), bit for bit for an unchanged loaded biLM. The hdf5 datasets, their shapes and what
each becomes (bilm-tf's TensorFlow variable names; d = 0 forward, 1 backward; F = the filters' total,
P = ``projection_dim``, H = ``lstm.dim``; ``docs/published_elmo.md``):

=========================================================  ==============================  ===========================
``char_embed``                                             (261, char_dim)                 rows 1..261 (row 0 = 0)
``CNN/W_cnn_i``, ``CNN/b_cnn_i``                           (1, width, char_dim, n), (n,)   ``Conv1d`` (n, char_dim, width)
``CNN_high_k/W_transform``, ``W_carry``, ``b_*``           (F, F), (F,)                    ``Linear(F, 2F)`` (transposed)
``CNN_proj/W_proj``, ``b_proj``                            (F, P), (P,)                    ``Linear(F, P)`` (transposed)
``RNN_d/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_0``            (P + P, 4H), gates i, j, f, o   input + recurrent weights
``RNN_d/RNN/MultiRNNCell/Cell{l}/LSTMCell/B``              (4H,)                           bias, forget gate + 1.0
``RNN_d/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_P_0``          (H, P)                          projection (transposed)
=========================================================  ==============================  ===========================
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import torch

from ..artifacts import atomic_hdf5, atomic_write_bytes, write_json
from ..data.chars import TF_BOS, TF_EOS, TF_NUM_CHARS
from ..errors import ElmoError
from .bilm import BiLM
from .bilm_config import BiLMConfig

#: keys of bilm-tf's options files; "training" ones (written by bilm-tf's trainer) are accepted and ignored
OPTION_KEYS = {
    "lstm": {"dim", "projection_dim", "n_layers", "cell_clip", "proj_clip", "use_skip_connections"},
    "char_cnn": {"embedding", "filters", "n_highway", "n_characters", "max_characters_per_token", "activation"},
}
TRAINING_KEYS = {"bidirectional", "dropout", "all_clip_norm_val", "n_epochs", "n_train_tokens", "batch_size",
                 "n_tokens_vocab", "unroll_steps", "n_negative_samples_batch"}
_TF_GATES, _OUR_GATES = [0, 2, 3, 1], [0, 3, 1, 2]  # TF (i, j, f, o) -> ours (i, f, o, j), and back
#: the first three lines of bilm-tf's vocabulary file, as its README requires (its ``Vocabulary`` finds them by name)
VOCAB_SPECIALS = (TF_BOS, TF_EOS, "<UNK>")


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


def config_from_options(options: Any) -> BiLMConfig:
    """The :meth:`~elmo.model.bilm_config.BiLMConfig.bilm_tf` config of a parsed ``options.json``. Raises ElmoError:
    unknown keys (all named), a missing or mistyped key, or an unsupported value."""
    if not isinstance(options, dict):
        raise ElmoError(f"expected a JSON object, got {type(options).__name__}")
    unknown = [k for k in options if k not in OPTION_KEYS and k not in TRAINING_KEYS]
    for section, known in OPTION_KEYS.items():
        if isinstance(options.get(section), dict):
            unknown += [f"{section}.{k}" for k in options[section] if k not in known]
    embedding = options.get("char_cnn", {}).get("embedding") if isinstance(options.get("char_cnn"), dict) else None
    if isinstance(embedding, dict):
        unknown += [f"char_cnn.embedding.{k}" for k in embedding if k != "dim"]
    if unknown:
        raise ElmoError(f"unknown option(s) {', '.join(unknown)}")
    if "char_cnn" not in options:
        raise ElmoError("no char_cnn section: only character-input biLMs (every published ELMo model) are supported")
    if options.get("bidirectional", True) is not True:
        raise ElmoError("bidirectional must be true (ELMo needs both directions)")
    filters = _get(options, "char_cnn.filters", list)
    if not all(isinstance(f, list) and len(f) == 2 and all(type(v) is int for v in f) for f in filters):
        raise ElmoError(f"char_cnn.filters must be a list of [width, count] integer pairs, got {filters!r}")
    number = (int, float)
    return BiLMConfig.bilm_tf(
        char_dim=_get(options, "char_cnn.embedding.dim", int), filters=tuple(map(tuple, filters)),
        num_highway=_get(options, "char_cnn.n_highway", int, 0),
        max_chars=_get(options, "char_cnn.max_characters_per_token", int),
        activation=_get(options, "char_cnn.activation", str, "relu"),
        n_characters=_get(options, "char_cnn.n_characters", int, 262),
        hidden_size=_get(options, "lstm.dim", int), projection_dim=_get(options, "lstm.projection_dim", int),
        num_layers=_get(options, "lstm.n_layers", int),
        cell_clip=_get(options, "lstm.cell_clip", number, None), proj_clip=_get(options, "lstm.proj_clip", number, None),
        use_skip_connections=_get(options, "lstm.use_skip_connections", bool, False))


def read_options(path: str | os.PathLike) -> BiLMConfig:
    """:func:`config_from_options` of bilm-tf's ``options.json`` file. Raises ElmoError, starting with the file name:
    the file is missing, unreadable or not JSON, or as :func:`config_from_options`."""
    path = Path(path)
    if not path.is_file():
        raise ElmoError(f"{path}: options file not found")
    try:
        options = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ElmoError(f"{path}: cannot read the options file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ElmoError(f"{path}: the options file is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ElmoError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    try:
        return config_from_options(options)
    except ElmoError as exc:
        raise ElmoError(f"{path}: {exc}") from None


def options_of(config: BiLMConfig) -> dict[str, Any]:
    """The ``options.json`` of ``config`` (inverse of :func:`config_from_options`; every key, clipping ``null`` when
    off), ``char_cnn.n_characters`` 262: bilm-tf's inference takes no other (261 at training; same weight rows)."""
    return {"lstm": {"dim": config.hidden_size, "projection_dim": config.output_size, "n_layers": config.num_layers,
                     "cell_clip": config.cell_clip, "proj_clip": config.proj_clip,
                     "use_skip_connections": config.residual},
            "char_cnn": {"embedding": {"dim": config.char_dim}, "filters": [list(f) for f in config.char_filters],
                         "n_highway": config.num_highway, "n_characters": TF_NUM_CHARS,
                         "max_characters_per_token": config.max_chars, "activation": config.activation}}


def _cell(direction: int, layer: int) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def expected_datasets(config: BiLMConfig) -> dict[str, tuple[int, ...]]:
    """Name → shape of every dataset the weights file of ``config`` must hold (see the module docstring)."""
    width, proj, cells = config.n_filters, config.output_size, config.hidden_size
    shapes: dict[str, tuple[int, ...]] = {"char_embed": (261, config.char_dim)}
    for i, (w, n) in enumerate(config.char_filters):
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


def _bias_from_tf(array: np.ndarray, config: BiLMConfig) -> np.ndarray:
    """Our LSTM bias of TF's ``B``: TF's ``LSTMCell`` forget bias 1.0 added, the gates in our order."""
    bias = array.copy()
    bias[2 * config.hidden_size:3 * config.hidden_size] += 1.0
    return _gates(bias, _TF_GATES)


_Conversion = tuple[tuple[str, ...], tuple[str, ...], Callable[..., tuple], Callable[..., tuple]]


def _layout(config: BiLMConfig, bilm: BiLM | None = None) -> list[_Conversion]:
    """What each hdf5 dataset becomes (module docstring), in bilm-tf's order: ``(datasets, state keys, to ours, to
    bilm-tf)``, where ``to ours`` maps the datasets' arrays to the :class:`~elmo.model.bilm.BiLM` state entries' and
    ``to bilm-tf`` back (``B``'s: :func:`tf_bias` of ``bilm``)."""
    width, proj = config.n_filters, config.output_size
    same, transposed = (lambda *a: a), (lambda *a: tuple(x.T for x in a))
    layout: list[_Conversion] = [(("char_embed",), ("token_encoder.char_embedding.weight",),
                                 lambda a: (np.concatenate([np.zeros_like(a[:1]), a]),), lambda w: (w[1:],))]
    for i in range(len(config.char_filters)):
        layout += [((f"CNN/W_cnn_{i}",), (f"token_encoder.convs.{i}.weight",), lambda a: (a[0].transpose(2, 1, 0),),
                    lambda w: (w.transpose(2, 1, 0)[None],)),
                   ((f"CNN/b_cnn_{i}",), (f"token_encoder.convs.{i}.bias",), same, same)]
    for k in range(config.num_highway):  # Linear(F, 2F): the transform half, then the carry half
        layout += [((f"CNN_high_{k}/{part}_transform", f"CNN_high_{k}/{part}_carry"),
                    (f"token_encoder.highways.{k}.{key}",), lambda t, c: (np.concatenate([t.T, c.T]),),
                    lambda w: (w[:width].T, w[width:].T)) for part, key in (("W", "weight"), ("b", "bias"))]
    if width != proj:
        layout += [(("CNN_proj/W_proj", "CNN_proj/b_proj"), ("token_encoder.projection.weight",
                                                             "token_encoder.projection.bias"), transposed, transposed)]
    for d, direction in enumerate(("forward_lm.layers", "backward_lm.layers")):
        for layer in range(config.num_layers):
            prefix, cell = f"{direction}.{layer}", _cell(d, layer)
            layout += [((f"{cell}/W_0",), (f"{prefix}.input_weight", f"{prefix}.recurrent_weight"),
                        lambda w: tuple(np.split(_gates(w.T, _TF_GATES), [proj], axis=1)),
                        lambda i, r: (_gates(np.concatenate([i, r], axis=1), _OUR_GATES).T,)),
                       ((f"{cell}/B",), (f"{prefix}.bias",), lambda b: (_bias_from_tf(b, config),),
                        lambda _, d=d, layer=layer: (tf_bias(bilm, d, layer),))]
            if proj < config.hidden_size:
                layout.append(((f"{cell}/W_P_0",), (f"{prefix}.projection",), transposed, transposed))
    return layout


def unused_by_options(name: str, config: BiLMConfig) -> str:
    """Why dataset ``name`` (not in :func:`expected_datasets`) does not fit the options, naming the key and its value."""
    width, proj, cells = config.n_filters, config.output_size, config.hidden_size
    if re.fullmatch(r"CNN_high_\d+/.*", name):
        n = config.num_highway
        return f"char_cnn.n_highway is {n}: " + (f"highway layers CNN_high_0 .. CNN_high_{n - 1}" if n else "no highway layer")
    if re.fullmatch(r"CNN/[Wb]_cnn_\d+", name):
        return f"char_cnn.filters has {len(config.char_filters)} filters: CNN/W_cnn_0 .. CNN/W_cnn_{len(config.char_filters) - 1}"
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


def load_published_bilm(options_file: str | os.PathLike, weight_file: str | os.PathLike) -> BiLM:
    """A :class:`~elmo.model.bilm.BiLM` from bilm-tf's ``options.json`` and ``weights.hdf5``, in eval
    mode on the CPU, float32; its ``config.weights_digest`` identifies the weights. Raises ElmoError: as
    :func:`read_options`; the weight file is missing or not HDF5; a dataset is missing, misshapen (both shapes named)
    or not numeric, or one the options do not account for (:func:`unused_by_options`)."""
    import h5py

    config, path, arrays = read_options(options_file), Path(weight_file), {}
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
                arrays[name] = np.asarray(node[...], dtype=np.float32)
            except (OSError, TypeError, ValueError) as exc:
                raise ElmoError(f"{path}: dataset {name} cannot be read as float32: {exc}") from None
    digest = hashlib.sha256(b"".join(f"{n}{a.shape}".encode() + a.reshape(-1)[:4096].tobytes() for n, a in arrays.items()))
    bilm = BiLM(replace(config, weights_digest=digest.hexdigest()[:16]))
    bilm.load_state_dict({key: torch.from_numpy(np.ascontiguousarray(value)) for names, keys, to_ours, _ in _layout(config)
                          for key, value in zip(keys, to_ours(*(arrays[n] for n in names)))}, assign=True)
    for d, stack in enumerate(bilm.stacks()):  # TF's B as read, for writing it back exactly (tf_datasets)
        for layer, lstm in enumerate(stack):
            lstm.tf_bias = torch.from_numpy(arrays[f"{_cell(d, layer)}/B"])
    bilm.source = (str(Path(options_file).resolve()), str(path.resolve()))
    return bilm.eval()


def tf_bias(bilm: BiLM, direction: int, layer: int) -> np.ndarray:
    """TF's ``B`` ``(4H,)`` of one LSTM layer (gates i, j, f, o; without the forget bias 1.0), float32. An unchanged
    layer loaded from a file gives the file's values bit for bit (its ``tf_bias``, kept by :func:`load_published_bilm`
    as ``B + 1.0`` rounds in float32); any other gives ``bias - 1.0`` at the forget gate, which loads back as ``bias``
    to within one rounding of 1.0."""
    lstm = bilm.stacks()[direction][layer]
    bias = lstm.bias.detach().cpu().float().numpy()
    if lstm.tf_bias is not None:
        raw = lstm.tf_bias.detach().cpu().float().numpy()
        if np.array_equal(_bias_from_tf(raw, bilm.config), bias):
            return raw.copy()
    tf = _gates(bias, _OUR_GATES)
    tf[2 * bilm.config.hidden_size:3 * bilm.config.hidden_size] -= 1.0
    return tf


def tf_datasets(bilm: BiLM) -> dict[str, np.ndarray]:
    """Name → float32 array of ``bilm``'s hdf5 datasets in bilm-tf's layout (module docstring); for an unchanged
    biLM from :func:`load_published_bilm`, exactly the file's datasets (:func:`tf_bias`)."""
    p = {k: v.detach().cpu().float().numpy() for k, v in bilm.state_dict().items()}
    return {name: np.ascontiguousarray(array, dtype=np.float32) for names, keys, _, to_tf in _layout(bilm.config, bilm)
            for name, array in zip(names, to_tf(*(p[k] for k in keys)))}


def vocabulary_lines(words: Iterable[str]) -> list[str]:
    """bilm-tf's vocabulary: :data:`VOCAB_SPECIALS`, then ``words`` in order, each once (specials not repeated).
    Raises ElmoError for a word that is empty or holds whitespace (bilm-tf reads one stripped token per line)."""
    lines = dict.fromkeys(VOCAB_SPECIALS)
    for i, word in enumerate(words):
        if not word or any(c.isspace() for c in word):
            raise ElmoError(f"vocabulary word {i} ({word!r}) is empty or holds whitespace: bilm-tf's vocabulary file "
                            "has one token per line")
        lines[word] = None
    return list(lines)


def read_vocabulary(path: str | os.PathLike) -> list[str]:
    """The tokens of a vocabulary file (bilm-tf's ``vocab.txt`` or any word list, one per line) in file order,
    ignoring a UTF-8 BOM, blank lines and surrounding whitespace. Raises ElmoError: the file is missing, unreadable
    or not UTF-8; a line (numbered from 1) holds more than one token."""
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


def save_published_bilm(bilm: BiLM, options_file: str | os.PathLike, weight_file: str | os.PathLike,
                        vocab_file: str | os.PathLike | None = None, words: Iterable[str] = ()) -> dict[str, int]:
    """Write ``bilm`` as bilm-tf's ``weights.hdf5`` (:func:`tf_datasets`), then ``vocab.txt`` if ``vocab_file`` is
    given (:func:`vocabulary_lines` of ``words``, UTF-8; why bilm-tf needs it even for a character-input biLM:
    ``docs/published_elmo.md``, "Exporting"), then ``options.json`` (:func:`options_of`), each atomically;
    returns how many datasets, numbers and vocabulary lines were written (``"datasets"``, ``"parameters"``,
    ``"vocabulary"``). Raises ElmoError: a bad vocabulary word (:func:`vocabulary_lines`, before anything is written);
    an unwritable folder (a path part that is a file is named)."""
    datasets = tf_datasets(bilm)
    lines = vocabulary_lines(words) if vocab_file is not None else []  # checked before anything is written
    with atomic_hdf5(weight_file) as out:
        for name, array in datasets.items():
            out.create_dataset(name, data=array)
    if vocab_file is not None:
        atomic_write_bytes(vocab_file, ("\n".join(lines) + "\n").encode("utf-8"))
    write_json(options_file, options_of(bilm.config))
    return {"datasets": len(datasets), "parameters": sum(a.size for a in datasets.values()), "vocabulary": len(lines)}
