"""The learning curve over labelled data (``python -m lab study --labelled-fractions ...``): when does ELMo pay?

Peters et al. (2018, §5.4 and Figure 1) find the gain of contextual vectors largest when labelled data is
scarce. This mode of the seeds study measures that on AG News: per seed, the biLM (the study's ``pretrain``
part), Word2Vec and SVD are learnt from all the training text, and the classifiers train on a share of the
labelled training documents, a class-balanced draw that is part of the seed (``--labelled-fraction``,
:func:`elmo.data.agnews.labelled_draw`). For each share ``f`` below 1, per seed, in
``<runs-dir>/seed_<s>/labelled_<f>/``, two parts:

=======================  ==================================================================================
part                     command (plus ``--seed s``, the folders, ``--threads``, ``--labelled-fraction f``)
=======================  ==================================================================================
``classify_labelled_f``  ``python -m lab elmo classify --mixes trainable_lambda learned_function``
``baselines_labelled_f`` ``python -m lab elmo baselines`` (Word2Vec and SVD with the same head, TF-IDF + LR)
=======================  ==================================================================================

(``python -m lab elmo``: the library's commands with the lab's flags too, such as ``--labelled-fraction``.)

The share 1 is the seeds study's own ``classify`` and ``baselines`` parts (``seed_<s>/results/``), so a
curve run in the seeds study's ``--runs-dir`` reuses them. Validation split, early stopping, model selection
and the head are those of the full-data runs: the validation split (5 % of the training rows) stays the
same at every share, and the batch size follows the number of labelled documents
(:func:`elmo.pipelines.common.auto_batch_size`: 8 documents a batch below 2,000 of them).

:func:`aggregate_curve` then writes ``--out`` (``results/learning_curve.json``): per share the number
of labelled documents, per method the per-seed test accuracy and macro-F1 with mean, std and 95 % CI, and
paired comparisons over seeds (t-test) with McNemar's test per seed: the best ELMo mix at that share (the
higher mean validation macro-F1) against Word2Vec, SVD and TF-IDF + LR; and across shares, the best ELMo at each
share against Word2Vec and TF-IDF + LR with all the labels.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from elmo.artifacts import environment_info, write_json
from elmo.errors import ElmoError
from lab.significance import MCNEMAR, PAIRED_T, mcnemar, paired_over_seeds, summarize

from .study import BASELINES, Part, StudyArgs, labels_of_test_split, load_result, merge_flags, plan, share_name

#: the ELMo layer mixes of the curve (frozen λ, the random fixed mix, is a diagnostic of the full-data study)
CURVE_MIXES = ("trainable_lambda", "learned_function")
CURVE_METHODS = (*CURVE_MIXES, *BASELINES)


def plan_curve(config: StudyArgs, classify_mixes: tuple[str, ...] | None = None) -> list[Part]:
    """The parts of the learning curve in start order: the seeds study's parts (``pretrain``; ``classify`` and
    ``baselines``, which are the share 1; ``classify_mixes`` as in :func:`~lab.study.plan`), then per
    seed the smaller shares, largest first."""
    base = [p for p in plan(config, classify_mixes) if p.name != "mlp"]
    python = [sys.executable, "-m", "lab", "elmo"]  # the library command, with the lab's flags too
    extra: list[Part] = []
    for seed in config.seeds:
        for fraction in sorted((f for f in config.labelled_fractions if f < 1.0), reverse=True):
            d = config.share_dir(seed, fraction)
            flags = merge_flags(["--seed", str(seed), "--data-dir", config.data_dir, "--models-dir", str(d / "models"),
                                 "--results-dir", str(d / "results"), "--images-dir", str(d / "images"), "--threads",
                                 str(config.threads), "--precision", config.precision, "--quiet",
                                 "--labelled-fraction", repr(fraction)], config.part_flags(), config.head_part_flags())
            logs = config.seed_dir(seed) / "logs"
            name = share_name(fraction)
            runs = {"classify": python + ["classify", *merge_flags(["--mixes", *CURVE_MIXES], flags)],
                    "baselines": python + ["baselines", *flags]}
            done = {"classify": d / "results" / "classification.json", "baselines": d / "results" / "baselines.json"}
            for part in ("classify", "baselines"):
                if part in config.parts:
                    extra.append(Part(f"{part}_labelled_{name}", seed, runs[part], done[part],
                                      logs / f"{part}_labelled_{name}.log",
                                      ["pretrain"] if "pretrain" in config.parts else [], models=d / "models"))
    if 1.0 not in config.labelled_fractions:
        base = [p for p in base if p.name == "pretrain"]
    return base + extra


def curve_results(config: StudyArgs, seed: int, fraction: float) -> tuple[dict[str, dict], int | None]:
    """``({method: its result entry}, labelled documents)`` of one seed at one share; methods whose part has
    not finished are absent."""
    d = config.share_dir(seed, fraction)
    cls, base = load_result(d / "results" / "classification.json"), load_result(d / "results" / "baselines.json")
    out = {m: cls[m] for m in CURVE_MIXES if cls and m in cls}
    out.update({m: base[m] for m in BASELINES if base and m in base})
    counts = [f.get("labelled_documents") for f in (cls, base) if f]
    return out, next((c for c in counts if c is not None), None)


def _paired(a: list[dict], b: list[dict], labels: list[int] | None, seeds: list[int]) -> dict:
    """Paired comparison of two methods' per-seed entries (test accuracy; McNemar per seed where both have
    predictions for the same test documents)."""
    out = paired_over_seeds([e["test"]["accuracy"] for e in a], [e["test"]["accuracy"] for e in b])
    out["seeds"] = seeds
    if labels is not None:
        out["mcnemar_per_seed"] = [{"seed": s, **mcnemar(labels, x["test_predictions"], y["test_predictions"])}
                                   for s, x, y in zip(seeds, a, b)
                                   if "test_predictions" in x and "test_predictions" in y]
    return out


def aggregate_curve(config: StudyArgs, record: dict[str, dict] | None = None) -> dict[str, Any]:
    """``results/learning_curve.json`` (:func:`curve_summary`, written to ``--out``).

    Raises:
        ElmoError: no share has a seed with every method finished.
    """
    out = curve_summary(config, record)
    write_json(Path(config.out_path), out)
    return out


def curve_summary(config: StudyArgs, record: dict[str, dict] | None = None) -> dict[str, Any]:
    """The learning curve of the finished parts (see the module docstring). A share counts the seeds where every
    method of :data:`CURVE_METHODS` finished.

    Raises:
        ElmoError: no share has a seed with every method finished.
    """
    labels = labels_of_test_split(config)
    sizes: dict[str, dict] = {}
    entries: dict[float, dict[int, dict[str, dict]]] = {}
    for fraction in sorted(config.labelled_fractions):
        per_seed, counts = {}, {}
        for seed in config.seeds:
            results, count = curve_results(config, seed, fraction)
            if set(CURVE_METHODS) <= set(results):
                per_seed[seed], counts[seed] = results, count
        if not per_seed:
            continue
        entries[fraction] = per_seed
        seeds = list(per_seed)
        methods = {}
        for m in CURVE_METHODS:
            values = {metric: [per_seed[s][m]["test"][metric] for s in seeds] for metric in ("accuracy", "f1")}
            methods[m] = {"test_accuracy": values["accuracy"], "test_f1": values["f1"],
                          "summary": {f"test_{k}": summarize(v) for k, v in values.items()},
                          "best_epoch": [per_seed[s][m].get("best_epoch") for s in seeds]}
        # the ELMo mix to compare: chosen on the validation split (mean macro-F1 over seeds), never on the test split
        best = max(CURVE_MIXES, key=lambda m: np.mean([per_seed[s][m]["val"]["f1"] for s in seeds]))
        comparisons = [{"a": best, "b": b, "metric": "test_accuracy",
                        **_paired([per_seed[s][best] for s in seeds], [per_seed[s][b] for s in seeds], labels, seeds)}
                       for b in BASELINES]
        sizes[share_name(fraction)] = {"fraction": fraction, "labelled_documents": [counts[s] for s in seeds],
                                       "seeds": seeds,
                                          "methods": methods, "best_elmo": best, "comparisons": comparisons}
    if not sizes:
        raise ElmoError(f"no share of {list(config.labelled_fractions)} has a seed with every method finished "
                        f"under {config.runs_dir}")
    across = []
    if 1.0 in entries:
        full = entries[1.0]
        for fraction, per_seed in entries.items():
            best = sizes[share_name(fraction)]["best_elmo"]
            for b in ("word2vec", "tfidf_logreg"):
                seeds = [s for s in per_seed if s in full]
                if seeds:
                    across.append({"a": f"{best}@{share_name(fraction)}", "b": f"{b}@1", "metric": "test_accuracy",
                                   **_paired([per_seed[s][best] for s in seeds], [full[s][b] for s in seeds], None,
                                             seeds)})
    out = {"fractions": [sizes[k]["fraction"] for k in sizes], "sizes": sizes, "across_sizes": across,
           "tests": {"over_seeds": PAIRED_T, "per_seed": MCNEMAR}, "parts": record or load_result(
               Path(config.runs_dir) / "parts.json") or {},
           "config": config.as_dict(), "meta": environment_info(config.seeds[0])}
    return out


def format_curve(out: dict) -> str:
    """Mean test accuracy (± std) per share and method, and the best ELMo's paired differences."""
    methods = CURVE_METHODS
    lines = [f"{'share':>6}{'docs':>11}" + "".join(f"{m:>20}" for m in methods)]
    for key, size in out["sizes"].items():
        docs = sorted(set(v for v in size["labelled_documents"] if v is not None))
        row = f"{key:>6}{'/'.join(map(str, docs)) or '?':>11}"
        for m in methods:
            s = size["methods"][m]["summary"]["test_accuracy"]
            row += f"{s['mean']:>12.4f}" + (f" ± {s['std']:.4f}" if s["std"] is not None else " (1 seed)")
        lines.append(row)
    lines.append("\nbest ELMo - baseline (test accuracy, points, paired over seeds):")
    for key, size in out["sizes"].items():
        for c in size["comparisons"]:
            p = "n/a" if c["p_value"] is None else f"{c['p_value']:.3g}"
            lines.append(f"  {key}: {c['a']} - {c['b']}: {c['mean_difference'] * 100:+.2f}, p = {p}")
    for c in out["across_sizes"]:
        p = "n/a" if c["p_value"] is None else f"{c['p_value']:.3g}"
        lines.append(f"  {c['a']} - {c['b']}: {c['mean_difference'] * 100:+.2f}, p = {p}")
    return "\n".join(lines)




# --------------------------------------------------------------------------------------------------------------
# The curve over pre-training text (--pretraining-texts): the same curve once per text the representations learn from

#: the variant of --pretraining-texts that adds the extra text to all the descriptions
EXTRA = "extra"


def text_variant(config: StudyArgs, variant: str) -> StudyArgs:
    """The study of one pre-training text: ``1`` is ``--runs-dir`` itself (the labelled-data curve's runs), a share
    ``f`` adds ``--text-fraction f`` to every part in ``<runs-dir>/text_<f>/``, ``extra`` adds ``--extra-text`` with
    ``--extra-text-files`` in ``<runs-dir>/text_extra/``."""
    if variant == "1":
        flags = []
    elif variant == EXTRA:
        flags = ["--extra-text", *config.extra_text_paths()]
    else:
        flags = ["--text-fraction", variant]
    return replace(config, runs_dir=str(config.text_runs_dir(variant)),
                   extra_flags=" ".join([config.extra_flags, *map(shlex.quote, flags)]).strip(), pretraining_texts=(), out=None)


def plan_text_curve(config: StudyArgs) -> list[Part]:
    """Every variant's parts (:func:`plan_curve` of :func:`text_variant`), named ``text_<variant>/<part>``, the
    full text first. A shorter or longer text's ``classify`` part (its full labelled set) trains the curve's
    mixes (:data:`CURVE_MIXES`) only; the full text's is the seeds study's, with frozen λ too."""
    parts = []
    for variant in sorted(config.pretraining_texts, key=lambda v: v != "1"):
        # the full text's share 1 is the seeds study's classify part (frozen λ too); the others train the curve's mixes
        for p in plan_curve(text_variant(config, variant), None if variant == "1" else CURVE_MIXES):
            parts.append(replace(p, name=f"text_{variant}/{p.name}", needs=[f"text_{variant}/{n}" for n in p.needs]))
    return parts


def _train_tokens(config: StudyArgs, seed: int) -> int | None:
    lm = load_result(config.seed_dir(seed) / "results" / "lm.json")
    return None if lm is None else lm.get("train_tokens")


def _bilm_setup(config: StudyArgs, seed: int) -> dict[str, Any] | None:
    """What a seed's biLM was trained with and reached (its ``lm.json``): the batch size and whether Word2Vec
    vectors initialised its embeddings (both chosen per corpus by the defaults), and its test perplexities."""
    lm = load_result(config.seed_dir(seed) / "results" / "lm.json")
    if lm is None:
        return None
    init = lm.get("init_embeddings")  # written before --init-embeddings auto (no "copied"): the vectors were copied
    return {"batch_size": lm.get("config", {}).get("batch_size"),
            "word2vec_init": None if init is None else init.get("copied", True),
            "test_perplexity": [lm.get("test", {}).get(f"{d}_perplexity") for d in ("forward", "backward")]}


def aggregate_text_curve(config: StudyArgs, record: dict[str, dict] | None = None) -> dict[str, Any]:
    """``results/pretraining_text_curve.json``: per pre-training text its tokens per seed, its biLMs' set-up and
    test perplexities (:func:`_bilm_setup`) and its learning curve (:func:`curve_summary`), then per labelled share and method the effect of a doubling of the text — the slope
    of test accuracy on log2(tokens) fitted per seed over the texts, summarised over seeds — and the best ELMo
    mix on each text against the full text (paired over seeds).

    Raises:
        ElmoError: no pre-training text has a finished curve.
    """
    texts: dict[str, dict] = {}
    for variant in config.pretraining_texts:
        sub = text_variant(config, variant)
        try:
            curve = curve_summary(sub)
        except ElmoError:
            continue
        curve.pop("parts"), curve.pop("meta")
        texts[variant] = {"runs_dir": sub.runs_dir, "train_tokens": [_train_tokens(sub, s) for s in config.seeds],
                          "bilm": [_bilm_setup(sub, s) for s in config.seeds], "curve": curve}
    if not texts:
        raise ElmoError(f"no pre-training text of {list(config.pretraining_texts)} has a finished curve under "
                        f"{config.runs_dir}")
    doubling, versus_full = {}, []
    for share in sorted({k for t in texts.values() for k in t["curve"]["sizes"]}, key=float):
        have = {v: t for v, t in texts.items() if share in t["curve"]["sizes"]}
        doubling[share] = {}
        for m in CURVE_METHODS:
            slopes, seeds = [], []
            for i, seed in enumerate(config.seeds):
                xs, ys = [], []
                for t in have.values():
                    size = t["curve"]["sizes"][share]
                    if seed in size["seeds"] and t["train_tokens"][i]:
                        xs.append(np.log2(t["train_tokens"][i]))
                        ys.append(size["methods"][m]["test_accuracy"][size["seeds"].index(seed)])
                if len(xs) >= 2 and np.ptp(xs) > 0:
                    slopes.append(float(np.polyfit(xs, ys, 1)[0]))
                    seeds.append(seed)
            if slopes:
                doubling[share][m] = {"seeds": seeds, "per_seed": slopes, "summary": summarize(slopes)}
        full = have.get("1")
        for variant, t in have.items():
            if variant == "1" or full is None:
                continue
            a, b = t["curve"]["sizes"][share], full["curve"]["sizes"][share]
            seeds = [s for s in a["seeds"] if s in b["seeds"]]
            for m in (*CURVE_MIXES, "word2vec"):
                xs = [a["methods"][m]["test_accuracy"][a["seeds"].index(s)] for s in seeds]
                ys = [b["methods"][m]["test_accuracy"][b["seeds"].index(s)] for s in seeds]
                if seeds:
                    versus_full.append({"share": share, "method": m, "a": f"text {variant}", "b": "text 1",
                                        "seeds": seeds, **paired_over_seeds(xs, ys)})
    out = {"texts": texts, "accuracy_per_doubling": doubling, "versus_full_text": versus_full,
           "tests": {"over_seeds": PAIRED_T, "per_doubling": "least-squares slope of test accuracy on log2(training "
                     "tokens) over the pre-training texts, per seed; mean and 95% t-interval over seeds"},
           "parts": record or load_result(Path(config.runs_dir) / "parts.json") or {},
           "config": config.as_dict(), "meta": environment_info(config.seeds[0])}
    write_json(Path(config.out_path), out)
    return out


def format_text_curve(out: dict) -> str:
    """Per pre-training text its tokens and the best ELMo's mean accuracy per share; the accuracy per doubling."""
    lines = []
    for variant, t in out["texts"].items():
        tokens = [x for x in t["train_tokens"] if x]
        accs = ", ".join(f"{k}: {s['methods'][s['best_elmo']]['summary']['test_accuracy']['mean']:.4f}"
                         for k, s in t["curve"]["sizes"].items())
        lines.append(f"text {variant:>6}: {np.mean(tokens) if tokens else float('nan'):,.0f} tokens; best ELMo {accs}")
    lines.append("test accuracy per doubling of the pre-training text, points (mean over seeds):")
    for share, methods in out["accuracy_per_doubling"].items():
        lines.append(f"  labelled share {share}: " + ", ".join(f"{m} {v['summary']['mean'] * 100:+.2f}"
                                                             for m, v in methods.items()))
    return "\n".join(lines)
