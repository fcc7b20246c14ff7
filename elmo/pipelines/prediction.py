"""Classifying texts with a trained ``classifier.pt`` from the command line (``python -m elmo predict``,
``classification.py --predict`` / ``--predict-file``): one ``label<TAB>probability<TAB>text`` line each."""

from __future__ import annotations

import sys
from typing import Any

from ..data.text import read_lines, tokenize
from ..errors import ElmoError
from ..inference.text_classifier import TextClassifier
from ..runtime.device import configure_threads


def predict_texts(models_dir: str, text: str | None = None, path: str | None = None, device: str = "auto",
                  precision: str = "auto", threads: int | None = None) -> list[dict[str, Any]]:
    """Classify ``text`` or every non-blank line of the file ``path`` with ``<models_dir>/classifier.pt``
    and print ``label<TAB>probability<TAB>text`` per text.

    Returns:
        ``[{"text", "label", "probability", "probabilities"}]`` in input order.

    Raises:
        ElmoError: neither or both of ``text`` and ``path``; missing model files; an empty text (named by
            its line) or an unreadable file.
    """
    if (text is None) == (path is None):
        raise ElmoError("give either --predict TEXT or --predict-file FILE")
    configure_threads(threads)
    if text is not None:
        texts, where = [text], ["--predict"]
    else:
        texts, numbers, blank = read_lines(path, "--predict-file")
        if blank:
            print(f"note: skipped {blank} blank line(s) of {path}", file=sys.stderr)
        where = [f"{path} line {n}" for n in numbers]
    for item, place in zip(texts, where):
        if not tokenize(item):
            raise ElmoError(f"{place}: the text holds no word to classify: {item[:60]!r}")
    classifier = TextClassifier.from_pretrained(models_dir, device=device, precision=precision)
    out = []
    for item, p in zip(texts, classifier.predict_proba(texts)):
        label = classifier.class_names[int(p.argmax())]
        print(f"{label}\t{p.max():.4f}\t{item}", flush=True)
        out.append({"text": item, "label": label, "probability": float(p.max()),
                    "probabilities": dict(zip(classifier.class_names, p.tolist()))})
    return out
