"""Helpers shared by the tests (importable as ``support`` through the ``pythonpath`` option of pyproject.toml):
small AG-News-like corpora, running the scripts in a subprocess, and the unigram perplexity a language
model must beat."""

from __future__ import annotations

import collections
import contextlib
import csv
import math
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Iterable, Sequence

ROOT = Path(__file__).resolve().parents[1]

TOPIC_WORDS = [
    ["minister", "election", "troops", "president", "talks", "border", "rebels", "parliament"],
    ["match", "season", "coach", "goal", "team", "league", "championship", "striker"],
    ["shares", "profit", "market", "investors", "oil", "prices", "quarter", "bank"],
    ["software", "internet", "computer", "researchers", "space", "wireless", "microsoft", "chip"],
]
COMMON = ["the", "a", "of", "in", "on", "said", "and", "to", "its", "after", "new", "for"]


def make_rows(n: int, seed: int) -> list[tuple[int, str, str]]:
    """``n`` rows (class 1-4, title, description) whose words depend on the class."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        label = i % 4
        words = [rng.choice(TOPIC_WORDS[label] if rng.random() < 0.5 else COMMON) for _ in range(rng.randint(5, 14))]
        rows.append((label + 1, f"title {i}", " ".join(words).capitalize() + " #39;s &lt;b&gt;news&lt;/b&gt;."))
    return rows


def write_csv(path: Path, rows, header: list[str] | None = None) -> Path:
    """Write rows the way AG News does: every field quoted, LF line endings."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, quoting=csv.QUOTE_ALL, lineterminator="\n")
        if header:
            writer.writerow(header)
        writer.writerows(rows)
    return path


def write_tiny_agnews(folder: Path) -> Path:
    """``folder/train.csv`` (240 rows, seed 1) and ``folder/test.csv`` (80 rows, seed 2): the corpus of every
    end-to-end test (and of the pinned metrics)."""
    write_csv(folder / "train.csv", make_rows(240, seed=1))
    write_csv(folder / "test.csv", make_rows(80, seed=2))
    return folder


def run_script(script: str | Path, out: Path, data: Path, *extra: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """``python script --data-dir data`` with its models/, results/ and images/ under ``out`` (also its working
    folder), ``PYTHONHASHSEED=0``; a flag of ``extra`` replaces the same flag before it (``lab.study.merge_flags``). ``script`` is a file (relative to the repository root) or ``-m elmo <command>``."""
    out.mkdir(parents=True, exist_ok=True)
    target = script.split() if isinstance(script, str) and script.startswith("-m ") else [str(ROOT / script)]
    from lab.study import merge_flags

    args = [sys.executable, *target, *merge_flags(["--data-dir", str(data), "--models-dir", str(out / "models"),
                                                   "--results-dir", str(out / "results"), "--images-dir",
                                                   str(out / "images")], extra)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    return subprocess.run(args, capture_output=True, text=True, cwd=out, env=env, timeout=timeout)


def run_in_process(command: str, out: Path, data: Path, *extra: str, lab: bool = False) -> int:
    """``elmo.cli.run(command, ...)`` with the folders of :func:`run_script`, in this process (no interpreter start:
    about 3 s less per run; ``lab``: with the lab's flags too, as ``python -m lab elmo``); returns the exit status.
    What a run changes process-wide (torch threads, the random generators, oneDNN's cache variables) is put back
    afterwards. For runs whose numbers are compared across processes, or that must be killed, use
    :func:`run_script`."""
    from elmo.cli import run
    from lab.study import merge_flags

    with process_state_kept():
        return run(command, merge_flags(["--data-dir", str(data), "--models-dir", str(out / "models"), "--results-dir",
                                         str(out / "results"), "--images-dir", str(out / "images")], extra), lab=lab)


@contextlib.contextmanager
def process_state_kept():
    """Put back what a command run in this process changes process-wide: torch's thread count, the random
    generators (torch, numpy, Python's) and the environment (oneDNN's cache variables)."""
    import numpy as np
    import torch

    saved = (torch.get_num_threads(), torch.get_rng_state(), np.random.get_state(), random.getstate(), dict(os.environ))
    try:
        yield
    finally:
        threads, torch_rng, numpy_rng, python_rng, environ = saved
        torch.set_num_threads(threads)
        torch.set_rng_state(torch_rng)
        np.random.set_state(numpy_rng)
        random.setstate(python_rng)
        os.environ.clear()
        os.environ.update(environ)


def without_timings(history: list[dict]) -> list[dict]:
    """A training history (``lm.json``'s ``directions.<d>.history``) without what the machine's speed sets
    (``seconds``, ``units_per_second``): what two runs of the same computation share bit for bit."""
    return [{k: v for k, v in row.items() if k not in ("seconds", "units_per_second")} for row in history]


def unigram_perplexity(train_docs: Iterable[Sequence[str]], test_docs: Iterable[Sequence[str]], vocab) -> float:
    """Perplexity on ``test_docs`` of the unigram model of ``train_docs`` (add-one smoothed), counted the way
    :func:`elmo.training.evaluation.perplexity` counts: every token through ``vocab`` (OOV → ``<unk>``) plus one
    end-of-document word per document. A language model that has learnt anything from context beats it."""
    end = object()
    counts = collections.Counter(t for doc in train_docs for t in [*vocab.encode(doc), end])
    total, size = sum(counts.values()), len(vocab) + 1
    test = [t for doc in test_docs for t in [*vocab.encode(doc), end]]
    return math.exp(-sum(math.log((counts[t] + 1) / (total + size)) for t in test) / len(test))


def needs_native_bf16():
    """``pytest.mark.skipif`` for tests that run bf16 kernels (LSTMs under bf16 autocast): on a CPU without native
    bf16 (AVX2 only) oneDNN has no bf16 LSTM primitive and aborts the test with an internal error."""
    import pytest

    from elmo.runtime.device import cpu_has_bf16

    return pytest.mark.skipif(not cpu_has_bf16(), reason="this CPU has no native bf16 (AVX512-BF16 / AMX-BF16): "
                              "oneDNN cannot run LSTMs in bf16 here, and --precision auto picks fp32")


#: ELMO.py flags of the small end-to-end run most integration tests share: 228 training documents in batches of
#: 16 make 15 steps an epoch (the resume tests count on it); lr 0.02 lets a 16-wide biLM learn the toy topics in
#: 2 epochs (test perplexity about 20 against the unigram model's 37). The token embeddings start from Word2Vec, as
#: in the full-data default run (``--init-embeddings auto`` would keep this tiny corpus's random rows), so that the
#: report's diagnostic runs (tests/integration/test_report_pdf.py) have a reference with another initialisation. One
#: thread (docs/testing.md), so the two directions train one after the other, in the script's own process (the
#: tests that kill it count on that); a run with ``--threads 2 --concurrent-directions on`` gives the same numbers.
SMALL = ["--embedding-dim", "16", "--hidden-size", "16", "--batch-size", "16", "--epochs", "2", "--lr", "0.02",
         "--init-embeddings", "word2vec", "--quiet", "--threads", "1"]
#: classification.py flags of that run (15 steps an epoch, 3 epochs, all three layer mixes).
CLASSIFY = ["--epochs", "3", "--batch-size", "16", "--encoder-hidden", "8", "--lr", "0.01", "--quiet"]


def hold_memory(mib: int) -> dict:
    """Write to ``mib`` MiB of memory and return ``{"mib": mib}`` (a child run's target whose peak RSS is known)."""
    import numpy

    block = numpy.ones(mib * 2**20 // 8)
    return {"mib": mib, "sum": float(block.sum())}


def write_published_lm(model, vocab, path: Path) -> Path:
    """``model`` (a ``BiLM`` with its training head) and ``vocab`` as a ``published_lm.pt``, the file earlier versions of
    ``pretrain --architecture`` and ``finetune`` wrote (this version reads it and writes a ``save_pretrained`` folder):
    the payload ``elmo.published_lm`` with bilm-tf's options, the softmax config, the vocabulary and the weights."""
    from elmo.artifacts import payload, save_checkpoint
    from elmo.model.published_io import options_of

    save_checkpoint(payload("published_lm", options=options_of(model.config), lm_config=model.config.head,
                            vocab=list(vocab.itos), meta={},
                            state_dict={old_name(k): v for k, v in model.state_dict().items()}), path)
    return Path(path)


def old_name(key: str) -> str:
    """The name an earlier version's ``published_lm.pt`` (or ``published_lm`` folder) gave a weight of the published
    architecture with its training head: the biLM under ``bilm.``, its LSTM layers as ``forward_layers.j``."""
    from elmo.model.hub import earlier_key

    return key if key.startswith("softmax.") else "bilm." + earlier_key(key)


def published_lm(config, vocab_size: int, seed: int = 0, **head):
    """The published architecture ``config`` with a training head over ``vocab_size`` words (``head``: its other
    fields) as ``pretrain --architecture`` trains it: a ``PublishedLM`` (``(loss, n)``; ``.bilm`` is the biLM)."""
    from dataclasses import replace

    from elmo.model.bilm import BiLM
    from elmo.model.language_model import PublishedLM

    return PublishedLM(BiLM(replace(config, vocab_size=vocab_size, **head), seed=seed))
