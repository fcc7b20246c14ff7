"""Pre-train the ELMo biLM (forward and backward 2-layer LSTM language models) on AG News.

Builds the vocabulary from the Description column of train.csv, trains both directions, prints
perplexities and writes models/{word2idx.pkl,forward.pt,backward.pt,bilstm.pt}, results/lm.json and
images/lm_*.png. Same as `python -m elmo pretrain`; see README.md.
"""

import sys

from elmo.cli import run

if __name__ == "__main__":
    sys.exit(run("pretrain", prog="ELMO.py"))
