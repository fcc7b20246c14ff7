"""``report.pdf``, generated from ``results/*.json`` and ``images/`` only (``python -m lab report``).

Owns the reportlab layout: :func:`build_report` lays out the sections in order, one function each
(:data:`SECTIONS`: the question, the method, the results over seeds with their uncertainty, the layer weights λ,
the learning curves, what the results mean, then the appendices: per-seed results, diagnostic runs, context
sensitivity, confusion matrices, how to rebuild), and :func:`make_report` with its flags (:class:`ReportArgs`) is
the command. Nothing here computes a comparison: every number is read from the JSON the pipeline wrote
(:mod:`lab.report.results`), every comparative sentence comes from :func:`~lab.report.analysis.analysis`, and the
summary figures from :mod:`lab.report.figures`; the per-method confusion matrices and the LM loss curves are the
PNGs the training scripts wrote.

Inputs: ``results/lm.json`` (``ELMO.py``), ``results/classification.json`` (``classification.py``),
``results/baselines.json`` (``baselines.py``), when present ``results/seeds.json``, ``learning_curve.json`` and
``pretraining_text_curve.json`` (``python -m lab study``), ``results/timing/`` (the timed default runs), and the
diagnostic runs named by ``--experiments`` (:data:`~lab.report.results.DIAGNOSTIC_RUNS`), each
``results/experiments/<name>/`` with the ``classification.json`` (and ``lm.json`` where its biLM changed) of a run
with one flag changed; the report lists what each changed (the config difference) and what it did.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence
from xml.sax.saxutils import escape

import matplotlib
from reportlab.lib import colors
from reportlab.lib.enums import TA_LEFT, TA_RIGHT
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import cm
from reportlab.lib.utils import ImageReader
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.platypus import Image, KeepTogether, PageBreak, Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

from elmo.artifacts import Outputs, atomic_write_bytes, refuse_overwriting_inputs
from elmo.data.agnews import CLASS_NAMES
from elmo.errors import ElmoError
from elmo.pipelines.common import option

from .analysis import analysis
from .figures import FIGURES, draw_figures
from .results import DIAGNOSTIC_RUNS, LABELS, elmo_mixes, experiment_changes, load_results, methods, reference_run
from .tables import (
    comparison_rows,
    comparisons_table,
    curve_comparison_rows,
    curve_rows,
    experiments_table,
    lambda_per_seed_rows,
    lambda_seed_rows,
    markdown_table,
    per_seed_rows,
    perplexities,
    seeds_summary_rows,
    seeds_table,
    text_curve_rows,
    text_effect_rows,
    texts_without_share,
)

#: Width of the text column on A4 with the report's 1.8 cm side margins.
WIDTH = A4[0] - 3.6 * cm


@dataclass
class ReportArgs:
    """Flags of ``python -m lab report``."""

    results_dir: str = option("results", "folder with lm.json, classification.json and baselines.json")
    images_dir: str = option("images", "folder with the training plots; the report's own figures go here too")
    experiments_dir: str | None = option(None, "folder of the diagnostic runs, one sub-folder each with "
                                         "classification.json and, where the biLM changed, lm.json (default: "
                                         "<results-dir>/experiments)")
    experiments: tuple[str, ...] = option(DIAGNOSTIC_RUNS, "the diagnostic runs the report lists, sub-folders of "
                                          "--experiments-dir (with no value: none)", nargs="*")
    out: str = option("report.pdf", "the PDF to write")
    markdown: bool = option(False, "also print the comparison table as Markdown (for README.md)")

    def check(self) -> None:
        """Raises :class:`ElmoError` when a required results file is missing."""
        outputs = Outputs(results=Path(self.results_dir))
        for name, hint in (("lm", "python ELMO.py"), ("classification", "python classification.py"),
                           ("baselines", "python baselines.py")):
            if not outputs.result(name).is_file():
                raise ElmoError(f"{outputs.result(name)} not found: run `{hint}` first")


# --------------------------------------------------------------------------------------------
# reportlab building blocks
# --------------------------------------------------------------------------------------------

def _styles() -> dict[str, ParagraphStyle]:
    """The report's paragraph styles, in DejaVu (registered once: it has λ, γ, →)."""
    fonts = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    if "DejaVu" not in pdfmetrics.getRegisteredFontNames():
        pdfmetrics.registerFont(TTFont("DejaVu", str(fonts / "DejaVuSans.ttf")))
        pdfmetrics.registerFont(TTFont("DejaVu-Bold", str(fonts / "DejaVuSans-Bold.ttf")))
    sheet = getSampleStyleSheet()
    body = ParagraphStyle("body", parent=sheet["BodyText"], fontName="DejaVu", fontSize=9.5, leading=13)
    return {
        "title": ParagraphStyle("title", parent=sheet["Title"], fontName="DejaVu-Bold", fontSize=17),
        "h1": ParagraphStyle("h1", parent=sheet["Heading1"], fontName="DejaVu-Bold", fontSize=13, spaceBefore=10),
        "h2": ParagraphStyle("h2", parent=sheet["Heading2"], fontName="DejaVu-Bold", fontSize=11),
        "body": body,
        "small": ParagraphStyle("small", parent=body, fontSize=8, leading=10),
        "bullet": ParagraphStyle("bullet", parent=body, leftIndent=12, bulletIndent=2),
    }


def _cell(text: str, font_size: float, bold: bool, right: bool) -> Paragraph:
    """A table cell that wraps within its column (the first column and the header left-aligned, numbers right)."""
    style = ParagraphStyle("cell", fontName="DejaVu-Bold" if bold else "DejaVu", fontSize=font_size,
                           leading=font_size * 1.2, alignment=TA_RIGHT if right else TA_LEFT)
    return Paragraph(escape(text), style)


def _table(rows: Sequence[Sequence[Any]], widths: Sequence[float] | None = None, font_size: float = 8) -> Table:
    """A gridded table with a shaded header row; cells that are not flowables are shown as ``str``, and where the
    column ``widths`` are given they wrap within them (a header never runs into the next column)."""
    def cell(c: Any, row: int, column: int) -> Any:
        if hasattr(c, "wrap"):
            return c
        if widths is None:
            return str(c)
        return _cell(str(c), font_size, bold=row == 0, right=row > 0 and column > 0)

    table = Table([[cell(c, i, j) for j, c in enumerate(r)] for i, r in enumerate(rows)], colWidths=widths,
                  repeatRows=1)
    table.setStyle(TableStyle([
        ("FONTNAME", (0, 0), (-1, -1), "DejaVu"), ("FONTNAME", (0, 0), (-1, 0), "DejaVu-Bold"),
        ("FONTSIZE", (0, 0), (-1, -1), font_size), ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#dde5f0")),
        ("GRID", (0, 0), (-1, -1), 0.3, colors.grey), ("VALIGN", (0, 0), (-1, -1), "MIDDLE"),
        ("ALIGN", (1, 1), (-1, -1), "RIGHT"),
    ]))
    return table


def _config_table(config: dict, keys: Sequence[str]) -> Table:
    """:func:`_config_rows` as a table, two options a row (the option names left-aligned)."""
    table = _table(_config_rows(config, keys), None, font_size=7.5)
    table.setStyle(TableStyle([("ALIGN", (2, 1), (2, -1), "LEFT")]))
    return table


def _config_rows(config: dict, keys: Sequence[str]) -> list[list[str]]:
    """``option | value | option | value`` rows for the ``keys`` that ``config`` holds (lists as JSON), two options
    a row."""
    cells = [[k, json.dumps(config[k]) if isinstance(config[k], (list, tuple)) else str(config[k])]
             for k in keys if k in config]
    cells += [["", ""]] * (len(cells) % 2)
    return [["option", "value", "option", "value"]] + [cells[i] + cells[i + 1] for i in range(0, len(cells), 2)]


class _Story:
    """The flowables of the PDF being laid out, and the section titles so far."""

    def __init__(self, res: dict, images: Path) -> None:
        self.res, self.images = res, images
        self.text = analysis(res)
        self.styles = _styles()
        self.flowables: list[Any] = []
        self.sections: list[str] = []

    def add(self, *flowables: Any) -> None:
        self.flowables.extend(flowables)

    def section(self, title: str) -> None:
        """A numbered section heading (recorded in :attr:`sections`)."""
        self.sections.append(title)
        self.add(Paragraph(title, self.styles["h1"]))

    def paragraph(self, markup: str, style: str = "body") -> Paragraph:
        return Paragraph(markup, self.styles[style])

    def para(self, markup: str, style: str = "body") -> None:
        """A paragraph of reportlab markup (the layout's own text)."""
        self.add(self.paragraph(markup, style))

    def sentences(self, key: str, style: str = "bullet", start: int = 0) -> None:
        """A paragraph per sentence of ``analysis(res)[key]`` from the ``start``-th on (plain text, escaped here)."""
        for sentence in self.text[key][start:]:
            self.para(escape(sentence), style)

    def image(self, name: str, width: float) -> Image | Paragraph:
        """The PNG ``images/<name>`` scaled to ``width``, or a note saying it is missing."""
        path = self.images / name
        if not path.is_file():
            return self.paragraph(f"(figure {path} is missing: re-run the script that writes it)", "small")
        w, h = ImageReader(str(path)).getSize()
        return Image(str(path), width=width, height=width * h / w)


# --------------------------------------------------------------------------------------------
# The sections, in order
# --------------------------------------------------------------------------------------------

def _opening(story: _Story) -> None:
    story.add(story.paragraph("ELMo on AG News: contextual vs static embeddings", "title"))
    story.para("Every number, table, figure and comparison below is computed from the files in results/ and images/; "
               "<font face='DejaVu-Bold'>python -m lab report</font> rebuilds this report from them (Appendix E says "
               "which command writes each file).", "small")
    story.add(Spacer(1, 4))


def _question(story: _Story) -> None:
    story.section("1. The question")
    story.para("ELMo gives every word a vector that depends on its sentence: the layers of a bidirectional LSTM "
               "language model (the biLM), pre-trained on unlabelled text and mixed per task. This project trains "
               "it on the AG News news descriptions and classifies them into four topics, to answer three questions:")
    for question in (
            "Does ELMo classify AG News better than static word vectors (Word2Vec, SVD of PPMI co-occurrences) given "
            "to the identical classifier, and better than TF-IDF with logistic regression?",
            "Which way of mixing the biLM's layers works best: trainable weights λ, a frozen random draw of λ, or a "
            "function learned per token?",
            "When does ELMo pay: with how few labelled documents, and with how much pre-training text?"):
        story.para(escape(question), "bullet")
    story.add(story.paragraph("The answer in brief", "h2"))
    story.sentences("answer", "body")


def _method(story: _Story) -> None:
    res, lm = story.res, story.res["lm"]
    docs, oov = lm["documents"], lm["oov_rate"]
    story.section("2. Method")
    story.add(story.paragraph("Data", "h2"))
    story.add(_table([
        ["item", "value"],
        ["training descriptions (biLM and classifiers)", f"{docs['train']:,}"],
        ["validation descriptions (held out from train.csv, model selection)", f"{docs['val']:,}"],
        ["test descriptions (official test.csv, final figures only)", f"{docs['test']:,}"],
        ["training tokens", f"{lm['train_tokens']:,}"],
        ["vocabulary (min-freq {}, with 4 specials)".format(lm["config"]["min_freq"]), f"{lm['vocab_size']:,}"],
        ["OOV rate, validation / test (tokens mapped to <unk>)", f"{oov['val']:.2%} / {oov['test']:.2%}"],
    ], [11 * cm, 4 * cm]))
    story.para("Text: the Description column, AG News escapes undone, lower-cased, split by the project's tokeniser "
               "(elmo.data.text). The static embeddings and the classifiers use the same tokens and vocabulary.",
               "small")
    story.add(KeepTogether([
        story.paragraph("The biLM", "h2"),
        story.paragraph("Two LSTM language models, forward (next word) and backward (previous word), on the same "
                        "vocabulary; adaptive softmax in training, the exact full-vocabulary perplexity in evaluation; "
                        "Adam, early stopping on validation perplexity. ELMo's layers are h0 (the context-free token "
                        "layer) and the two LSTM layers h1 and h2, each the two directions side by side.", "small"),
        _config_table({**lm["config"], **lm["bilm_config"]}, (
            "embedding_dim", "hidden_size", "num_layers", "dropout", "cutoffs", "div_value", "lr", "epochs",
            "batch_size", "max_tokens", "clip_norm", "patience", "max_length", "init_embeddings"))]))
    bcfg = res["baselines"].get("config", {})
    story.add(KeepTogether([
        story.paragraph("The classifiers", "h2"),
        story.paragraph("Every classifier has the same head: the representation (frozen), concatenated with a "
                        "task-trained token embedding x_k (paper §3.3, [x_k; ELMo_k]), then dropout, a one-layer "
                        "BiLSTM, mean+max pooling and a linear layer. The ELMo classifiers differ only in the layer "
                        "mix; Word2Vec and SVD replace the biLM with a frozen static matrix. Adam, early stopping and "
                        "model selection on validation macro-F1.", "small"),
        _config_table(res["classification"]["config"], (
            "encoder_hidden", "token_embedding_dim", "dropout", "lr", "weight_decay", "epochs", "batch_size",
            "max_tokens", "clip_norm", "patience", "max_length"))]))
    story.para(f"Static embeddings: Word2Vec skip-gram (gensim), {bcfg.get('static_dim')} dimensions, window "
               f"{bcfg.get('w2v_window')}, {bcfg.get('w2v_epochs')} epochs; SVD: PPMI (α = {bcfg.get('svd_alpha')}) "
               f"of co-occurrences within ±{bcfg.get('svd_window')} words, TruncatedSVD to {bcfg.get('static_dim')} "
               "dimensions, vectors UΣ^½. TF-IDF: word 1-2 grams, logistic regression (C = 10). "
               + escape(" ".join(story.text["head"])), "small")
    story.add(story.paragraph("Seeds and tests", "h2"))
    study = res.get("seeds")
    if study:
        story.para(f"The whole comparison runs once per seed ({', '.join(map(str, study['seeds']))}): each seed "
                   "re-trains the biLM and every classifier and re-draws the validation split's shuffling, the "
                   "initialisation and dropout (python -m lab study). Results are the mean ± standard deviation over "
                   "the seeds with the 95% confidence interval of the mean; differences between methods are tested "
                   f"by a {escape(study['tests']['over_seeds'])}, and per seed by {escape(study['tests']['per_seed'])}.",
                   "small")
    else:
        story.para("One seed only (results/seeds.json is absent): the differences below carry no estimate of their "
                   "uncertainty; python -m lab study measures it over seeds.", "small")


def _results(story: _Story) -> None:
    """The results with their uncertainty (``seeds.json``), or the single run's when the study has not run."""
    study = story.res.get("seeds")
    story.section("3. Results: test accuracy and its uncertainty")
    if not study:
        _run_results(story)
        story.sentences("elmo_vs_static")
        return
    story.add(_table(seeds_summary_rows(study), [5.4 * cm, 3.8 * cm, 3.6 * cm, 4.6 * cm], font_size=7.5))
    story.add(story.image(FIGURES["seeds"], WIDTH * 0.8))
    story.sentences("seeds", start=1)  # the first is the table above in words
    story.add(story.paragraph("Paired comparisons", "h2"))
    story.para("Each row: method a minus method b in test accuracy points, mean over the seeds with its 95% CI, the "
               "paired t-test's p, the seeds where a is ahead, and the seeds where McNemar's test on the test "
               "documents finds the two apart (p < 0.05).", "small")
    story.add(_table(comparison_rows(study), [6.8 * cm, 1.8 * cm, 2.8 * cm, 1.8 * cm, 1.4 * cm, 2.6 * cm],
                     font_size=6.5))
    story.add(story.paragraph("The project's goals", "h2"))
    story.sentences("targets")


def _lambda(story: _Story) -> None:
    """The layer weights: over the seeds where the study recorded them, else the single run's."""
    study = story.res.get("seeds")
    story.section("4. λ: how the layers are mixed")
    story.para("Trainable λ mixes the layers as γ Σ_j λ_j h_j with λ = softmax(w) and w, γ trained (the paper's "
               "scalar mix); frozen λ keeps a random draw of w (from the seed) and γ = 1; the learned function "
               "(a gate) adds per-token logits to a global w, so its λ is the global part; the MLP variant has no "
               "weights to show.", "small")
    rows = lambda_seed_rows(study) if study else []
    if rows:
        story.add(_table(rows, [4.4 * cm] + [2.9 * cm] * (len(rows[0]) - 2) + [3.4 * cm], font_size=7.5))
        story.add(story.image(FIGURES["lambda_seeds"], WIDTH * 0.7))
        story.sentences("lambda_over_seeds")
        story.sentences("seeds_mixes")
    else:
        _run_lambda(story)


def _curves(story: _Story) -> None:
    """When ELMo pays: the learning curve over labelled data and the curve over pre-training text."""
    curve, text_curve = story.res.get("learning_curve"), story.res.get("pretraining_text_curve")
    story.section("5. When ELMo pays: learning curves")
    if not curve and not text_curve:
        story.para("Not measured: python -m lab study --labelled-fractions 0.01 0.03 0.1 0.3 1 writes "
                   "results/learning_curve.json, and --pretraining-texts 0.25 0.5 1 extra "
                   "results/pretraining_text_curve.json.", "small")
    if curve:
        story.add(story.paragraph("Fewer labelled documents", "h2"))
        story.para("From results/learning_curve.json (python -m lab study --labelled-fractions ...). Per seed and share, "
                   "the classifiers are re-trained on a class-balanced draw of the labelled training documents; mean "
                   "± std over seeds [95% CI of the mean].", "small")
        rows = curve_rows(curve)
        story.add(_table(rows, [3.6 * cm] + [(WIDTH - 3.6 * cm) / (len(rows[0]) - 1)] * (len(rows[0]) - 1),
                         font_size=6.5))
        story.add(story.image(FIGURES["learning_curve"], WIDTH * 0.8))
        story.sentences("learning_curve")
        story.add(Spacer(1, 4), _table(curve_comparison_rows(curve), [1.3 * cm, 6.2 * cm, 1.8 * cm, 2.8 * cm, 1.8 * cm,
                                                                      1.3 * cm, 2.2 * cm], font_size=6.5))
    if text_curve:
        story.add(story.paragraph("More pre-training text", "h2"))
        story.para("From results/pretraining_text_curve.json (python -m lab study --pretraining-texts ...). Per "
                   "doubling: " + escape(text_curve["tests"]["per_doubling"]) + ".", "small")
        shares = sorted({k for t in text_curve["texts"].values() for k in t["curve"]["sizes"]}, key=float)
        for share in shares:
            rows = text_curve_rows(text_curve, share)
            story.para(f"Test accuracy, mean ± std over seeds, with {float(share):.0%} of the labels:", "small")
            story.add(_table(rows, [3.8 * cm, 1.6 * cm] + [(WIDTH - 5.4 * cm) / (len(rows[0]) - 2)] * (len(rows[0]) - 2),
                             font_size=6.5))
            if missing := texts_without_share(text_curve, share):
                story.para(escape(missing), "small")
        story.add(story.image(FIGURES["pretraining_text_curve"], WIDTH * (0.5 if len(shares) == 1 else 0.95)))
        story.sentences("pretraining_text_curve")
        rows = text_effect_rows(text_curve)
        story.add(Spacer(1, 4), _table(rows, [1.2 * cm, 3.4 * cm, 3.2 * cm]
                                       + [(WIDTH - 7.8 * cm) / max(1, len(rows[0]) - 3)] * (len(rows[0]) - 3),
                                       font_size=6.5))


def _conclusion(story: _Story) -> None:
    story.section("6. What the results mean")
    story.sentences("conclusion")


def _run_results(story: _Story) -> None:
    """The single (seed-0) run's classifiers: train and test metrics, and the comparison figures."""
    rows = [["method", "split", "accuracy", "precision", "recall", "F1"]]
    for name, entry in methods(story.res).items():
        for split in ("train", "test"):
            m = entry[split]
            rows.append([LABELS.get(name, name), split, f"{m['accuracy']:.4f}", f"{m['precision']:.4f}",
                         f"{m['recall']:.4f}", f"{m['f1']:.4f}"])
    story.add(KeepTogether([story.paragraph("Every method (macro-averaged precision, recall, F1)", "small"),
                            _table(rows, [6.2 * cm, 1.4 * cm, 2 * cm, 2 * cm, 2 * cm, 2 * cm])]),
              story.image(FIGURES["method_comparison"], WIDTH * 0.8),
              story.image(FIGURES["validation_curves"], WIDTH * 0.55))


def _run_lambda(story: _Story) -> None:
    """The single (seed-0) run's layer weights λ and scale γ, their figure and sentences."""
    cls = story.res["classification"]
    rows = [["layer mix", "λ (h0, h1, h2)", "γ", "test accuracy", "test macro-F1"]]
    for s in elmo_mixes(story.res):
        weights = cls[s].get("lambdas")
        rows.append([LABELS[s], "–" if not weights else ", ".join(f"{w:.3f}" for w in weights),
                     "–" if cls[s].get("gamma") is None else f"{cls[s]['gamma']:.3f}",
                     f"{cls[s]['test']['accuracy']:.4f}", f"{cls[s]['test']['f1']:.4f}"])
    story.add(_table(rows), story.image(FIGURES["lambdas"], WIDTH * 0.55))
    story.sentences("lambda")


def _biLM_run(story: _Story) -> None:
    """The single (seed-0) run's biLM: perplexities, accuracies and speed per direction, and its loss curves."""
    lm = story.res["lm"]
    rows = [["direction", "val perplexity", "test perplexity", "test top-1", "test top-5", "best epoch", "tokens/s"]]
    for d in ("forward", "backward"):
        w = lm["test"][f"{d}_words"]
        rows.append([d, f"{lm['val'][f'{d}_perplexity']:.2f}", f"{lm['test'][f'{d}_perplexity']:.2f}",
                     f"{w['top1_accuracy']:.3f}", f"{w['top5_accuracy']:.3f}", lm["directions"][d]["best_epoch"],
                     f"{lm['tokens_per_second'][d]:,.0f}"])
    story.add(_table(rows), story.image("lm_loss.png", WIDTH * 0.55))


def _seed(story: _Story) -> Any:
    """The seed of the main run (``results/classification.json``)."""
    return story.res["classification"].get("meta", {}).get("seed", 0)


def _appendix_seeds(story: _Story) -> None:
    """Appendix A: every seed's numbers, then the seed-0 run in detail."""
    study, seed = story.res.get("seeds"), _seed(story)
    story.add(PageBreak())
    story.section("Appendix A. Per-seed results")
    if study:
        rows = per_seed_rows(study)
        story.add(_table(rows, [5.6 * cm] + [(WIDTH - 5.6 * cm) / (len(rows[0]) - 1)] * (len(rows[0]) - 1),
                         font_size=7))
        rows = lambda_per_seed_rows(study)
        if len(rows[0]) > 1:
            story.para("Layer weights per seed:", "small")
            story.add(_table(rows, [1.2 * cm] + [(WIDTH - 1.2 * cm) / (len(rows[0]) - 1)] * (len(rows[0]) - 1),
                             font_size=7))
        story.add(story.paragraph(f"The seed-{seed} run in detail", "h2"))
        story.para("results/lm.json, classification.json and baselines.json: one seed's run. Its single-seed "
                   "differences are to be read against the seed-to-seed spread of Section 3.", "small")
        _run_results(story)
        story.sentences("elmo_vs_static")
        _run_lambda(story)
    else:
        story.para(f"One seed only (seed {seed}): its classifiers are in Section 3 and its layer weights in "
                   "Section 4.", "small")
    story.add(story.paragraph(f"The seed-{seed} biLM", "h2"))
    _biLM_run(story)


def _diagnostics(story: _Story) -> None:
    """Appendix B: the diagnostic runs (:data:`~lab.report.results.DIAGNOSTIC_RUNS`), one change each."""
    res = story.res
    story.section("Appendix B. Diagnostic runs")
    if not story.text["diagnostics"] and not story.text["init"]:
        story.para("No diagnostic run is listed (python -m lab report --experiments names them).", "small")
        return
    story.para("Each run is the main run with one change, on the same data and seed (one seed: read a difference "
               "against the seed-to-seed spread of Section 3). Δ: test accuracy points against the run it is "
               "compared with, the main run or, for a run trained in fp32, the main run repeated in fp32. "
               + escape(" ".join(story.text["diagnostics_reference"])), "small")
    rows = [["run", "change", "fwd / bwd test ppl", "test accuracy", "test macro-F1", "Δ, points"]]
    main = res["classification"].get("trainable_lambda", {}).get("test")
    if main:
        rows.append(["main", "–", perplexities(res["lm"]), f"{main['accuracy']:.4f}", f"{main['f1']:.4f}", "–"])
    for name, exp in res["experiments"].items():
        m = exp["classification"].get("trainable_lambda", {}).get("test")
        if m:
            ref_name, ref = reference_run(res, exp["classification"])
            ref_m = ref.get("trainable_lambda", {}).get("test")
            delta = "–" if ref is exp["classification"] or not ref_m else \
                f"{(m['accuracy'] - ref_m['accuracy']) * 100:+.2f}" + (" (fp32)" if ref_name != "the main run" else "")
            changes = story.paragraph(escape(", ".join(experiment_changes(res, name)) or "–"), "small")
            rows.append([name, changes, perplexities(exp.get("lm")), f"{m['accuracy']:.4f}", f"{m['f1']:.4f}", delta])
    story.add(_table(rows, [2.8 * cm, 5.4 * cm, 2.6 * cm, 2 * cm, 2 * cm, 1.6 * cm], font_size=7))
    if story.text["init"]:
        story.add(story.paragraph("Word2Vec-initialised token embeddings", "h2"))
        story.sentences("init")


def _context_block(story: _Story, item: dict) -> KeepTogether:
    """One context word: its example sentences and the cosine table of its occurrences."""
    block = [story.paragraph(f"“{escape(item['word'])}”", "h2")]
    for tag, sent in zip(("A", "A′", "B"), item["sentences"]):
        text = escape(sent["text"] if len(sent["text"]) < 260 else sent["text"][:257] + "…")
        block.append(story.paragraph(f"<b>{tag}</b> ({sent['topic']}): {text}", "small"))
    counts = " and ".join(f"{n} {t}" for t, n in item["occurrences"].items())
    rows = [["representation", "cos(A, A′)", "cos(A, B)", "mean cos, same topic", "mean cos, across topics"]]
    for k, v in item["cosine"].items():
        label = {"h0": "ELMo h0 (token layer)", "mix": "ELMo scalar mix (trainable λ)"}.get(k, f"ELMo h{k[1:]}")
        rows.append([label, f"{v['example_same']:.3f}", f"{v['example_cross']:.3f}", f"{v['same_topic']:.3f}",
                     f"{v['cross_topic']:.3f}"])
    rows.append(["Word2Vec / SVD (one vector per word)", "1.000", "1.000", "1.000", "1.000"])
    block.append(story.paragraph(f"Means over all pairs of the {counts} test occurrences used.", "small"))
    block.append(_table(rows))
    return KeepTogether(block)


def _context(story: _Story) -> None:
    context = story.res["baselines"].get("context") or []
    story.section("Appendix C. Context sensitivity")
    story.para("A word that occurs in two topics of the test set: how similar its ELMo vectors are within a topic "
               f"and across topics (cosines; the seed-{_seed(story)} run).", "small")
    story.add(*(_context_block(story, item) for item in context))
    story.sentences("context", "small" if context else "body")


def _confusion(story: _Story) -> None:
    story.add(PageBreak())
    story.section(f"Appendix D. Confusion matrices (test set, the seed-{_seed(story)} run)")
    cells = [story.image(f"confusion_{m}.png", WIDTH / 2 - 0.4 * cm) for m in methods(story.res)]
    grid = [cells[i:i + 2] + [""] * (2 - len(cells[i:i + 2])) for i in range(0, len(cells), 2)]
    story.add(Table(grid, colWidths=[WIDTH / 2] * 2))
    story.para("Rows: true class, columns: predicted, in the order " + ", ".join(CLASS_NAMES) + ". Language-model "
               "confusions over the 20 most frequent words: images/lm_confusion_forward.png and _backward.png.",
               "small")


def _rebuild(story: _Story) -> None:
    story.section("Appendix E. Rebuilding this report")
    story.para("<font face='DejaVu-Bold'>python -m lab report</font> writes report.pdf from results/ and images/ "
               "(run from the repository root; --results-dir, --images-dir and --out name other places). The files "
               "it reads, and the commands that write them:", "small")
    for command, files in (
            ("pip install torch==2.13.0 &amp;&amp; pip install -r requirements.txt", "the environment"),
            ("python ELMO.py; python classification.py; python baselines.py",
             f"results/lm.json, classification.json, baselines.json and the images (the seed-{_seed(story)} run)"),
            ("python -m lab study", "results/seeds.json (the seeds)"),
            ("python -m lab study --labelled-fractions 0.01 0.03 0.1 0.3 1", "results/learning_curve.json"),
            ("python -m lab study --pretraining-texts 0.25 0.5 1 extra", "results/pretraining_text_curve.json"),
            ("python -m lab elmo pretrain (where its biLM changed) and python -m lab elmo classify --mixes "
             "trainable_lambda, each with the flags of its row in Appendix B and --models-dir models/&lt;name&gt; "
             "--results-dir results/experiments/&lt;name&gt;",
             "a diagnostic run (the report lists those named by --experiments)")):
        story.para(f"<font face='DejaVu-Bold'>{command}</font>: {files}", "bullet")
    meta = story.res["classification"]["meta"]
    story.para("Environment of the classification run: " + escape(", ".join(f"{k} {v}" for k, v in meta.items())),
               "small")


#: The report's parts, in the order :func:`build_report` lays them out.
SECTIONS: tuple[Callable[[_Story], None], ...] = (
    _opening, _question, _method, _results, _lambda, _curves, _conclusion,
    _appendix_seeds, _diagnostics, _context, _confusion, _rebuild)


def _write(flowables: list[Any], out: str | os.PathLike) -> None:
    """Render the flowables as an A4 PDF and write it to ``out`` atomically."""
    buffer = io.BytesIO()
    doc = SimpleDocTemplate(buffer, pagesize=A4, leftMargin=1.8 * cm, rightMargin=1.8 * cm, topMargin=1.5 * cm,
                            bottomMargin=1.5 * cm, title="ELMo on AG News", author="elmo toolkit")
    doc.build(flowables)
    atomic_write_bytes(out, buffer.getvalue())


def build_report(res: dict, images_dir: str | os.PathLike, out: str | os.PathLike) -> list[str]:
    """Write the PDF to ``out`` (atomically) from ``res`` and the PNGs in ``images_dir``.

    Args:
        res: :func:`~lab.report.results.load_results`.
        images_dir: folder with the training plots; the summary figures
            (:func:`~lab.report.figures.draw_figures`) are drawn into it first.
        out: the PDF to write.

    Returns:
        The section titles, in order.

    Raises:
        ElmoError: results without the expected keys (naming the missing one), an unwritable path.
    """
    images = Path(images_dir)
    try:
        draw_figures(res, images)
        story = _Story(res, images)
        for lay_out in SECTIONS:
            lay_out(story)
        _write(story.flowables, out)
    except KeyError as exc:
        raise ElmoError(f"the results are missing the key {exc}: re-run the pipeline that writes them") from None
    return story.sections


def check_files(config: ReportArgs) -> None:
    """Before anything is written: neither ``--out`` nor the summary figures drawn into ``--images-dir``
    (:data:`~lab.report.figures.FIGURES`) is one of the files the report reads (the JSON under
    ``--results-dir`` and ``--experiments-dir``, the other PNGs of ``--images-dir``).

    Raises:
        ElmoError: naming the output and the input it would write over.
    """
    images, drawn = Path(config.images_dir), set(FIGURES.values())
    inputs: dict[str, Path] = {}
    for flag, folder in (("--results-dir", config.results_dir), ("--experiments-dir", config.experiments_dir)):
        if folder is not None and Path(folder).is_dir():
            inputs |= {f"{flag} ({p.relative_to(folder)})": p for p in sorted(Path(folder).rglob("*.json"))}
    if images.is_dir():
        inputs |= {f"--images-dir ({p.name})": p for p in sorted(images.glob("*.png")) if p.name not in drawn}
    outputs = {"--out": Path(config.out)} | {f"--images-dir ({name})": images / name for name in FIGURES.values()}
    refuse_overwriting_inputs(inputs, outputs)


def make_report(config: ReportArgs) -> list[str]:
    """Load the results named by ``config``, write the report (and print the Markdown tables when
    ``config.markdown``).

    Returns:
        The section titles, in order (:func:`build_report`).

    Raises:
        ElmoError: a missing or invalid results file (a diagnostic run named by ``--experiments`` included),
            results without an expected key, ``--out`` or a summary figure that is one of the files the report
            reads (:func:`check_files`).
    """
    check_files(config)
    res = load_results(config.results_dir, config.experiments_dir or Path(config.results_dir) / "experiments",
                       config.experiments)
    sections = build_report(res, config.images_dir, config.out)
    if config.markdown:
        print(markdown_table(res) + "\n\n" + experiments_table(res))
        if res["seeds"]:
            print("\n" + seeds_table(res["seeds"]) + "\n\n" + comparisons_table(res["seeds"]))
    print(f"wrote {config.out}: {len(sections)} sections, {len(res['experiments'])} diagnostic runs"
          + ("" if res["init"] else " (no run differing in --init-embeddings: that comparison is left out)"))
    return sections
