"""One nn.LSTM pass at the classifier's and the LM's shapes, with oneDNN's kernels and with PyTorch's own.

    python results/experiments/classifier_avx2/lstm_microbench.py THREADS

Prints milliseconds per training pass (forward + backward, the input needing a gradient as in both models) and
per inference pass (no autograd), the faster of two alternating rounds of each kernel.
"""

import sys
import time
import warnings

import torch

warnings.filterwarnings("ignore")
torch.manual_seed(0)
threads = int(sys.argv[1])
torch.set_num_threads(threads)
SHAPES = {"classifier": (64, 40, 640, 128), "classifier_pred": (256, 40, 640, 128), "lm": (128, 32, 256, 256),
          "lm_long": (64, 64, 256, 256)}  # batch, steps, input width, hidden width


def bench(batch: int, steps: int, width: int, hidden: int, train: bool, reps: int = 15) -> list[float]:
    lstm = torch.nn.LSTM(width, hidden, batch_first=True)
    x = torch.randn(batch, steps, width, requires_grad=train)

    def run(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            if train:
                y, _ = lstm(x)
                y.sum().backward()
            else:
                with torch.no_grad():
                    lstm(x)
        return (time.perf_counter() - start) / n

    out = []
    for enabled in (True, False, True, False):
        with torch.backends.mkldnn.flags(enabled=enabled):
            run(2)
            out.append(run(reps) * 1000)
    return out


for name, shape in SHAPES.items():
    for train in (True, False):
        r = bench(*shape, train)
        onednn, native = min(r[0], r[2]), min(r[1], r[3])
        print(f"{threads}t {name:16s} {'train' if train else 'infer'}: oneDNN {onednn:7.1f} ms  native {native:7.1f} ms  "
              f"ratio {onednn / native:.2f}")
