"""Train the 4-way AG News classifier on frozen ELMo embeddings with three layer mixes.

Loads models/bilstm.pt (from `python ELMO.py`), trains one classifier per layer mix (trainable λ,
frozen λ, learned function), prints accuracy, macro precision/recall/F1 and confusion matrices, and
writes models/classifier*.pt, results/classification.json and images/. Same as `python -m elmo classify`;
`python -m elmo predict --text TEXT` classifies texts with the trained classifier. See README.md.
"""

import sys

from elmo.cli import run

if __name__ == "__main__":
    sys.exit(run("classify", prog="classification.py"))
