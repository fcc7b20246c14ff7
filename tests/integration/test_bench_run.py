"""The speed benchmark end to end (:func:`elmo.bench.speed.bench`, every section), on a corpus the test writes,
checking how its figures relate rather than what they are."""

from __future__ import annotations

import json
import os
import pickle

import pytest
import torch
from support import TOPIC_WORDS, make_rows, write_csv

import elmo.bench.speed as speed
from elmo.bench.speed import BenchConfig, bench
from elmo.model.mix import MIX_SETTINGS

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
    cfg = BenchConfig(data_dir=str(root / "data"), models_dir=str(root / "none"), out=str(root / "bench.json"),
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


def test_ours_trains_the_lm_faster_than_the_naive_reference_with_less_padding(result):
    lm = result["lm"]
    rates = lm["tokens_per_second"]
    assert rates["ours"] > rates["naive"] > 0 and rates["ratio"] == pytest.approx(rates["ours"] / rates["naive"])
    assert 0 <= lm["padding_share"]["ours"] < lm["padding_share"]["naive"] < 1
    assert lm["padding_share"]["naive"] > 0.5  # the long documents: most of the naive batches is padding


def test_achieved_flops_are_a_fraction_of_the_measured_matmul_peak(result):
    r = result
    peaks = r["machine"]["matmul_peak_gflops"]
    assert peaks["fp32"] > 0 and peaks["bf16"] > 0
    fraction = r["lm"]["peak_fraction"]
    # <= 1 on a quiet machine; the peak and the LM are timed at different moments, so another job running
    # during the peak's measurement alone can push the ratio above 1 (seen at 1.2 with two jobs on two cores)
    assert 0 < fraction["ours"] <= 2 and 0 < fraction["naive"] <= 2
    assert fraction["naive"] == pytest.approx(r["lm"]["gflops"]["naive"] / peaks["fp32"])
    assert fraction["ours"] == pytest.approx(r["lm"]["gflops"]["ours"] / peaks.get(r["lm"]["precision"], peaks["fp32"]))


def test_classifier_training_with_the_layer_cache_is_faster_than_without(result):
    classifier = result["classifier"]
    assert set(classifier["train_docs_per_second"]) == set(MIX_SETTINGS)
    for setting, rates in classifier["train_docs_per_second"].items():
        assert rates["cached"] > rates["uncached"] > 0, setting
        assert rates["cached_on_disk"] > rates["uncached"], setting
    assert classifier["cache"]["bytes_per_token"] > 0 and classifier["cache"]["tokens_per_second"] > 0
    assert classifier["cache"]["disk_tokens_per_second"] > 0


def test_projected_totals_are_the_sums_of_their_parts(result):
    projection = result["projection"]
    for corpus in ("this_corpus_seconds", "target_seconds"):
        parts = {k: v for k, v in projection[corpus].items() if k != "total"}
        assert all(v > 0 for v in parts.values()), corpus
        assert projection[corpus]["total"] == pytest.approx(sum(parts.values()), rel=1e-12)
    assert projection["target_seconds"]["total"] > projection["this_corpus_seconds"]["total"] > 0
    for part, seconds in projection["target_seconds"].items():  # 120,000 rows take longer than 246, part by part
        assert seconds >= projection["this_corpus_seconds"][part], part
    assert "scripts" not in result  # memory_docs=() skips the script runs


def test_embedding_figures_and_the_printed_table(result):
    from elmo.bench.speed import format_bench

    r = result
    assert r["embedding"]["batch_64"]["sentences_per_second"] > r["embedding"]["single"]["sentences_per_second"] > 0
    table = format_bench(r)
    assert "speed-up ours / naive" in table and "projected pipeline wall time" in table
    assert f"{r['lm']['tokens_per_second']['ratio']:.1f}x" in table
