"""The speed benchmark end to end (:func:`lab.bench.speed.bench`, every section), on a corpus the test writes,
checking its schema and how its figures relate (arithmetic), never which is faster: speeds are measured by
`python -m lab bench`, not asserted (docs/testing.md)."""

from __future__ import annotations

import json
import math
import os
import pickle
from dataclasses import replace

import pytest
import torch
from support import TOPIC_WORDS, make_rows, write_csv

import lab.bench.speed as speed
from elmo.model.mix import LAYER_MIXES
from lab.bench.speed import BenchArgs, bench

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> dict:
    """bench() without the script memory runs (``memory_docs=()``: their arithmetic and flags are tested in
    tests/unit/bench), its sections in this process instead of one spawned process each (``in_child`` only isolates
    their peak memory, which is not checked here; a spawn costs an interpreter start), on the tiny corpus plus a few
    150-word documents: the naive reference pads every batch to the longest document, ours only to the longest of
    its length bucket."""
    root = tmp_path_factory.mktemp("bench")
    long_docs = [(i % 4 + 1, "long", " ".join(TOPIC_WORDS[i % 4] * 19)[:900]) for i in range(6)]
    write_csv(root / "data" / "train.csv", make_rows(240, seed=1) + long_docs)
    write_csv(root / "data" / "test.csv", make_rows(80, seed=2))
    cfg = BenchArgs(data_dir=str(root / "data"), models_dir=str(root / "none"), out=str(root / "bench.json"),
                      repeats=1, lm_batches=1, naive_batches=1, classifier_batches=2, embed_sentences=40,
                      single_sentences=4, memory_docs=(), threads=1)
    threads, environ = torch.get_num_threads(), dict(os.environ)  # what the sections set process-wide: put back
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(speed, "in_child", lambda section, *args: pickle.loads(pickle.dumps(section(*args))))
            returned = bench(cfg)
    finally:
        torch.set_num_threads(threads)
        os.environ.clear()
        os.environ.update(environ)
    written = json.loads((root / "bench.json").read_text())
    assert written == json.loads(json.dumps(returned))  # what it returns is what it wrote
    return written


def _positive_number(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def test_lm_section_reports_both_rates_and_their_ratio_with_less_padding_for_ours(result):
    """Speeds are measured, never compared here (they flip on a loaded or different CPU): the section reports
    a finite rate for ours and the naive reference, the ratio is their quotient, and the padding shares, which
    depend only on the batching, show ours pads less."""
    lm = result["lm"]
    rates = lm["tokens_per_second"]
    assert _positive_number(rates["ours"]) and _positive_number(rates["naive"])
    assert rates["ratio"] == pytest.approx(rates["ours"] / rates["naive"])
    assert 0 <= lm["padding_share"]["ours"] < lm["padding_share"]["naive"] < 1
    assert lm["padding_share"]["naive"] > 0.5  # the long documents: most of the naive batches is padding


def test_peak_fraction_is_achieved_flops_over_the_measured_peak_of_the_same_precision(result):
    r = result
    peaks = r["machine"]["matmul_peak_gflops"]
    from elmo.runtime.device import cpu_has_bf16

    # bf16 only where it is native: oneDNN's emulation elsewhere is hundreds of times slower and no run uses it
    assert set(peaks) == ({"fp32", "bf16"} if cpu_has_bf16() else {"fp32"})
    assert all(_positive_number(v) for v in peaks.values())
    fraction = r["lm"]["peak_fraction"]
    assert fraction["naive"] == pytest.approx(r["lm"]["gflops"]["naive"] / peaks["fp32"])
    assert fraction["ours"] == pytest.approx(r["lm"]["gflops"]["ours"] / peaks.get(r["lm"]["precision"], peaks["fp32"]))


def test_classifier_section_measures_every_layer_mix_with_and_without_the_layer_cache(result):
    classifier = result["classifier"]
    assert set(classifier["train_docs_per_second"]) == set(LAYER_MIXES)
    for mix, rates in classifier["train_docs_per_second"].items():
        assert set(rates) == {"cached", "cached_on_disk", "uncached"}, mix
        assert all(_positive_number(v) for v in rates.values()), (mix, rates)
    bytes_per_token = classifier["cache"]["bytes_per_token"]
    assert isinstance(bytes_per_token, int) and bytes_per_token > 0 and bytes_per_token % 2 == 0  # 16-bit values
    assert _positive_number(classifier["cache"]["tokens_per_second"])
    assert _positive_number(classifier["cache"]["disk_tokens_per_second"])
    peaks = result["machine"]["matmul_peak_gflops"]
    assert set(classifier["encoder_gflops"]) == set(LAYER_MIXES)
    for mix, gflops in classifier["encoder_gflops"].items():  # the task encoder's products over the cached step
        assert _positive_number(gflops), mix
        assert classifier["encoder_peak_fraction"][mix] == pytest.approx(
            gflops / peaks.get(classifier["precision"], peaks["fp32"]))


def test_projected_totals_are_the_sums_of_their_parts(result):
    projection = result["projection"]
    for corpus in ("this_corpus_seconds", "target_seconds"):
        parts = {k: v for k, v in projection[corpus].items() if k != "total"}
        assert projection[corpus]["total"] == pytest.approx(sum(parts.values()), rel=1e-12)
    assert projection["target_seconds"].keys() == projection["this_corpus_seconds"].keys()  # how each part scales:
    # tests/unit/bench/test_speed_units.py, on fixed rates
    assert "scripts" not in result  # memory_docs=() skips the script runs
    assert result["lm_side_by_side"] is None  # one thread: ELMO.py trains one direction after the other


def test_embedding_figures_and_the_printed_table(result):
    from lab.bench.speed import format_bench

    r = result
    assert _positive_number(r["embedding"]["batch_64"]["sentences_per_second"])
    assert _positive_number(r["embedding"]["single"]["sentences_per_second"])
    table = format_bench(r)
    assert "speed-up ours / naive" in table and "projected pipeline wall time" in table
    assert f"{r['lm']['tokens_per_second']['ratio']:.1f}x" in table
    share = r["classifier"]["encoder_peak_fraction"]["trainable_lambda"]
    assert table.count("task encoder GFLOP/s") == len(LAYER_MIXES) and f"({share:.0%})" in table
    older = {**r, "classifier": {k: v for k, v in r["classifier"].items() if not k.startswith("encoder_")}}
    assert "task encoder" not in format_bench(older)  # a bench.json written before the figure still prints


def test_the_two_directions_side_by_side_are_measured_in_two_one_thread_processes(tmp_path):
    """``ELMO.py``'s default on two CPU threads: each direction in its own one-thread process (the rates are its
    own, the GFLOP/s their sum; which rate is higher is not asserted), and nothing where ELMO.py would not do it."""
    data = write_csv(tmp_path / "data" / "train.csv", make_rows(240, seed=1)).parent
    write_csv(data / "test.csv", make_rows(80, seed=2))
    cfg = BenchArgs(data_dir=str(data), models_dir=str(tmp_path / "none"), out=str(tmp_path / "bench.json"), repeats=1,
                    lm_batches=1, threads=2)
    sbs = speed.section_lm_side_by_side(cfg)
    assert sbs["threads_per_direction"] == 1 and sbs["precision"] in ("fp32", "bf16")
    rates = sbs["tokens_per_second"]
    assert _positive_number(rates["forward"]) and _positive_number(rates["backward"])
    assert rates["slowest"] == min(rates["forward"], rates["backward"])
    assert sbs["runs"] == {"forward": [rates["forward"]], "backward": [rates["backward"]]}  # one repeat: the median
    assert _positive_number(sbs["gflops"]) and all(_positive_number(mb) for mb in sbs["peak_rss_mb"].values())
    evals = sbs["eval_words_per_second"]
    for kind in ("perplexity", "full_softmax"):
        assert _positive_number(evals["forward"][kind]) and _positive_number(evals["backward"][kind])
        assert evals["slowest"][kind] == min(evals["forward"][kind], evals["backward"][kind])
    assert speed.section_lm_side_by_side(replace(cfg, threads=1)) is None  # ELMO.py: one after the other
