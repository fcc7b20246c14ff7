"""The pipeline's results as the report reads them.

Owns reading ``results/*.json`` and the diagnostic runs the report lists (:data:`DIAGNOSTIC_RUNS`, each a folder
``results/experiments/<name>/``; :func:`load_results`), the list of classifiers and their display names
(:func:`methods`, :data:`LABELS`), and what a diagnostic run changed relative to the main run
(:func:`experiment_changes`, :func:`config_changes`, :func:`reference_run`). Nothing here formats
a sentence, draws or lays out anything.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Any, Sequence

from elmo.errors import ElmoError
from elmo.model.mix import LAYER_MIXES
from elmo.pipelines.classification import ClassifyArgs
from elmo.pipelines.pretraining import PretrainArgs

#: The static-embedding baselines, trained with the same head as ELMo.
STATIC = ("word2vec", "svd")
#: Display name of every method (ELMo layer mixes and baselines).
LABELS = {"trainable_lambda": "ELMo, trainable λ", "frozen_lambda": "ELMo, frozen λ",
          "learned_function": "ELMo, learned function", "learned_function_mlp": "ELMo, learned function (MLP)",
          "word2vec": "Word2Vec (same head)",
          "svd": "SVD / PPMI (same head)", "tfidf_logreg": "TF-IDF + logistic regression"}

#: The diagnostic runs the report lists, in this order: each the main run with one change, on the same data and seed,
#: in ``<experiments dir>/<name>/`` (``results/experiments/<name>/``): its ``classification.json`` (trainable λ at
#: least) and, where the change is the biLM's, its ``lm.json``. ``python -m lab report --experiments`` names others.
DIAGNOSTIC_RUNS = (
    "fp32_main",  # the main run in fp32: the reference of the fp32 runs below (FP32_REFERENCE)
    # changes to the biLM (lm.json and classification.json)
    "random_init", "residual", "char_cnn", "proj_512_256", "lm_8_epochs",
    # changes to the classifier on the main run's biLM (classification.json)
    "layer_norm", "elmo_dropout", "fine_tune", "mix_l2", "mix_l2_1", "no_concat", "xk_word2vec",
)
#: The diagnostic run that repeats the main run in fp32: what a diagnostic run trained in fp32 is compared with when
#: the main run is not fp32 (:func:`reference_run`).
FP32_REFERENCE = "fp32_main"

#: Config keys that name folders or output options, or otherwise do not change what a run computes
#: (``download`` only decides whether missing data files are fetched): never an experimental change.
_NOT_A_CHANGE = {"data_dir", "models_dir", "results_dir", "images_dir", "quiet", "threads", "device", "mixes",
                 "predict", "predict_file", "resume", "checkpoint_every", "cache_layers", "precision", "download",
                 "overwrite"}


#: Keys of ``classification.json`` under their earlier names (files written then keep their numbers readable, and
#: what a run changed is named by today's flag): ``{earlier: current}`` at the top level, and in its ``config``.
EARLIER_KEYS = {"best_setting": "best_mix"}
EARLIER_FLAGS = {"settings": "mixes", "fine_tune": "unfreeze_bilm", "bilm_options_file": "options_file",
                 "bilm_weight_file": "weight_file"}


def current_keys(classification: dict) -> dict:
    """A parsed ``classification.json`` with the current key names (:data:`EARLIER_KEYS`, :data:`EARLIER_FLAGS`),
    whichever version of ``classification.py`` wrote it; changed in place and returned."""
    for earlier, current in EARLIER_KEYS.items():
        if earlier in classification:
            classification.setdefault(current, classification.pop(earlier))
    config = classification.get("config")
    if isinstance(config, dict):
        for earlier, current in EARLIER_FLAGS.items():
            if earlier in config:
                config.setdefault(current, config.pop(earlier))
    return classification


class Recorded(dict):
    """A JSON object read from a results file (:func:`read_json`) that knows where it came from: reading a key it
    lacks (``obj[key]``) raises :class:`ElmoError` naming the file and the key's path (``test.forward_perplexity``),
    so a file written by another kind of run (a biLM without a test split, say) stops the command with one line
    instead of a ``KeyError`` deep in the report. ``get`` and ``in`` behave as a dict's."""

    def __init__(self, items: dict, file: Path, where: tuple[str, ...] = ()):
        super().__init__(items)
        self.file, self.where = file, where

    def __missing__(self, key: Any) -> Any:
        raise ElmoError(f"{self.file}: no key {'.'.join([*self.where, str(key)])!r}: it was written by a run that does "
                        "not record it, so it cannot be read here")


def _recorded(value: Any, file: Path, where: tuple[str, ...] = ()) -> Any:
    """``value`` with every JSON object in it a :class:`Recorded` of ``file`` at its key path."""
    if isinstance(value, dict):
        return Recorded({k: _recorded(v, file, (*where, str(k))) for k, v in value.items()}, file, where)
    if isinstance(value, list):
        return [_recorded(v, file, (*where, str(i))) for i, v in enumerate(value)]
    return value


def read_json(path: Path) -> dict:
    """The JSON object in ``path`` as a :class:`Recorded` (a missing key read from it names the file and the key);
    :class:`ElmoError` (naming the file) when the file is missing or invalid."""
    try:
        return _recorded(json.loads(path.read_text(encoding="utf-8")), path)
    except FileNotFoundError:
        raise ElmoError(f"{path} not found") from None
    except json.JSONDecodeError as exc:
        raise ElmoError(f"{path}: not valid JSON ({exc})") from None


def _load_experiments(experiments_dir: str | os.PathLike | None, runs: Sequence[str]) -> dict[str, dict]:
    """``{name: {"lm": dict | None, "classification": dict}}`` for every diagnostic run of ``runs``, in that order:
    ``<experiments_dir>/<name>/classification.json`` and ``lm.json`` where present (empty when ``experiments_dir``
    is ``None``).

    Raises:
        ElmoError: a run without its ``classification.json`` (naming the file and how to leave the run out).
    """
    out: dict[str, dict] = {}
    if experiments_dir is None:
        return out
    for name in runs:
        folder = Path(experiments_dir) / name
        if not (folder / "classification.json").is_file():
            raise ElmoError(f"{folder / 'classification.json'} not found: the diagnostic run {name!r} has not been run "
                            "there; name the runs to list with --experiments (none: --experiments with no value)")
        lm = folder / "lm.json"
        out[name] = {"lm": read_json(lm) if lm.is_file() else None,
                     "classification": current_keys(read_json(folder / "classification.json"))}
    return out


def _init_embeddings(lm: dict | None) -> str:
    """The ``--init-embeddings`` of a biLM run (``"none"`` for runs made before the flag existed)."""
    return (lm or {}).get("config", {}).get("init_embeddings", "none")


def _init_pair(res: dict) -> dict | None:
    """The first diagnostic run that differs from its :func:`reference_run` in ``--init-embeddings``
    (``none`` vs ``word2vec``): ``{"name", "reference", "none": run, "word2vec": run}``, or ``None``."""
    for name, exp in res["experiments"].items():
        ref_name, ref_classification = reference_run(res, exp["classification"])
        ref = res["experiments"].get(ref_name) or {"lm": res["lm"], "classification": ref_classification}
        ref_init, other = _init_embeddings(ref["lm"]), _init_embeddings(exp["lm"])
        if exp["lm"] is not None and ref is not exp and {ref_init, other} == {"none", "word2vec"}:
            return {"name": name, "reference": ref_name, ref_init: ref, other: exp}
    return None


def load_results(results_dir: str | os.PathLike, experiments_dir: str | os.PathLike | None = None,
                 runs: Sequence[str] = DIAGNOSTIC_RUNS) -> dict[str, Any]:
    """Read the pipeline's JSON.

    Args:
        results_dir: folder with ``lm.json``, ``classification.json`` and ``baselines.json``.
        experiments_dir: folder of the diagnostic runs, one sub-folder each (none are read when ``None``).
        runs: the diagnostic runs to read from it, in the order the report lists them.

    Returns:
        ``{"lm", "classification", "baselines", "seeds", "learning_curve" (``learning_curve.json`` or ``None``),
        "pretraining_text_curve" (``pretraining_text_curve.json`` or ``None``), "timing" (:func:`load_timings` of ``results_dir/timing``),
        "experiments": {name: {"lm": dict | None,
        "classification": dict | None}}, "init"}`` where ``seeds`` is ``seeds.json`` (the seeds study,
        :mod:`lab.study`) or ``None`` when it has not been run, and ``init`` pairs a diagnostic run with its
        :func:`reference_run` when the two differ in ``--init-embeddings``: ``{"name", "reference",
        "none": run, "word2vec": run}`` (or ``None``).
        Every ``classification.json`` is read with the current key names (``best_mix``, the ``mixes`` flag;
        :func:`current_keys`).

    Raises:
        ElmoError: a file that is missing or not valid JSON (naming it), a diagnostic run of ``runs`` missing.
    """
    results = Path(results_dir)
    out = {name: read_json(results / f"{name}.json") for name in ("lm", "classification", "baselines")}
    current_keys(out["classification"])  # the current key names, whichever version wrote it
    out["seeds"] = read_json(results / "seeds.json") if (results / "seeds.json").is_file() else None
    curve = results / "learning_curve.json"
    out["learning_curve"] = read_json(curve) if curve.is_file() else None
    text_curve = results / "pretraining_text_curve.json"
    out["pretraining_text_curve"] = read_json(text_curve) if text_curve.is_file() else None
    out["timing"] = load_timings(results / "timing")
    out["experiments"] = _load_experiments(experiments_dir, runs)
    out["init"] = _init_pair(out)
    return out


def load_timings(folder: str | os.PathLike) -> dict[str, dict[str, dict[str, float]]]:
    """Wall time and peak memory of the timed default runs: every ``<precision>_<script>_time.txt`` in
    ``folder``, the output of GNU ``/usr/bin/time -v`` (e.g. ``bf16_ELMO.py_time.txt``).

    Returns:
        ``{precision: {script: {"seconds": wall seconds, "peak_gb": maximum resident set in GB (10^9 bytes)}}}``;
        empty when the folder is absent. ``/usr/bin/time -v`` sees the largest process only: for an ``ELMO.py``
        run whose directions trained side by side, ``peak_gb`` is the sum of the processes' own peaks that
        ``<precision>_lm.json`` records (``peak_rss_mb``), an upper bound of their peak together.

    Raises:
        ElmoError: a file without the wall-clock or maximum-resident-set line (naming it).
    """
    out: dict[str, dict[str, dict[str, float]]] = {}
    for path in sorted(Path(folder).glob("*_*_time.txt")) if Path(folder).is_dir() else []:
        precision, script = path.name[:-len("_time.txt")].split("_", 1)
        run = read_time_v(path)
        lm = Path(folder) / f"{precision}_lm.json"
        if script == "ELMO.py" and lm.is_file():  # directions side by side: the sum of the processes' own peaks
            per_process = read_json(lm).get("peak_rss_mb")
            run["peak_gb"] = sum(per_process.values()) * 2**20 / 1e9 if per_process else run["peak_gb"]
        out.setdefault(precision, {})[script] = run
    return out


def read_time_v(path: str | os.PathLike) -> dict[str, float]:
    """Wall time and peak memory of one command from GNU ``/usr/bin/time -v``'s output in ``path``.

    Returns:
        ``{"seconds": wall seconds, "peak_gb": maximum resident set in GB (10^9 bytes)}``.

    Raises:
        ElmoError: a file without the wall-clock or maximum-resident-set line (naming it).
    """
    text = Path(path).read_text()
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", text)
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    if not wall or not peak:
        raise ElmoError(f"{path}: not the output of /usr/bin/time -v (no wall-clock or maximum resident set line)")
    seconds = sum(float(part) * 60 ** i for i, part in enumerate(reversed(wall.group(1).split(":"))))
    return {"seconds": seconds, "peak_gb": int(peak.group(1)) * 1024 / 1e9}


def _defaults(config_cls: type) -> dict[str, Any]:
    """An arguments dataclass's defaults as they read back from JSON (tuples become lists)."""
    return json.loads(json.dumps({f.name: f.default for f in dataclasses.fields(config_cls)}))


def config_changes(base: dict, other: dict, defaults: dict | None = None) -> list[str]:
    """What ``other`` changed relative to ``base`` (two run configs as recorded in the JSON).

    Args:
        base, other: ``{flag: value}`` of the two runs.
        defaults: values for the flags ``base`` lacks (added after that run was made).

    Returns:
        ``"key: value"`` (``other``'s value) for every key that differs, ignoring paths, output flags and
        the other keys of ``_NOT_A_CHANGE``.
    """
    defaults = defaults or {}
    return [f"{k}: {_shown(other[k])}" for k in other
            if k not in _NOT_A_CHANGE and base.get(k, defaults.get(k)) != other[k]]


def _shown(value: Any) -> Any:
    """A config value as the report shows it: an absolute path from its ``results`` folder on (or by its file name),
    so that where the run was made does not show; anything else as it is."""
    if not isinstance(value, str) or not os.path.isabs(value):
        return value
    parts = Path(value).parts
    return "/".join(parts[parts.index("results"):]) if "results" in parts else Path(value).name


def run_precision(classification: dict) -> str:
    """The training precision a ``classification.json`` records (runs made before ``--precision`` existed were fp32)."""
    return classification.get("precision", "fp32")


def reference_run(res: dict, classification: dict) -> tuple[str, dict]:
    """The run a diagnostic run is compared with.

    Args:
        res: :func:`load_results`.
        classification: the diagnostic run's ``classification.json``.

    Returns:
        ``(name, classification.json)``: the main run, or the :data:`FP32_REFERENCE` diagnostic run (the main run
        repeated in fp32) for an fp32 run when the main run is not fp32.
    """
    fp32_main = res.get("experiments", {}).get(FP32_REFERENCE, {}).get("classification")
    main = res["classification"]
    if fp32_main and classification is not fp32_main and run_precision(classification) == run_precision(fp32_main) \
            != run_precision(main):
        return FP32_REFERENCE, fp32_main
    return "the main run", main


def experiment_changes(res: dict, name: str) -> list[str]:
    """What the diagnostic run ``name`` of ``res`` (:func:`load_results`) changed relative to the main run.

    Returns:
        ``"key: value"`` entries: its precision when it differs from the main run's, then its biLM flags and
        its classifier flags that differ from its :func:`reference_run`'s (:func:`config_changes`; an fp32
        run is described against :data:`FP32_REFERENCE`), and a different biLM fingerprint when it reused another
        biLM; each entry once.
    """
    exp = res["experiments"][name]
    ref_name, ref_classification = reference_run(res, exp["classification"])
    ref_lm = (res["experiments"].get(ref_name) or {}).get("lm") or res["lm"]
    changes = []
    if run_precision(exp["classification"]) != run_precision(res["classification"]):
        changes.append(f"precision: {run_precision(exp['classification'])}")
    if exp.get("lm"):
        changes += config_changes(ref_lm.get("config", {}), exp["lm"].get("config", {}), _defaults(PretrainArgs))
    changes += config_changes(ref_classification.get("config", {}), exp["classification"].get("config", {}),
                              _defaults(ClassifyArgs))
    main_bilm = res["classification"].get("meta", {}).get("bilm_fingerprint")
    bilm = exp["classification"].get("meta", {}).get("bilm_fingerprint")
    if not exp.get("lm") and main_bilm and bilm and bilm != main_bilm:
        changes.append(f"a different biLM (fingerprint {bilm})")
    return list(dict.fromkeys(changes))  # a flag both scripts take (e.g. --max-docs) is one change


def elmo_mixes(res: dict) -> list[str]:
    """The layer mixes (:data:`~elmo.model.mix.LAYER_MIXES`) ``res["classification"]`` holds, in order."""
    return [m for m in LAYER_MIXES if m in res["classification"]]


def methods(res: dict) -> dict[str, dict]:
    """Every classifier ``res`` (:func:`load_results`) holds, ELMo layer mixes first.

    Returns:
        ``{name: {"train", "val", "test", ...}}``: the ELMo layer mixes, then :data:`STATIC` and ``tfidf_logreg``.
    """
    cls, base = res["classification"], res["baselines"]
    out = {m: cls[m] for m in elmo_mixes(res)}
    out |= {m: base[m] for m in (*STATIC, "tfidf_logreg") if m in base}
    return out
