"""Baselines for the report: Word2Vec and SVD embeddings in ELMo's classifier head, and TF-IDF + LR.

Run after ELMO.py (it uses the biLM's vocabulary). Trains each static embedding on the same training
descriptions, feeds it frozen into exactly the classifier head classification.py uses, and writes
results/baselines.json, models/{word2vec,svd}.pt and images/confusion_<method>.png. See README.md.
"""

import sys

from elmo.baselines import main

if __name__ == "__main__":
    sys.exit(main())
