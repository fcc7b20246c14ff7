#!/bin/bash
# model-selection noise: trainable λ, seeds 0-2, validation share 0.05 and 0.10, per-epoch test accuracy tracked,
# no early stop (patience 5 = epochs); selection by F1 and by loss computed afterwards from the histories
cd /tmp/timing
run() {
  s=$1; v=$2; out=/tmp/sel/seed_${s}_val_${v}
  mkdir -p $out/models && cp /tmp/studyrepo/runs/study/seed_$s/models/{bilstm.pt,forward.pt,backward.pt,word2idx.pkl} $out/models/
  /usr/bin/time -v -o $out/time.txt python -m elmo classify --seed $s --val-fraction $v --settings trainable_lambda \
    --patience 5 --track-test --threads 1 --quiet --models-dir $out/models --results-dir $out/results --images-dir $out/images \
    > $out/log.txt 2>&1
  echo "$(date +%T) done seed $s val $v rc $?"
}
export -f run
printf "%s\n" "0 0.05" "0 0.1" "1 0.05" "1 0.1" "2 0.05" "2 0.1" | xargs -P 2 -L 1 bash -c 'run $0 $1'
