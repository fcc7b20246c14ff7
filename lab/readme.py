"""Write README.md's headline, timing table and Results section, and docs/results.md, from results/ (seeds.json + the seed-0 main run).

Run from the repository root after a study: ``python lab/readme.py``. Every number and
comparative sentence comes from the committed JSON (:mod:`lab.report.analysis`).
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from lab.report.analysis import analysis  # noqa: E402 (after the sys.path line)
from lab.report.results import load_results, load_timings  # noqa: E402 (after the sys.path line)
from lab.report.tables import (  # noqa: E402 (after the sys.path line)
    comparisons_table,
    curve_comparisons_table,
    curve_table,
    markdown_table,
    seeds_table,
    text_curve_table,
    text_effect_table,
    texts_without_share,
)

res = load_results(ROOT / "results", ROOT / "results" / "experiments")
text = analysis(res)
study = res["seeds"]
n = len(study["seeds"])
b = study["bilm"]["summary"]
ppl = {k: b[k]["mean"] for k in b}
parts = {k: v for k, v in study["parts"].items() if v["returncode"] == 0}
def part_stats(name):
    xs = [v for k, v in parts.items() if k.endswith("/" + name)]
    return (min(v["seconds"] for v in xs) / 60, max(v["seconds"] for v in xs) / 60, max(v["peak_rss_mb"] for v in xs) / 1024) if xs else None
pre, cls, base, mlp = (part_stats(p) for p in ("pretrain", "classify", "baselines", "mlp"))
mlp_seeds = study["methods"].get("learned_function_mlp", {}).get("seeds", [])

def _comparison(a: str, b: str) -> dict:
    return next(c for c in study["comparisons"] if c["a"] == a and c["b"] == b and c["metric"] == "test_accuracy")


def _points(c: dict) -> str:
    if c["ci95"] is None:
        return f"{100 * c['mean_difference']:+.2f} points (one seed)"
    lo, hi = (100 * x for x in c["ci95"])
    return f"{100 * c['mean_difference']:+.2f} points (95% CI [{lo:+.2f}, {hi:+.2f}], paired t-test p = {c['p_value']:.3g})"


def _text_bullet() -> str:
    """The README's pre-training-text bullet from results/pretraining_text_curve.json (empty without it)."""
    text_curve = res.get("pretraining_text_curve")
    if not text_curve:
        return ""
    slopes = []
    for share, per_method in text_curve["accuracy_per_doubling"].items():
        for m in ("trainable_lambda", "word2vec"):
            if m in per_method:
                s = per_method[m]["summary"]
                ci = "" if s["ci95"] is None else f" [{100 * s['ci95'][0]:+.2f}, {100 * s['ci95'][1]:+.2f}]"
                slopes.append(f"{'ELMo (trainable λ)' if m != 'word2vec' else 'Word2Vec'} {100 * s['mean']:+.2f}{ci} "
                              f"with {float(share):.0%} of the labels")
    extra = [s for s in text["pretraining_text_curve"] if s.startswith("Extra text in the default run: ")]
    local = [s for s in text["pretraining_text_curve"] if s.startswith("The same per doubling between consecutive")]
    verdict = extra[0].removeprefix("Extra text in the default run: ") if extra else ""
    return ("* More pre-training text ([curve](docs/results.md#when-elmo-pays-more-pre-training-text)): test accuracy "
            "points per doubling of the biLM's and the static vectors' text, mean [95% CI] over seeds: "
            + "; ".join(slopes) + "." + (" " + local[0] if local else "")
            + (" " + verdict[:1].upper() + verdict[1:] if verdict else "") + "\n")


def _curve_bullet() -> str:
    """The README's "When ELMo pays" bullet from results/learning_curve.json (empty without it)."""
    curve = res.get("learning_curve")
    if not curve:
        return ""
    leads = []
    for b in ("word2vec", "tfidf_logreg"):
        best = max(((size, c) for size in curve["sizes"].values() for c in size["comparisons"] if c["b"] == b),
                   key=lambda sc: sc[1]["mean_difference"])
        docs = "/".join(f"{d:,}" for d in sorted(set(best[0]["labelled_documents"])))
        leads.append(f"over {'Word2Vec' if b == 'word2vec' else 'TF-IDF + LR'} at {docs} labelled documents, "
                     f"{_points(best[1])}")
    significant = {b: [f"{size['fraction']:.0%}" for size in curve["sizes"].values() for c in size["comparisons"]
                       if c["b"] == b and c["p_value"] is not None and c["p_value"] < 0.05 and c["mean_difference"] > 0]
                   for b in ("word2vec", "tfidf_logreg")}
    verdict = (f"The ELMo mix chosen on validation is ahead of TF-IDF + LR beyond the noise at {', '.join(significant['tfidf_logreg']) or 'no share'} "
               f"of the labels, of Word2Vec with the same head at {', '.join(significant['word2vec']) or 'no share'}")
    return ("* When ELMo pays ([learning curve](docs/results.md#when-elmo-pays-the-learning-curve-over-labelled-data)): "
            "the best ELMo's lead is largest " + "; ".join(leads) + f". {verdict} (paired t-test, p < 0.05).\n")


best = study["methods"]["trainable_lambda"]["summary"]["test_accuracy"]
headline = (f"On AG News topic classification, ELMo with a trainable scalar mix reaches **{best['mean']:.4f} ± "
            f"{best['std']:.4f}** test accuracy over {n} seeds, {_points(_comparison('trainable_lambda', 'word2vec'))} "
            "over Word2Vec vectors read by the same classifier.")

results_block = f"""Over {n} seeds (`python -m lab study --seeds {' '.join(map(str, study['seeds']))}`, `results/seeds.json`): each seed
re-trains the biLM, the ELMo classifiers and the baselines; Word2Vec and SVD use the same classifier head.
Trained on the 39,122-row sample of the official train split, tested on the official 7,600-row test split.

{seeds_table(study)}

* ELMo (trainable λ) − TF-IDF + logistic regression: {_points(_comparison('trainable_lambda', 'tfidf_logreg'))};
  − SVD: {_points(_comparison('trainable_lambda', 'svd'))}. A single seed's difference below
  0.6 points is within the seed-to-seed spread.
* biLM test perplexity, mean over seeds: forward {ppl['test_forward_perplexity']:.1f}, backward {ppl['test_backward_perplexity']:.1f}.
{_curve_bullet()}{_text_bullet()}* Every paired comparison and McNemar's test per seed: [docs/results.md](docs/results.md) and
  [report.pdf](report.pdf); the goals met and missed: [docs/results.md](docs/results.md#accuracy-and-performance-goals)."""


def _cpu_label(lscpu_file: Path) -> str:
    """``2-core AMD EPYC (family 25, AVX512-BF16)`` from an ``lscpu`` output (``AVX2 only`` without AVX-512)."""
    lscpu = lscpu_file.read_text()
    model = re.search(r"Model name:\s*(.+)", lscpu).group(1).strip()
    cores = re.search(r"^CPU\(s\):\s*(\d+)", lscpu, re.M).group(1)
    family = re.search(r"CPU family:\s*(\d+)", lscpu).group(1)
    isa = ", AVX512-BF16" if "avx512_bf16" in lscpu else (", AVX2 only" if "avx512" not in lscpu else "")
    return f"{cores}-core {model} (family {family}{isa})"


def _timing_block() -> str:
    """The README's table of wall time and peak memory, from results/timing/ (``/usr/bin/time -v`` files) and, for
    a CPU without native bf16, results/timing/avx2/."""
    folder = ROOT / "results" / "timing"
    cpu = _cpu_label(folder / "lscpu.txt")
    rows_of = [(load_timings(folder), {"bf16": f"{cpu}, bf16 (`--precision auto`)",
                                       "fp32": "the same CPU, `--precision fp32`"})]
    if (folder / "avx2" / "lscpu.txt").is_file():
        rows_of.append((load_timings(folder / "avx2"),
                        {"fp32": f"{_cpu_label(folder / 'avx2' / 'lscpu.txt')}, fp32 (`--precision auto`)"}))

    def cell(run: dict | None) -> str:
        if run is None:
            return "not measured"
        minutes, seconds = divmod(round(run["seconds"]), 60)
        return f"{minutes}:{seconds:02d}, {run['peak_gb'] * 1e9 / 2 ** 30:.1f} GiB"

    def table(rows_of: list) -> str:
        rows = ["| device and precision | `python ELMO.py` | `python classification.py` | both |", "|---|---|---|---|"]
        for timings, labels in rows_of:
            for precision, label in labels.items():
                runs = timings.get(precision, {})
                both = (sum(runs[s]["seconds"] for s in ("ELMO.py", "classification.py")) / 60
                        if len(runs) >= 2 else None)
                rows.append(f"| {label} | {cell(runs.get('ELMO.py'))} | {cell(runs.get('classification.py'))} | "
                            + (f"{both:.1f} min |" if both else "not measured |"))
        return "\n".join(rows)

    avx2 = ("" if len(rows_of) > 1 else "On a CPU without native bf16 (AVX2 only) `--precision auto` trains in fp32, "
            "so expect the fp32 row or\nslower. ")
    large = folder / "rows_120k"
    large_text = ("The official 120,000-row file, which a fresh machine downloads, has about three times the\n"
                  "sample's tokens; its runs are not measured yet. ")
    if (large / "lscpu.txt").is_file():
        large_timings = load_timings(large)
        labels = {p: f"{_cpu_label(large / 'lscpu.txt')}, {p} (`--precision auto`)" for p in large_timings}
        large_text = ("On 120,000 rows, the official file's size (the sample repeated to 120,000 rows, "
                      "[results/timing/rows_120k](results/timing/rows_120k/README.md)):\n\n"
                      + table([(large_timings, labels)]) + "\n\n")
    large_text += ("GPU runs are not measured yet ([docs/performance.md](docs/performance.md)). About 3 GiB of free "
                   "space in `$TMPDIR` (9 GiB for 120,000 rows) holds `classification.py`'s layer cache (`--cache-layers`).")
    return ("Wall time and peak memory (`/usr/bin/time -v`, 2 threads, nothing else running) of the default commands on\n"
            "the 39,122-row sample, from `results/timing/`:\n\n" + table(rows_of) + f"\n\n{avx2}{large_text}")


def fill(text: str, name: str, block: str) -> str:
    """``text`` with what lies between ``<!-- generated:name -->`` and ``<!-- /generated:name -->`` replaced."""
    start, end = f"<!-- generated:{name} -->\n", f"<!-- /generated:{name} -->"
    if start not in text or end not in text:
        raise SystemExit(f"README.md: the markers {start.strip()} ... {end} are missing")
    head, rest = text.split(start, 1)
    return head + start + block + "\n" + end + rest.split(end, 1)[1]


readme = (ROOT / "README.md").read_text()
for name, block in (("headline", headline), ("timing", _timing_block()), ("results", results_block)):
    readme = fill(readme, name, block)
(ROOT / "README.md").write_text(readme)

_FINISH_CURVE = ("The study resumes from the committed parts: `results/pretraining_text_curve/restore_out_dir.py` "
                 "rebuilds its `--out-dir` and gives the commands. The committed parts trained in bf16, so the rest "
                 "needs a CPU with native bf16 (AVX512-BF16 or AMX-BF16) or a GPU in bf16; the study refuses to mix "
                 "precisions.")


def _text_curve_section() -> str:
    """docs/results.md's pre-training-text section (empty without results/pretraining_text_curve.json)."""
    text_curve = res.get("pretraining_text_curve")
    if not text_curve:
        return ""
    config = text_curve["config"]
    shares = sorted({k for t in text_curve["texts"].values() for k in t["curve"]["sizes"]}, key=float)
    cost = {k: v for k, v in text_curve["parts"].items() if "/text_" in k and "/text_1/" not in k
            and v["returncode"] == 0}
    hours = sum(v["seconds"] for v in cost.values()) / 3600
    head = f" --head-extra \"{config['head_extra']}\"" if config.get("head_extra") else ""
    tables = "\n\n".join(f"With {float(share):.0%} of the labels:\n\n{text_curve_table(text_curve, share)}"
                          + (f"\n\n{missing} {_FINISH_CURVE}" if (missing := texts_without_share(text_curve, share)) else "")
                          for share in shares)
    return f"""## When ELMo pays: more pre-training text

Command: `python -m lab study --seeds {' '.join(map(str, config['seeds']))} --pretraining-texts \
{' '.join(text_curve['texts'])} --labelled-fractions {' '.join(shares)}{head}` (`results/pretraining_text_curve.json`). Per seed, the
biLM (`ELMO.py`'s defaults), Word2Vec, SVD and TF-IDF's vocabulary are re-learnt from a random share of the training
descriptions (`--text-fraction`), or from all of them plus the unlabelled AG News rows of `data/ag_news/extra/`
(`--extra-text`: rows that repeat a training description or contain a validation or test description are dropped).
The classifiers train on the same labelled documents whatever the text; the row of all the descriptions is the
labelled-data curve's runs above. Test accuracy, mean ± std over seeds:

{tables}

![pre-training text](../images/pretraining_text_curve.png)

""" + "\n".join("* " + s for s in text["pretraining_text_curve"]) + f"""

Per labelled share and method: the slope of test accuracy on log2(pre-training tokens), and each text against all
the descriptions (paired over seeds):

{text_effect_table(text_curve)}

The texts other than all the descriptions took {hours:.1f} CPU-hours of parts ({len(cost)} parts, one thread each,
two at a time, on the 2-core AMD EPYC of the seeds study; `results/pretraining_text_curve.json`, `parts`).

"""


def _curve_section() -> str:
    """docs/results.md's learning-curve section (empty without results/learning_curve.json)."""
    curve = res.get("learning_curve")
    if not curve:
        return ""
    seeds = sorted({s for size in curve["sizes"].values() for s in size["seeds"]})
    shares = " ".join(f"{s:g}" for s in curve["fractions"])
    cost = {k: v for k, v in curve["parts"].items() if "labelled" in k and v["returncode"] == 0}
    hours = sum(v["seconds"] for v in cost.values()) / 3600
    return f"""## When ELMo pays: the learning curve over labelled data

Command: `python -m lab study --seeds {' '.join(map(str, seeds))} --labelled-fractions {shares}` (`results/learning_curve.json`;
the share 1 is the seeds study's own runs). Per seed and share the classifiers train on a class-balanced draw of
the 37,166 labelled training descriptions; the biLM, Word2Vec, SVD and TF-IDF's vocabulary learn from all of them.
Validation split (1,956 descriptions) and early stopping as in the full-data runs. Test accuracy, mean ± std over
seeds [95% CI]:

{curve_table(curve)}

![learning curve](../images/learning_curve.png)

""" + "\n".join("* " + s for s in text["learning_curve"]) + f"""

The best ELMo layer mix at each share against each baseline (paired over seeds; McNemar's test per seed):

{curve_comparisons_table(curve)}

The shares below 1 took {hours:.1f} CPU-hours of parts ({len(cost)} parts, one thread each, two at a time, on the
2-core AMD EPYC of the seeds study; `results/learning_curve.json`, `parts`).

"""


main = markdown_table(res)
results_md = f"""# Results

The full report is [report.pdf](../report.pdf), generated by `python -m lab report` from the
committed `results/*.json` and `images/`. Every comparative sentence in it is computed from the JSON.
`python -m lab report --markdown` also prints the tables below.

## Over seeds: the headline

Command: `python -m lab study --seeds {' '.join(map(str, study['seeds']))}` (`results/seeds.json`; each seed's JSON
and logs are under `results/study/seed_<s>/`).

Per seed, the study:
- re-trains the biLM (`ELMO.py --seed s`);
- re-trains the three ELMo layer mixes (`classification.py --seed s`);
- re-trains Word2Vec and SVD with the same head, and TF-IDF + LR (`baselines.py --seed s`).

The seed also re-draws the validation split, batch order, initialisation and dropout. The data is the
39,122-row sample of the official train split (37,166 training and 1,956 validation descriptions),
tested on the official 7,600-row test split. The CPU is a 2-core AMD EPYC with AVX512-BF16, bf16,
torch 2.13.0. Two parts ran at a time, on one thread each.

{seeds_table(study)}

![every seed per method](../images/seeds.png)

""" + "\n".join("* " + s for s in text["seeds"]) + """

Every paired comparison. Test accuracy a − b is in points. The 95% CI comes from Student's t over seeds.
p is from a paired t-test over seeds (`scipy.stats.ttest_rel`). The last column counts the seeds in
which McNemar's exact test on the 7,600 test documents gives p < 0.05:

""" + comparisons_table(study) + """

""" + "\n".join("* " + s for s in text["seeds_mixes"]) + """

""" + _curve_section() + _text_curve_section() + """### Accuracy and performance goals

""" + "\n".join("* " + s for s in text["targets"]) + """

### What the study cost

Wall time and peak resident memory of each part (`results/study/parts.json`), with two parts running at
a time on one thread each on the 2-core CPU. Each part is a separate process.
"""
if pre:
    results_md += f"* `ELMO.py` (pretrain): {pre[0]:.0f}–{pre[1]:.0f} min, peak {pre[2]:.2f} GB.\n"
if cls:
    results_md += f"* `classification.py` (three layer mixes): {cls[0]:.0f}–{cls[1]:.0f} min, peak {cls[2]:.2f} GB.\n"
if mlp:
    results_md += f"* `classification.py --mixes learned_function --learned-function mlp`: {mlp[0]:.0f}–{mlp[1]:.0f} min, peak {mlp[2]:.2f} GB.\n"
if base:
    results_md += f"* `baselines.py`: {base[0]:.0f}–{base[1]:.0f} min, peak {base[2]:.2f} GB.\n"
results_md += """
The first two biLMs trained while the test suite was also running on the same two cores, so their times
are upper bounds.""" + ("" if len(mlp_seeds) == n else " The mlp part was skipped for the seeds not listed above, to bound the study's time.") + f"""

## The seed-0 run in full

`results/lm.json`, `results/classification.json` and `results/baselines.json` are seed 0 of the study.
The report's per-run sections describe this run. Its single-seed differences should be read against the
spread above.

{main}

biLM (seed 0): test perplexity forward {res['lm']['test']['forward_perplexity']:.1f}, backward
{res['lm']['test']['backward_perplexity']:.1f}; vocabulary {res['lm']['vocab_size']:,} words; test OOV rate
{res['lm']['oov_rate']['test']:.2%}.

## The previous default run

`results/experiments/previous_defaults/` holds the earlier main run (one seed). It used lr 2e-3, dropout 0.2,
no residual connection and the MLP learned function. It scored: trainable λ 0.9091, frozen λ 0.8995,
learned function (MLP) 0.8908, Word2Vec 0.9029, SVD 0.8913, TF-IDF + LR 0.8936. The biLM's test perplexity
was 124.4 / 118.0. From that one seed ELMo led Word2Vec by 0.62 points; the study above measures how much
of such a lead survives re-training.
"""
(ROOT / "docs" / "results.md").write_text(results_md)
print(headline)
