"""``report.pdf``, generated from ``results/*.json`` and ``images/`` only (``python -m elmo report``).

Nothing in the report is typed by hand: every number is read from the JSON the pipeline wrote and
every comparative sentence is computed by :func:`analysis` from those numbers, so when ELMo loses
somewhere the report says so. The summary figures (:func:`plot_method_comparison`,
:func:`plot_lambdas`, :func:`plot_validation_curves`) are drawn here from the same JSON; the
per-method confusion matrices and the LM loss curves are the PNGs the training scripts wrote.

Inputs: ``results/lm.json`` (``ELMO.py``), ``results/classification.json`` (``classification.py``),
``results/baselines.json`` (``baselines.py``) and, optionally, diagnostic runs under
``results/experiments/<name>/`` (``lm.json`` and/or ``classification.json`` of a run with one flag
changed, e.g. ``w2v_init`` = ``ELMO.py --init-embeddings word2vec``); the report lists what each
changed (the config difference) and what it did. PDF layout: reportlab.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence
from xml.sax.saxutils import escape

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from ..artifacts import atomic_write_bytes
from ..data.agnews import CLASS_NAMES
from ..errors import ElmoError
from ..model.mix import MIX_SETTINGS
from ..pipelines.classification import ClassifyConfig
from ..pipelines.common import option
from ..pipelines.plots import save_figure
from ..pipelines.pretraining import PretrainConfig

STATIC = ("word2vec", "svd")
LABELS = {"trainable_lambda": "ELMo, trainable λ", "frozen_lambda": "ELMo, frozen λ",
          "learned_function": "ELMo, learned function", "word2vec": "Word2Vec (same head)",
          "svd": "SVD / PPMI (same head)", "tfidf_logreg": "TF-IDF + logistic regression"}


@dataclass
class ReportConfig:
    """Flags of ``python -m elmo report``."""

    results_dir: str = option("results", "folder with lm.json, classification.json and baselines.json")
    images_dir: str = option("images", "folder with the training plots; the report's own figures go here too")
    experiments_dir: str | None = option(None, "folder of diagnostic runs, one sub-folder each with lm.json "
                                         "and/or classification.json (default: <results-dir>/experiments; "
                                         "skipped when absent)")
    out: str = option("report.pdf", "the PDF to write")
    markdown: bool = option(False, "also print the comparison table as Markdown (for README.md)")

    def check(self) -> None:
        """Raises :class:`ElmoError` when a required results file is missing."""
        for name, hint in (("lm.json", "python ELMO.py"), ("classification.json", "python classification.py"),
                           ("baselines.json", "python baselines.py")):
            if not (Path(self.results_dir) / name).is_file():
                raise ElmoError(f"{Path(self.results_dir) / name} not found: run `{hint}` first")


def load_results(results_dir: str | os.PathLike, experiments_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """Read the pipeline's JSON.

    Returns:
        ``{"lm", "classification", "baselines", "experiments": {name: {"lm": dict | None,
        "classification": dict | None}}, "init"}`` where ``init`` pairs a diagnostic run with its
        :func:`reference_run` when the two differ in ``--init-embeddings``: ``{"name", "reference",
        "none": run, "word2vec": run}`` (or ``None``).

    Raises:
        ElmoError: a file that is missing or not valid JSON (naming it).
    """
    def read(path: Path) -> dict:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ElmoError(f"{path} not found") from None
        except json.JSONDecodeError as exc:
            raise ElmoError(f"{path}: not valid JSON ({exc})") from None

    results = Path(results_dir)
    out = {name: read(results / f"{name}.json") for name in ("lm", "classification", "baselines")}
    out["experiments"] = {}
    if experiments_dir and Path(experiments_dir).is_dir():
        for folder in sorted(p for p in Path(experiments_dir).iterdir() if p.is_dir()):
            entry = {name: read(folder / f"{name}.json") if (folder / f"{name}.json").is_file() else None
                     for name in ("lm", "classification")}
            if entry["classification"] is not None:
                out["experiments"][folder.name] = entry
    out["init"] = None  # a diagnostic run and its reference run that differ in --init-embeddings, when there is one
    for name, exp in out["experiments"].items():
        ref_name, ref_classification = reference_run(out, exp["classification"])
        ref = out["experiments"][ref_name] if ref_name in out["experiments"] else {"lm": out["lm"],
                                                                                    "classification": ref_classification}
        ref_init = (ref["lm"] or {}).get("config", {}).get("init_embeddings", "none")  # older runs had no such flag
        other = (exp["lm"] or {}).get("config", {}).get("init_embeddings", "none")
        if exp["lm"] is not None and ref is not exp and {ref_init, other} == {"none", "word2vec"}:
            out["init"] = {"name": name, "reference": ref_name, ref_init: ref, other: exp}
            break
    return out


#: Config keys that name folders or output options, not an experimental change.
_NOT_A_CHANGE = {"data_dir", "models_dir", "results_dir", "images_dir", "quiet", "threads", "device", "settings",
                 "predict", "predict_file", "resume", "checkpoint_every", "cache_layers", "precision"}


def _defaults(config_cls: type) -> dict[str, Any]:
    """A config dataclass's defaults as they read back from JSON (tuples become lists)."""
    return json.loads(json.dumps({f.name: f.default for f in dataclasses.fields(config_cls)}))


def config_changes(base: dict, other: dict, defaults: dict | None = None) -> list[str]:
    """``key: value`` for every config key whose value differs from ``base`` (ignoring paths and output
    flags); a key ``base`` lacks (a flag added after that run) is compared with its default."""
    defaults = defaults or {}
    return [f"{k}: {other[k]}" for k in other
            if k not in _NOT_A_CHANGE and base.get(k, defaults.get(k)) != other[k]]


def run_precision(classification: dict) -> str:
    """The training precision a ``classification.json`` records (runs made before ``--precision`` existed were fp32)."""
    return classification.get("precision", "fp32")


def reference_run(res: dict, classification: dict) -> tuple[str, dict]:
    """``(name, classification.json)`` a diagnostic run is compared with: the main run, or the
    ``fp32_main`` diagnostic run (the main run repeated in fp32) for an fp32 run when the main run is not fp32."""
    fp32_main = res.get("experiments", {}).get("fp32_main", {}).get("classification")
    main = res["classification"]
    if fp32_main and classification is not fp32_main and run_precision(classification) == run_precision(fp32_main) \
            != run_precision(main):
        return "fp32_main", fp32_main
    return "the main run", main


def experiment_changes(res: dict, name: str) -> list[str]:
    """What a diagnostic run changed relative to the main run (its biLM flags, its classifier flags and
    the precision it trained in)."""
    exp = res["experiments"][name]
    changes = []
    if run_precision(exp["classification"]) != run_precision(res["classification"]):
        changes.append(f"precision: {run_precision(exp['classification'])}")
    if exp.get("lm"):
        changes += config_changes(res["lm"].get("config", {}), exp["lm"].get("config", {}), _defaults(PretrainConfig))
    changes += config_changes(res["classification"].get("config", {}), exp["classification"].get("config", {}),
                              _defaults(ClassifyConfig))
    main_bilm = res["classification"].get("meta", {}).get("bilm_fingerprint")
    bilm = exp["classification"].get("meta", {}).get("bilm_fingerprint")
    if not exp.get("lm") and main_bilm and bilm and bilm != main_bilm:
        changes.append(f"a different biLM (fingerprint {bilm})")
    return changes


def methods(res: dict) -> dict[str, dict]:
    """Every classifier the results hold, ELMo settings first: ``{name: {"train", "val", "test", ...}}``."""
    cls, base = res["classification"], res["baselines"]
    out = {s: cls[s] for s in MIX_SETTINGS if s in cls}
    out |= {m: base[m] for m in (*STATIC, "tfidf_logreg") if m in base}
    return out


def _compare(name_a: str, a: dict, name_b: str, b: dict) -> tuple[str, bool]:
    """A sentence comparing two methods' test accuracy and macro-F1, and whether ``a`` loses on either."""
    da, df = (a["accuracy"] - b["accuracy"]) * 100, (a["f1"] - b["f1"]) * 100
    if da > 0 and df > 0:
        verdict = "ahead on both"
    elif da < 0 and df < 0:
        verdict = "behind on both"
    elif da == 0 and df == 0:
        verdict = "level"
    else:
        verdict = "ahead on one and not the other"
    text = (f"{name_a} vs {name_b}: test accuracy {a['accuracy']:.4f} vs {b['accuracy']:.4f} ({da:+.2f} points), "
            f"macro-F1 {a['f1']:.4f} vs {b['f1']:.4f} ({df:+.2f} points): {verdict}.")
    return text, da < 0 or df < 0


def analysis(res: dict) -> dict[str, list[str]]:
    """The report's comparative sentences, each computed from the numbers in ``res`` (:func:`load_results`).

    Returns:
        ``{"elmo_vs_static", "lambda", "init", "diagnostics"}``: lists of sentences.
    """
    cls = res["classification"]
    all_methods = methods(res)
    elmo = [s for s in MIX_SETTINGS if s in cls]
    best = max(elmo, key=lambda s: cls[s]["test"]["accuracy"])
    chosen = cls.get("best_setting", best)
    acc = {m: all_methods[m]["test"]["accuracy"] for m in all_methods}
    f1 = {m: all_methods[m]["test"]["f1"] for m in all_methods}
    out: dict[str, list[str]] = {"elmo_vs_static": [], "lambda": [], "init": []}

    text = out["elmo_vs_static"]
    text.append(f"The best ELMo setting on test accuracy is {LABELS[best]} ({acc[best]:.4f}, macro-F1 {f1[best]:.4f}); "
                f"the setting chosen on validation macro-F1 is {LABELS[chosen]} ({acc[chosen]:.4f}).")
    losses = []
    for other in (m for m in (*STATIC, "tfidf_logreg") if m in acc):
        sentence, lost = _compare(LABELS[best], all_methods[best]["test"], LABELS[other], all_methods[other]["test"])
        text.append(sentence)
        if lost:
            losses.append(LABELS[other])
    if losses:
        text.append(f"ELMo does not win everywhere: it loses to {', '.join(losses)} on at least one of test "
                    "accuracy and macro-F1 in this run.")
    else:
        text.append("ELMo's best setting is ahead of every baseline on both test accuracy and macro-F1 in this run.")
    static_best = max((m for m in STATIC if m in acc), key=lambda m: acc[m], default=None)
    if static_best:
        gain = acc[best] - acc[static_best]
        text.append(f"Contextual layers are worth {gain * 100:+.2f} accuracy points over the best static embedding "
                    f"({LABELS[static_best]}) with the identical head, data and training schedule, so the "
                    "difference comes from the representation alone.")
        gaps = {m: all_methods[m]["train"]["accuracy"] - acc[m] for m in (best, static_best)}
        text.append(f"Train-test accuracy gap: {gaps[best] * 100:.1f} points for {LABELS[best]}, "
                    f"{gaps[static_best] * 100:.1f} for {LABELS[static_best]}.")

    lam = out["lambda"]
    ranked = sorted(elmo, key=lambda s: -acc[s])
    lam.append("Test accuracy by layer combination: " + "; ".join(
        f"{LABELS[s]} {acc[s]:.4f} (macro-F1 {f1[s]:.4f})" for s in ranked) + ".")
    for a, b in (("trainable_lambda", "frozen_lambda"), ("learned_function", "trainable_lambda")):
        if a in cls and b in cls:
            lam.append(_compare(LABELS[a], cls[a]["test"], LABELS[b], cls[b]["test"])[0])
    for s in ("trainable_lambda", "frozen_lambda"):
        weights = cls.get(s, {}).get("lambdas")
        if weights:
            top = int(np.argmax(weights))
            spread = max(abs(w - 1 / len(weights)) for w in weights)
            lam.append(f"{LABELS[s]}: softmax weights λ = ({', '.join(f'{w:.3f}' for w in weights)}) for "
                       f"(h0 … h{len(weights) - 1}), γ = {cls[s]['gamma']:.3f}; the largest weight is on h{top}, "
                       f"and the weights are at most {spread:.3f} from the uniform {1 / len(weights):.3f}.")
    if "frozen_lambda" in cls and cls["frozen_lambda"].get("lambdas"):
        w0 = cls["frozen_lambda"]["lambdas"][0]
        if w0 > 0.5:
            lam.append(f"The random frozen draw puts {w0:.0%} of the weight on h0, the context-free token layer, "
                       "so this classifier sees mostly static vectors; its gap to trainable λ measures what the "
                       "contextual layers add when the mix is chosen by the task.")

    out["diagnostics"] = []
    for name, exp in res.get("experiments", {}).items():
        for s in (s for s in MIX_SETTINGS if s in exp["classification"] and s in cls):
            ref_name, ref = reference_run(res, exp["classification"])
            if s not in ref:
                continue
            a, b = ref[s]["test"], exp["classification"][s]["test"]
            changes = ", ".join(experiment_changes(res, name)) or "no flag changed"
            versus = "" if ref is exp["classification"] else f" ({(b['accuracy'] - a['accuracy']) * 100:+.2f} points vs {ref_name})"
            sentence = f"{name} ({changes}): {LABELS[s]} test accuracy {b['accuracy']:.4f}{versus}, macro-F1 {b['f1']:.4f}"
            if exp.get("lm"):
                sentence += "; test perplexity " + ", ".join(
                    f"{d} {exp['lm']['test'][f'{d}_perplexity']:.1f}" for d in ("forward", "backward"))
            if "word2vec" in acc:
                sentence += f"; vs Word2Vec ({acc['word2vec']:.4f}): {(b['accuracy'] - acc['word2vec']) * 100:+.2f} points"
            out["diagnostics"].append(sentence + ".")

    init = res.get("init")
    if init:
        none, w2v = init["none"], init["word2vec"]
        words = [f"{d} test perplexity {none['lm']['test'][f'{d}_perplexity']:.1f} → "
                 f"{w2v['lm']['test'][f'{d}_perplexity']:.1f}" for d in ("forward", "backward")]
        out["init"].append("Initialising both LMs' token embeddings from Word2Vec instead of at random "
                           f"(--init-embeddings none → word2vec; run '{init['name']}' vs {init.get('reference', 'the main run')}, "
                           "everything else unchanged): " + "; ".join(words) + ".")
        for s in (s for s in MIX_SETTINGS if s in none["classification"] and s in w2v["classification"]):
            a, b = none["classification"][s]["test"]["accuracy"], w2v["classification"][s]["test"]["accuracy"]
            verdict = "helps" if b > a else "does not help" if b < a else "makes no difference"
            out["init"].append(f"{LABELS[s]} test accuracy {a:.4f} → {b:.4f}: the Word2Vec initialisation "
                               f"{verdict} here ({(b - a) * 100:+.2f} points).")
    return out


# --------------------------------------------------------------------------------------------
# Figures drawn from the JSON
# --------------------------------------------------------------------------------------------

def plot_method_comparison(res: dict, path: str | os.PathLike) -> None:
    """Bar chart of test accuracy and macro-F1 for every method (ELMo settings and baselines)."""
    all_methods = methods(res)
    names = list(all_methods)
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(8, 4))
    for k, (metric, label) in enumerate((("accuracy", "test accuracy"), ("f1", "test macro-F1"))):
        values = [all_methods[m]["test"][metric] for m in names]
        bars = ax.bar(x + (k - 0.5) * 0.38, values, 0.38, label=label)
        ax.bar_label(bars, fmt="%.3f", fontsize=7, rotation=90, padding=2)
    low = min(all_methods[m]["test"][k] for m in names for k in ("accuracy", "f1"))
    ax.set_ylim(max(0.0, low - 0.05), 1.0)
    short = {"svd": "SVD\n(PPMI)", "tfidf_logreg": "TF-IDF\n+ log. reg."}
    ax.set_xticks(x, [short.get(m, LABELS.get(m, m).replace(" (same head)", "").replace(", ", "\n")) for m in names],
                  fontsize=8)
    ax.set_title("AG News test set: every method")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="lower right")
    save_figure(fig, path)


def plot_lambdas(res: dict, path: str | os.PathLike) -> None:
    """Bar chart of the softmax-normalised layer weights λ_j per scalar-mix setting, γ in the legend."""
    cls = res["classification"]
    settings = [s for s in ("trainable_lambda", "frozen_lambda") if cls.get(s, {}).get("lambdas")]
    if not settings:
        raise ElmoError("classification.json holds no λ weights (run the trainable_lambda or frozen_lambda setting)")
    layers = len(cls[settings[0]]["lambdas"])
    x = np.arange(layers)
    fig, ax = plt.subplots(figsize=(6, 3.6))
    width = 0.8 / len(settings)
    for k, s in enumerate(settings):
        bars = ax.bar(x + (k - (len(settings) - 1) / 2) * width, cls[s]["lambdas"], width,
                      label=f"{LABELS[s]} (γ = {cls[s]['gamma']:.2f})")
        ax.bar_label(bars, fmt="%.2f", fontsize=8)
    ax.axhline(1 / layers, color="grey", linestyle="--", linewidth=1, label="uniform")
    ax.set_xticks(x, [f"h{j}" + (" (token)" if j == 0 else "") for j in range(layers)])
    ax.set_ylabel("softmax weight λ")
    ax.set_ylim(0, 1)
    ax.set_title("ELMo layer weights")
    ax.legend(fontsize=8)
    save_figure(fig, path)


def plot_validation_curves(res: dict, path: str | os.PathLike) -> None:
    """Validation macro-F1 per epoch for every classifier trained with the shared head."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, entry in methods(res).items():
        history = entry.get("history")
        if history:
            ax.plot(range(1, len(history) + 1), [row["val_f1"] for row in history], marker="o",
                    label=LABELS.get(name, name))
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation macro-F1")
    ax.set_title("Classifier validation curves (same head)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(fig, path)


# --------------------------------------------------------------------------------------------
# The PDF
# --------------------------------------------------------------------------------------------

def _styles():
    from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    fonts = Path(matplotlib.get_data_path()) / "fonts" / "ttf"  # DejaVu has λ, γ, →
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


def _table(rows: Sequence[Sequence[Any]], widths: Sequence[float] | None = None, font_size: float = 8):
    from reportlab.lib import colors
    from reportlab.platypus import Table, TableStyle

    table = Table([[c if hasattr(c, "wrap") else str(c) for c in r] for r in rows], colWidths=widths, repeatRows=1)
    table.setStyle(TableStyle([
        ("FONTNAME", (0, 0), (-1, -1), "DejaVu"), ("FONTNAME", (0, 0), (-1, 0), "DejaVu-Bold"),
        ("FONTSIZE", (0, 0), (-1, -1), font_size), ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#dde5f0")),
        ("GRID", (0, 0), (-1, -1), 0.3, colors.grey), ("VALIGN", (0, 0), (-1, -1), "MIDDLE"),
        ("ALIGN", (1, 1), (-1, -1), "RIGHT"),
    ]))
    return table


def _image(path: Path, width: float):
    from reportlab.platypus import Image, Paragraph

    if not path.is_file():
        return Paragraph(f"(figure {path} is missing: re-run the script that writes it)", _styles()["small"])
    from reportlab.lib.utils import ImageReader

    w, h = ImageReader(str(path)).getSize()
    return Image(str(path), width=width, height=width * h / w)


def _config_rows(config: dict, keys: Sequence[str]) -> list[list[str]]:
    return [["setting", "value"]] + [[k, json.dumps(config[k]) if isinstance(config[k], (list, tuple)) else str(config[k])]
                                     for k in keys if k in config]


def build_report(res: dict, images_dir: str | os.PathLike, out: str | os.PathLike) -> list[str]:
    """Write the PDF to ``out`` (atomically) from ``res`` (:func:`load_results`) and the PNGs in ``images_dir``.

    Draws ``method_comparison.png``, ``lambda_weights.png`` and ``validation_curves.png`` into
    ``images_dir`` first.

    Returns:
        The section titles, in order.

    Raises:
        ElmoError: results without the expected keys (naming the missing one), an unwritable path.
    """
    images = Path(images_dir)
    try:
        plot_method_comparison(res, images / "method_comparison.png")
        plot_lambdas(res, images / "lambda_weights.png")
        plot_validation_curves(res, images / "validation_curves.png")
        return _build(res, images, out)
    except KeyError as exc:
        raise ElmoError(f"the results are missing the key {exc}: re-run the pipeline that writes them") from None


def _build(res: dict, images: Path, out: str | os.PathLike) -> list[str]:
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.units import cm
    from reportlab.platypus import (
        KeepTogether,
        PageBreak,
        Paragraph,
        SimpleDocTemplate,
        Spacer,
        Table,
    )

    st = _styles()
    lm, cls, base = res["lm"], res["classification"], res["baselines"]
    all_methods = methods(res)
    sentences = analysis(res)
    story: list[Any] = []
    sections: list[str] = []
    width = A4[0] - 3.6 * cm

    def section(title: str) -> None:
        sections.append(title)
        story.append(Paragraph(title, st["h1"]))

    def para(text: str, style: str = "body") -> None:
        story.append(Paragraph(text, st[style]))

    story.append(Paragraph("ELMo on AG News: contextual vs static embeddings", st["title"]))
    para(f"Generated by <font face='DejaVu-Bold'>python -m elmo report</font> from results/lm.json, "
         f"results/classification.json and results/baselines.json (seed {cls['meta'].get('seed')}, torch "
         f"{cls['meta'].get('torch')}). Every number and every comparison below is computed from those files.", "small")
    story.append(Spacer(1, 6))
    for s in sentences["elmo_vs_static"][:2]:
        para(s)

    section("1. Data")
    docs, oov = lm["documents"], lm["oov_rate"]
    story.append(_table([
        ["item", "value"],
        ["training descriptions (biLM and classifiers)", f"{docs['train']:,}"],
        ["validation descriptions (held out from train.csv, model selection)", f"{docs['val']:,}"],
        ["test descriptions (official test.csv, final figures only)", f"{docs['test']:,}"],
        ["training tokens", f"{lm['train_tokens']:,}"],
        ["vocabulary (min-freq {}, with 4 specials)".format(lm["config"]["min_freq"]), f"{lm['vocab_size']:,}"],
        ["OOV rate, validation / test (tokens mapped to <unk>)", f"{oov['val']:.2%} / {oov['test']:.2%}"],
    ], [11 * cm, 4 * cm]))
    para("Text: the Description column, AG News escapes undone, lower-cased, split by the project tokeniser "
         "(elmo/data.py). The static embeddings and the classifiers use the same tokens and vocabulary.", "small")

    section("2. Pre-training the biLM")
    bc = lm["bilm_config"]
    story.append(_table(_config_rows({**lm["config"], **bc}, (
        "embedding_dim", "hidden_size", "num_layers", "dropout", "cutoffs", "div_value", "lr", "epochs",
        "batch_size", "max_tokens", "clip_norm", "patience", "max_length", "init_embeddings", "seed")),
        [6 * cm, 6 * cm]))
    para("Two separate LSTM language models (forward: next word; backward: previous word), adaptive softmax "
         "in training, exact full-vocabulary perplexity in evaluation; Adam, early stopping on validation "
         "perplexity.", "small")
    rows = [["direction", "val perplexity", "test perplexity", "test top-1", "test top-5", "best epoch", "tokens/s"]]
    for d in ("forward", "backward"):
        w = lm["test"][f"{d}_words"]
        rows.append([d, f"{lm['val'][f'{d}_perplexity']:.2f}", f"{lm['test'][f'{d}_perplexity']:.2f}",
                     f"{w['top1_accuracy']:.3f}", f"{w['top5_accuracy']:.3f}", lm["directions"][d]["best_epoch"],
                     f"{lm['tokens_per_second'][d]:,.0f}"])
    story.append(Spacer(1, 6))
    story.append(_table(rows))
    story.append(_image(images / "lm_loss.png", width * 0.62))
    if sentences["init"]:
        story.append(Paragraph("Word2Vec-initialised token embeddings", st["h2"]))
        for s in sentences["init"]:
            para(s, "bullet")

    section("3. Downstream classification")
    cc = cls["config"]
    para("Every classifier uses the same head: representation (frozen) → concatenated with a task-trained token "
         "embedding x_k (paper §3.3, [x_k; ELMo_k]) → dropout → one-layer BiLSTM → mean+max pooling → linear. "
         "ELMo settings differ only in the layer mix; Word2Vec and SVD replace the biLM with a frozen static "
         "matrix. Adam, early stopping and model selection on validation macro-F1.", "small")
    story.append(_table(_config_rows(cc, ("encoder_hidden", "token_embedding_dim", "dropout", "lr", "weight_decay",
                                          "epochs", "batch_size", "max_tokens", "clip_norm", "patience", "max_length",
                                          "seed")), [6 * cm, 6 * cm]))
    bcfg = base.get("config", {})
    para(f"Static embeddings: Word2Vec skip-gram (gensim), {bcfg.get('static_dim')} dimensions, window "
         f"{bcfg.get('w2v_window')}, {bcfg.get('w2v_epochs')} epochs; SVD: PPMI (α = {bcfg.get('svd_alpha')}) of "
         f"co-occurrences within ±{bcfg.get('svd_window')} words, TruncatedSVD to {bcfg.get('static_dim')} "
         "dimensions, vectors UΣ^½. TF-IDF: word 1-2 grams, logistic regression (C = 10)."
         + (f" Head flags differing from the ELMo run: {', '.join(base['head_mismatch'])}." if base.get("head_mismatch")
            else " The head flags equal the ELMo run's."), "small")
    rows = [["method", "split", "accuracy", "precision", "recall", "F1"]]
    for name, entry in all_methods.items():
        for split in ("train", "test"):
            m = entry[split]
            rows.append([LABELS.get(name, name), split, f"{m['accuracy']:.4f}", f"{m['precision']:.4f}",
                         f"{m['recall']:.4f}", f"{m['f1']:.4f}"])
    story.append(KeepTogether([Paragraph("Results (macro-averaged precision, recall, F1)", st["h2"]),
                               _table(rows, [6.2 * cm, 1.4 * cm, 2 * cm, 2 * cm, 2 * cm, 2 * cm])]))
    story.append(_image(images / "method_comparison.png", width * 0.85))
    story.append(_image(images / "validation_curves.png", width * 0.6))

    section("4. The role of λ")
    rows = [["setting", "λ (h0, h1, h2)", "γ", "test accuracy", "test macro-F1"]]
    for s in (s for s in MIX_SETTINGS if s in cls):
        weights = cls[s].get("lambdas")
        rows.append([LABELS[s], "–" if not weights else ", ".join(f"{w:.3f}" for w in weights),
                     "–" if cls[s].get("gamma") is None else f"{cls[s]['gamma']:.3f}",
                     f"{cls[s]['test']['accuracy']:.4f}", f"{cls[s]['test']['f1']:.4f}"])
    story.append(_table(rows))
    story.append(_image(images / "lambda_weights.png", width * 0.6))
    for s in sentences["lambda"]:
        para(s, "bullet")

    section("5. Analysis: ELMo vs Word2Vec vs SVD")
    for s in sentences["elmo_vs_static"]:
        para(s, "bullet")

    if sentences["diagnostics"]:
        story.append(Paragraph("Diagnostic runs (one change each, same data and seed)", st["h2"]))
        rows = [["run", "change", "fwd / bwd test ppl", "test accuracy", "test macro-F1"]]
        main_acc = cls["trainable_lambda"]["test"] if "trainable_lambda" in cls else None
        if main_acc:
            rows.append(["main", "–", f"{lm['test']['forward_perplexity']:.1f} / {lm['test']['backward_perplexity']:.1f}",
                         f"{main_acc['accuracy']:.4f}", f"{main_acc['f1']:.4f}"])
        for name, exp in res["experiments"].items():
            m = exp["classification"].get("trainable_lambda", {}).get("test")
            if not m:
                continue
            ppl = ("–" if not exp.get("lm") else
                   f"{exp['lm']['test']['forward_perplexity']:.1f} / {exp['lm']['test']['backward_perplexity']:.1f}")
            rows.append([name, Paragraph(escape(", ".join(experiment_changes(res, name)) or "–"), st["small"]), ppl,
                         f"{m['accuracy']:.4f}", f"{m['f1']:.4f}"])
        story.append(_table(rows, [3 * cm, 5.5 * cm, 3 * cm, 2.4 * cm, 2.4 * cm]))
        para("Each row is ELMo with trainable λ and the same head; test accuracy of Word2Vec with the same head: "
             + (f"{all_methods['word2vec']['test']['accuracy']:.4f}." if "word2vec" in all_methods else "not run."),
             "small")
        for s in sentences["diagnostics"]:
            para(s, "bullet")

    section("6. Context sensitivity")
    context = base.get("context") or []
    if not context:
        para("No candidate word occurred in two topics of the test set; nothing to show.")
    for item in context:
        block = [Paragraph(f"“{escape(item['word'])}”", st["h2"])]
        for tag, sent in zip(("A", "A′", "B"), item["sentences"]):
            text = escape(sent["text"] if len(sent["text"]) < 260 else sent["text"][:257] + "…")
            block.append(Paragraph(f"<b>{tag}</b> ({sent['topic']}): {text}", st["small"]))
        counts = " and ".join(f"{n} {t}" for t, n in item["occurrences"].items())
        rows = [["representation", "cos(A, A′)", "cos(A, B)", "mean cos, same topic", "mean cos, across topics"]]
        for k, v in item["cosine"].items():
            label = {"h0": "ELMo h0 (token layer)", "mix": "ELMo scalar mix (trainable λ)"}.get(k, f"ELMo h{k[1:]}")
            rows.append([label, f"{v['example_same']:.3f}", f"{v['example_cross']:.3f}", f"{v['same_topic']:.3f}",
                         f"{v['cross_topic']:.3f}"])
        rows.append(["Word2Vec / SVD (one vector per word)", "1.000", "1.000", "1.000", "1.000"])
        block.append(Paragraph(f"Means over all pairs of the {counts} test occurrences used.", st["small"]))
        block.append(_table(rows))
        story.append(KeepTogether(block))
    if context:
        for item in context:
            c = item["cosine"]
            top = max((k for k in c if k not in ("h0", "mix")), key=lambda k: c[k]["same_topic"] - c[k]["cross_topic"])
            gap = c[top]["same_topic"] - c[top]["cross_topic"]
            para(f"“{escape(item['word'])}”: the contextual layers give every occurrence its own vector "
                 f"(h1/h2 cosines well below 1); in {top} occurrences from the same topic are "
                 + (f"more similar than occurrences across topics by {gap:.3f} on average." if gap > 0 else
                    f"not more similar than across topics ({gap:+.3f}): the vectors differ, but not by topic.")
                 + " h0 and every static embedding give one vector for all of them.", "small")

    story.append(PageBreak())
    section("7. Confusion matrices (test set)")
    pngs = [images / f"confusion_{m}.png" for m in all_methods]
    cells = [_image(p, width / 2 - 0.4 * cm) for p in pngs]
    grid = [cells[i:i + 2] + [""] * (2 - len(cells[i:i + 2])) for i in range(0, len(cells), 2)]
    story.append(Table(grid, colWidths=[width / 2] * 2))
    para("Rows: true class, columns: predicted, in the order " + ", ".join(CLASS_NAMES) + ". Language-model "
         "confusions over the 20 most frequent words: images/lm_confusion_forward.png and _backward.png.", "small")

    section("8. Reproduce")
    para("pip install torch==2.13.0 &amp;&amp; pip install -r requirements.txt; python ELMO.py; "
         "python classification.py; python baselines.py; python -m elmo report. Each diagnostic run repeats "
         "ELMO.py (when its biLM flags changed) and/or classification.py --settings trainable_lambda with the "
         "flags listed in its row and --models-dir models/&lt;name&gt; --results-dir results/experiments/&lt;name&gt;.",
         "small")
    meta = cls["meta"]
    para("Environment of the classification run: " + ", ".join(f"{k} {v}" for k, v in meta.items()), "small")

    buffer = io.BytesIO()
    doc = SimpleDocTemplate(buffer, pagesize=A4, leftMargin=1.8 * cm, rightMargin=1.8 * cm, topMargin=1.5 * cm,
                            bottomMargin=1.5 * cm, title="ELMo on AG News", author="elmo toolkit")
    doc.build(story)
    atomic_write_bytes(out, buffer.getvalue())
    return sections


def markdown_table(res: dict) -> str:
    """The all-methods comparison (train/test accuracy, test macro P/R/F1, λ, γ) as a Markdown table
    (the diagnostic runs are in :func:`experiments_table`)."""
    lines = ["| method | train acc | test acc | test precision | test recall | test macro-F1 | λ (h0, h1, h2) | γ |",
             "|---|---|---|---|---|---|---|---|"]
    best = res["classification"].get("best_setting")
    for name, entry in methods(res).items():
        tr, te = entry["train"], entry["test"]
        lam = ", ".join(f"{w:.3f}" for w in entry["lambdas"]) if entry.get("lambdas") else "–"
        gamma = f"{entry['gamma']:.3f}" if entry.get("gamma") is not None else "–"
        label = LABELS.get(name, name) + (" (best on val)" if name == best else "")
        lines.append(f"| {label} | {tr['accuracy']:.4f} | {te['accuracy']:.4f} | {te['precision']:.4f} | "
                     f"{te['recall']:.4f} | {te['f1']:.4f} | {lam} | {gamma} |")
    return "\n".join(lines)


def experiments_table(res: dict) -> str:
    """Every diagnostic run next to the main run: its change, biLM test perplexities and trainable-λ test
    accuracy / macro-F1 with the difference from its :func:`reference_run`, as a Markdown table."""
    main = res["classification"].get("trainable_lambda")
    if not main:
        return ""

    def ppl(lm: dict | None) -> str:
        return " / ".join(f"{lm['test'][f'{d}_perplexity']:.1f}" for d in ("forward", "backward")) if lm else "(reference biLM)"

    lines = ["| run | change from the default | biLM test perplexity fwd / bwd | test acc | test macro-F1 | "
             "Δ acc (vs the same precision's reference) |",
             "|---|---|---|---|---|---|",
             f"| main (default) | – | {ppl(res['lm'])} | {main['test']['accuracy']:.4f} | {main['test']['f1']:.4f} | – |"]
    for name, exp in res.get("experiments", {}).items():
        m = exp["classification"].get("trainable_lambda")
        if m:
            ref = reference_run(res, exp["classification"])[1]["trainable_lambda"]
            delta = "–" if ref is m else f"{(m['test']['accuracy'] - ref['test']['accuracy']) * 100:+.2f}"
            lines.append(f"| `{name}` | {', '.join(experiment_changes(res, name)) or '–'} | {ppl(exp.get('lm'))} | "
                         f"{m['test']['accuracy']:.4f} | {m['test']['f1']:.4f} | {delta} |")
    return "\n".join(lines)


def make_report(config: ReportConfig) -> list[str]:
    """Load the results and write the report; returns the section titles."""
    res = load_results(config.results_dir, config.experiments_dir or Path(config.results_dir) / "experiments")
    sections = build_report(res, config.images_dir, config.out)
    if config.markdown:
        print(markdown_table(res) + "\n\n" + experiments_table(res))
    print(f"wrote {config.out}: {len(sections)} sections, {len(res['experiments'])} diagnostic runs"
          + ("" if res["init"] else " (no run differing in --init-embeddings: that comparison is left out)"))
    return sections
