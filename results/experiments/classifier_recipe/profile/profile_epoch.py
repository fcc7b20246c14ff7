"""Profile one training epoch of classification.py (trainable λ, batches of 64, one thread) with torch.profiler.

    python results/experiments/classifier_recipe/profile/profile_epoch.py MODELS_DIR > trainable_lambda_one_epoch.txt

The table gives each operator's share of the epoch's CPU time (training steps and the validation pass).
"""

import sys

from torch.profiler import ProfilerActivity, profile

import elmo.pipelines.task as task
from elmo.cli import run

models_dir = sys.argv[1] if len(sys.argv) > 1 else "models"
sys.argv = ["classification.py", "--models-dir", models_dir, "--results-dir", "/tmp/profile_epoch/results",
            "--images-dir", "/tmp/profile_epoch/images", "--max-docs", "4000", "--batch-size", "64", "--epochs", "1",
            "--mixes", "trainable_lambda", "--threads", "1", "--quiet", "--cache-layers", "memory"]
fit = task.fit


def profiled_fit(*args, **kwargs):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        out = fit(*args, **kwargs)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=35))
    return out


task.fit = profiled_fit
run("classify", prog="classification.py")
