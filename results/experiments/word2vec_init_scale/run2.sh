#!/bin/bash
cd /tmp/timing
for s in 1 2; do init=word2vec-centered
  out=/tmp/w2v/${init}_seed$s
  python ELMO.py --max-docs 2000 --epochs 1 --seed $s --init-embeddings $init --quiet --models-dir $out/models --results-dir $out/results --images-dir $out/images > $out.lm.log 2>&1
  python classification.py --max-docs 2000 --epochs 1 --seed $s --quiet --models-dir $out/models --results-dir $out/results --images-dir $out/images > $out.cls.log 2>&1
  echo "$(date +%T) $init seed $s rc $?"
done
out=/tmp/w2v/full_centered_seed0
python ELMO.py --seed 0 --init-embeddings word2vec-centered --models-dir $out/models --results-dir $out/results --images-dir $out/images > $out.lm.log 2>&1
echo "$(date +%T) full centered seed 0 rc $?"
