"""The prediction command: texts classified with a trained ``classifier.pt``, one
``label<TAB>probability<TAB>text`` line each.

One implementation behind both spellings: ``python -m elmo predict --text TEXT | --file FILE`` and
``classification.py --predict TEXT | --predict-file FILE`` (which builds :class:`PredictArgs` from its
own flags and passes their names, so every message names the flag the user typed).
"""

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
    """Flags of ``python -m elmo predict``."""

    text: str | None = option(None, "classify this text")
    file: str | None = option(None, "classify every non-blank line of this UTF-8 file")
    models_dir: str = option("models", "folder holding bilstm.pt and classifier.pt")
    device: str = option("auto", "auto (CUDA when present), cpu or cuda")
    precision: str = option("auto", "auto, fp32, bf16 or fp16 (as classification.py)", choices=PRECISIONS)
    threads: int | None = option(None, "CPU threads (default: all cores)")

    def check(self, text_flag: str = "--text", file_flag: str = "--file") -> None:
        """Exactly one of ``text`` and ``file``. Raises :class:`ElmoError` naming the two flags."""
        if (self.text is None) == (self.file is None):
            raise ElmoError(f"give either {text_flag} TEXT or {file_flag} FILE")


def predict(args: PredictArgs, text_flag: str = "--text", file_flag: str = "--file") -> list[dict[str, Any]]:
    """Classify ``args.text`` or every non-blank line of the file ``args.file`` with
    ``<models_dir>/classifier.pt`` and print ``label<TAB>probability<TAB>text`` per text (in input order).

    Args:
        args: what to classify and where the models are; text_flag, file_flag: how messages name the
            text and the file (``--text`` / ``--file``, or ``classification.py``'s ``--predict`` /
            ``--predict-file``).

    Returns:
        ``[{"text", "label", "probability", "probabilities": {class name: probability}}]`` in input order.

    Raises:
        ElmoError: neither or both of the text and the file; missing model files; an empty text (named by
            its flag or file line) or an unreadable file.
    """
    args.check(text_flag, file_flag)
    configure_threads(args.threads)
    if args.text is not None:
        texts, where = [args.text], [text_flag]
    else:
        texts, numbers, blank = read_lines(args.file, file_flag)
        if blank:
            print(f"note: skipped {blank} blank line(s) of {args.file}", file=sys.stderr)
        where = [f"{args.file} line {n}" for n in numbers]
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
