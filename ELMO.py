"""Pre-train the ELMo biLM (forward and backward 2-layer LSTM language models) on AG News.

Builds the vocabulary from the Description column of train.csv, trains both directions, prints
perplexities and writes models/{word2idx.pkl,forward.pt,backward.pt,bilstm.pt}, results/lm.json and
images/lm_*.png. All code lives in the `elmo` package; see README.md.
"""

import sys

from elmo.cli import run_cli
from elmo.pretrain import PretrainConfig, pretrain

if __name__ == "__main__":
    sys.exit(run_cli(PretrainConfig, pretrain, __doc__.splitlines()[0]))
