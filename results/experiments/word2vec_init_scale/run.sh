#!/bin/bash
# smoke-scale check of the Word2Vec-initialisation lead: 2,000 documents, 1 epoch, init word2vec vs none
cd /tmp/timing
for s in 1 2; do for init in word2vec none; do
  out=/tmp/w2v/${init}_seed$s
  python ELMO.py --max-docs 2000 --epochs 1 --seed $s --init-embeddings $init --quiet --models-dir $out/models --results-dir $out/results --images-dir $out/images > $out.lm.log 2>&1
  python classification.py --max-docs 2000 --epochs 1 --seed $s --quiet --models-dir $out/models --results-dir $out/results --images-dir $out/images > $out.cls.log 2>&1
  echo "$(date +%T) $init seed $s rc $?"
done; done
