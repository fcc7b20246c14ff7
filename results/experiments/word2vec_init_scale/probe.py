"""Norms of h0/h1/h2, the "bank" cosine per layer and the test accuracies of each smoke biLM under DIR. Usage: python probe.py DIR"""
import glob
import json
import sys

import torch

sys.path.insert(0, ".")
from elmo import ElmoEmbedder

out = {}
for d in sorted(glob.glob(sys.argv[1] + "/*_seed[12]/models")):
    name = d.split("/")[-2]
    emb = ElmoEmbedder.from_pretrained(d, precision="auto")  # the precision the recorded probe used
    a = "the bank raised interest rates on friday".split()
    b = "fans crowded the river bank to watch the race".split()
    va, vb = emb.embed_sentence(a), emb.embed_sentence(b)  # (3, T, D)
    va, vb = torch.as_tensor(va), torch.as_tensor(vb)
    cos = [float(torch.nn.functional.cosine_similarity(va[k, 1], vb[k, 4], dim=0)) for k in range(3)]
    norms = [float(va[k].norm(dim=-1).mean()) for k in range(3)]
    cls = json.load(open(d.replace("models", "results") + "/classification.json"))
    lm = json.load(open(d.replace("models", "results") + "/lm.json"))
    out[name] = {"bank_cosine_h0_h1_h2": cos, "mean_norm_h0_h1_h2": norms,
                 "test_accuracy": {k: cls[k]["test"]["accuracy"] for k in ("trainable_lambda", "frozen_lambda", "learned_function")},
                 "test_perplexity": [lm["test"]["forward_perplexity"], lm["test"]["backward_perplexity"]]}
    print(name, json.dumps(out[name]))
json.dump(out, open(sys.argv[1] + "/probe.json", "w"), indent=1)
