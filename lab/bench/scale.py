"""Scaling benchmark: peak memory of a streamed own-corpus run at two corpus sizes, and torchrun throughput.

``python -m lab bench-scale`` (about 15 minutes on the 2-core CPU with the defaults) writes
``results/bench_scale.json`` and prints a table:

* **stream**: synthetic corpora (Zipf-distributed words over a fixed pool of 100k pseudo-words,
  8-60 words a line), each measured in its own process (peak RSS from ``ru_maxrss``) at two sizes
  10x apart: the streamed data path of ``ELMO.py --train-file`` (vocabulary pass + one epoch of
  collated batches, :func:`stream_pass`) over ``--size-mb`` (1 GB) and a tenth of it, and the whole
  ``ELMO.py --train-file`` run (small biLM, one epoch per direction) over ``--script-mb`` (50 MB)
  and a tenth of it: training through 1 GB (about 170M tokens) takes hours on a 2-core CPU.
* **ddp**: ``ELMO.py`` (one epoch per direction) and ``classification.py`` (one layer mix, one epoch)
  on the first ``--ddp-docs`` AG News rows, as one process with all cores and under
  ``torchrun --nproc_per_node=2`` (one thread each), with the same global batch; the figures are
  the training throughputs the scripts record (tokens/s per direction, documents/s).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from elmo.artifacts import Outputs, environment_info, refuse_overwriting_inputs, write_json
from elmo.data.stream import StreamedCorpus, TextSource
from elmo.data.vocab import Vocabulary
from elmo.errors import ElmoError
from elmo.pipelines.common import option

from .children import in_child, peak_rss_mb, run_script

#: the ``python -m elmo`` command of each script
COMMAND = {"ELMO.py": ["-m", "elmo", "pretrain"], "classification.py": ["-m", "elmo", "classify"]}


@dataclass
class ScaleArgs:
    """Flags of ``python -m lab bench-scale``."""

    size_mb: int = option(1000, "corpus size in MB of the data-path pass (vocabulary + one streamed epoch of "
                          "batches); it is also run on a tenth of it")
    script_mb: int = option(50, "corpus size in MB of the whole ELMO.py --train-file runs (also run on a tenth)")
    work_dir: str = option(str(Path(tempfile.gettempdir()) / "elmo_bench_scale"), "where corpora and runs go")
    data_dir: str = option("data/ag_news", "AG News for the torchrun section")
    ddp_docs: int = option(8000, "AG News training rows of the torchrun section")
    sections: tuple[str, ...] = option(("stream", "ddp"), "sections to run", choices=("stream", "ddp"))
    out: str = option("results/bench_scale.json", "JSON results file")
    seed: int = option(0, "seed of the synthetic corpora")

    def check(self) -> None:
        if self.size_mb < 10 or self.ddp_docs < 100:
            raise ElmoError(f"--size-mb must be >= 10 and --ddp-docs >= 100, got {self.size_mb}, {self.ddp_docs}")
        if self.script_mb < 10:
            raise ElmoError(f"--script-mb must be >= 10, got {self.script_mb}")


def synthetic_corpus(path: Path, megabytes: float, seed: int = 0, pool: int = 100_000) -> dict[str, Any]:
    """Write about ``megabytes`` MB of text, one document per line: 8-60 words drawn from a Zipf
    distribution (exponent 1.05) over ``pool`` pseudo-words of 2-10 letters. Reused when it exists.

    Returns:
        ``{"bytes", "lines", "seconds"}`` (seconds 0 for a reused file).
    """
    if path.is_file() and path.with_suffix(".json").is_file():
        return {**json.loads(path.with_suffix(".json").read_text()), "seconds": 0.0}
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = np.array(["".join(rng.choice(letters, size=rng.integers(2, 11))) for _ in range(pool)])
    cdf = np.cumsum(1.0 / np.arange(1, pool + 1) ** 1.05)
    cdf /= cdf[-1]
    target, written, lines, started = int(megabytes * 1e6), 0, 0, time.perf_counter()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".tmp"), "w", encoding="utf-8") as handle:
        while written < target:
            lengths = rng.integers(8, 61, size=20_000)
            tokens = words[np.searchsorted(cdf, rng.random(int(lengths.sum())))]
            bounds = np.concatenate([[0], np.cumsum(lengths)])
            text = "\n".join(" ".join(tokens[a:b]) for a, b in zip(bounds[:-1], bounds[1:])) + "\n"
            handle.write(text)
            written += len(text)
            lines += len(lengths)
    path.with_suffix(".tmp").replace(path)
    info = {"bytes": written, "lines": lines}
    path.with_suffix(".json").write_text(json.dumps(info))
    return {**info, "seconds": time.perf_counter() - started}


STREAM_FLAGS = ["--epochs", "1", "--init-embeddings", "none", "--embedding-dim", "32", "--hidden-size", "32",
                "--max-vocab", "20000", "--batch-size", "256", "--max-tokens", "16384", "--max-val-docs", "2000",
                "--quiet"]


def stream_pass(path: str, max_length: int = 256, batch_size: int = 256, max_tokens: int = 16384) -> dict[str, Any]:
    """The data path of ``ELMO.py --train-file`` over a whole file, in this process: the vocabulary pass
    (:meth:`~elmo.data.vocab.Vocabulary.build` over :meth:`~elmo.data.stream.TextSource.documents`), then one
    epoch of collated training batches (:meth:`~elmo.data.stream.StreamedCorpus.epoch_batches`, what
    :func:`elmo.training.trainer.fit` consumes). Returns seconds, tokens, batches and this process's peak RSS."""

    started = time.perf_counter()
    source = TextSource(path)
    vocab = Vocabulary.build(source.documents("train", 0.05, 0, 2000), min_freq=2, max_size=20000)
    counted = time.perf_counter() - started
    corpus = StreamedCorpus(source, vocab, max_length, part="train", val_fraction=0.05, max_val_docs=2000)
    tokens = batches = 0
    for batch in corpus.epoch_batches(batch_size, max_tokens, seed=1):
        tokens += int(batch["lengths"].sum())
        batches += 1
    return {"vocabulary_seconds": counted, "epoch_seconds": time.perf_counter() - started - counted,
            "tokens": tokens, "batches": batches, "vocab_size": len(vocab), "peak_rss_mb": peak_rss_mb()}


def section_stream(cfg: ScaleArgs) -> dict[str, Any]:
    """Peak RSS at two corpus sizes, 10x apart: the streamed data path over ``--size-mb`` and a tenth of it,
    and the whole ``ELMO.py --train-file`` run (one epoch per direction, small biLM) over ``--script-mb``
    and a tenth of it."""
    work = Path(cfg.work_dir)
    out: dict[str, Any] = {"flags": STREAM_FLAGS, "data_path": [], "script": []}
    for megabytes in (cfg.size_mb / 10, cfg.size_mb):
        corpus = work / f"synthetic_{megabytes:g}mb.txt"
        made = synthetic_corpus(corpus, megabytes, cfg.seed)
        row = {"megabytes": made["bytes"] / 1e6, "lines": made["lines"], **in_child(stream_pass, str(corpus))}
        out["data_path"].append(row)
        print(f"stream data path: {row['megabytes']:,.0f} MB, {row['tokens']:,} tokens in {row['batches']:,} batches: "
              f"{row['vocabulary_seconds'] + row['epoch_seconds']:.0f} s, peak RSS {row['peak_rss_mb']:,.0f} MB", flush=True)
    for megabytes in (cfg.script_mb / 10, cfg.script_mb):
        corpus = work / f"synthetic_{megabytes:g}mb.txt"
        made = synthetic_corpus(corpus, megabytes, cfg.seed)
        run_dir = work / f"run_{megabytes:g}mb"
        shutil.rmtree(run_dir, ignore_errors=True)
        seconds, rss = run_script([*COMMAND["ELMO.py"], "--train-file", str(corpus), *STREAM_FLAGS,
                                    "--models-dir", str(run_dir / "models"), "--results-dir", str(run_dir / "results"),
                                    "--images-dir", str(run_dir / "images")])
        lm = json.loads(Outputs(results=run_dir / "results").result("lm").read_text())
        out["script"].append({"megabytes": made["bytes"] / 1e6, "lines": made["lines"], "seconds": seconds,
                              "peak_rss_mb": rss, "tokens": lm["train_tokens"], "vocab_size": lm["vocab_size"],
                              "tokens_per_second": lm["tokens_per_second"],
                              "val_perplexity": {d: lm["val"][f"{d}_perplexity"] for d in ("forward", "backward")}})
        print(f"ELMO.py --train-file: {made['bytes'] / 1e6:,.0f} MB, {lm['train_tokens']:,} training tokens: "
              f"{seconds:.0f} s, peak RSS {rss:,.0f} MB", flush=True)
    for part in ("data_path", "script"):
        small, large = out[part]
        out[f"{part}_ratios"] = {"text": large["megabytes"] / small["megabytes"],
                                 "peak_rss": large["peak_rss_mb"] / small["peak_rss_mb"]}
    return out


def _torchrun(procs: int) -> list[str]:
    """The command prefix of ``procs`` processes: ``python -m torch.distributed.run`` (= ``torchrun``) or ``python``."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={procs}"] \
        if procs > 1 else [sys.executable]  # then COMMAND's "-m elmo ...": torchrun takes -m as python does


def section_ddp(cfg: ScaleArgs) -> dict[str, Any]:
    """Training throughput of both scripts as 1 process (all cores) and as 2 torchrun processes."""
    import os
    import subprocess

    work = Path(cfg.work_dir)
    out: dict[str, Any] = {"ddp_docs": cfg.ddp_docs, "runs": {}}
    for procs in (1, 2):
        run_dir = work / f"ddp_{procs}"
        shutil.rmtree(run_dir, ignore_errors=True)
        common = ["--data-dir", str(Path(cfg.data_dir).resolve()), "--max-docs", str(cfg.ddp_docs), "--quiet",
                  "--models-dir", str(run_dir / "models"), "--results-dir", str(run_dir / "results"),
                  "--images-dir", str(run_dir / "images")]
        row: dict[str, Any] = {}
        for script, extra in (("ELMO.py", ["--epochs", "1", "--init-embeddings", "none"]),
                              ("classification.py", ["--epochs", "1", "--mixes", "trainable_lambda"])):
            started = time.perf_counter()
            proc = subprocess.run([*_torchrun(procs), *COMMAND[script], *common, *extra], capture_output=True,
                                  text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
            if proc.returncode != 0:
                raise ElmoError(f"{script} with {procs} process(es) failed: {proc.stderr[-800:]}")
            row[f"{script}_seconds"] = time.perf_counter() - started
        lm = json.loads(Outputs(results=run_dir / "results").result("lm").read_text())
        cls = json.loads(Outputs(results=run_dir / "results").result("classification").read_text())
        row["lm_tokens_per_second"] = lm["tokens_per_second"]
        row["lm_val_perplexity"] = {d: lm["val"][f"{d}_perplexity"] for d in ("forward", "backward")}
        row["classifier_docs_per_second"] = cls["trainable_lambda"]["history"][0]["units_per_second"]
        row["classifier_val_f1"] = cls["trainable_lambda"]["val"]["f1"]
        out["runs"][str(procs)] = row
        print(f"ddp: {procs} process(es): LM {row['lm_tokens_per_second']['forward']:,.0f} tokens/s (forward), "
              f"classifier {row['classifier_docs_per_second']:,.0f} docs/s", flush=True)
    return out


def bench_scale(cfg: ScaleArgs) -> dict[str, Any]:
    """Run the chosen sections and write ``cfg.out``.

    Raises:
        ElmoError: ``--out`` is one of the AG News files the torchrun section reads (naming both).
    """
    data = Path(cfg.data_dir)
    refuse_overwriting_inputs({f"--data-dir ({n})": data / n for n in ("train.csv", "test.csv")}, {"--out": cfg.out})
    results: dict[str, Any] = {"meta": environment_info(cfg.seed)}
    if "stream" in cfg.sections:
        results["stream"] = section_stream(cfg)
    if "ddp" in cfg.sections:
        results["ddp"] = section_ddp(cfg)
    write_json(cfg.out, results)
    print(format_scale(results))
    return results


def format_scale(r: dict[str, Any]) -> str:
    """The results as a text table."""
    lines = []
    if "stream" in r:
        lines.append("corpus MB   tokens        vocabulary   seconds   peak RSS MB")
        for part, title in (("data_path", "data path (vocabulary pass + one streamed epoch of batches)"),
                            ("script", "ELMO.py --train-file (vocabulary + 1 epoch per direction + evaluation)")):
            lines.append(title)
            for run in r["stream"][part]:
                seconds = run.get("seconds", run.get("vocabulary_seconds", 0) + run.get("epoch_seconds", 0))
                lines.append(f"{run['megabytes']:>9,.0f}{run['tokens']:>14,}{run['vocab_size']:>13,}{seconds:>10.0f}"
                             f"{run['peak_rss_mb']:>14,.0f}")
            ratios = r["stream"][f"{part}_ratios"]
            lines.append(f"  {ratios['text']:.1f}x the text, {ratios['peak_rss']:.2f}x the peak memory")
    if "ddp" in r:
        lines.append("processes   LM tokens/s (fwd / bwd)   classifier docs/s   ELMO.py s   classification.py s")
        for procs, run in r["ddp"]["runs"].items():
            t = run["lm_tokens_per_second"]
            lines.append(f"{procs:>9}{t['forward']:>15,.0f} / {t['backward']:<8,.0f}{run['classifier_docs_per_second']:>18,.0f}"
                         f"{run['ELMO.py_seconds']:>12.0f}{run['classification.py_seconds']:>22.0f}")
    return "\n".join(lines)
