"""How fast the task encoder's oneDNN LSTM kernels run inside a classifier training step, against the whole step.

    python results/experiments/classifier_avx2/kernel_gflops.py MODELS [MIX]

MODELS holds a ``bilstm.pt`` (speed does not depend on its weights); MIX is a layer mix (default trainable_lambda).
On the first 6,400 training documents of ``data/ag_news`` with the layer cache in memory, 2 threads, batches of 64
(as ``classification.py``): 50 warm-up batches, 50 timed, the same 50 again under ``torch.profiler``. FLOPs are
:func:`elmo.bench.speed.task_encoder_flops` over the padded positions; the kernels' GFLOP/s divide the forward
(1x) and backward (2x) shares by the profiler's self time of ``mkldnn_rnn_layer`` and ``mkldnn_rnn_layer_backward``;
the twelve operations of the largest self time follow.
"""

import sys
import time

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

from elmo.bench.speed import matmul_peak, task_encoder_flops
from elmo.data.agnews import load_agnews
from elmo.data.corpus import encode_corpus
from elmo.inference.layer_cache import compute_layers
from elmo.model.classifier import ElmoClassifier
from elmo.model.serialization import load_bilm
from elmo.pipelines.classification import ClassifyArgs
from elmo.pipelines.task import classifier_loss
from elmo.runtime.device import cap_kernel_caches, configure_threads
from elmo.training.trainer import Objective, Progress, TrainConfig, fit

models, mix = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "trainable_lambda"
torch.manual_seed(0)
configure_threads(2)
cap_kernel_caches(256)
clf = ClassifyArgs(data_dir="data/ag_news", batch_size=64)
train, _, _ = load_agnews("data/ag_news", clf.val_fraction, 0)
bilm, vocab, _ = load_bilm(f"{models}/bilstm.pt")
docs = train.subset(np.arange(6400))
corpus = encode_corpus(docs.tokens, vocab, docs.labels, clf.max_length, bilm.config.chars_per_token)
corpus.attach_layers(compute_layers(bilm, corpus, torch.device("cpu"), None))
batches = corpus.batches(clf.batch_size, clf.max_tokens, shuffle=True, seed=0)
model = ElmoClassifier(bilm, clf.classifier_config(mix))


def train_on(index) -> float:
    objective = Objective(batches=lambda epoch: (corpus.collate(i) for i in index), loss_fn=classifier_loss,
                          validate=lambda: {"none": 0.0}, monitor="none", maximize=False)
    start = time.perf_counter()
    fit(model, objective, TrainConfig(epochs=1, lr=clf.lr), torch.device("cpu"), None, progress=Progress(quiet=True))
    return time.perf_counter() - start


train_on(batches[:50])
timed = batches[50:100]
seconds = train_on(timed)
with profile(activities=[ProfilerActivity.CPU]) as prof:
    train_on(timed)
self_seconds = {e.key: e.self_cpu_time_total / 1e6 for e in prof.key_averages()}
total = sum(self_seconds.values())
flops = task_encoder_flops(model, sum(len(i) * int(corpus.lengths[i].max()) for i in timed))
forward, backward = self_seconds["aten::mkldnn_rnn_layer"], self_seconds["aten::mkldnn_rnn_layer_backward"]
peak = matmul_peak(torch.device("cpu"), torch.float32)
print(f"{mix}: 50 batches, {len(np.concatenate(timed))} documents, {seconds:.2f} s")
print(f"fp32 matmul peak {peak:.0f} GFLOP/s (fastest 2048 x 2048 product of 20)")
print(f"whole step: {flops / seconds / 1e9:.1f} GFLOP/s ({flops / seconds / 1e9 / peak:.0%} of the peak)")
print(f"LSTM kernels: forward {flops / 3 / forward / 1e9:.1f}, backward {2 * flops / 3 / backward / 1e9:.1f} GFLOP/s "
      f"({flops / (forward + backward) / 1e9 / peak:.0%} of the peak together); "
      f"{(forward + backward) / total:.0%} of the profiled CPU time")
print("largest shares of the profiled CPU time (self):")
for name, s in sorted(self_seconds.items(), key=lambda kv: -kv[1])[:12]:
    print(f"  {s / total:6.1%}  {name}")
