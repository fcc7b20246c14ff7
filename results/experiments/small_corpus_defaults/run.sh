#!/usr/bin/env bash
# A first run on a small corpus: both scripts with the corpus-adaptive defaults (--batch-size, --init-embeddings
# auto) and with the fixed values the full sample resolves to (--batch-size 64 --init-embeddings word2vec), then
# the README's smoke command; 1 thread per run, two runs side by side on 2 cores. Writes runs/small_corpus/<name>-s<seed>/.
# Collect with: python results/experiments/small_corpus_defaults/collect.py runs/small_corpus > summary.json
set -euo pipefail
cd "$(dirname "$0")/../../.."
one() {  # name seed "ELMO.py flags" "classification.py flags"
  local d=runs/small_corpus/$1-s$2
  rm -rf "$d"
  python ELMO.py --seed "$2" --threads 1 --quiet --models-dir "$d/models" --results-dir "$d/results" --images-dir "$d/images" $3
  python classification.py --seed "$2" --threads 1 --quiet --models-dir "$d/models" --results-dir "$d/results" --images-dir "$d/images" $4
}
for s in 1 2 0; do one defaults_2000_docs_1_epoch "$s" "--max-docs 2000 --epochs 1" "--max-docs 2000 --epochs 1"; done &
for s in 1 2; do one smoke_4000_docs_2_epochs "$s" "--max-docs 4000 --epochs 2" "--max-docs 4000 --epochs 2"; done
wait
for s in 1 2; do one fixed_2000_docs_1_epoch "$s" "--max-docs 2000 --epochs 1 --batch-size 64 --init-embeddings word2vec" \
  "--max-docs 2000 --epochs 1 --batch-size 64" & done
wait
