"""Baselines for the report: Word2Vec and SVD embeddings in ELMo's classifier head, and TF-IDF + LR.

Run after ELMO.py (it uses the biLM's vocabulary). Writes results/baselines.json,
models/{word2vec,svd}.pt and images/confusion_<method>.png. Same as `python -m elmo baselines`.
"""

import sys

from elmo.cli import run

if __name__ == "__main__":
    sys.exit(run("baselines", prog="baselines.py"))
