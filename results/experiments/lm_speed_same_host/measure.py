"""Tokens/s of a fresh forward LM over 40 batches for residual x dropout (README.md). Usage: python measure.py 0|1 (flush denormals)."""
import dataclasses
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from elmo.model.bilm import LanguageModel  # noqa: E402 (after the sys.path line)
from elmo.pipelines.pretraining import PretrainArgs, prepare_data  # noqa: E402 (after the sys.path line)
from elmo.training.trainer import Objective, Progress, TrainConfig, fit  # noqa: E402 (after the sys.path line)

torch.set_num_threads(2)
pre = PretrainArgs(data_dir=str(ROOT / "data" / "ag_news"), seed=0)
_, vocab, data = prepare_data(pre)
corpus = data["train"]
batches = corpus.batches(pre.batch_size, pre.max_tokens, shuffle=True, seed=0)[:40]
cfg = pre.bilm_config(len(vocab))
def rate(lm, lr=1e-3, warm=0):
    obj = Objective(batches=lambda e: (corpus.collate(i) for i in batches), loss_fn=lambda m, b: m(b["ids"], b["lengths"]),
                    validate=lambda: {"none": 0.0}, monitor="none", maximize=False)
    f = fit(lm, obj, TrainConfig(epochs=1, lr=lr, warmup_steps=warm), torch.device("cpu"), torch.bfloat16, progress=Progress(quiet=True))
    return f.history[0]["units_per_second"]
torch.set_flush_denormal(sys.argv[1] == "1")
rate(LanguageModel(cfg, "forward"))
for res in [False, True, False, True]:
    for drop in [0.2, 0.1]:
        c = dataclasses.replace(cfg, residual=res, dropout=drop)
        torch.manual_seed(0)
        print(f"flush={sys.argv[1]} residual={res} dropout={drop}: {rate(LanguageModel(c, 'forward')):,.0f}", flush=True)
