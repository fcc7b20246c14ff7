"""bilm-tf's reference vectors in tests/fixtures/bilm_tf (AllenNLP's test fixtures, Apache 2.0; see its README.md),
read the same way by the tests of the published biLM (importable as ``published_reference``)."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "bilm_tf"
OPTIONS, WEIGHTS = FIXTURES / "options.json", FIXTURES / "lm_weights.hdf5"
#: the required agreement with bilm-tf (float32 on the CPU); the fixtures agree among themselves to about 1e-6
TOLERANCE = 1e-5


def reference_batches() -> list[list[list[str]]]:
    """The 10 batches bilm-tf embedded, in order: batch i = row k of sentences.json for k = 0, 1, 2."""
    rows = json.loads((FIXTURES / "sentences.json").read_text(encoding="utf-8"))
    return [[rows[k][i].split() for k in range(3)] for i in range(10)]


def reference_top(i: int) -> np.ndarray:
    """bilm-tf's top layer of row 0 of (stateful) batch i, ``(n, 32)``: the forward half, then the backward half."""
    with h5py.File(FIXTURES / "lm_embeddings_0.hdf5", "r") as f:
        return np.concatenate(f[str(i)][...], axis=-1)
