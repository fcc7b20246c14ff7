"""`python -m elmo bench` without the script memory runs (`memory_docs=()`; on the command line `--memory-docs` with no
value), writing this folder's bench.json:

    python results/experiments/bench_avx2/run_bench.py

No models/bilstm.pt is needed: the embedding and classifier sections then use a randomly initialised biLM of the
default sizes (speed does not depend on the weights).
"""

from pathlib import Path

from elmo.bench.speed import BenchArgs, bench

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":  # the sections run in spawned processes, which import this file again
    bench(BenchArgs(models_dir=str(HERE / "no_models"), out=str(HERE / "bench.json"), memory_docs=()))
