"""The prediction command, ``python -m elmo predict --text TEXT [--text TEXT ...] | --input-file FILE``: texts
classified with a trained ``classifier.pt`` (``classification.py`` writes it) and the biLM it was trained on, printed
as one ``label<TAB>probability<TAB>text`` line each, in the order given."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from ..data.text import read_lines, tokenize
from ..errors import ElmoError
from ..inference.text_classifier import TextClassifier
from ..runtime.device import PRECISIONS, configure_threads
from .common import option


@dataclass
class PredictArgs:
    """Flags of ``python -m elmo predict`` (module docstring); ``--input-file`` is read as UTF-8. A single string
    given as ``text`` is one text."""

    text: tuple[str, ...] = option((), "classify this text; give --text once per text (or several texts after "
                                   "one), each classified in order", metavar="TEXT")
    input_file: str | None = option(None, "classify every non-blank line of this file")
    models_dir: str = option("models", "folder holding bilstm.pt and classifier.pt")
    device: str = option("auto", "auto (CUDA when present), cpu or cuda")
    precision: str = option("auto", "auto, fp32, bf16 or fp16", choices=PRECISIONS)
    threads: int | None = option(None, "CPU threads (default: all cores)")

    def __post_init__(self) -> None:
        self.text = (self.text,) if isinstance(self.text, str) else tuple(self.text or ())

    def check(self) -> None:
        """Texts or ``input_file``, not both. Raises :class:`ElmoError` naming the two flags."""
        if bool(self.text) == (self.input_file is not None):
            raise ElmoError("give either --text TEXT or --input-file FILE")


def predict(args: PredictArgs) -> list[dict[str, Any]]:
    """Classify and print the texts as the module docstring says; returns ``[{"text", "label", "probability",
    "probabilities": {class name: probability}}]`` in input order. Raises :class:`ElmoError` on neither or both of the
    texts and the file, missing model files, an empty text (named by its flag or file line) or an unreadable file."""
    args.check()
    configure_threads(args.threads)
    if args.text:
        texts = list(args.text)
        where = ["--text"] if len(texts) == 1 else [f"--text {n} (of {len(texts)})" for n in range(1, len(texts) + 1)]
    else:
        texts, numbers, blank = read_lines(args.input_file, "--input-file")
        if blank:
            print(f"note: skipped {blank} blank line(s) of {args.input_file}", file=sys.stderr)
        where = [f"{args.input_file} line {n}" for n in numbers]
    for item, place in zip(texts, where):
        if not tokenize(item):
            raise ElmoError(f"{place}: the text holds no word to classify: {item[:60]!r}")
    classifier = TextClassifier.from_pretrained(args.models_dir, device=args.device, precision=args.precision)
    out = []
    for item, p in zip(texts, classifier.predict_proba(texts)):
        label = classifier.class_names[int(p.argmax())]
        print(f"{label}\t{p.max():.4f}\t{item}", flush=True)
        out.append({"text": item, "label": label, "probability": float(p.max()),
                    "probabilities": dict(zip(classifier.class_names, p.tolist()))})
    return out
