"""``python -m lab readme``: README.md's generated blocks and ``lab/results.md``, from ``results/``.

README.md holds three blocks between ``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->`` markers, which
:func:`write_readme` replaces (the text around them is written by hand):

* ``headline``: the seeds study's headline sentence (``results/seeds.json``);
* ``timing``: one line per CPU measured, the wall time and peak memory of ``python ELMO.py`` and
  ``python classification.py`` with their defaults (``results/timing/``: ``/usr/bin/time -v`` files and ``lscpu``);
* ``results``: the seeds study's table and its main comparisons.

``lab/results.md`` is written whole: the seeds study with every paired comparison, the two learning curves
(``results/learning_curve.json``, ``results/pretraining_text_curve.json``), the project's goals, what the study
cost and the seed-0 run (``results/{lm,classification,baselines}.json``). Every number and comparative sentence
comes from the committed JSON (:mod:`lab.report.results`, :mod:`lab.report.analysis`); prose is wrapped so that
no generated line is longer than :data:`WIDTH` characters (table rows excepted).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from elmo.errors import ElmoError
from elmo.pipelines.common import option

from .report.analysis import analysis
from .report.results import load_results, load_timings, read_json
from .report.tables import (
    comparisons_table,
    curve_comparisons_table,
    curve_table,
    markdown_table,
    seeds_table,
    text_curve_table,
    text_effect_table,
    texts_without_share,
)

#: The width generated prose is wrapped to.
WIDTH = 115
#: The README blocks :func:`write_readme` fills, in order.
BLOCKS = ("headline", "timing", "results")


@dataclass
class ReadmeArgs:
    """Flags of ``python -m lab readme``."""

    results_dir: str = option("results", "folder with seeds.json, the seed-0 run's JSON, the curves and timing/")
    readme: str = option("README.md", "the README whose generated blocks are filled in place")
    results_page: str = option("lab/results.md", "the results page written whole")

    def check(self) -> None:
        """Raises :class:`ElmoError` when the README, its markers or the seeds study are missing."""
        readme = Path(self.readme)
        if not readme.is_file():
            raise ElmoError(f"{readme} not found")
        text = readme.read_text(encoding="utf-8")
        for name in BLOCKS:
            if f"<!-- generated:{name} -->\n" not in text or f"<!-- /generated:{name} -->" not in text:
                raise ElmoError(f"{readme}: the markers <!-- generated:{name} --> ... <!-- /generated:{name} --> are missing")
        if not (Path(self.results_dir) / "seeds.json").is_file():
            raise ElmoError(f"{Path(self.results_dir) / 'seeds.json'} not found: run `python -m lab study` first")


# ------------------------------------------------------------------------------------------------
# text helpers
# ------------------------------------------------------------------------------------------------

def wrap(text: str, prefix: str = "") -> str:
    """``text`` as lines of at most :data:`WIDTH` characters, the first starting with ``prefix`` and the others
    indented to match it (a Markdown bullet's continuation)."""
    return textwrap.fill(text, WIDTH, initial_indent=prefix, subsequent_indent=" " * len(prefix),
                         break_long_words=False, break_on_hyphens=False)


def bullets(sentences: list[str]) -> str:
    """One wrapped Markdown bullet per sentence."""
    return "\n".join(wrap(s, "* ") for s in sentences)


def fill(text: str, name: str, block: str) -> str:
    """``text`` with what lies between ``<!-- generated:name -->`` and ``<!-- /generated:name -->`` replaced.

    Raises:
        ElmoError: the markers are missing.
    """
    start, end = f"<!-- generated:{name} -->\n", f"<!-- /generated:{name} -->"
    if start not in text or end not in text:
        raise ElmoError(f"the markers {start.strip()} ... {end} are missing")
    head, rest = text.split(start, 1)
    return head + start + block + "\n" + end + rest.split(end, 1)[1]


def _points(c: dict) -> str:
    """A paired comparison as ``+0.76 points (95% CI [+0.38, +1.15], paired t-test p = 0.0135)``."""
    if c["ci95"] is None:
        return f"{100 * c['mean_difference']:+.2f} points (one seed)"
    lo, hi = (100 * x for x in c["ci95"])
    return f"{100 * c['mean_difference']:+.2f} points (95% CI [{lo:+.2f}, {hi:+.2f}], paired t-test p = {c['p_value']:.3g})"


def _comparison(study: dict, a: str, b: str) -> dict:
    """The test-accuracy comparison ``a − b`` of ``seeds.json``."""
    return next(c for c in study["comparisons"] if c["a"] == a and c["b"] == b and c["metric"] == "test_accuracy")


# ------------------------------------------------------------------------------------------------
# timing: one line per CPU
# ------------------------------------------------------------------------------------------------

def cpu_label(lscpu_file: Path) -> str:
    """``2-core AMD EPYC (family 25, model 17, AVX512-BF16)`` from an ``lscpu`` output (``AVX2, no AVX-512`` when it
    lacks AVX-512)."""
    lscpu = lscpu_file.read_text()
    found = {key: re.search(pattern, lscpu, re.M) for key, pattern in
             (("name", r"Model name:\s*(.+)"), ("cores", r"^CPU\(s\):\s*(\d+)"), ("family", r"CPU family:\s*(\d+)"),
              ("model", r"^Model:\s*(\d+)"))}
    if not all(found.values()):
        raise ElmoError(f"{lscpu_file}: not the output of lscpu (no model name, CPU(s), family or model line)")
    isa = "AVX512-BF16" if "avx512_bf16" in lscpu else ("AVX2 only" if "avx512" not in lscpu else "AVX-512")
    return (f"{found['cores'].group(1)}-core {found['name'].group(1).strip()} (family {found['family'].group(1)}, "
            f"model {found['model'].group(1)}, {isa})")


def _clock(seconds: float) -> str:
    """``8:44`` (minutes:seconds)."""
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}:{secs:02d}"


def _pair(runs: dict) -> str | None:
    """``21.2 min (8:44 + 12:29, peaks 3.2 / 2.3 GiB)`` for a folder's two default commands (None without both)."""
    if not {"ELMO.py", "classification.py"} <= set(runs):
        return None
    lm, cls = runs["ELMO.py"], runs["classification.py"]
    gib = [r["peak_gb"] * 1e9 / 2 ** 30 for r in (lm, cls)]
    return (f"{(lm['seconds'] + cls['seconds']) / 60:.1f} min ({_clock(lm['seconds'])} + {_clock(cls['seconds'])}, "
            f"peaks {gib[0]:.1f} / {gib[1]:.1f} GiB)")


#: The timed folders under ``results/timing/`` (each with ``lscpu.txt``) and what was run there besides the sample.
TIMED = (("", ""), ("avx2", ""), ("rows_120k", " on 120,000 rows"))


def timing_lines(results_dir: Path) -> list[str]:
    """One Markdown bullet per CPU of ``results/timing/`` (:data:`TIMED`), each run's two commands summed.

    The precision ``--precision auto`` picks on that CPU (bf16 with native bf16, else fp32) comes first, then any
    other precision timed on it, then the runs on 120,000 rows.
    """
    per_cpu: dict[str, list[str]] = {}
    for sub, text in TIMED:
        folder = results_dir / "timing" / sub
        if not (folder / "lscpu.txt").is_file():
            continue
        label = cpu_label(folder / "lscpu.txt")
        auto = "bf16" if "BF16" in label else "fp32"
        timings = load_timings(folder)
        for precision in sorted(timings, key=lambda p: p != auto):
            pair = _pair(timings[precision])
            if pair:
                per_cpu.setdefault(label, []).append(f"{precision}{text} {pair}")
    return [f"* {label}: " + "; ".join(parts) + "." for label, parts in per_cpu.items()]


# ------------------------------------------------------------------------------------------------
# README blocks
# ------------------------------------------------------------------------------------------------

def headline(study: dict) -> str:
    """The seeds study's headline: trainable λ's test accuracy and its lead over Word2Vec with the same head."""
    best = study["methods"]["trainable_lambda"]["summary"]["test_accuracy"]
    return wrap(f"On AG News topic classification, ELMo with a trainable scalar mix reaches **{best['mean']:.4f} ± "
                f"{best['std']:.4f}** test accuracy over {len(study['seeds'])} seeds, "
                f"{_points(_comparison(study, 'trainable_lambda', 'word2vec'))} over Word2Vec vectors read by the "
                "same classifier.")


def gpu_lines(results_dir: Path) -> list[str]:
    """One Markdown bullet per GPU run of ``results/gpu/`` (``gpu.json`` of ``python -m lab gpu``): the default run's
    two scripts, their held-out perplexities and accuracies, and the device's peak memory."""
    file = results_dir / "gpu" / "gpu.json"
    if not file.is_file():
        return []
    run = read_json(file)
    scripts, device = run["parts"].get("default_run", {}).get("scripts", {}), run["device"]
    lm, cls = scripts.get("ELMO.py", {}), scripts.get("classification.py", {})
    if "seconds" not in lm or "seconds" not in cls:
        return []
    test = lm["perplexity"]["test"]
    accuracy = " / ".join(f"{cls['mixes'][m]['test_accuracy']:.4f}" for m in cls["mixes"])
    peak = max(r.get("cuda_max_reserved_mb", 0.0) for r in (lm, cls)) / 1024
    return [f"* one {device['name']} ({device['cpu_count']} CPU cores, torch {device['torch']}, `python -m lab gpu`, "
            f"`results/gpu/gpu.json`): {lm['precision']} {(lm['seconds'] + cls['seconds']) / 60:.1f} min "
            f"({_clock(lm['seconds'])} + {_clock(cls['seconds'])}, GPU memory at most {peak:.1f} GiB reserved); test "
            f"perplexity {test['forward']:.2f} / {test['backward']:.2f}, test accuracy {accuracy} ({', '.join(cls['mixes'])})."]


def timing_block(results_dir: Path) -> str:
    """README's timing block: :func:`timing_lines` and :func:`gpu_lines` under the sentence that names the commands."""
    intro = wrap("`python ELMO.py` then `python classification.py` with their defaults (2 threads on a CPU, nothing else "
                 "running; `/usr/bin/time -v`, `results/timing/`), on the 39,122-row sample unless stated: wall time "
                 "of both, peak memory of each. `--precision auto` is bf16 where the CPU has native bf16 and on a GPU, "
                 "else fp32.")
    return intro + "\n\n" + "\n".join(timing_lines(results_dir) + gpu_lines(results_dir))


def results_block(res: dict, text: dict) -> str:
    """README's results block: the seeds table and the comparisons a reader asks first."""
    study = res["seeds"]
    seeds = " ".join(map(str, study["seeds"]))
    ppl = {k: v["mean"] for k, v in study["bilm"]["summary"].items()}
    intro = wrap(f"`python -m lab study --seeds {seeds}` (`results/seeds.json`): each seed re-trains the biLM, the "
                 "ELMo classifiers and the baselines; Word2Vec and SVD feed the same classifier head as ELMo. "
                 "Trained on a 39,122-row sample of the official train split, tested on the official 7,600-row test "
                 "split. Every comparison, the learning curves and the goals: [lab/results.md](lab/results.md), "
                 "[report.pdf](report.pdf).")
    points = [
        f"ELMo (trainable λ) leads TF-IDF + logistic regression by {_short(_comparison(study, 'trainable_lambda', 'tfidf_logreg'))} "
        f"and SVD with the same head by {_short(_comparison(study, 'trainable_lambda', 'svd'))}; biLM test perplexity "
        f"{ppl['test_forward_perplexity']:.1f} forward, {ppl['test_backward_perplexity']:.1f} backward (means over seeds).",
    ]
    if res.get("learning_curve"):
        points.append("With fewer labels ([the learning curve](lab/results.md#when-elmo-pays-the-learning-curve-over-"
                      "labelled-data)): " + _short_lead(res["learning_curve"]))
    return intro + "\n\n" + seeds_table(study) + "\n\n" + bullets(points)


def _short(c: dict) -> str:
    """A paired comparison as ``+1.29 points (p = 0.00573)``."""
    return f"{100 * c['mean_difference']:+.2f} points (p = {c['p_value']:.3g})"


def _short_lead(curve: dict) -> str:
    """The best ELMo mix's largest lead over Word2Vec and over TF-IDF + LR across the labelled shares."""
    leads = []
    for b, name in (("word2vec", "Word2Vec"), ("tfidf_logreg", "TF-IDF + LR")):
        size, c = max(((size, c) for size in curve["sizes"].values() for c in size["comparisons"] if c["b"] == b),
                      key=lambda sc: sc[1]["mean_difference"])
        leads.append((f"{_short(c)} over {name}", "/".join(f"{d:,}" for d in sorted(set(size["labelled_documents"])))))
    if leads[0][1] == leads[1][1]:
        return f"at {leads[0][1]} labelled documents the best ELMo mix leads by {leads[0][0]} and {leads[1][0]}."
    return "the best ELMo mix leads by " + " and ".join(f"{lead} at {docs} labelled documents" for lead, docs in leads) + "."


# ------------------------------------------------------------------------------------------------
# lab/results.md
# ------------------------------------------------------------------------------------------------

def _curve_section(res: dict, text: dict) -> str:
    """The learning curve over labelled data (empty without ``learning_curve.json``)."""
    curve = res.get("learning_curve")
    if not curve:
        return ""
    seeds = " ".join(map(str, sorted({s for size in curve["sizes"].values() for s in size["seeds"]})))
    shares = " ".join(f"{s:g}" for s in curve["fractions"])
    cost = [v for k, v in curve["parts"].items() if "labelled" in k and v["returncode"] == 0]
    return "\n\n".join([
        "## When ELMo pays: the learning curve over labelled data",
        wrap(f"Command: `python -m lab study --seeds {seeds} --labelled-fractions {shares}` "
             "(`results/learning_curve.json`; the share 1 is the seeds study's own runs). Per seed and share the "
             "classifiers train on a class-balanced draw of the 37,166 labelled training descriptions; the biLM, "
             "Word2Vec, SVD and TF-IDF's vocabulary learn from all of them. Validation split (1,956 descriptions) "
             "and early stopping as in the full-data runs. Test accuracy, mean ± std over seeds [95% CI]:"),
        curve_table(curve),
        "![learning curve](../images/learning_curve.png)",
        bullets(text["learning_curve"]),
        "The best ELMo layer mix at each share against each baseline (paired over seeds; McNemar's test per seed):",
        curve_comparisons_table(curve),
        wrap(f"The shares below 1 took {sum(v['seconds'] for v in cost) / 3600:.1f} CPU-hours of parts ({len(cost)} "
             "parts, one thread each, two at a time, on the CPU of the seeds study; `parts` in the JSON)."),
    ]) + "\n\n"


def _text_curve_section(res: dict, text: dict) -> str:
    """The learning curve over pre-training text (empty without ``pretraining_text_curve.json``)."""
    text_curve = res.get("pretraining_text_curve")
    if not text_curve:
        return ""
    config = text_curve["config"]
    shares = sorted({k for t in text_curve["texts"].values() for k in t["curve"]["sizes"]}, key=float)
    cost = [v for k, v in text_curve["parts"].items() if "/text_" in k and "/text_1/" not in k and v["returncode"] == 0]
    head_flags = config.get("head_extra_flags", config.get("head_extra"))  # the key before 0.4.0: head_extra
    head = f" --head-extra-flags \"{head_flags}\"" if head_flags else ""
    tables = []
    for share in shares:
        tables.append(f"With {float(share):.0%} of the labels:\n\n{text_curve_table(text_curve, share)}")
        missing = texts_without_share(text_curve, share)
        if missing:
            tables.append(wrap(missing))
    return "\n\n".join([
        "## When ELMo pays: more pre-training text",
        wrap(f"Command: `python -m lab study --seeds {' '.join(map(str, config['seeds']))} --pretraining-texts "
             f"{' '.join(text_curve['texts'])} --labelled-fractions {' '.join(shares)}{head}` "
             "(`results/pretraining_text_curve.json`). Per seed, the biLM (`ELMO.py`'s defaults), Word2Vec, SVD and "
             "TF-IDF's vocabulary are learnt again from a random share of the training descriptions "
             "(`--text-fraction`), or from all of them plus the unlabelled AG News rows of `data/ag_news/extra/` "
             "(`--extra-text`: rows that repeat a training description or contain a validation or test description "
             "are dropped). The classifiers train on the same labelled documents whatever the text; the row of all "
             "the descriptions is the labelled-data curve's runs. Test accuracy, mean ± std over seeds:"),
        *tables,
        "![pre-training text](../images/pretraining_text_curve.png)",
        bullets(text["pretraining_text_curve"]),
        wrap("Per labelled share and method: the slope of test accuracy on log2(pre-training tokens), and each text "
             "against all the descriptions (paired over seeds):"),
        text_effect_table(text_curve),
        wrap(f"The texts other than all the descriptions took {sum(v['seconds'] for v in cost) / 3600:.1f} CPU-hours "
             f"of parts ({len(cost)} parts, one thread each, two at a time, on the CPU of the seeds study)."),
    ]) + "\n\n"


def _cost_section(study: dict) -> str:
    """Wall time and peak memory of the seeds study's parts (``parts`` in ``seeds.json``)."""
    done = {k: v for k, v in study["parts"].items() if v["returncode"] == 0}
    lines = []
    for part, label in (("pretrain", "`ELMO.py` (pretrain)"), ("classify", "`classification.py` (three layer mixes)"),
                        ("mlp", "`classification.py --mixes learned_function --learned-function mlp`"),
                        ("baselines", "`baselines.py`")):
        runs = [v for k, v in done.items() if k.endswith("/" + part)]
        if runs:
            lo, hi = (f(v["seconds"] for v in runs) / 60 for f in (min, max))
            peak = max(v["peak_rss_mb"] for v in runs) / 1024
            span = f"{lo:.0f}" if round(lo) == round(hi) else f"{lo:.0f}–{hi:.0f}"
            lines.append(f"{label}: {span} min, peak {peak:.2f} GB ({len(runs)} seeds).")
    return "\n\n".join([
        "## What the study cost",
        wrap("Wall time and peak resident memory of each part (`parts` in `results/seeds.json`), two parts running "
             "at a time on one thread each, each part a process of its own:"),
        bullets(lines),
        wrap("The first two biLMs trained while other work shared the two cores, so their times are upper bounds."),
    ]) + "\n\n"


def results_page(res: dict, text: dict, cpu: str) -> str:
    """``lab/results.md``: everything the committed studies and the seed-0 run measured."""
    study = res["seeds"]
    seeds = " ".join(map(str, study["seeds"]))
    lm = res["lm"]
    sections = [
        "# Results",
        wrap("Generated by `python -m lab readme` from the committed `results/*.json`; every comparative sentence is "
             "computed from the JSON (`lab/report/analysis.py`). The full report is [report.pdf](../report.pdf) "
             "(`python -m lab report`); the exploratory runs are in [experiments.md](experiments.md)."),
        "## Over seeds: the headline",
        wrap(f"Command: `python -m lab study --seeds {seeds}` (`results/seeds.json`). Per seed the study re-trains the "
             "biLM (`ELMO.py --seed s`), the three ELMo layer mixes (`classification.py --seed s`) and Word2Vec, SVD "
             "and TF-IDF + LR (`baselines.py --seed s`); the seed also re-draws the validation split, batch order, "
             "initialisation and dropout. Data: a 39,122-row sample of the official train split (37,166 training and "
             "1,956 validation descriptions), tested on the official 7,600-row test split. CPU: " + cpu + ", bf16 "
             f"(`--precision auto`), torch {study['meta']['torch']}, two parts at a time on one thread each."),
        seeds_table(study),
        "![every seed per method](../images/seeds.png)",
        bullets(text["seeds"]),
        wrap("Every paired comparison. Test accuracy a − b is in points; the 95% CI comes from Student's t over "
             "seeds, p from a paired t-test over seeds (`scipy.stats.ttest_rel`); the last column counts the seeds in "
             "which McNemar's exact test on the 7,600 test documents gives p < 0.05:"),
        comparisons_table(study),
        bullets(text["seeds_mixes"]),
    ]
    page = "\n\n".join(sections) + "\n\n" + _curve_section(res, text) + _text_curve_section(res, text)
    page += "## Accuracy and performance goals\n\n" + bullets(text["targets"]) + "\n\n" + _cost_section(study)
    page += "\n\n".join([
        "## The seed-0 run in full",
        wrap("`results/lm.json`, `results/classification.json` and `results/baselines.json` are seed 0 of the study; "
             "the report's per-run sections describe this run. Read its single-seed differences against the spread "
             "above."),
        markdown_table(res),
        wrap(f"biLM (seed 0): test perplexity forward {lm['test']['forward_perplexity']:.1f}, backward "
             f"{lm['test']['backward_perplexity']:.1f}; vocabulary {lm['vocab_size']:,} words; test OOV rate "
             f"{lm['oov_rate']['test']:.2%}."),
    ]) + "\n"
    return page


# ------------------------------------------------------------------------------------------------
# the command
# ------------------------------------------------------------------------------------------------

def write_readme(config: ReadmeArgs) -> str:
    """Fill README.md's generated blocks (:data:`BLOCKS`) and write the results page, from ``config.results_dir``.

    Returns:
        The README as written.

    Raises:
        ElmoError: a missing or invalid results file, a results file without a key the text needs (naming the file
            and the key: :class:`~lab.report.results.Recorded`), or README markers that are missing. Nothing is
            written then: both texts are made before either file is written.
    """
    results = Path(config.results_dir)
    res = load_results(results, results / "experiments")
    if not res.get("seeds"):
        raise ElmoError(f"{results / 'seeds.json'} not found: run `python -m lab study` first")
    text = analysis(res)
    readme_path = Path(config.readme)
    readme = readme_path.read_text(encoding="utf-8")
    for name, block in zip(BLOCKS, (headline(res["seeds"]), timing_block(results), results_block(res, text))):
        readme = fill(readme, name, block)
    lscpu = results / "timing" / "lscpu.txt"
    cpu = cpu_label(lscpu) if lscpu.is_file() else "not recorded"
    page_text = results_page(res, text, cpu)
    readme_path.write_text(readme, encoding="utf-8")
    page = Path(config.results_page)
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(page_text, encoding="utf-8")
    print(f"wrote {readme_path} ({len(readme.splitlines())} lines) and {page}", flush=True)
    return readme
