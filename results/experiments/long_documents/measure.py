"""Peak memory of embedding one long document, before and after chunking (README.md, docs/published_elmo.md).

Usage (from the repository root; nothing else running, it takes about half an hour on 2 cores)::

    git archive ef5d230 elmo | tar -x -C /tmp/ld_before      # the package before the change
    python results/experiments/long_documents/measure.py --before-code /tmp/ld_before \\
        --out results/experiments/long_documents/memory.json

Every measurement is its own process (``os.wait4`` / ``getrusage`` peak RSS, 1 thread, fp32, CPU): a biLM
with random weights, a warm-up sentence of 20 tokens (the baseline: weights, packed copies, libraries), then
one document of N random words (letters, 2-12 characters, almost all distinct) through
``ElmoEmbedder.embed_sentence``; for the Original architecture also through ``python -m elmo embed`` (one
line of N words, ``--all``, the random weights written in the published hdf5 layout). Recorded per run:
``peak_rss_mb`` (the process's peak), ``rss_before_mb`` (RSS after the warm-up), ``document_peak_rss_mb`` (the
peak during the document's call alone: the peak is reset through ``/proc/self/clear_refs`` first) and
``growth_mb`` (their difference: what the document itself needs, vectors included). ``--before-code DIR`` runs
the package found in DIR (the *before* code) for the *before* rows. The rows already in ``--out`` are kept
(the script resumes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LENGTHS = (1000, 3000, 10000)
MODELS = ("original", "ours_paper_char", "ours_default")
SWEEP = (128, 256, 512, 1024, 2048, 4096, None)  # chunk sizes tried (after), None = one pass
SWEEP_MODELS = ("original", "ours_paper_char")
SWEEP_LENGTH = 3000


def words(count: int, seed: int) -> list[str]:
    """``count`` random words of 2-12 ASCII letters (almost all distinct)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    return ["".join(rng.choice(letters, rng.integers(2, 13))) for _ in range(count)]


def peak_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def status_mb(key: str) -> float:
    """``VmRSS`` / ``VmHWM`` (peak RSS since start or since :func:`reset_peak`) of this process, MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(key)


def reset_peak() -> None:
    """Start the peak RSS (``VmHWM``, ``ru_maxrss``) again from the current RSS (Linux >= 4.0)."""
    Path("/proc/self/clear_refs").write_text("5")


def build(model: str, chunk: str):
    """An ``ElmoEmbedder`` of ``model`` with random weights (``chunk``: ``default``, ``none`` or a number)."""
    import torch

    from elmo import ElmoEmbedder
    from elmo.data.vocab import SPECIALS, Vocabulary

    kwargs = {} if chunk == "default" else {"chunk_size": None if chunk == "none" else int(chunk)}
    torch.manual_seed(0)
    if model == "original":
        from elmo.bench.published import ARCHITECTURES
        from elmo.model.bilm_tf import PublishedBiLM

        return ElmoEmbedder(bilm=PublishedBiLM(ARCHITECTURES["original"][1]).reset_parameters(0), device="cpu",
                            precision="fp32", **kwargs)
    from elmo.model.bilm import BiLM, BiLMConfig
    from elmo.model.bilm_tf import PUBLISHED_FILTERS

    vocab = Vocabulary(list(SPECIALS) + sorted(set(words(20000, 1))))
    sizes = {"ours_default": {},  # python ELMO.py's defaults: word embeddings, 2 x 256 LSTM
             "ours_paper_char": {"token_encoder": "char", "embedding_dim": 512, "hidden_size": 4096, "proj_size": 512,
                                 "char_filters": PUBLISHED_FILTERS, "num_highway": 2, "max_chars": 50}}[model]
    bilm = BiLM(BiLMConfig(vocab_size=len(vocab), dropout=0.0, **sizes))
    return ElmoEmbedder(bilm=bilm, vocab=vocab, device="cpu", precision="fp32", **kwargs)


def child(model: str, length: int, chunk: str, save: str | None) -> None:
    """One measurement in this process; prints a JSON line."""
    import numpy as np
    import torch

    import elmo

    torch.set_num_threads(1)
    embedder = build(model, chunk)
    doc = words(length, 0)
    embedder.embed_sentence(doc[:20])
    setup_peak = peak_mb()  # building the model, its warm-up
    before = status_mb("VmRSS")
    reset_peak()
    start = time.perf_counter()
    vectors = embedder.embed_sentence(doc)
    seconds = time.perf_counter() - start
    document_peak = status_mb("VmHWM")
    row = {"peak_rss_mb": max(setup_peak, document_peak), "setup_peak_rss_mb": setup_peak, "rss_before_mb": before,
           "document_peak_rss_mb": document_peak, "growth_mb": document_peak - before, "seconds": seconds,
           "vectors_mb": vectors.nbytes / 2**20, "shape": list(vectors.shape), "package": elmo.__file__,
           "chunk_size": getattr(embedder.bilm, "chunk_size", None)}
    if save:
        np.save(save, vectors)
    print(json.dumps(row))


def run(args: list[str], code: Path | None) -> tuple[str, float, float]:
    """``(stdout, seconds, peak RSS MiB)`` of ``python args`` (``code``: the package folder put first on the path)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    if code is not None:
        env["PYTHONPATH"] = str(code)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, *args], stdout=out, stderr=err, env=env, cwd=code or ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"failed: python {' '.join(args)}\n{err.read().decode()[-2000:]}")
        return out.read().decode(), seconds, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(Path(__file__).with_name("memory.json")))
    parser.add_argument("--before-code", help="folder holding the package before the change")
    parser.add_argument("--child", nargs=4, metavar=("MODEL", "LENGTH", "CHUNK", "SAVE"), help=argparse.SUPPRESS)
    parser.add_argument("--parts", nargs="+", default=["embedder", "cli", "sweep"])
    args = parser.parse_args()
    if args.child:
        model, length, chunk, save = args.child
        return child(model, int(length), chunk, None if save == "-" else save)
    out = Path(args.out)
    results = json.loads(out.read_text()) if out.exists() else {"rows": []}
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    # this process stays small (no torch, no vectors loaded while children run): a child's ru_maxrss starts from
    # its parent's peak RSS at exec
    from importlib.metadata import version

    field = {ln.split(":", 1)[0].strip(): ln.split(":", 1)[1].strip() for ln in lscpu.splitlines() if ":" in ln}
    results["meta"] = {"cpu": field.get("Model name", ""), "cpu_family": field.get("CPU family", ""),
                       "cpu_model": field.get("Model", ""), "bf16": "avx512_bf16" in lscpu, "cores": os.cpu_count(), "torch": version("torch"),
                       "python": platform.python_version(), "threads": 1, "precision": "fp32",
                       "command": "python results/experiments/long_documents/measure.py --before-code /tmp/ld_before"}
    done = {(r["label"], r["path"], r["model"], r["tokens"], str(r["chunk_setting"])) for r in results["rows"]}
    vectors = Path(tempfile.gettempdir()) / "long_documents_vectors"
    vectors.mkdir(exist_ok=True)
    codes = {"before": Path(args.before_code).resolve() if args.before_code else None, "after": None}

    def record(row: dict) -> None:
        results["rows"].append(row)
        results["loadavg_last"] = os.getloadavg()
        out.write_text(json.dumps(results, indent=1) + "\n")
        print(json.dumps({k: v for k, v in row.items() if k != "package"}), flush=True)

    script = str(Path(__file__).resolve())
    jobs = []
    if "embedder" in args.parts:
        jobs += [(label, model, n, "default") for model in MODELS for n in LENGTHS for label in codes
                 if label == "after" or codes["before"]]
    if "sweep" in args.parts:
        jobs += [("after", model, SWEEP_LENGTH, "none" if c is None else str(c)) for model in SWEEP_MODELS for c in SWEEP]
    for label, model, n, chunk in jobs:
        if (label, "ElmoEmbedder", model, n, chunk) in done:
            continue
        save = str(vectors / f"{label}_{model}_{n}_{chunk}.npy")
        stdout, seconds, rss = run([script, "--child", model, str(n), chunk, save], codes[label])
        row = json.loads(stdout.strip().splitlines()[-1])
        record({"label": label, "path": "ElmoEmbedder", "model": model, "tokens": n, "chunk_setting": chunk, **row})
    if "cli" in args.parts:
        with tempfile.TemporaryDirectory() as tmp:
            files = None
            for label, code in codes.items():
                if label == "before" and code is None:
                    continue
                for n in LENGTHS:
                    if (label, "python -m elmo embed", "original", n, "default") in done:
                        continue
                    if files is None:
                        code_line = ("import sys; from elmo.bench.published import write_weights; "
                                     f"print(write_weights('original', {tmp!r}, 0))")
                        run(["-c", code_line], None)
                        files = [str(Path(tmp) / "original_options.json"), str(Path(tmp) / "original_weights.hdf5")]
                    text = Path(tmp) / f"doc_{n}.txt"
                    text.write_text(" ".join(words(n, 0)) + "\n")
                    _, seconds, rss = run(["-m", "elmo", "embed", str(text), str(Path(tmp) / "out.hdf5"), "--all",
                                           "--options-file", files[0], "--weight-file", files[1], "--device", "cpu",
                                           "--threads", "1", "--quiet"], code)
                    record({"label": label, "path": "python -m elmo embed", "model": "original", "tokens": n,
                            "chunk_setting": "default", "process_peak_rss_mb": rss, "seconds": seconds})
    import numpy as np  # the same vectors before and after? (loaded only now, see above)

    for model in MODELS:
        for n in LENGTHS:
            pair = [vectors / f"{label}_{model}_{n}_default.npy" for label in ("before", "after")]
            if all(f.exists() for f in pair):
                diff = float(np.abs(np.load(pair[0]) - np.load(pair[1])).max())
                results.setdefault("before_vs_after_max_abs", {})[f"{model}_{n}"] = diff
    out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
