#!/bin/bash
# Does the lower-perplexity biLM buy accuracy? old vs new ELMO.py defaults, 3 seeds each, then classification.py
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
export PYTHONUNBUFFERED=1
mkdir -p data && ln -sfn $PWD/.gpudata/ag_news data/ag_news
OLD="--lr 2e-3 --warmup-steps 0 --dropout 0.2"
for s in 0 1 2; do
  python3 ELMO.py --seed $s --models-dir /tmp/m/new$s --results-dir /tmp/r/new$s --images-dir /tmp/i/new$s --threads 2 --quiet > $OUT/lm_new$s.log 2>&1 &
  python3 ELMO.py --seed $s $OLD --models-dir /tmp/m/old$s --results-dir /tmp/r/old$s --images-dir /tmp/i/old$s --threads 2 --quiet > $OUT/lm_old$s.log 2>&1 &
done
wait
for v in new old; do for s in 0 1 2; do
  python3 classification.py --seed $s --models-dir /tmp/m/$v$s --results-dir /tmp/r/$v$s --images-dir /tmp/i/$v$s --threads 2 --quiet > $OUT/cls_$v$s.log 2>&1 &
done; done
wait
python3 - <<'PY'
import json, os
out = {}
for v in ("new", "old"):
    for s in (0, 1, 2):
        d = f"/tmp/r/{v}{s}"
        try:
            lm = json.load(open(d + "/lm.json")); cls = json.load(open(d + "/classification.json"))
        except Exception as e:
            print(v, s, "missing", e); continue
        out[f"{v}{s}"] = {"config": {k: lm["config"][k] for k in ("lr", "warmup_steps", "dropout", "seed")},
                          "val_ppl": [lm["val"]["forward_perplexity"], lm["val"]["backward_perplexity"]],
                          "test_ppl": [lm["test"]["forward_perplexity"], lm["test"]["backward_perplexity"]],
                          "test_accuracy": {k: cls[k]["test"]["accuracy"] for k in ("trainable_lambda", "frozen_lambda", "learned_function")},
                          "test_f1": {k: cls[k]["test"]["f1"] for k in ("trainable_lambda", "frozen_lambda", "learned_function")},
                          "precision": cls["precision"], "device": "cuda"}
        print(v, s, [round(x, 1) for x in out[f"{v}{s}"]["test_ppl"]], {k: round(x, 4) for k, x in out[f"{v}{s}"]["test_accuracy"].items()})
json.dump(out, open(os.environ["OUT"] + "/ppl_vs_accuracy.json", "w"), indent=1)
PY
