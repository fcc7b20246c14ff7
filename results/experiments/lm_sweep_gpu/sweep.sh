#!/bin/bash
# LM schedule sweep on the GPU: validation perplexity of ELMO.py variants (same data, seed, epochs)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
export PYTHONUNBUFFERED=1
mkdir -p data && ln -sfn $PWD/.gpudata/ag_news data/ag_news
nvidia-smi --query-gpu=name,memory.total --format=csv
python3 -c "import torch; print(torch.__version__, torch.cuda.is_available())"
run() { name=$1; shift; python3 ELMO.py --models-dir /tmp/m/$name --results-dir /tmp/r/$name --images-dir /tmp/i/$name --threads 2 --quiet "$@" > $OUT/$name.log 2>&1; echo "$name done rc=$?"; }
run lr3_w300 --lr 3e-3 --warmup-steps 300 &
run lr4_w300 --lr 4e-3 --warmup-steps 300 &
run lr5_w300 --lr 5e-3 --warmup-steps 300 &
run drop01 --dropout 0.1 &
run lr4_w300_drop01 --lr 4e-3 --warmup-steps 300 --dropout 0.1 &
run epochs5 --epochs 5 &
wait
python3 - <<'PY'
import json, glob, os
rows = {}
for f in sorted(glob.glob('/tmp/r/*/lm.json')):
    d = json.load(open(f)); n = f.split('/')[3]
    rows[n] = {"val": [d['val']['forward_perplexity'], d['val']['backward_perplexity']],
               "test": [d['test']['forward_perplexity'], d['test']['backward_perplexity']],
               "seconds": d['seconds'], "history": {k: [h.get('val_perplexity') for h in v.get('history', [])] for k, v in d['directions'].items()}}
    print(n, [round(x, 1) for x in rows[n]['val']], [round(x, 1) for x in rows[n]['test']], round(d['seconds']), rows[n]['history'])
json.dump(rows, open(os.environ['OUT'] + '/sweep.json', 'w'), indent=1)
PY
