#!/usr/bin/env bash
# A first run on a small corpus: both scripts at the corpus-adaptive defaults (--batch-size, --init-embeddings auto),
# at the fixed values the full sample resolves to (--batch-size 64 --init-embeddings word2vec), and candidate smoke
# commands. One thread per run, two runs side by side on the 2 cores; the README's smoke command (docs_6000_epochs_2)
# was also timed alone with 2 threads (results/timing/smoke/). Each run writes runs/small_corpus/<name>-s<seed>/.
# Summary: python results/experiments/small_corpus_defaults/collect.py runs/small_corpus > summary.json
set -euo pipefail
cd "$(dirname "$0")/../../.."
one() {  # name seed flags (the same for both scripts) [ELMO.py-only flags] [classification.py-only flags]
  local d=runs/small_corpus/$1-s$2
  rm -rf "$d"
  python ELMO.py --seed "$2" --threads 1 --quiet --models-dir "$d/models" --results-dir "$d/results" --images-dir "$d/images" $3 ${4:-}
  python classification.py --seed "$2" --threads 1 --quiet --models-dir "$d/models" --results-dir "$d/results" --images-dir "$d/images" $3 ${5:-}
}
for s in 1 2 0; do one defaults_2000_docs_1_epoch "$s" "--max-docs 2000 --epochs 1"; done &
for s in 1 2; do one fixed_2000_docs_1_epoch "$s" "--max-docs 2000 --epochs 1 --batch-size 64" "--init-embeddings word2vec"; done
wait
for s in 1 2; do one docs_4000_epochs_2 "$s" "--max-docs 4000 --epochs 2"; done &
one docs_6000_epochs_2 2 "--max-docs 6000 --epochs 2"
one docs_8000_epochs_2 2 "--max-docs 8000 --epochs 2"
wait
