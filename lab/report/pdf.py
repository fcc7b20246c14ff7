"""``report.pdf``, generated from ``results/*.json`` and ``images/`` only (``python -m lab report``).

Owns the reportlab layout: :func:`build_report` lays out the sections in order, one function each
(:data:`SECTIONS`), and :func:`make_report` with its flags (:class:`ReportArgs`) is the command.
Nothing here computes a comparison: every number is read from the JSON the pipeline wrote
(:mod:`lab.report.results`), every comparative sentence comes from
:func:`~lab.report.analysis.analysis`, and the summary figures from :mod:`lab.report.figures`;
the per-method confusion matrices and the LM loss curves are the PNGs the training scripts wrote.

Inputs: ``results/lm.json`` (``ELMO.py``), ``results/classification.json`` (``classification.py``),
``results/baselines.json`` (``baselines.py``) and, optionally, diagnostic runs under
``results/experiments/<name>/`` (``lm.json`` and/or ``classification.json`` of a run with one flag
changed, e.g. ``w2v_init`` = ``ELMO.py --init-embeddings word2vec``); the report lists what each
changed (the config difference) and what it did.
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
from .results import LABELS, elmo_mixes, experiment_changes, load_results, methods
from .tables import (
    comparison_rows,
    comparisons_table,
    curve_comparison_rows,
    curve_rows,
    experiments_table,
    markdown_table,
    perplexities,
    seeds_rows,
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
    experiments_dir: str | None = option(None, "folder of diagnostic runs, one sub-folder each with lm.json "
                                         "and/or classification.json (default: <results-dir>/experiments; "
                                         "skipped when absent)")
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


def _table(rows: Sequence[Sequence[Any]], widths: Sequence[float] | None = None, font_size: float = 8) -> Table:
    """A gridded table with a shaded header row; cells that are not flowables are shown as ``str``."""
    table = Table([[c if hasattr(c, "wrap") else str(c) for c in r] for r in rows], colWidths=widths, repeatRows=1)
    table.setStyle(TableStyle([
        ("FONTNAME", (0, 0), (-1, -1), "DejaVu"), ("FONTNAME", (0, 0), (-1, 0), "DejaVu-Bold"),
        ("FONTSIZE", (0, 0), (-1, -1), font_size), ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#dde5f0")),
        ("GRID", (0, 0), (-1, -1), 0.3, colors.grey), ("VALIGN", (0, 0), (-1, -1), "MIDDLE"),
        ("ALIGN", (1, 1), (-1, -1), "RIGHT"),
    ]))
    return table


def _config_rows(config: dict, keys: Sequence[str]) -> list[list[str]]:
    """``option | value`` rows for the ``keys`` that ``config`` holds (lists as JSON)."""
    return [["option", "value"]] + [[k, json.dumps(config[k]) if isinstance(config[k], (list, tuple)) else str(config[k])]
                                     for k in keys if k in config]


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

    def sentences(self, key: str, style: str = "bullet") -> None:
        """A paragraph per sentence of ``analysis(res)[key]`` (plain text, escaped here)."""
        for sentence in self.text[key]:
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
    cls = story.res["classification"]
    story.add(story.paragraph("ELMo on AG News: contextual vs static embeddings", "title"))
    study = " and results/seeds.json (the seeds study)" if story.res.get("seeds") else ""
    story.para(f"Generated by <font face='DejaVu-Bold'>python -m lab report</font> from results/lm.json, "
               f"results/classification.json and results/baselines.json (seed {cls['meta'].get('seed')}, torch "
               f"{cls['meta'].get('torch')}){study}. Every number and every comparison below is computed from "
               "those files.", "small")
    story.add(Spacer(1, 6))
    story.sentences("summary", "body")


def _seeds(story: _Story) -> None:
    """The headline over seeds (``seeds.json``; nothing when the study has not run)."""
    study = story.res.get("seeds")
    if not study:
        return
    story.section("Over seeds: the headline")
    story.para(f"From results/seeds.json (python -m lab study, seeds {', '.join(map(str, study['seeds']))}). "
               "Every method re-trained per seed; tests: " + escape(study["tests"]["over_seeds"]) + "; per seed, "
               + escape(study["tests"]["per_seed"]) + ".", "small")
    story.add(_table(seeds_rows(study), [4.6 * cm, 3.2 * cm, 3 * cm, 3.8 * cm, 3 * cm], font_size=7))
    story.add(story.image(FIGURES["seeds"], WIDTH * 0.85))
    story.sentences("seeds")
    story.add(Spacer(1, 4), _table(comparison_rows(study), [6.8 * cm, 1.8 * cm, 2.8 * cm, 1.8 * cm, 1.4 * cm, 2.6 * cm],
                                   font_size=6.5))
    story.sentences("seeds_mixes")
    story.add(story.paragraph("Accuracy and performance goals", "h2"))
    story.sentences("targets")
    story.para("The sections below describe the seed-0 main run (results/lm.json, classification.json, "
               "baselines.json); its single-seed differences are to be read against the seed-to-seed spread above.",
               "small")


def _text_curve(story: _Story) -> None:
    """When ELMo pays, continued: more pre-training text (``pretraining_text_curve.json``; nothing without it)."""
    text_curve = story.res.get("pretraining_text_curve")
    if not text_curve:
        return
    story.section("When ELMo pays: more pre-training text")
    story.para("From results/pretraining_text_curve.json (python -m lab study --pretraining-texts ...). Tests: "
               + escape(text_curve["tests"]["over_seeds"]) + "; per doubling: " + escape(text_curve["tests"]["per_doubling"])
               + ".", "small")
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


def _learning_curve(story: _Story) -> None:
    """When ELMo pays (``learning_curve.json``; nothing when the curve has not been run)."""
    curve = story.res.get("learning_curve")
    if not curve:
        return
    story.section("When ELMo pays: the learning curve over labelled data")
    story.para("From results/learning_curve.json (python -m lab study --labelled-fractions ...). Per seed and share, "
               "the classifiers are re-trained on a class-balanced draw of the labelled training documents; tests: "
               + escape(curve["tests"]["over_seeds"]) + "; per seed, " + escape(curve["tests"]["per_seed"]) + ".",
               "small")
    rows = curve_rows(curve)
    story.add(_table(rows, [3.6 * cm] + [(WIDTH - 3.6 * cm) / (len(rows[0]) - 1)] * (len(rows[0]) - 1), font_size=6.5))
    story.add(story.image(FIGURES["learning_curve"], WIDTH * 0.85))
    story.sentences("learning_curve")
    story.add(Spacer(1, 4), _table(curve_comparison_rows(curve), [1.3 * cm, 6.2 * cm, 1.8 * cm, 2.8 * cm, 1.8 * cm,
                                                                  1.3 * cm, 2.2 * cm], font_size=6.5))


def _data(story: _Story) -> None:
    lm = story.res["lm"]
    docs, oov = lm["documents"], lm["oov_rate"]
    story.section("1. Data")
    story.add(_table([
        ["item", "value"],
        ["training descriptions (biLM and classifiers)", f"{docs['train']:,}"],
        ["validation descriptions (held out from train.csv, model selection)", f"{docs['val']:,}"],
        ["test descriptions (official test.csv, final figures only)", f"{docs['test']:,}"],
        ["training tokens", f"{lm['train_tokens']:,}"],
        ["vocabulary (min-freq {}, with 4 specials)".format(lm["config"]["min_freq"]), f"{lm['vocab_size']:,}"],
        ["OOV rate, validation / test (tokens mapped to <unk>)", f"{oov['val']:.2%} / {oov['test']:.2%}"],
    ], [11 * cm, 4 * cm]))
    story.para("Text: the Description column, AG News escapes undone, lower-cased, split by the project tokeniser "
               "(elmo/data.py). The static embeddings and the classifiers use the same tokens and vocabulary.",
               "small")


def _pretraining(story: _Story) -> None:
    lm = story.res["lm"]
    story.section("2. Pre-training the biLM")
    story.add(_table(_config_rows({**lm["config"], **lm["bilm_config"]}, (
        "embedding_dim", "hidden_size", "num_layers", "dropout", "cutoffs", "div_value", "lr", "epochs",
        "batch_size", "max_tokens", "clip_norm", "patience", "max_length", "init_embeddings", "seed")),
        [6 * cm, 6 * cm]))
    story.para("Two separate LSTM language models (forward: next word; backward: previous word), adaptive softmax "
               "in training, exact full-vocabulary perplexity in evaluation; Adam, early stopping on validation "
               "perplexity.", "small")
    rows = [["direction", "val perplexity", "test perplexity", "test top-1", "test top-5", "best epoch", "tokens/s"]]
    for d in ("forward", "backward"):
        w = lm["test"][f"{d}_words"]
        rows.append([d, f"{lm['val'][f'{d}_perplexity']:.2f}", f"{lm['test'][f'{d}_perplexity']:.2f}",
                     f"{w['top1_accuracy']:.3f}", f"{w['top5_accuracy']:.3f}", lm["directions"][d]["best_epoch"],
                     f"{lm['tokens_per_second'][d]:,.0f}"])
    story.add(Spacer(1, 6), _table(rows), story.image("lm_loss.png", WIDTH * 0.62))
    if story.text["init"]:
        story.add(story.paragraph("Word2Vec-initialised token embeddings", "h2"))
        story.sentences("init")


def _classification_setup(story: _Story) -> None:
    bcfg = story.res["baselines"].get("config", {})
    story.section("3. Downstream classification")
    story.para("Every classifier uses the same head: representation (frozen) → concatenated with a task-trained "
               "token embedding x_k (paper §3.3, [x_k; ELMo_k]) → dropout → one-layer BiLSTM → mean+max pooling → "
               "linear. The ELMo classifiers differ only in the layer mix; Word2Vec and SVD replace the biLM with a frozen "
               "static matrix. Adam, early stopping and model selection on validation macro-F1.", "small")
    story.add(_table(_config_rows(story.res["classification"]["config"], (
        "encoder_hidden", "encoder_projection", "token_embedding_dim", "dropout", "lr", "weight_decay", "epochs", "batch_size",
        "max_tokens", "clip_norm", "patience", "max_length", "seed")), [6 * cm, 6 * cm]))
    story.para(f"Static embeddings: Word2Vec skip-gram (gensim), {bcfg.get('static_dim')} dimensions, window "
               f"{bcfg.get('w2v_window')}, {bcfg.get('w2v_epochs')} epochs; SVD: PPMI (α = {bcfg.get('svd_alpha')}) "
               f"of co-occurrences within ±{bcfg.get('svd_window')} words, TruncatedSVD to {bcfg.get('static_dim')} "
               "dimensions, vectors UΣ^½. TF-IDF: word 1-2 grams, logistic regression (C = 10). "
               + escape(" ".join(story.text["head"])), "small")


def _classification_results(story: _Story) -> None:
    rows = [["method", "split", "accuracy", "precision", "recall", "F1"]]
    for name, entry in methods(story.res).items():
        for split in ("train", "test"):
            m = entry[split]
            rows.append([LABELS.get(name, name), split, f"{m['accuracy']:.4f}", f"{m['precision']:.4f}",
                         f"{m['recall']:.4f}", f"{m['f1']:.4f}"])
    story.add(KeepTogether([story.paragraph("Results (macro-averaged precision, recall, F1)", "h2"),
                            _table(rows, [6.2 * cm, 1.4 * cm, 2 * cm, 2 * cm, 2 * cm, 2 * cm])]),
              story.image(FIGURES["method_comparison"], WIDTH * 0.85),
              story.image(FIGURES["validation_curves"], WIDTH * 0.6))


def _lambda(story: _Story) -> None:
    cls = story.res["classification"]
    story.section("4. The role of λ")
    rows = [["layer mix", "λ (h0, h1, h2)", "γ", "test accuracy", "test macro-F1"]]
    for s in elmo_mixes(story.res):
        weights = cls[s].get("lambdas")
        rows.append([LABELS[s], "–" if not weights else ", ".join(f"{w:.3f}" for w in weights),
                     "–" if cls[s].get("gamma") is None else f"{cls[s]['gamma']:.3f}",
                     f"{cls[s]['test']['accuracy']:.4f}", f"{cls[s]['test']['f1']:.4f}"])
    story.add(_table(rows), story.image(FIGURES["lambdas"], WIDTH * 0.6))
    story.sentences("lambda")


def _analysis(story: _Story) -> None:
    story.section("5. Analysis: ELMo vs Word2Vec vs SVD")
    story.sentences("elmo_vs_static")


def _diagnostics(story: _Story) -> None:
    """Part of section 5: the diagnostic runs' table and sentences (nothing without diagnostic sentences)."""
    res = story.res
    if not story.text["diagnostics"]:
        return
    story.add(story.paragraph("Diagnostic runs (one change each, same data and seed)", "h2"))
    rows = [["run", "change", "fwd / bwd test ppl", "test accuracy", "test macro-F1"]]
    main = res["classification"].get("trainable_lambda", {}).get("test")
    if main:
        rows.append(["main", "–", perplexities(res["lm"]), f"{main['accuracy']:.4f}", f"{main['f1']:.4f}"])
    for name, exp in res["experiments"].items():
        m = exp["classification"].get("trainable_lambda", {}).get("test")
        if m:
            changes = story.paragraph(escape(", ".join(experiment_changes(res, name)) or "–"), "small")
            rows.append([name, changes, perplexities(exp.get("lm")), f"{m['accuracy']:.4f}", f"{m['f1']:.4f}"])
    story.add(_table(rows, [3 * cm, 5.5 * cm, 3 * cm, 2.4 * cm, 2.4 * cm]))
    story.sentences("diagnostics_reference", "small")
    story.sentences("diagnostics")


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
    story.section("6. Context sensitivity")
    story.add(*(_context_block(story, item) for item in context))
    story.sentences("context", "small" if context else "body")


def _confusion(story: _Story) -> None:
    story.add(PageBreak())
    story.section("7. Confusion matrices (test set)")
    cells = [story.image(f"confusion_{m}.png", WIDTH / 2 - 0.4 * cm) for m in methods(story.res)]
    grid = [cells[i:i + 2] + [""] * (2 - len(cells[i:i + 2])) for i in range(0, len(cells), 2)]
    story.add(Table(grid, colWidths=[WIDTH / 2] * 2))
    story.para("Rows: true class, columns: predicted, in the order " + ", ".join(CLASS_NAMES) + ". Language-model "
               "confusions over the 20 most frequent words: images/lm_confusion_forward.png and _backward.png.",
               "small")


def _reproduce(story: _Story) -> None:
    story.section("8. Reproduce")
    story.para("pip install torch==2.13.0 &amp;&amp; pip install -r requirements.txt; python ELMO.py; "
               "python classification.py; python baselines.py; python -m lab report. Each diagnostic run repeats "
               "ELMO.py (when its biLM flags changed) and/or classification.py --mixes trainable_lambda with "
               "the flags listed in its row and --models-dir models/&lt;name&gt; --results-dir "
               "results/experiments/&lt;name&gt;.", "small")
    meta = story.res["classification"]["meta"]
    story.para("Environment of the classification run: " + ", ".join(f"{k} {v}" for k, v in meta.items()), "small")


#: The report's parts, in the order :func:`build_report` lays them out.
SECTIONS: tuple[Callable[[_Story], None], ...] = (
    _opening, _seeds, _learning_curve, _text_curve, _data, _pretraining, _classification_setup, _classification_results, _lambda, _analysis,
    _diagnostics, _context, _confusion, _reproduce)


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
        ElmoError: a missing or invalid results file, results without an expected key, ``--out`` or a summary
            figure that is one of the files the report reads (:func:`check_files`).
    """
    check_files(config)
    res = load_results(config.results_dir, config.experiments_dir or Path(config.results_dir) / "experiments")
    sections = build_report(res, config.images_dir, config.out)
    if config.markdown:
        print(markdown_table(res) + "\n\n" + experiments_table(res))
        if res["seeds"]:
            print("\n" + seeds_table(res["seeds"]) + "\n\n" + comparisons_table(res["seeds"]))
    print(f"wrote {config.out}: {len(sections)} sections, {len(res['experiments'])} diagnostic runs"
          + ("" if res["init"] else " (no run differing in --init-embeddings: that comparison is left out)"))
    return sections
