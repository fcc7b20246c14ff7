"""Measurements behind ``python -m elmo finetune``'s defaults and docs/fine_tuning.md (README.md here).

Usage (from the repository root; CPU, one job at a time)::

    python results/experiments/finetune_published/measure.py fixture   # about 6 minutes on 1 thread
    python results/experiments/finetune_published/measure.py original  # about 10 minutes

``fixture``: the bilm-tf test biLM (tests/fixtures/bilm_tf, 2 x 64 cells, projection 16) fine-tuned with
``python -m elmo finetune`` on AG News descriptions (the first 3,000 lines of data/ag_news/train.csv as a text file,
5 % held out; ``--softmax-samples 1024`` for its 6,000-word vocabulary; the first 1,000 test descriptions as ``--test-file``), ``--threads 1 --precision fp32``: the softmax
initialisations (``token-layer`` against ``random``: held-out perplexity before and after one epoch) and a small
learning-rate grid (biLM ``--lr`` x ``--softmax-lr``, 2 epochs), then the defaults for 3 epochs with the test file.

``original``: RANDOM weights of the Original model's shape (``elmo-original``: 2 x 4096 cells, projection 512, two
highway layers; written in the published hdf5 layout by :func:`elmo.bench.published.write_weights`), the softmax
over a 50,000-word vocabulary (every description of data/ag_news/train.csv, case kept), the ``token-layer``
initialisation, then a few training steps through :func:`elmo.training.trainer.fit` (the loop of ``finetune``) at a
batch of 16 descriptions, each setting in its own process (peak RSS from ``getrusage``): seconds per step, tokens per
second, the time of the start-up (loading, vocabulary, token vectors of the vocabulary, scale fit) and the projected
time of an epoch of 1 M and 10 M tokens.

Writes ``finetune_published.json`` next to this file (the parts already there are kept).
"""

from __future__ import annotations

import csv
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
OUT = HERE / "finetune_published.json"
FIXTURE = ROOT / "tests" / "fixtures" / "bilm_tf"
TEXT = Path(tempfile.gettempdir()) / "finetune_published_text"
FIXTURE_DOCS, TEST_DOCS, FIXTURE_SAMPLES = 3000, 1000, 1024
#: (biLM --lr, --softmax-lr) of the grid
LR_GRID = ((3e-5, 1e-3), (1e-4, 1e-3), (1e-3, 1e-3), (1e-4, 1e-2))
ORIGINAL_VOCAB, ORIGINAL_BATCH, ORIGINAL_STEPS = 50_000, 16, 5


def descriptions(path: Path, count: int | None = None) -> list[str]:
    """The description column of an AG News CSV (no header row), the first ``count`` rows."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = [row[2] for row in csv.reader(handle)]
    return rows[:count]


def write_text() -> dict[str, Path]:
    """The domain text files of the ``fixture`` runs under $TMPDIR."""
    TEXT.mkdir(exist_ok=True)
    files = {"train": TEXT / "train.txt", "test": TEXT / "test.txt"}
    files["train"].write_text("\n".join(descriptions(ROOT / "data/ag_news/train.csv", FIXTURE_DOCS)) + "\n", encoding="utf-8")
    files["test"].write_text("\n".join(descriptions(ROOT / "data/ag_news/test.csv", TEST_DOCS)) + "\n", encoding="utf-8")
    return files


def finetune_run(name: str, files: dict[str, Path], *flags: str) -> dict:
    """``python -m elmo finetune`` on the fixture biLM; its lm.json with the wall seconds and the command."""
    out = TEXT / name
    args = [sys.executable, "-m", "elmo", "finetune", "--options-file", str(FIXTURE / "options.json"),
            "--weight-file", str(FIXTURE / "lm_weights.hdf5"), "--train-file", str(files["train"]),
            "--models-dir", str(out / "models"), "--results-dir", str(out / "results"), "--images-dir",
            str(out / "images"), "--threads", "1", "--precision", "fp32", "--quiet", "--softmax-samples", str(FIXTURE_SAMPLES), *flags]
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed: {done.stderr[-2000:]}")
    lm = json.loads((out / "results" / "lm.json").read_text())
    mean = lambda split: {d: lm[split][f"{d}_perplexity"] for d in ("forward", "backward")}  # noqa: E731
    return {"command": " ".join(["python", *args[1:]]).replace(str(ROOT) + "/", ""), "wall_seconds": time.perf_counter() - start,
            "before": lm["before"], "after_val": mean("val"), "after_test": mean("test") if lm["test"] else None,
            "best_epoch": lm["directions"]["forward"]["best_epoch"], "softmax_init": lm["finetune"]["softmax_init"],
            "val_perplexity_per_epoch": [row["val_perplexity"] for row in lm["directions"]["forward"]["history"]],
            "tokens_per_second": lm["tokens_per_second"]["forward"], "train_tokens": lm["train_tokens"],
            "vocab_size": lm["vocab_size"]}


def fixture() -> dict:
    files = write_text()
    out = {"init": {}, "lr": {}}
    for init in ("token-layer", "random"):
        out["init"][init] = finetune_run(f"init_{init}", files, "--softmax-init", init, "--epochs", "1")
        print(init, out["init"][init]["before"], out["init"][init]["after_val"], flush=True)
    for lr, softmax_lr in LR_GRID:
        key = f"lr {lr:g} softmax-lr {softmax_lr:g}"
        out["lr"][key] = finetune_run(f"lr_{lr:g}_{softmax_lr:g}", files, "--lr", str(lr), "--softmax-lr",
                                      str(softmax_lr), "--epochs", "2", "--patience", "5")
        print(key, out["lr"][key]["val_perplexity_per_epoch"], flush=True)
    out["defaults"] = finetune_run("defaults", files, "--test-file", str(files["test"]))
    print("defaults", out["defaults"]["before"], out["defaults"]["after_val"], out["defaults"]["after_test"], flush=True)
    return out


def original_child(threads: int, precision: str, folder: str) -> dict:
    """One ``original`` measurement (run in a fresh process)."""
    import itertools

    import torch

    from elmo.bench.children import peak_rss_mb
    from elmo.data.corpus import encode_corpus
    from elmo.data.text import tokenize
    from elmo.data.vocab import Vocabulary
    from elmo.model.bilm_tf_finetune import init_softmax_from_token_layer, language_model_of, target_counts
    from elmo.model.bilm_tf_io import load_published_bilm
    from elmo.model.bilm_tf_lm import PublishedLMConfig
    from elmo.runtime.device import configure_threads, resolve_precision
    from elmo.training.trainer import Objective, Progress, TrainConfig, Unfreezing, fit

    configure_threads(threads)
    torch.manual_seed(0)
    device = torch.device("cpu")
    amp = resolve_precision(precision, device)
    t0 = time.perf_counter()
    bilm = load_published_bilm(Path(folder) / "original_options.json", Path(folder) / "original_weights.hdf5")
    load_seconds = time.perf_counter() - t0
    docs = [tokenize(text, lowercase=False) for text in descriptions(ROOT / "data/ag_news/train.csv")]
    vocab = Vocabulary.build(docs, min_freq=1, max_size=ORIGINAL_VOCAB)
    model = language_model_of(bilm, PublishedLMConfig(len(vocab), softmax="sampled"))
    t0 = time.perf_counter()
    sample = encode_corpus(docs[:256], vocab, max_chars=50, char_scheme="bilm_tf")
    init = init_softmax_from_token_layer(model, vocab, target_counts(docs, vocab), sample)
    init_seconds = time.perf_counter() - t0
    rss_before = peak_rss_mb()
    train = encode_corpus(docs[1000:1000 + ORIGINAL_BATCH * ORIGINAL_STEPS], vocab, max_chars=50, char_scheme="bilm_tf")
    val = encode_corpus(docs[:8], vocab, max_chars=50, char_scheme="bilm_tf")
    stamps, tokens = [], []

    def loss_fn(m, batch):
        stamps.append(time.perf_counter())
        tokens.append(int(batch["lengths"].sum()))
        return m(batch["ids"], batch["lengths"], batch["chars"])

    from elmo.training.evaluation import perplexity

    objective = Objective(lambda epoch: itertools.islice(train.epoch_batches(ORIGINAL_BATCH, None, epoch), ORIGINAL_STEPS),
                          loss_fn, lambda: {"perplexity": perplexity(model, val, device)}, "perplexity", False)
    groups = Unfreezing([{"params": list(model.bilm.parameters()), "lr": 1e-4},
                         {"params": list(model.softmax.parameters()), "lr": 1e-3}], lambda epoch: None)
    t0 = time.perf_counter()
    fit(model, objective, TrainConfig(epochs=1, lr=1e-4), device, amp, progress=Progress(quiet=True), unfreezing=groups)
    fit_seconds = time.perf_counter() - t0
    steps = [b - a for a, b in zip(stamps, stamps[1:])]  # step i's time: from its forward to the next forward
    per_step = sorted(steps[1:])[len(steps[1:]) // 2]  # median, the first step (kernel creation) left out
    step_tokens = sum(tokens[1:-1]) / max(len(tokens) - 2, 1)
    return {"threads": threads, "precision": precision, "vocab_size": len(vocab), "load_seconds": load_seconds,
            "init_seconds": init_seconds, "softmax_init": init, "rss_before_training_mb": rss_before,
            "peak_rss_mb": peak_rss_mb(), "steps": len(stamps), "batch_documents": ORIGINAL_BATCH,
            "step_seconds": steps, "median_step_seconds": per_step, "mean_tokens_per_step": step_tokens,
            "tokens_per_second": step_tokens / per_step, "fit_seconds_with_validation": fit_seconds,
            "hours_per_epoch": {"1M tokens": 1e6 / (step_tokens / per_step) / 3600,
                                "10M tokens": 1e7 / (step_tokens / per_step) / 3600}}


def original() -> dict:
    from elmo.bench.children import in_child
    from elmo.bench.published import write_weights

    out = {}
    with tempfile.TemporaryDirectory() as folder:
        out["weights"] = write_weights("original", folder, seed=0)
        for threads, precision in ((1, "auto"), (2, "auto")):
            key = f"threads {threads} {precision}"
            out[key] = in_child(original_child, threads, precision, folder)
            print(key, {k: out[key][k] for k in ("median_step_seconds", "tokens_per_second", "peak_rss_mb")}, flush=True)
    return out


def main() -> None:
    part = sys.argv[1]
    results = json.loads(OUT.read_text()) if OUT.is_file() else {}
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    results["machine"] = {"cpu": next((line.split(":", 1)[1].strip() for line in lscpu.splitlines()
                                       if line.startswith("Model name")), platform.processor()),
                          "cores": int(subprocess.run(["nproc"], capture_output=True, text=True).stdout),
                          "python": platform.python_version()}
    results[part] = {"fixture": fixture, "original": original}[part]()
    OUT.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
