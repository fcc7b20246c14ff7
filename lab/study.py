"""The seeds study (``python -m lab study``): the whole comparison once per seed, then its statistics.

Per seed s, in ``<runs-dir>/seed_<s>/``, four *parts*, each the project's own command run as a child
process (so a part is exactly what a user runs, and its peak memory is measured on its own), through
``python -m lab elmo <command>`` (:func:`lab.cli.run_library`: the library's command, taking the lab's flags too):

=============  ==================================================================  ==========================
part           command (plus ``--seed s``, the folders and ``--threads``)         done when it has written
=============  ==================================================================  ==========================
``pretrain``   ``pretrain`` (``ELMO.py``)                                          ``results/lm.json``
``classify``   ``classify`` (the three ELMo layer mixes)                           ``results/classification.json``
``mlp``        ``classify --mixes learned_function --learned-function mlp``       ``results_mlp/classification.json``
``baselines``  ``baselines`` (Word2Vec, SVD, TF-IDF + LR)                          ``results/baselines.json``
=============  ==================================================================  ==========================

``classify``, ``mlp`` and ``baselines`` need the seed's biLM (its vocabulary) and start when its
``pretrain`` is done. ``--jobs`` parts run at once, each on ``--threads`` threads (default: two at a time
on one thread each, which uses both cores of a 2-core machine). A part whose file exists is skipped, so
an interrupted study resumes where it stopped (delete a seed's folder to redo it). Each part's log is
``logs/<part>.log``; its wall time and peak resident memory go to ``<runs-dir>/parts.json``.

Then :func:`aggregate` writes ``--out`` (``results/seeds.json``): per method the per-seed test
accuracy, test and validation macro-F1 with mean, std and 95% CI (:func:`lab.significance.summarize`);
the biLM's perplexities per seed; and the comparisons — each ELMo layer mix against each baseline, the
mixes against each other and the gated learned function against the MLP — as a paired t-test over
seeds plus McNemar's test on the test documents per seed (:mod:`lab.significance`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from elmo.artifacts import environment_info, refuse_overwriting_inputs, write_json
from elmo.data.agnews import read_agnews
from elmo.errors import ElmoError
from elmo.model.mix import LAYER_MIXES
from elmo.pipelines.common import option
from elmo.runtime.device import precision_name, resolve_device, resolve_precision
from lab.significance import MCNEMAR, PAIRED_T, mcnemar, paired_over_seeds, summarize

BASELINES = ("word2vec", "svd", "tfidf_logreg")
PARTS = ("pretrain", "classify", "mlp", "baselines")
METRICS = ("test_accuracy", "test_f1", "val_f1", "val_accuracy")


def share_name(fraction: float) -> str:
    """``0.01`` -> ``"0.01"``, ``1.0`` -> ``"1"``: a share of the labelled documents in folder names and JSON keys."""
    return f"{fraction:g}"


def merge_flags(*sources: Sequence[str]) -> list[str]:
    """The flags of several sources as one list, a flag of a later source replacing the same flag of an earlier one
    (``--no-x`` and ``--x`` are one flag; its values are the words up to the next ``--``), since the library refuses a
    flag given twice and ``--extra-flags`` / ``--head-extra-flags`` override the study's own. Raises
    :class:`ElmoError` when a source starts with a word that is not a ``--flag``."""
    merged: dict[str, list[str]] = {}
    for source in sources:
        key = None
        for word in source:
            if word.startswith("--"):
                key = re.sub(r"^--no-", "--", word.split("=", 1)[0])
                merged.pop(key, None)  # the later one, in the later place
                merged[key] = [word]
            elif key is None:
                raise ElmoError(f"{' '.join(source)!r}: flags must start with --, got {word!r} first")
            else:
                merged[key].append(word)
    return [word for words in merged.values() for word in words]


@dataclass
class StudyArgs:
    """Flags of ``python -m lab study``."""

    seeds: tuple[int, ...] = option((0, 1, 2), "seeds to run (each: biLM, three ELMo layer mixes, baselines)")
    runs_dir: str = option("runs/study", "per-seed folders seed_<s>/ (models, results, images, logs) and parts.json")
    out: str | None = option(None, "where the statistics over seeds are written (default: results/seeds.json; "
                                 "with --labelled-fractions, results/learning_curve.json)")
    data_dir: str = option("data/ag_news", "folder holding train.csv and test.csv")
    jobs: int = option(2, "parts run at the same time")
    threads: int = option(1, "CPU threads of each part")
    precision: str = option("auto", "--precision of every part")
    parts: tuple[str, ...] = option(PARTS, "parts to run per seed (mlp: the learned function as the MLP, for "
                                    "comparison with the default gate)", choices=PARTS)
    extra_flags: str = option("", "more flags for every training part, e.g. '--max-docs 2000 --epochs 1' (quick check)")
    head_extra_flags: str = option("", "more flags for the classifier parts only (classify, mlp, baselines; not the biLM's "
                                   "pretrain), e.g. '--epochs 5', the head's recipe of the committed studies")
    aggregate_only: bool = option(False, "only (re)compute --out from the finished parts")
    labelled_fractions: tuple[float, ...] = option((), "learning-curve mode: per seed, the classifiers (trainable λ, "
                                                   "the learned function, Word2Vec, SVD, TF-IDF + LR) train on these "
                                                   "shares of the labelled training documents (e.g. 0.01 0.03 0.1 0.3 "
                                                   "1; 1 is the study's own classify and baselines parts), the "
                                                   "representations on all the training text "
                                                   "(lab/learning_curve.py)")
    pretraining_texts: tuple[str, ...] = option((), "curve over pre-training text: per text (a share of the training "
                                                "descriptions such as 0.25, 1, or 'extra': all of them plus "
                                                "--extra-text-files) the biLM, Word2Vec and SVD re-learnt from it in "
                                                "<runs-dir>/text_<text>/ (1: --runs-dir itself) and the classifiers "
                                                "trained at --labelled-fractions (default 0.1 1)")
    extra_text_files: tuple[str, ...] | None = option(None, "the extra text of --pretraining-texts extra (default: "
                                                      "<data-dir>/extra/train_joined_unsplit.csv and "
                                                      "train_nolabel.csv)")

    @property
    def out_path(self) -> str:
        """``--out``, or its default for the mode."""
        if self.out is not None:
            return self.out
        if self.pretraining_texts:
            return "results/pretraining_text_curve.json"
        return "results/learning_curve.json" if self.labelled_fractions else "results/seeds.json"

    def extra_text_paths(self) -> list[str]:
        """``--extra-text-files``, or its default under ``--data-dir``."""
        if self.extra_text_files is not None:
            return list(self.extra_text_files)
        return [str(Path(self.data_dir) / "extra" / name) for name in ("train_joined_unsplit.csv", "train_nolabel.csv")]

    def part_flags(self) -> list[str]:
        """``--extra-flags`` split into flags."""
        return shlex.split(self.extra_flags)

    def head_part_flags(self) -> list[str]:
        """``--head-extra-flags`` split into flags (after ``--extra-flags``'s, so they win where both set a flag)."""
        return shlex.split(self.head_extra_flags)

    def as_dict(self) -> dict[str, Any]:
        """The flags as recorded in the results (``out`` resolved)."""
        return {**asdict(self), "out": self.out_path}

    def check(self) -> None:
        """Raises :class:`ElmoError` naming the flag."""
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ElmoError(f"--seeds must be distinct and at least one, got {list(self.seeds)}")
        if self.jobs < 1 or self.threads < 1:
            raise ElmoError(f"--jobs and --threads must be >= 1, got {self.jobs}, {self.threads}")
        bad = [f for f in self.labelled_fractions if not 0.0 < f <= 1.0]
        if bad or len(set(self.labelled_fractions)) != len(self.labelled_fractions):
            raise ElmoError(f"--labelled-fractions must be distinct shares in (0, 1], got {list(self.labelled_fractions)}")
        for flag, given in (("--extra-flags", self.part_flags()), ("--head-extra-flags", self.head_part_flags())):
            if "--labelled-fraction" in given:
                raise ElmoError(f"{flag} must not set --labelled-fraction: give the shares with --labelled-fractions")
        for text in self.pretraining_texts:
            try:
                ok = text == "extra" or 0.0 < float(text) <= 1.0
            except ValueError:
                ok = False
            if not ok:
                raise ElmoError(f"--pretraining-texts takes shares in (0, 1] and 'extra', got {text!r}")
        for flag, given in (("--extra-flags", self.part_flags()), ("--head-extra-flags", self.head_part_flags())):
            if self.pretraining_texts and {"--text-fraction", "--extra-text"} & set(given):
                raise ElmoError(f"{flag} must not set --text-fraction or --extra-text: give the texts with "
                                "--pretraining-texts")
        if "pretrain" not in self.parts and not self.aggregate_only:
            roots = [self.text_runs_dir(t) for t in self.pretraining_texts] or [Path(self.runs_dir)]
            missing = [str((root / f"seed_{s}").relative_to(self.runs_dir)) for root in roots for s in self.seeds
                       if not (root / f"seed_{s}" / "models" / "bilstm.pt").is_file()]
            if missing:
                raise ElmoError(f"--parts without pretrain needs each seed's biLM; missing for {', '.join(missing)}")

    def text_runs_dir(self, text: str) -> Path:
        """Where the study of the pre-training text ``text`` (``--pretraining-texts``) runs: ``--runs-dir`` itself for
        the full text ``1``, else ``<runs-dir>/text_<text>``."""
        return Path(self.runs_dir) if text == "1" else Path(self.runs_dir) / f"text_{text}"

    def seed_dir(self, seed: int) -> Path:
        """``<runs-dir>/seed_<seed>``."""
        return Path(self.runs_dir) / f"seed_{seed}"

    def share_dir(self, seed: int, fraction: float) -> Path:
        """Where the learning curve's parts of the share ``fraction`` of ``seed`` write: the seed's own folder for
        1 (the study's classify and baselines parts), else ``seed_<s>/labelled_<fraction>``."""
        return self.seed_dir(seed) if fraction == 1.0 else self.seed_dir(seed) / f"labelled_{share_name(fraction)}"


@dataclass
class Part:
    """One command of one seed: what it runs, what marks it done, what it waits for."""

    name: str
    seed: int
    argv: list[str]
    done_file: Path
    log: Path
    needs: list[str] = field(default_factory=list)
    models: Path | None = None  # a --models-dir that gets the seed's biLM linked in before the part starts

    @property
    def key(self) -> str:
        return f"seed_{self.seed}/{self.name}"


def plan(config: StudyArgs, classify_mixes: tuple[str, ...] | None = None) -> list[Part]:
    """The parts of the study in start order (every seed's biLM first, then the rest seed by seed);
    ``classify_mixes``: the ``--mixes`` of the ``classify`` part (``None``: every layer mix)."""
    python = [sys.executable, "-m", "lab", "elmo"]  # the library command, with the lab's flags too
    parts: list[Part] = []
    for seed in config.seeds:
        d = config.seed_dir(seed)

        def flags(results: str = "results", models: str = "models", images: str = "images",
                  seed: int = seed, d: Path = d, head: bool = True, first: Sequence[str] = ()) -> list[str]:
            return merge_flags(first, ["--seed", str(seed), "--data-dir", config.data_dir, "--models-dir",
                                       str(d / models), "--results-dir", str(d / results), "--images-dir",
                                       str(d / images), "--threads", str(config.threads), "--precision",
                                       config.precision, "--quiet"],
                               config.part_flags(), config.head_part_flags() if head else [])

        runs = {
            "pretrain": (python + ["pretrain", *flags(head=False)], d / "results" / "lm.json", []),
            "classify": (python + ["classify", *flags(first=["--mixes", *classify_mixes] if classify_mixes else [])],
                         d / "results" / "classification.json", ["pretrain"]),
            "mlp": (python + ["classify", *flags("results_mlp", "models_mlp", "images_mlp", first=[
                                  "--mixes", "learned_function", "--learned-function", "mlp"])],
                    d / "results_mlp" / "classification.json", ["pretrain"]),
            "baselines": (python + ["baselines", *flags()], d / "results" / "baselines.json", ["pretrain"]),
        }
        for name in config.parts:
            argv, done, needs = runs[name]
            parts.append(Part(name, seed, argv, done, d / "logs" / f"{name}.log",
                              [n for n in needs if n in config.parts], d / "models_mlp" if name == "mlp" else None))
    return sorted(parts, key=lambda p: (p.name != "pretrain", config.seeds.index(p.seed), PARTS.index(p.name)))


def link_bilm(models: Path, seed_models: Path) -> None:
    """Link the seed's biLM files (``bilstm.pt``, ``word2idx.pkl`` in ``seed_models``) into ``models``, relative
    links, so that a part with its own ``--models-dir`` reads the seed's biLM."""
    models.mkdir(parents=True, exist_ok=True)
    for name in ("bilstm.pt", "word2idx.pkl"):
        link = models / name
        if not link.exists() and not link.is_symlink():
            link.symlink_to(Path(os.path.relpath(seed_models / name, models)))


def _launch(part: Part) -> subprocess.Popen:
    """Start ``part`` with its output in its log file (a part with its own models folder gets the seed's biLM
    linked in)."""
    part.log.parent.mkdir(parents=True, exist_ok=True)
    if part.models is not None:
        link_bilm(part.models, part.log.parent.parent / "models")
    with open(part.log, "w", encoding="utf-8") as log:
        log.write("$ " + " ".join(shlex.quote(a) for a in part.argv) + "\n")
        log.flush()
        return subprocess.Popen(part.argv, stdout=log, stderr=subprocess.STDOUT)


def check_precision(config: StudyArgs, parts: list[Part]) -> None:
    """Before any part starts: the finished parts trained at the precision ``--precision`` gives on this machine
    (``precision`` in their ``lm.json`` / ``classification.json``). ``auto`` is bf16 on a CPU with native bf16 and
    fp32 on one without (:func:`~elmo.runtime.device.resolve_precision`), so a study resumed on another CPU would
    otherwise put, say, fp32 biLMs beside bf16 ones and compare them as one method.

    Raises:
        ElmoError: naming the first finished part's file, its precision and this machine's; nothing has run.
    """
    if all(p.done_file.is_file() for p in parts):
        return
    here = precision_name(resolve_precision(config.precision, resolve_device("auto")))
    for p in parts:
        recorded = (load_result(p.done_file) or {}).get("precision") if p.done_file.is_file() else None
        if recorded in ("fp32", "bf16", "fp16") and recorded != here:
            raise ElmoError(f"--precision {config.precision}: {p.done_file} was trained in {recorded} but this machine "
                            f"runs the remaining parts in {here}, so the study would mix precisions; finish it on a "
                            f"machine that runs {recorded}, or start it again in a new --runs-dir")


def run_parts(config: StudyArgs, parts: list[Part], say=print) -> dict[str, dict]:
    """Run the unfinished ``parts``, ``--jobs`` at a time, in order as their dependencies finish.

    Returns:
        ``<runs-dir>/parts.json``: ``{part key: {"seconds", "peak_rss_mb", "returncode", "log", "argv"}}`` of every
        part recorded there. Each part run now is merged into the file when it ends (read again first, so
        studies sharing the out-dir keep each other's records).

    Raises:
        ElmoError: the finished parts trained at another precision than this machine's (:func:`check_precision`),
            or a part failed (its log named); the others that do not depend on it are finished first.
    """
    check_precision(config, parts)
    record_path = Path(config.runs_dir) / "parts.json"
    record: dict[str, dict] = {}
    todo = [p for p in parts if not p.done_file.is_file()]
    for p in parts:
        if p.done_file.is_file():
            say(f"[study] {p.key}: done before ({p.done_file})")
    done = {(p.seed, p.name) for p in parts if p.done_file.is_file()}
    failed: set[tuple[int, str]] = set()
    running: dict[int, tuple[Part, subprocess.Popen, float]] = {}
    while todo or running:
        for p in list(todo):
            if len(running) >= config.jobs:
                break
            if any((p.seed, n) in failed for n in p.needs):
                todo.remove(p)
                failed.add((p.seed, p.name))
                say(f"[study] {p.key}: skipped, a part it needs failed")
            elif all((p.seed, n) in done for n in p.needs):
                todo.remove(p)
                proc = _launch(p)
                running[proc.pid] = (p, proc, time.perf_counter())
                say(f"[study] {p.key}: started (log {p.log})")
        if not running:
            break
        pid, status, usage = _wait_any(list(running))
        p, proc, started = running.pop(pid)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        ok = proc.returncode == 0 and p.done_file.is_file()
        (done if ok else failed).add((p.seed, p.name))
        record[p.key] = {"seconds": round(seconds, 1), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
                         "returncode": proc.returncode, "log": str(p.log), "argv": p.argv}
        # read again: another study may share the out-dir (e.g. one per pre-training text) and have written since
        write_json(record_path, {**(load_result(record_path) or {}), p.key: record[p.key]})
        say(f"[study] {p.key}: {'finished' if ok else 'FAILED'} in {seconds / 60:.1f} min, "
            f"peak {usage.ru_maxrss / 2**20:.2f} GB")
    if failed:
        raise ElmoError("study parts failed: " + ", ".join(f"seed_{s}/{n}" for s, n in sorted(failed))
                        + f" (see their logs under {config.runs_dir}/seed_*/logs/)")
    return {**(load_result(record_path) or {}), **record}


def _wait_any(pids: list[int]) -> tuple[int, int, "os.struct_rusage"]:
    """Wait until one of ``pids`` (our children) ends; ``(pid, wait status, its resource usage)``. Polls each
    pid rather than ``wait4(-1)``, which could reap a child that is not ours (a caller's own subprocess)."""
    while True:
        for pid in pids:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                return done, status, usage
        time.sleep(0.2)


def load_result(path: Path) -> dict | None:
    """The JSON at ``path``, ``None`` when the file does not exist (a part that has not finished)."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def seed_results(config: StudyArgs, seed: int) -> dict[str, dict]:
    """One seed's finished results: ``{method: its entry}`` (``learned_function_mlp`` for the mlp part)
    and ``"lm"`` (``lm.json``); methods whose part has not finished are absent."""
    d = config.seed_dir(seed)
    out: dict[str, dict] = {}
    cls, mlp, base, lm = (load_result(d / f) for f in ("results/classification.json", "results_mlp/classification.json",
                                                 "results/baselines.json", "results/lm.json"))
    for name in LAYER_MIXES:
        if cls and name in cls:
            out[name] = cls[name]
    if mlp and "learned_function" in mlp:
        out["learned_function_mlp"] = mlp["learned_function"]
    for name in BASELINES:
        if base and name in base:
            out[name] = base[name]
    if lm:
        out["lm"] = lm
    return out


def _comparisons(per_seed: dict[int, dict[str, dict]], seeds: list[int], labels: list[int] | None) -> list[dict]:
    """Paired comparisons (over seeds, and McNemar per seed) of the pairs the study is about, each over the
    seeds of ``seeds`` where both methods finished (recorded as ``"seeds"``)."""
    present = [m for m in (*LAYER_MIXES, "learned_function_mlp", *BASELINES) if any(m in per_seed[s] for s in seeds)]
    elmo = [m for m in LAYER_MIXES if m in present]
    pairs = [(a, b) for a in elmo for b in BASELINES if b in present]
    pairs += [(a, b) for i, a in enumerate(elmo) for b in elmo[i + 1:]]
    if "learned_function_mlp" in present and "learned_function" in present:
        pairs.append(("learned_function", "learned_function_mlp"))
    out = []
    for a, b in pairs:
        common = [s for s in seeds if a in per_seed[s] and b in per_seed[s]]
        if not common:
            continue
        for metric in ("test_accuracy", "test_f1"):
            split, key = metric.split("_")
            xs = [per_seed[s][a][split][key] for s in common]
            ys = [per_seed[s][b][split][key] for s in common]
            entry = {"a": a, "b": b, "metric": metric, "seeds": common, **paired_over_seeds(xs, ys)}
            if metric == "test_accuracy" and labels is not None:
                entry["mcnemar_per_seed"] = [
                    {"seed": s, **mcnemar(labels, per_seed[s][a]["test_predictions"], per_seed[s][b]["test_predictions"])}
                    for s in common if "test_predictions" in per_seed[s][a] and "test_predictions" in per_seed[s][b]]
            out.append(entry)
    return out


def labels_of_test_split(config: StudyArgs) -> list[int] | None:
    """The test split's labels in file order (for McNemar's test), ``None`` when the file cannot be read."""
    try:
        return list(read_agnews(Path(config.data_dir) / "test.csv").labels)
    except (ElmoError, OSError):
        return None


def aggregate(config: StudyArgs, record: dict[str, dict] | None = None) -> dict[str, Any]:
    """``results/seeds.json`` from the seeds whose biLM, ELMo layer mixes and baselines have all finished (see the
    module docstring); the optional mlp part counts over the seeds where it finished (``methods[m]["seeds"]``).

    Raises:
        ElmoError: no seed has finished.
    """
    per_seed = {s: seed_results(config, s) for s in config.seeds}
    core = set(LAYER_MIXES if "classify" in config.parts else ()) | set(BASELINES if "baselines" in config.parts else ())
    seeds = [s for s in config.seeds if core <= set(per_seed[s]) and "lm" in per_seed[s]]
    if not seeds:
        raise ElmoError(f"no seed of {list(config.seeds)} has finished all its parts under {config.runs_dir}")
    methods: dict[str, dict] = {}
    for m in (*LAYER_MIXES, "learned_function_mlp", *BASELINES):
        have = [s for s in seeds if m in per_seed[s]]  # the mlp part may have finished for fewer seeds
        if not have:
            continue
        values = {metric: [per_seed[s][m][metric.split("_")[0]][metric.split("_")[1]] for s in have]
                  for metric in METRICS}
        methods[m] = {"seeds": have, **values, "summary": {k: summarize(v) for k, v in values.items()},
                      "best_epoch": [per_seed[s][m].get("best_epoch") for s in have]}
        if m in LAYER_MIXES:
            methods[m]["lambdas"] = [per_seed[s][m].get("lambdas") for s in have]
    lm = {f"{split}_{d}_perplexity": [per_seed[s]["lm"][split][f"{d}_perplexity"] for s in seeds]
          for split in ("val", "test") for d in ("forward", "backward")}
    lm["seconds"] = [per_seed[s]["lm"].get("seconds") for s in seeds]
    out = {"seeds": seeds, "methods": methods, "bilm": {**lm, "summary": {k: summarize(v) for k, v in lm.items()
                                                                           if None not in v}},
           "comparisons": _comparisons(per_seed, seeds, labels_of_test_split(config)),
           "tests": {"over_seeds": PAIRED_T, "per_seed": MCNEMAR},
           "parts": record or load_result(Path(config.runs_dir) / "parts.json") or {},
           "config": config.as_dict(), "meta": environment_info(seeds[0])}
    write_json(Path(config.out_path), out)
    return out


def format_study(out: dict) -> str:
    """The headline table (mean ± std and 95% CI of test accuracy per method) and the comparisons."""
    lines = [f"seeds {out['seeds']}", f"{'method':<22}{'test accuracy':>24}{'95% CI':>20}{'test macro-F1':>22}"]
    for m, entry in out["methods"].items():
        acc, f1 = entry["summary"]["test_accuracy"], entry["summary"]["test_f1"]
        ci = "" if acc["ci95"] is None else f"[{acc['ci95'][0]:.4f}, {acc['ci95'][1]:.4f}]"
        std = "" if acc["std"] is None else f" ± {acc['std']:.4f}"
        f1std = "" if f1["std"] is None else f" ± {f1['std']:.4f}"
        lines.append(f"{m:<22}{acc['mean']:>14.4f}{std:<10}{ci:>20}{f1['mean']:>12.4f}{f1std:<10}")
    lines.append("\npaired over seeds (test accuracy, a - b, points):")
    for c in out["comparisons"]:
        if c["metric"] != "test_accuracy":
            continue
        p = "n/a" if c["p_value"] is None else f"{c['p_value']:.3g}"
        ci = "" if c["ci95"] is None else f" [{c['ci95'][0] * 100:+.2f}, {c['ci95'][1] * 100:+.2f}]"
        lines.append(f"  {c['a']} - {c['b']}: {c['mean_difference'] * 100:+.2f}{ci}, p = {p}, "
                     f"a better in {c['wins']}/{c['n']} seeds")
    return "\n".join(lines)


def check_files(config: StudyArgs) -> None:
    """Before anything is written: ``--out`` is none of the files the study reads (AG News in
    ``--data-dir``, ``<runs-dir>/parts.json``, each seed's results files).

    Raises:
        ElmoError: naming ``--out`` and the input it would write over.
    """
    inputs: dict[str, Path] = {f"--data-dir ({name})": Path(config.data_dir) / name for name in ("train.csv", "test.csv")}
    inputs["--runs-dir (parts.json)"] = Path(config.runs_dir) / "parts.json"
    for seed in config.seeds:
        for name in ("results/lm.json", "results/classification.json", "results/baselines.json",
                     "results_mlp/classification.json"):
            inputs[f"--runs-dir (seed_{seed}/{name})"] = config.seed_dir(seed) / name
        for fraction in config.labelled_fractions:
            for name in ("classification.json", "baselines.json"):
                path = config.share_dir(seed, fraction) / "results" / name
                inputs[f"--runs-dir ({path.relative_to(config.runs_dir)})"] = path
    refuse_overwriting_inputs(inputs, {"--out": config.out_path})
