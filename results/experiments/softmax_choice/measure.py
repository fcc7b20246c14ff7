"""Which training softmax of the published architecture reaches a held-out perplexity sooner on the CPU?

One arm per process (``python measure.py ARM``; ``python measure.py --summary`` combines them): the small options
file next to this script (2 x 256 cells / 64 projection, 128 filters), trained on the first ``--max-docs`` AG News
training descriptions exactly as ``python -m elmo pretrain --architecture options.json`` trains it (the same data
preparation, model, batches, Adam with warm-up, gradient clipping and precision), for ``--minutes`` of the process's
CPU time (``time.process_time``, so another job on the machine slows the wall clock, not the measurement); every
``--eval-every`` CPU seconds the training clock stops while the exact full-vocabulary perplexity of both directions
on the validation descriptions is computed. Arms: ``adaptive``, ``sampled`` (bilm-tf's 8192 candidates) and
``sampled-1024``. The summary: for the target perplexity the worst arm reaches, the CPU seconds each arm needed
(linear between two evaluations; 0 when an arm starts below it), the tokens and optimiser steps per CPU second, and
each arm's validation perplexity at each evaluation.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from elmo.artifacts import environment_info, write_json
from elmo.model.bilm_tf_lm import PublishedLanguageModel
from elmo.pipelines.pretraining import PretrainArgs, lm_train_config, prepare_data
from elmo.runtime.device import autocast, configure_threads, resolve_precision, set_seed, to_device
from elmo.training.evaluation import perplexity

HERE = Path(__file__).resolve().parent
ARMS = {"adaptive": ("adaptive", 8192), "sampled": ("sampled", 8192), "sampled-1024": ("sampled", 1024)}


def run_arm(arm: str, args: argparse.Namespace) -> dict:
    softmax, samples = ARMS[arm]
    config = PretrainArgs(architecture=str(HERE / "options.json"), softmax=softmax, softmax_samples=samples,
                          data_dir=args.data_dir, max_docs=args.max_docs, min_freq=args.min_freq,
                          batch_size=args.batch_size, seed=args.seed, threads=1)
    set_seed(config.seed)
    configure_threads(1)
    device = torch.device("cpu")
    amp = resolve_precision("auto", device)
    _, vocab, data = prepare_data(config)
    model = PublishedLanguageModel(config.published_config(), config.published_lm_config(len(vocab)), seed=config.seed)
    train_config = lm_train_config(config, data["train"])
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, fused=True)
    budget, curve, clock, steps, tokens, epoch = args.minutes * 60, [], 0.0, 0, 0, 0
    torch.manual_seed(config.seed)

    def evaluate():
        curve.append({"cpu_seconds": clock, "steps": steps, "tokens": tokens,
                      "val_perplexity": perplexity(model, data["val"], device)})
        print(f"{arm}: {clock:.0f} s, step {steps}, val perplexity {curve[-1]['val_perplexity']:.2f}", flush=True)

    evaluate()
    next_eval = args.eval_every
    while clock < budget:
        for step, batch in enumerate(data["train"].epoch_batches(config.batch_size, config.max_tokens, config.seed + epoch)):
            start = time.process_time()
            model.train()
            batch = to_device(batch, device)
            with autocast(device, amp):
                loss, n = model(batch["ids"], batch["lengths"], batch["chars"])
            optimizer.zero_grad(set_to_none=True)
            for group in optimizer.param_groups:
                group["lr"] = config.lr * train_config.lr_factor(epoch, step)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
            optimizer.step()
            clock += time.process_time() - start
            steps, tokens = steps + 1, tokens + n
            if clock >= next_eval or clock >= budget:
                evaluate()
                next_eval += args.eval_every
            if clock >= budget:
                break
        epoch += 1
    return {"arm": arm, "softmax": softmax, "samples": min(samples, len(vocab)), "vocab_size": len(vocab),
            "train_documents": len(data["train"]), "train_tokens": data["train"].num_tokens,
            "val_documents": len(data["val"]), "batch_size": config.batch_size, "precision": str(amp),
            "epochs_started": epoch, "curve": curve, "meta": environment_info(config.seed), "flags": vars(args)}


def seconds_to(curve: list[dict], target: float) -> float | None:
    """CPU seconds at which the validation perplexity first reached ``target`` (linear between evaluations)."""
    for a, b in zip(curve, curve[1:]):
        if b["val_perplexity"] <= target:
            if a["val_perplexity"] <= target:
                return a["cpu_seconds"]
            share = (a["val_perplexity"] - target) / (a["val_perplexity"] - b["val_perplexity"])
            return a["cpu_seconds"] + share * (b["cpu_seconds"] - a["cpu_seconds"])
    return None


def summary() -> dict:
    arms = {arm: json.loads((HERE / f"{arm}.json").read_text()) for arm in ARMS if (HERE / f"{arm}.json").is_file()}
    best = {arm: min(row["val_perplexity"] for row in out["curve"]) for arm, out in arms.items()}
    target = max(best.values())
    times = {arm: seconds_to(out["curve"], target) for arm, out in arms.items()}
    rates = {arm: out["curve"][-1]["tokens"] / out["curve"][-1]["cpu_seconds"] for arm, out in arms.items()}
    steps = {arm: out["curve"][-1]["steps"] / out["curve"][-1]["cpu_seconds"] for arm, out in arms.items()}
    fastest = min((t, arm) for arm, t in times.items() if t is not None)[1]
    return {"target_val_perplexity": target, "best_val_perplexity": best, "cpu_seconds_to_target": times,
            "tokens_per_cpu_second": rates, "steps_per_cpu_second": steps, "fastest": fastest,
            "val_perplexity_by_cpu_seconds": {arm: [[round(r["cpu_seconds"]), r["val_perplexity"]] for r in out["curve"]]
                                              for arm, out in arms.items()},
            "vocab_size": next(iter(arms.values()))["vocab_size"],
            "samples": {arm: out["samples"] for arm, out in arms.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("arm", nargs="?", choices=list(ARMS))
    parser.add_argument("--summary", action="store_true")
    parser.add_argument("--data-dir", default="data/ag_news")
    parser.add_argument("--max-docs", type=int, default=4000)
    parser.add_argument("--min-freq", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--eval-every", type=float, default=60)
    args = parser.parse_args()
    if args.summary:
        out = summary()
        write_json(HERE / "softmax_choice.json", out)
        print(json.dumps(out, indent=1))
        return
    if args.arm is None:
        sys.exit("give an arm or --summary")
    write_json(HERE / f"{args.arm}.json", run_arm(args.arm, args))


if __name__ == "__main__":
    main()
