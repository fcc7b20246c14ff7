"""Classical reference: TF-IDF (word 1-2 grams) + logistic regression (scikit-learn).

Trained on exactly the training rows the ELMo classifier uses (same ``--max-docs``, validation split
and seed), on the cleaned Description text, and evaluated on test with the same metrics.

Run: ``python -m elmo.baselines [--data-dir data/ag_news] [--results-dir results]``; writes
``results/baselines.json`` as ``{"tfidf_logreg": {"train": {...}, "test": {...}}, ...}``.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Sequence

from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from .checkpoint import environment_info, write_json
from .data import NUM_CLASSES, Corpus, load_agnews
from .errors import ElmoError
from .metrics import classification_metrics


def tfidf_logreg(train: Corpus, test: Corpus, seed: int = 0) -> dict:
    """Fit TF-IDF (1-2 grams, sublinear tf, min_df 2) + logistic regression; metrics on train and test.

    The documents are the project's own tokens joined by spaces, so the baseline sees the same
    cleaned, lower-cased text as the biLM (but every word, with no vocabulary cut-off).

    Returns:
        ``{"train": metrics, "test": metrics, "seconds": float}`` (metrics as
        :func:`~elmo.metrics.classification_metrics`).
    """
    started = time.perf_counter()
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, token_pattern=r"\S+")
    x_train = vectorizer.fit_transform(" ".join(t) for t in train.tokens)
    model = LogisticRegression(C=10.0, max_iter=2000, random_state=seed)
    model.fit(x_train, train.labels)
    x_test = vectorizer.transform(" ".join(t) for t in test.tokens)
    return {
        "train": classification_metrics(train.labels, model.predict(x_train), NUM_CLASSES),
        "test": classification_metrics(test.labels, model.predict(x_test), NUM_CLASSES),
        "seconds": time.perf_counter() - started,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elmo.baselines", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="data/ag_news")
    parser.add_argument("--results-dir", default="results")
    parser.add_argument("--max-docs", type=int, default=None)
    parser.add_argument("--val-fraction", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        train, _, test = load_agnews(args.data_dir, args.val_fraction, args.seed, args.max_docs)
        result = tfidf_logreg(train, test, args.seed)
        write_json(f"{args.results_dir}/baselines.json", {
            "tfidf_logreg": {**result, "train_documents": len(train)},
            "meta": environment_info(args.seed)})
    except ElmoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"TF-IDF (1-2 grams) + logistic regression on {len(train)} training documents: "
          f"test accuracy {result['test']['accuracy']:.4f}, macro-F1 {result['test']['f1']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
