"""Every sentence of the report that compares or judges numbers, computed from the results.

Owns :func:`analysis`: the report states nothing about the results that is not computed here from
the JSON (:func:`~lab.report.results.load_results`), so when ELMo loses somewhere the report says so.
The sentences are plain text (no markup); the PDF layout (:mod:`lab.report.pdf`) only places them.
"""

from __future__ import annotations

import numpy as np

from elmo.model.mix import LAYER_MIXES

from .results import LABELS, STATIC, elmo_mixes, experiment_changes, methods, reference_run
from .tables import text_label, text_order


def _compare(name_a: str, a: dict, name_b: str, b: dict) -> tuple[str, bool]:
    """A sentence comparing two methods' test accuracy and macro-F1, and whether ``a`` loses on either."""
    da, df = (a["accuracy"] - b["accuracy"]) * 100, (a["f1"] - b["f1"]) * 100
    if da > 0 and df > 0:
        verdict = "ahead on both"
    elif da < 0 and df < 0:
        verdict = "behind on both"
    elif da == 0 and df == 0:
        verdict = "level"
    else:
        verdict = "ahead on one and not the other"
    text = (f"{name_a} vs {name_b}: test accuracy {a['accuracy']:.4f} vs {b['accuracy']:.4f} ({da:+.2f} points), "
            f"macro-F1 {a['f1']:.4f} vs {b['f1']:.4f} ({df:+.2f} points): {verdict}.")
    return text, da < 0 or df < 0


def _best_mix(res: dict) -> str:
    """The ELMo layer mix with the highest test accuracy."""
    cls = res["classification"]
    return max(elmo_mixes(res), key=lambda m: cls[m]["test"]["accuracy"])


def _best_static(test: dict[str, dict]) -> str | None:
    """The static embedding (:data:`STATIC`) with the highest test accuracy among ``test``'s methods, or ``None``."""
    return max((m for m in STATIC if m in test), key=lambda m: test[m]["accuracy"], default=None)


def _elmo_vs_static(res: dict) -> list[str]:
    """The best ELMo layer mix against every baseline, and what the contextual layers are worth."""
    all_methods = methods(res)
    test = {m: all_methods[m]["test"] for m in all_methods}
    best = _best_mix(res)
    chosen = res["classification"].get("best_mix", best)
    text = [f"The best ELMo layer mix on test accuracy is {LABELS[best]} ({test[best]['accuracy']:.4f}, macro-F1 "
            f"{test[best]['f1']:.4f}); the mix chosen on validation macro-F1 is {LABELS[chosen]} "
            f"({test[chosen]['accuracy']:.4f})."]
    losses = []
    for other in (m for m in (*STATIC, "tfidf_logreg") if m in test):
        sentence, lost = _compare(LABELS[best], test[best], LABELS[other], test[other])
        text.append(sentence)
        if lost:
            losses.append(LABELS[other])
    if losses:
        text.append(f"ELMo does not win everywhere: it loses to {', '.join(losses)} on at least one of test "
                    "accuracy and macro-F1 in this run.")
    else:
        text.append("ELMo's best layer mix is ahead of every baseline on both test accuracy and macro-F1 in this run.")
    static_best = _best_static(test)
    if static_best:
        gain = test[best]["accuracy"] - test[static_best]["accuracy"]
        text.append(f"Contextual layers are worth {gain * 100:+.2f} accuracy points over the best static embedding "
                    f"({LABELS[static_best]}) with the identical head, data and training schedule, so the "
                    "difference comes from the representation alone.")
        gaps = {m: all_methods[m]["train"]["accuracy"] - test[m]["accuracy"] for m in (best, static_best)}
        text.append(f"Train-test accuracy gap: {gaps[best] * 100:.1f} points for {LABELS[best]}, "
                    f"{gaps[static_best] * 100:.1f} for {LABELS[static_best]}.")
    return text


def _lambda_weights(cls: dict, mix: str) -> str:
    """The softmax weights λ and γ of one scalar mix, and where the weight sits."""
    weights = cls[mix]["lambdas"]
    top = int(np.argmax(weights))
    spread = max(abs(w - 1 / len(weights)) for w in weights)
    return (f"{LABELS[mix]}: softmax weights λ = ({', '.join(f'{w:.3f}' for w in weights)}) for "
            f"(h0 … h{len(weights) - 1}), γ = {cls[mix]['gamma']:.3f}; the largest weight is on h{top}, "
            f"and the weights are at most {spread:.3f} from the uniform {1 / len(weights):.3f}.")


def _lambda(res: dict) -> list[str]:
    """The ELMo layer mixes ranked by test accuracy, compared pairwise, and their layer weights."""
    cls = res["classification"]
    test = {m: cls[m]["test"] for m in elmo_mixes(res)}
    ranked = sorted(test, key=lambda s: -test[s]["accuracy"])
    text = ["Test accuracy by layer combination: " + "; ".join(
        f"{LABELS[s]} {test[s]['accuracy']:.4f} (macro-F1 {test[s]['f1']:.4f})" for s in ranked) + "."]
    for a, b in (("trainable_lambda", "frozen_lambda"), ("learned_function", "trainable_lambda")):
        if a in cls and b in cls:
            text.append(_compare(LABELS[a], cls[a]["test"], LABELS[b], cls[b]["test"])[0])
    text += [_lambda_weights(cls, s) for s in ("trainable_lambda", "frozen_lambda") if cls.get(s, {}).get("lambdas")]
    if "frozen_lambda" in cls and cls["frozen_lambda"].get("lambdas"):
        w0 = cls["frozen_lambda"]["lambdas"][0]
        if w0 > 0.5:
            text.append(f"The random frozen draw puts {w0:.0%} of the weight on h0, the context-free token layer, "
                        "so this classifier sees mostly static vectors; its gap to trainable λ measures what the "
                        "contextual layers add when the mix is chosen by the task.")
    return text


def _diagnostic(res: dict, name: str, mix: str) -> str | None:
    """One diagnostic run's result for one ELMo layer mix, against its reference run and Word2Vec
    (``None`` when the reference run lacks the mix)."""
    exp = res["experiments"][name]
    ref_name, ref = reference_run(res, exp["classification"])
    if mix not in ref:
        return None
    a, b = ref[mix]["test"], exp["classification"][mix]["test"]
    changes = ", ".join(experiment_changes(res, name)) or "no flag changed"
    versus = "" if ref is exp["classification"] else f" ({(b['accuracy'] - a['accuracy']) * 100:+.2f} points vs {ref_name})"
    sentence = f"{name} ({changes}): {LABELS[mix]} test accuracy {b['accuracy']:.4f}{versus}, macro-F1 {b['f1']:.4f}"
    if exp.get("lm"):
        sentence += "; test perplexity " + ", ".join(
            f"{d} {exp['lm']['test'][f'{d}_perplexity']:.1f}" for d in ("forward", "backward"))
    w2v = res["baselines"].get("word2vec")
    if w2v:
        w2v_acc = w2v["test"]["accuracy"]
        sentence += f"; vs Word2Vec ({w2v_acc:.4f}): {(b['accuracy'] - w2v_acc) * 100:+.2f} points"
    return sentence + "."


def _diagnostics(res: dict) -> list[str]:
    """A sentence per diagnostic run and ELMo layer mix it trained (see :func:`_diagnostic`)."""
    cls = res["classification"]
    sentences = (_diagnostic(res, name, s) for name, exp in res.get("experiments", {}).items()
                 for s in LAYER_MIXES if s in exp["classification"] and s in cls)
    return [s for s in sentences if s is not None]


def _diagnostics_reference(res: dict) -> list[str]:
    """What the diagnostic runs' table compares with (only when there are diagnostic sentences)."""
    w2v = res["baselines"].get("word2vec")
    return ["Each row is ELMo with trainable λ and the same head; test accuracy of Word2Vec with the same head: "
            + (f"{w2v['test']['accuracy']:.4f}." if w2v else "not run.")]


def _init(res: dict) -> list[str]:
    """What initialising the biLM's token embeddings from Word2Vec did (empty without such a run)."""
    init = res.get("init")
    if not init:
        return []
    none, w2v = init["none"], init["word2vec"]
    words = [f"{d} test perplexity {none['lm']['test'][f'{d}_perplexity']:.1f} → "
             f"{w2v['lm']['test'][f'{d}_perplexity']:.1f}" for d in ("forward", "backward")]
    text = ["Initialising both LMs' token embeddings from Word2Vec instead of at random "
            f"(--init-embeddings none → word2vec; run '{init['name']}' vs {init.get('reference', 'the main run')}, "
            "everything else unchanged): " + "; ".join(words) + "."]
    for s in (s for s in LAYER_MIXES if s in none["classification"] and s in w2v["classification"]):
        a, b = none["classification"][s]["test"]["accuracy"], w2v["classification"][s]["test"]["accuracy"]
        verdict = "helps" if b > a else "does not help" if b < a else "makes no difference"
        text.append(f"{LABELS[s]} test accuracy {a:.4f} → {b:.4f}: the Word2Vec initialisation "
                    f"{verdict} here ({(b - a) * 100:+.2f} points).")
    return text


def _head(res: dict) -> list[str]:
    """Whether the static baselines' head flags equal the ELMo run's."""
    mismatch = res["baselines"].get("head_mismatch")
    if mismatch:
        return [f"Head flags differing from the ELMo run: {', '.join(mismatch)}."]
    return ["The head flags equal the ELMo run's."]


def _context_word(item: dict) -> str:
    """Whether a word's contextual vectors separate its topics, from the cosines ``baselines.json`` records."""
    c = item["cosine"]
    top = max((k for k in c if k not in ("h0", "mix")), key=lambda k: c[k]["same_topic"] - c[k]["cross_topic"])
    gap = c[top]["same_topic"] - c[top]["cross_topic"]
    return (f"“{item['word']}”: the contextual layers give every occurrence its own vector "
            f"(h1/h2 cosines well below 1); in {top} occurrences from the same topic are "
            + (f"more similar than occurrences across topics by {gap:.3f} on average." if gap > 0 else
               f"not more similar than across topics ({gap:+.3f}): the vectors differ, but not by topic.")
            + " h0 and every static embedding give one vector for all of them.")


def _context(res: dict) -> list[str]:
    """A sentence per context word of ``baselines.json``, or one saying there is none."""
    context = res["baselines"].get("context") or []
    if not context:
        return ["No candidate word occurred in two topics of the test set; nothing to show."]
    return [_context_word(item) for item in context]


def _points(x: float) -> str:
    return f"{x * 100:+.2f}"


def _verdict(c: dict, alpha: float = 0.05) -> str:
    """``significant`` / ``not significant`` at ``alpha`` for one comparison of ``seeds.json``."""
    if c["p_value"] is None:
        return "untestable with one seed"
    return ("significant" if c["p_value"] < alpha else "not significant") + f" at {alpha}"


def _comparison_sentence(c: dict) -> str:
    """One paired comparison of ``seeds.json``: mean difference, CI, p, wins, McNemar per seed."""
    ci = "" if c["ci95"] is None else f" (95% CI [{_points(c['ci95'][0])}, {_points(c['ci95'][1])}])"
    p = "n/a" if c["p_value"] is None else f"{c['p_value']:.3g}"
    text = (f"{LABELS.get(c['a'], c['a'])} − {LABELS.get(c['b'], c['b'])}: {_points(c['mean_difference'])} test "
            f"accuracy points{ci}, paired t-test p = {p} over {c['n']} seeds, ahead in {c['wins']} of {c['n']}: "
            f"{_verdict(c)}")
    per_seed = c.get("mcnemar_per_seed") or []
    if per_seed:
        significant = sum(m["p_value"] < 0.05 for m in per_seed)
        text += f"; McNemar's test on the test documents: p < 0.05 in {significant} of {len(per_seed)} seeds"
    return text + "."


def seed_comparison(study: dict, a: str, b: str, metric: str = "test_accuracy") -> dict | None:
    """The entry of ``seeds.json``'s comparisons for ``a`` vs ``b`` on ``metric`` (``None`` when absent)."""
    return next((c for c in study["comparisons"] if (c["a"], c["b"], c["metric"]) == (a, b, metric)), None)


def best_over_seeds(study: dict) -> str:
    """The ELMo layer mix with the highest mean test accuracy over the study's seeds."""
    elmo = [m for m in LAYER_MIXES if m in study["methods"]]
    return max(elmo, key=lambda m: study["methods"][m]["summary"]["test_accuracy"]["mean"])


def _seeds(res: dict) -> list[str]:
    """The headline over seeds (``seeds.json``): mean ± std per method, then the paired comparisons."""
    study = res.get("seeds")
    if not study:
        return []
    summary = {m: e["summary"]["test_accuracy"] for m, e in study["methods"].items()}
    seeds = ", ".join(map(str, study["seeds"]))
    text = [f"Over {len(study['seeds'])} seeds ({seeds}; each seed re-trains the biLM and every classifier and "
            "re-draws the validation split's shuffling, the initialisation and dropout), test accuracy mean ± std: "
            + "; ".join(f"{LABELS.get(m, m)} {v['mean']:.4f} " + (f"± {v['std']:.4f}" if v["std"] is not None
                        else "(one seed)") for m, v in summary.items()) + "."]
    best = best_over_seeds(study)
    for b in ("word2vec", "svd", "tfidf_logreg"):
        c = seed_comparison(study, best, b)
        if c:
            text.append(_comparison_sentence(c))
    stds = [v["std"] for v in summary.values() if v["std"] is not None]
    if stds:
        text.append(f"The seed-to-seed standard deviation of one method's test accuracy is {min(stds) * 100:.2f}–"
                    f"{max(stds) * 100:.2f} points, so a single-seed difference of that size is noise.")
    return text


def _seeds_mixes(res: dict) -> list[str]:
    """The ELMo layer mixes against each other over seeds, and the gated learned function against the MLP."""
    study = res.get("seeds")
    if not study:
        return []
    pairs = [(a, b) for i, a in enumerate(LAYER_MIXES) for b in LAYER_MIXES[i + 1:]]
    pairs.append(("learned_function", "learned_function_mlp"))
    return [_comparison_sentence(c) for a, b in pairs if (c := seed_comparison(study, a, b))]


def _targets(res: dict) -> list[str]:
    """The project's accuracy goals, each met or not, from ``seeds.json`` (then the time and memory goals)."""
    study = res.get("seeds")
    if not study:
        return []
    acc = {m: e["summary"]["test_accuracy"]["mean"] for m, e in study["methods"].items()}
    best = best_over_seeds(study)
    text = []
    w2v = seed_comparison(study, best, "word2vec")
    if w2v:
        met = w2v["mean_difference"] >= 0.01 and w2v["p_value"] is not None and w2v["p_value"] < 0.05
        text.append(f"Best ELMo layer mix ≥ Word2Vec + 1.0 point with p < 0.05: {'met' if met else 'not met'} "
                    f"({_points(w2v['mean_difference'])} points, p = "
                    + ("n/a" if w2v["p_value"] is None else f"{w2v['p_value']:.3g}") + ").")
    if "tfidf_logreg" in acc:
        gap = acc[best] - acc["tfidf_logreg"]
        text.append(f"Best ELMo layer mix ≥ TF-IDF + LR + 1.5 points: {'met' if gap >= 0.015 else 'not met'} "
                    f"({_points(gap)} points).")
    mixes = [m for m in LAYER_MIXES if m in acc]
    spread = acc[best] - min(acc[m] for m in mixes)
    text.append(f"All ELMo layer mixes within 1.0 point of the best: {'met' if spread <= 0.01 else 'not met'} "
                f"(largest gap {spread * 100:.2f} points).")
    ppl = study.get("bilm", {}).get("summary", {})
    if "test_forward_perplexity" in ppl:
        f, b = ppl["test_forward_perplexity"]["mean"], ppl["test_backward_perplexity"]["mean"]
        text.append(f"biLM test perplexity ≤ 90 in both directions: {'met' if max(f, b) <= 90 else 'not met'} "
                    f"(mean over seeds: forward {f:.1f}, backward {b:.1f}).")
    return text + _time_and_memory_targets(res.get("timing") or {})


#: the project's performance goals: the default pipeline's minutes per precision, classification.py's peak GB
TIME_TARGET_MINUTES, MEMORY_TARGET_GB = {"bf16": 20, "fp32": 25}, 5.0


def _time_and_memory_targets(timing: dict) -> list[str]:
    """The wall-time and peak-memory goals, from the timed default runs (``results/timing``)."""
    text = []
    for precision, limit in TIME_TARGET_MINUTES.items():
        runs = timing.get(precision, {})
        if {"ELMO.py", "classification.py"} <= set(runs):
            minutes = (runs["ELMO.py"]["seconds"] + runs["classification.py"]["seconds"]) / 60
            text.append(f"`python ELMO.py && python classification.py` ≤ {limit} minutes in {precision}: "
                        f"{'met' if minutes <= limit else 'not met'} ({minutes:.1f} minutes: "
                        f"{runs['ELMO.py']['seconds'] / 60:.1f} + {runs['classification.py']['seconds'] / 60:.1f}).")
    peaks = {p: runs["classification.py"]["peak_gb"] for p, runs in timing.items() if "classification.py" in runs}
    if peaks:
        worst = max(peaks.values())
        text.append(f"`classification.py` peak memory ≤ {MEMORY_TARGET_GB:g} GB: {'met' if worst <= MEMORY_TARGET_GB else 'not met'} ("
                    + ", ".join(f"{gb:.2f} GB in {p}" for p, gb in sorted(peaks.items())) + ").")
    return text


def _share_docs(size: dict) -> str:
    docs = sorted({d for d in size["labelled_documents"] if d is not None})
    return f"{'/'.join(f'{d:,}' for d in docs)} labelled documents ({size['fraction']:.0%})"


def _curve_comparison(size: dict, b: str) -> dict | None:
    return next((c for c in size["comparisons"] if c["b"] == b), None)


def _learning_curve(res: dict) -> list[str]:
    """When ELMo pays (``learning_curve.json``): the best ELMo mix's (chosen on validation) lead over Word2Vec and
    TF-IDF + LR per share,
    where it is largest, the goals, and which method to pick for a given number of labelled documents."""
    curve = res.get("learning_curve")
    if not curve:
        return []
    sizes = list(curve["sizes"].values())
    seeds = sorted({s for size in sizes for s in size["seeds"]})
    text = [f"Learning curve over labelled data (results/learning_curve.json, seeds {', '.join(map(str, seeds))}): "
            "the classifiers train on class-balanced draws of " + ", ".join(f"{s['fraction']:.0%}" for s in sizes)
            + " of the labelled training documents, while the biLM, Word2Vec, SVD and TF-IDF's vocabulary learn "
            "from all the training text; validation split and early stopping as in the full-data runs. At each "
            "share the ELMo layer mix compared with the baselines is the one with the higher mean validation "
            "macro-F1."]
    for b in ("word2vec", "tfidf_logreg"):
        leads = [(size, c) for size in sizes if (c := _curve_comparison(size, b))]
        if not leads:
            continue
        per_share = "; ".join(f"{s['fraction']:.0%}: {_points(c['mean_difference'])} (p = "
                              + ("n/a" if c["p_value"] is None else f"{c['p_value']:.3g}") + ")" for s, c in leads)
        size, c = max(leads, key=lambda sc: sc[1]["mean_difference"])
        text.append(f"Best ELMo layer mix − {LABELS.get(b, b)} per share, test accuracy points: {per_share}. "
                    f"The lead is largest at {_share_docs(size)}: " + _comparison_sentence(c))
    text += _curve_goals(curve)
    picks = []
    for size in sizes:
        ranked = sorted(size["methods"], key=lambda m: -size["methods"][m]["summary"]["test_accuracy"]["mean"])
        first, second = ranked[0], ranked[1]
        c = next((c for c in size["comparisons"] if {c["a"], c["b"]} == {first, second}), None)
        close = "" if c is None else (" (ahead of " + LABELS.get(second, second) + " by "
                                      + f"{abs(c['mean_difference']) * 100:.2f} points, {_verdict(c)})")
        picks.append(f"{_share_docs(size)}: {LABELS.get(first, first)}{close}")
    text.append("Highest mean test accuracy per share: " + "; ".join(picks) + ".")
    return text


def _curve_goals(curve: dict) -> list[str]:
    """The learning curve's goals, each met or not: at <= 1,000 labelled documents the best ELMo leads Word2Vec
    and TF-IDF + LR by >= 3 points with paired p < 0.05; the best ELMo with 30% of the labels >= Word2Vec with all."""
    text = []
    small = [s for s in curve["sizes"].values() if max(d or 0 for d in s["labelled_documents"]) <= 1000]
    for size in small:
        for b in ("word2vec", "tfidf_logreg"):
            c = _curve_comparison(size, b)
            if c is None:
                continue
            met = c["mean_difference"] >= 0.03 and c["p_value"] is not None and c["p_value"] < 0.05
            text.append(f"Goal at {_share_docs(size)}, best ELMo ≥ {LABELS.get(b, b)} + 3 points with p < 0.05: "
                        f"{'met' if met else 'not met'} ({_points(c['mean_difference'])} points, p = "
                        + ("n/a" if c["p_value"] is None else f"{c['p_value']:.3g}") + ").")
    if not small:
        text.append("No share has at most 1,000 labelled documents, so the goal for scarce labels is not tested.")
    for c in curve.get("across_sizes", []):
        if c["a"].endswith("@0.3") and c["b"] == "word2vec@1":
            mix = c["a"].split("@")[0]
            met = c["mean_difference"] >= 0
            text.append(f"Goal, best ELMo ({LABELS.get(mix, mix)}) with 30% of the labels ≥ Word2Vec with all of them: "
                        f"{'met' if met else 'not met'} ({_points(c['mean_difference'])} points over {c['n']} seeds, "
                        + ("p n/a" if c["p_value"] is None else f"p = {c['p_value']:.3g}") + ").")
    return text


def _text_step(c: dict) -> str:
    """One entry of ``pretraining_text_curve.json``'s ``versus_full_text``: the text and method, the mean difference
    with its 95% CI, p and the seeds ahead."""
    ci = "" if c["ci95"] is None else f" [{_points(c['ci95'][0])}, {_points(c['ci95'][1])}]"
    p = "n/a" if c["p_value"] is None else f"{c['p_value']:.3g}"
    return (f"{text_label(c['a'].removeprefix('text '))}, {LABELS.get(c['method'], c['method'])}: "
            f"{_points(c['mean_difference'])}{ci}, p = {p}, ahead in {c['wins']} of {c['n']} ({_verdict(c)})")


def _text_curve(res: dict) -> list[str]:
    """More pre-training text (``pretraining_text_curve.json``): what each text is, the test accuracy per doubling
    of it per labelled share and method, each text against all the descriptions for the best ELMo mix and Word2Vec
    (paired over seeds), the biLM set-ups the corpus-adaptive defaults chose, and whether the extra text earns a
    place in the default run (a gain beyond the noise, p < 0.05, at every share measured)."""
    text_curve = res.get("pretraining_text_curve")
    if not text_curve:
        return []
    order = text_order(text_curve)
    texts = text_curve["texts"]
    seeds = sorted({s for t in texts.values() for z in t["curve"]["sizes"].values() for s in z["seeds"]})

    def tokens(v: str) -> str:
        counts = [c for c in texts[v]["train_tokens"] if c]
        return f"{np.mean(counts) / 1e6:.2f}M tokens" if counts else "tokens unknown"

    out = [f"Pre-training text (results/pretraining_text_curve.json, seeds {', '.join(map(str, seeds))}): the biLM, "
           "Word2Vec, SVD and TF-IDF's vocabulary are re-learnt from " + ", ".join(
               f"{text_label(v)} ({tokens(v)})" for v in order) + "; at each text the classifiers train on the same "
           "class-balanced labelled documents, so only the representations change."]
    for share, per_method in text_curve["accuracy_per_doubling"].items():
        parts = []
        for m, d in per_method.items():
            s = d["summary"]
            ci = "" if s["ci95"] is None else f" [{s['ci95'][0] * 100:+.2f}, {s['ci95'][1] * 100:+.2f}]"
            parts.append(f"{LABELS.get(m, m)} {s['mean'] * 100:+.2f}{ci}")
        out.append(f"With {float(share):.0%} of the labels, test accuracy points per doubling of the pre-training "
                   f"text (least-squares slope on log2 tokens, mean and 95% CI over seeds): " + "; ".join(parts) + ".")
        local = []
        for m in ("trainable_lambda", "word2vec"):
            have = [v for v in order if share in texts[v]["curve"]["sizes"] and m in texts[v]["curve"]["sizes"][share]["methods"]]
            pieces = []
            for a, b in zip(have, have[1:]):
                ta, tb = ([c for c in texts[v]["train_tokens"] if c] for v in (a, b))
                if ta and tb:
                    acc = [texts[v]["curve"]["sizes"][share]["methods"][m]["summary"]["test_accuracy"]["mean"]
                           for v in (a, b)]
                    doublings = np.log2(np.mean(tb) / np.mean(ta))
                    pieces.append(f"{text_label(a)} → {text_label(b)} {_points((acc[1] - acc[0]) / doublings)}")
            if pieces:
                local.append(f"{LABELS.get(m, m)}: " + ", ".join(pieces))
        if local:
            out.append(f"The same per doubling between consecutive texts (means over seeds), {float(share):.0%} of the "
                       "labels: " + "; ".join(local) + ".")
        steps = [c for c in text_curve["versus_full_text"] if c["share"] == share]
        if steps:
            out.append(f"Each text against all the descriptions, {float(share):.0%} of the labels, test accuracy "
                       "points (paired over seeds): " + "; ".join(_text_step(c) for c in steps) + ".")
    chosen = []
    for v in order:
        setups = [b for b in texts[v].get("bilm", []) if b]
        sizes = sorted({b["batch_size"] for b in setups if b.get("batch_size")})
        init = {b.get("word2vec_init") for b in setups}
        if setups:
            chosen.append(f"{text_label(v)}: batches of {'/'.join(map(str, sizes))}, "
                          + ("Word2Vec-initialised embeddings" if init == {True} else "random embeddings"
                             if init == {False} else "Word2Vec-initialised embeddings for some seeds only"))
    if len({c.split(': ', 1)[1] for c in chosen}) > 1:
        out.append("The biLM's corpus-adaptive defaults chose different set-ups per text (" + "; ".join(chosen)
                   + "), so a step between those texts measures the text and the set-up the defaults pick for it, "
                   "as a user running ELMO.py on that much text would get.")
    best = {share: size["best_elmo"] for share, size in texts.get("extra", {}).get("curve", {}).get("sizes", {}).items()}
    extra = [c for c in text_curve["versus_full_text"] if c["a"] == "text extra" and c["method"] == best.get(c["share"])]
    if extra:
        ahead = [c["mean_difference"] > 0 and c["p_value"] is not None and c["p_value"] < 0.05 for c in extra]
        where = "; ".join(f"{float(c['share']):.0%}: {_points(c['mean_difference'])} points, p = "
                          + ("n/a" if c["p_value"] is None else f"{c['p_value']:.3g}") for c in extra)
        out.append("Extra text in the default run: " + (
            f"the extra AG News text raises the ELMo mix chosen on validation beyond the noise at every labelled share "
            f"measured ({where}): pass --extra-text when the files are present (the default stays train.csv alone, "
            "which every other result here was measured on)." if all(ahead) else
            f"the extra AG News text raises the ELMo mix chosen on validation beyond the noise "
            f"{'at only some of the labelled shares' if any(ahead) else 'at none of the labelled shares'} measured "
            f"({where}), so ELMO.py keeps training on train.csv alone by default; --extra-text adds it."))
    return out


def _lambda_over_seeds(res: dict) -> list[str]:
    """The layer weights of each scalar mix over the study's seeds (``seeds.json``'s per-seed λ): their means, where
    the weight sits, and how much they move from seed to seed (empty without a study that recorded λ)."""
    study = res.get("seeds")
    if not study:
        return []
    text = []
    for mix in ("trainable_lambda", "learned_function", "frozen_lambda"):
        draws = [w for w in study["methods"].get(mix, {}).get("lambdas") or [] if w]
        if not draws:
            continue
        weights = np.array(draws)
        mean, spread = weights.mean(axis=0), weights.max(axis=0) - weights.min(axis=0)
        layers = ", ".join(f"h{j}" for j in range(len(mean)))
        what = {"trainable_lambda": "the softmax weights λ it learns",
                "learned_function": "the global part of its weights, softmax(w), to which the gate adds per token",
                "frozen_lambda": "the softmax weights λ, drawn at random from the seed and never trained"}[mix]
        text.append(f"{LABELS[mix]}, {what}: on average ({', '.join(f'{w:.3f}' for w in mean)}) on ({layers}) over "
                    f"{len(draws)} seeds, the most on h{int(np.argmax(mean))}; from seed to seed a weight moves by at "
                    f"most {spread.max():.3f}.")
    return text


def _headline(study: dict) -> str:
    """The best ELMo layer mix over seeds against every baseline, in one sentence (from ``seeds.json``)."""
    best = best_over_seeds(study)
    acc = study["methods"][best]["summary"]["test_accuracy"]
    leads, beyond = [], []
    for b in ("word2vec", "svd", "tfidf_logreg"):
        c = seed_comparison(study, best, b)
        if c is None:
            continue
        ci = "" if c["ci95"] is None else f", 95% CI [{_points(c['ci95'][0])}, {_points(c['ci95'][1])}]"
        p = "" if c["p_value"] is None else f", p = {c['p_value']:.3g}"
        leads.append(f"{LABELS.get(b, b)} by {_points(c['mean_difference'])} points ({c['wins']} of {c['n']} seeds{ci}{p})")
        if c["p_value"] is not None and c["p_value"] < 0.05 and c["mean_difference"] > 0:
            beyond.append(LABELS.get(b, b))
    spread = f" ± {acc['std']:.4f}" if acc["std"] is not None else ""
    verdict = ("ahead of every baseline beyond the noise" if len(beyond) == len(leads) else
               "ahead beyond the noise of " + ", ".join(beyond) + " only" if beyond else
               "ahead of no baseline beyond the noise")
    return (f"Over {len(study['seeds'])} seeds, the best ELMo layer mix, {LABELS.get(best, best)}, reaches "
            f"{acc['mean']:.4f}{spread} test accuracy and leads " + "; ".join(leads)
            + f": {verdict} (paired t-test over seeds, p < 0.05).")


def _mixes_verdict(study: dict) -> str | None:
    """The best ELMo layer mix over seeds against the other mixes, in one sentence (``None`` without them)."""
    best = best_over_seeds(study)
    parts = []
    for other in (m for m in (*LAYER_MIXES, "learned_function_mlp") if m != best and m in study["methods"]):
        c, sign = seed_comparison(study, best, other), 1
        if c is None:
            c, sign = seed_comparison(study, other, best), -1
        if c is None or c["p_value"] is None:
            continue
        parts.append(f"{LABELS.get(other, other)} by {_points(sign * c['mean_difference'])} points "
                     f"(p = {c['p_value']:.3g}, {_verdict(c)})")
    if not parts:
        return None
    return f"Among the ways of mixing the layers, {LABELS.get(best, best)} leads " + "; ".join(parts) + "."


def _curve_verdicts(curve: dict) -> list[str]:
    """Per baseline of ``learning_curve.json``: the best ELMo mix's lead with the fewest and with all the labelled
    documents, and at how many shares it is beyond the noise; then which method to use at those two ends."""
    sizes = sorted(curve["sizes"].values(), key=lambda z: z["fraction"])
    out = []
    for b in ("word2vec", "tfidf_logreg"):
        leads = [(z, c) for z in sizes if (c := _curve_comparison(z, b))]
        if len(leads) < 2:
            continue
        (few, c_few), (full, c_full) = leads[0], leads[-1]
        beyond = sum(c["p_value"] is not None and c["p_value"] < 0.05 and c["mean_difference"] > 0 for _, c in leads)
        out.append(f"Against {LABELS.get(b, b)}, the best ELMo mix leads by {_points(c_few['mean_difference'])} points "
                   f"with {_share_docs(few)} and by {_points(c_full['mean_difference'])} with {_share_docs(full)}; the "
                   f"lead is beyond the noise (p < 0.05) at {beyond} of the {len(leads)} shares.")
    tops = []
    for z in (sizes[0], sizes[-1]):
        top = max(z["methods"], key=lambda m: z["methods"][m]["summary"]["test_accuracy"]["mean"])
        tops.append(f"{LABELS.get(top, top)} with {_share_docs(z)}")
    if len(sizes) > 1:
        out.append("The method with the highest mean test accuracy is " + " and ".join(tops) + ".")
    return out


def _slope(summary: dict) -> str:
    """``+2.07 [+1.97, +2.16]``: a summarised slope in points with its 95% CI."""
    ci = "" if summary["ci95"] is None else f" [{_points(summary['ci95'][0])}, {_points(summary['ci95'][1])}]"
    return f"{_points(summary['mean'])}{ci}"


def _text_verdicts(text_curve: dict) -> list[str]:
    """Per labelled share of ``pretraining_text_curve.json``: ELMo's test accuracy points per doubling of the
    pre-training text against Word2Vec's."""
    out = []
    for share, per_method in text_curve["accuracy_per_doubling"].items():
        elmo = next((m for m in LAYER_MIXES if m in per_method), None)
        if elmo is None or "word2vec" not in per_method:
            continue

        slope = {m: _slope(per_method[m]["summary"]) for m in (elmo, "word2vec")}
        out.append(f"Each doubling of the pre-training text is worth {slope[elmo]} test accuracy points to "
                   f"{LABELS.get(elmo, elmo)} and {slope['word2vec']} to Word2Vec with {float(share):.0%} of the "
                   "labels (mean [95% CI] over seeds).")
    return out


def _goals_verdict(goals: list[str]) -> str | None:
    """How many of the goal sentences (:func:`_targets`, :func:`_curve_goals`) say "met", and which do not."""
    missed = [g.split(": not met")[0] for g in goals if ": not met" in g]
    met = [g for g in goals if ": met" in g]
    if not met and not missed:
        return None
    return (f"Of the project's {len(met) + len(missed)} goals checked here, {len(met)} are met"
            + (f"; not met: {'; '.join(missed)}." if missed else "."))


def _answer(res: dict) -> list[str]:
    """The three questions answered in one sentence each, for the report's first page: the best ELMo layer mix
    against the best static embedding and TF-IDF + LR (over seeds when the study has run), the best mix, and the
    lead with the fewest labelled documents and per doubling of the pre-training text."""
    study = res.get("seeds")
    if not study:
        test = {m: e["test"] for m, e in methods(res).items()}
        best = _best_mix(res)
        static = _best_static(test)
        against = [f"{_points(test[best]['accuracy'] - test[m]['accuracy'])} points against {LABELS[m]}"
                   for m in (static, "tfidf_logreg") if m in test]
        return [f"In one run (seed {res['classification'].get('meta', {}).get('seed', 0)}), the best ELMo layer mix, "
                f"{LABELS[best]}, reaches {test[best]['accuracy']:.4f} test accuracy: " + " and ".join(against)
                + "; one seed gives no estimate of the uncertainty (python -m lab study measures it)."]
    best = best_over_seeds(study)
    acc = study["methods"][best]["summary"]["test_accuracy"]
    compared = {b: c for b in ("word2vec", "svd", "tfidf_logreg") if (c := seed_comparison(study, best, b))}
    beyond = [LABELS.get(b, b) for b, c in compared.items() if c["p_value"] is not None and c["p_value"] < 0.05]
    noise = ("each beyond the noise" if len(beyond) == len(compared) else
             f"beyond the noise for {', '.join(beyond)} only" if beyond else "none beyond the noise")
    out = [f"Over {len(study['seeds'])} seeds, {LABELS.get(best, best)} has the highest mean test accuracy "
           f"({acc['mean']:.4f}): " + ", ".join(f"{_points(c['mean_difference'])} points over {LABELS.get(b, b)}"
                                                 for b, c in compared.items())
           + f"; {noise} (paired t-test over seeds, p < 0.05)."]
    others = [m for m in LAYER_MIXES if m != best and m in study["methods"]]
    if others:
        apart = [m for m in others if (c := seed_comparison(study, best, m) or seed_comparison(study, m, best))
                 and c["p_value"] is not None and c["p_value"] < 0.05]
        out.append(f"Of the layer mixes, {LABELS.get(best, best)} is ahead on average, beyond the noise "
                   + (("of " + ", ".join(LABELS.get(m, m) for m in apart)) if len(apart) == len(others) else
                      ("of " + ", ".join(LABELS.get(m, m) for m in apart) + " only") if apart else "of none")
                   + " (Section 4).")
    curve, text_curve = res.get("learning_curve"), res.get("pretraining_text_curve")
    pays = []
    if curve:
        few = min(curve["sizes"].values(), key=lambda z: z["fraction"])
        leads = [f"{_points(c['mean_difference'])} points over {LABELS.get(c['b'], c['b'])}"
                 for c in few["comparisons"] if c["b"] in ("word2vec", "tfidf_logreg")]
        if leads:
            pays.append(f"with {_share_docs(few)} the best ELMo mix leads by " + " and ".join(leads))
    if text_curve:
        share, per_method = max(text_curve["accuracy_per_doubling"].items(), key=lambda kv: -float(kv[0]))
        elmo = next((m for m in LAYER_MIXES if m in per_method), None)
        if elmo and "word2vec" in per_method:
            pays.append(f"each doubling of the pre-training text adds {_points(per_method[elmo]['summary']['mean'])} "
                        f"points to {LABELS.get(elmo, elmo)} and {_points(per_method['word2vec']['summary']['mean'])} "
                        f"to Word2Vec ({float(share):.0%} of the labels)")
    if pays:
        out.append("When it pays: " + "; ".join(pays) + " (Section 5).")
    return out


def _conclusion(res: dict) -> list[str]:
    """What the results mean, each sentence computed from the numbers: the headline over seeds (or, without a
    study, the seed-0 run's, which has no uncertainty), the layer mixes, the learning curves, and the goals."""
    study = res.get("seeds")
    out = []
    if study:
        out.append(_headline(study))
        static = [b for b in STATIC if seed_comparison(study, best_over_seeds(study), b)]
        if static:
            gain = min(seed_comparison(study, best_over_seeds(study), b)["mean_difference"] for b in static)
            out.append(f"Word2Vec and SVD feed the identical classifier with the same data and training schedule, so "
                       f"ELMo's lead over the better of them ({_points(gain)} points) is what the contextual "
                       "representation adds.")
        mixes = _mixes_verdict(study)
        if mixes:
            out.append(mixes)
    else:
        test = {m: e["test"] for m, e in methods(res).items()}
        best = _best_mix(res)
        static = _best_static(test)
        if static:
            gap = test[best]["accuracy"] - test[static]["accuracy"]
            out.append(f"ELMo's best layer mix is {'ahead of' if gap > 0 else 'not ahead of'} the best static "
                       f"embedding with the identical classifier ({_points(gap)} points), but these are one seed's "
                       "numbers: without python -m lab study there is no estimate of their uncertainty.")
    if res.get("learning_curve"):
        out += _curve_verdicts(res["learning_curve"])
    if res.get("pretraining_text_curve"):
        out += _text_verdicts(res["pretraining_text_curve"])
    goals = _targets(res) + (_curve_goals(res["learning_curve"]) if res.get("learning_curve") else [])
    verdict = _goals_verdict(goals)
    return out + ([verdict] if verdict else [])


def analysis(res: dict) -> dict[str, list[str]]:
    """The report's comparative sentences, each computed from the numbers in ``res``.

    Args:
        res: :func:`~lab.report.results.load_results` (``experiments`` and ``init`` may be absent).

    Returns:
        Lists of plain-text sentences: ``elmo_vs_static`` (best ELMo layer mix vs every baseline),
        ``summary`` (its first two sentences, for the report's opening), ``lambda`` (layer mixes and
        weights), ``init`` (Word2Vec-initialised biLM; empty without that run), ``diagnostics`` (a
        sentence per diagnostic run), ``diagnostics_reference`` (what the diagnostic table compares with;
        empty without diagnostic sentences), ``head`` (baselines' head vs the ELMo run's), ``context``
        (per context word, or a sentence saying there is none), and from ``seeds.json`` when the study has
        run (else empty): ``seeds`` (mean ± std per method, the best layer mix against each baseline with
        paired tests), ``seeds_mixes`` (the layer mixes against each other, gate vs MLP) and ``targets``; from
        ``learning_curve.json`` when it exists (else empty): ``learning_curve`` (when ELMo pays); from
        ``pretraining_text_curve.json`` likewise: ``pretraining_text_curve`` (the effect of more pre-training text);
        ``lambda_over_seeds`` (each scalar mix's λ over the study's seeds; empty without a study), ``answer`` (the
        report's three questions answered in a sentence each) and ``conclusion`` (what the results mean: the
        headline, the layer mixes, the curves, the goals). With a study,
        ``summary`` is its first two sentences.

    Raises:
        KeyError: ``res`` lacks a key the sentences need.
    """
    elmo_vs_static = _elmo_vs_static(res)
    diagnostics = _diagnostics(res)
    seeds = _seeds(res)
    return {"learning_curve": _learning_curve(res), "pretraining_text_curve": _text_curve(res),
            "elmo_vs_static": elmo_vs_static, "summary": seeds[:2] or elmo_vs_static[:2], "lambda": _lambda(res),
            "seeds": seeds, "seeds_mixes": _seeds_mixes(res), "targets": _targets(res),
            "init": _init(res), "diagnostics": diagnostics,
            "diagnostics_reference": _diagnostics_reference(res) if diagnostics else [],
            "head": _head(res), "context": _context(res), "lambda_over_seeds": _lambda_over_seeds(res),
            "answer": _answer(res), "conclusion": _conclusion(res)}
