"""The report's sentences, computed from the numbers (lab.report.analysis), and its refusals, in process."""

from __future__ import annotations

import copy

from lab.cli import run as elmo_run
from lab.report import analysis, load_results


def metrics(acc: float, f1: float | None = None) -> dict:
    f1 = acc if f1 is None else f1
    return {"accuracy": acc, "precision": f1, "recall": f1, "f1": f1, "confusion_matrix": [[1]]}


def fake_results(elmo: float, w2v: float, svd: float) -> dict:
    cls = {s: {"train": metrics(0.99), "val": metrics(elmo), "test": metrics(elmo - d), "lambdas": lam, "gamma": g,
               "history": [{"val_f1": elmo}]}
           for s, d, lam, g in (("trainable_lambda", 0.0, [0.3, 0.3, 0.4], 1.2),
                                ("frozen_lambda", 0.01, [0.8, 0.15, 0.05], 1.0),
                                ("learned_function", 0.005, None, None))}
    cls["best_mix"] = "trainable_lambda"
    base = {m: {"train": metrics(0.95), "val": metrics(a), "test": metrics(a)}
            for m, a in (("word2vec", w2v), ("svd", svd), ("tfidf_logreg", 0.85))}
    return {"lm": {}, "classification": cls, "baselines": base, "init": None}


def test_analysis_says_when_elmo_loses():
    text = analysis(fake_results(elmo=0.88, w2v=0.90, svd=0.86))["elmo_vs_static"]
    joined = " ".join(text)
    assert "loses to Word2Vec (same head)" in joined and "SVD" not in joined.split("loses to")[1]
    assert "test accuracy 0.8800 vs 0.9000 (-2.00 points)" in joined and "behind on both" in joined
    assert "Contextual layers are worth -2.00 accuracy points over the best static embedding" in joined


def test_analysis_says_when_elmo_wins_and_describes_lambda():
    out = analysis(fake_results(elmo=0.92, w2v=0.90, svd=0.89))
    joined = " ".join(out["elmo_vs_static"])
    assert "ahead of every baseline" in joined and "loses" not in joined
    assert "+2.00 points" in joined
    lam = " ".join(out["lambda"])
    assert "λ = (0.300, 0.300, 0.400)" in lam and "largest weight is on h2" in lam
    assert "puts 80% of the weight on h0" in lam
    assert "ELMo, trainable λ vs ELMo, frozen λ: test accuracy 0.9200 vs 0.9100 (+1.00 points)" in lam


def test_analysis_of_the_word2vec_initialisation():
    res = fake_results(0.9, 0.9, 0.9)
    res["lm"] = {"test": {"forward_perplexity": 140.0, "backward_perplexity": 138.0}}
    init_cls = copy.deepcopy(res["classification"])
    init_cls["trainable_lambda"]["test"] = metrics(0.91)
    res["init"] = {"name": "w2v", "none": {"lm": res["lm"], "classification": res["classification"]},
                   "word2vec": {"lm": {"test": {"forward_perplexity": 120.0, "backward_perplexity": 150.0}},
                                "classification": {"trainable_lambda": init_cls["trainable_lambda"]}}}
    init = " ".join(analysis(res)["init"])
    assert "forward test perplexity 140.0 → 120.0" in init and "backward test perplexity 138.0 → 150.0" in init
    assert "0.9000 → 0.9100: the Word2Vec initialisation helps here (+1.00 points)" in init


def test_report_without_baselines_exits_2_naming_the_command(tmp_path, capsys):
    (tmp_path / "lm.json").write_text("{}")
    (tmp_path / "classification.json").write_text("{}")
    assert elmo_run("report", ["--results-dir", str(tmp_path), "--out", str(tmp_path / "r.pdf")]) == 2
    assert "baselines.json not found: run `python baselines.py` first" in capsys.readouterr().err
    (tmp_path / "baselines.json").write_text("{not json")
    assert elmo_run("report", ["--results-dir", str(tmp_path), "--out", str(tmp_path / "r.pdf")]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert not (tmp_path / "r.pdf").exists()


def test_the_report_reads_the_diagnostic_runs_it_names_in_that_order(tmp_path, capsys):
    for name in ("lm", "classification", "baselines"):
        (tmp_path / f"{name}.json").write_text('{"config": {}}')
    runs = tmp_path / "experiments"
    for name, lm in (("b_run", True), ("a_run", False), ("not_listed", True)):
        (runs / name).mkdir(parents=True)
        (runs / name / "classification.json").write_text('{"best_setting": "trainable_lambda", "config": {}}')
        if lm:
            (runs / name / "lm.json").write_text('{"config": {}}')
    res = load_results(tmp_path, runs, ("b_run", "a_run"))
    assert list(res["experiments"]) == ["b_run", "a_run"]  # the named runs, in the order named; no others
    assert res["experiments"]["a_run"]["lm"] is None and res["experiments"]["b_run"]["lm"] == {"config": {}}
    assert res["experiments"]["a_run"]["classification"]["best_mix"] == "trainable_lambda"  # read with today's keys
    assert load_results(tmp_path, runs, ())["experiments"] == {}
    assert elmo_run("report", ["--results-dir", str(tmp_path), "--out", str(tmp_path / "r.pdf"), "--experiments",
                               "a_run", "missing"]) == 2
    err = capsys.readouterr().err
    assert f"{runs / 'missing' / 'classification.json'} not found" in err and "--experiments" in err
    assert not (tmp_path / "r.pdf").exists()
