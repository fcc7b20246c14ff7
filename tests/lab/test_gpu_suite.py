"""``python -m lab gpu`` (lab.bench.gpu) at ``--tiny`` sizes on the CPU: every part's record in gpu.json, the default
run kept out of the working folder, the budget's skips listed, a CPU refused without --tiny. No timing is asserted."""

from __future__ import annotations

import json
import math

import pytest
from support import needs_native_bf16

from elmo.errors import ElmoError
from elmo.model.mix import LAYER_MIXES
from elmo.runtime import device as device_module
from elmo.runtime.device import cpu_has_bf16
from lab import cli
from lab.bench import gpu
from lab.bench.children import run_script

ARCHITECTURES = list(gpu.TINY_ARCHITECTURES)


def precisions_here() -> list[str]:
    """The precisions the library runs on this CPU: bf16 only with native bf16 (a CPU feature, read by lscpu)."""
    return ["bf16", "fp32"] if cpu_has_bf16() else ["fp32"]


def training_labels(precisions=("bf16", "fp32")) -> list[str]:
    """The training rows' labels in the order ``--tiny`` runs them: the Original at ``large_batch`` windows, then
    every architecture at ``batch``."""
    large, batch = gpu.TINY_SIZES["large_batch"], gpu.TINY_SIZES["batch"]
    return ([f"training {ARCHITECTURES[0]} {lstm} {p} at {large} windows" for lstm in ("fused", "clipped")
             for p in precisions]
            + [f"training {n} {lstm} {p} at {batch} windows" for n in ARCHITECTURES for lstm in ("fused", "clipped")
               for p in precisions])


def inference_labels(precisions=("bf16", "fp32")) -> list[str]:
    """The inference rows' labels in the order ``--tiny`` runs them: batches of 64, then of ``large_embed_batch``."""
    large = gpu.TINY_SIZES["large_embed_batch"]
    return ([f"inference tiny-original {p}" for p in precisions]
            + [f"inference tiny-original {p} in batches of {large}" for p in precisions])


def left_out_here() -> list[str]:
    """The rows ``--tiny`` leaves out on this CPU, as ``skipped`` lists them: the bf16 ones without native bf16."""
    if cpu_has_bf16():
        return []
    return training_labels(("bf16",)) + inference_labels(("bf16",))


def positive(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


@pytest.mark.slow
@pytest.mark.cpu_features
def test_tiny_run_records_every_part_and_bf16_rows_only_with_native_bf16(tmp_path, monkeypatch, tiny_agnews):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    out = tmp_path / "gpu"
    assert cli.main(["gpu", "--tiny", "--data-dir", str(tiny_agnews), "--out", str(out), "--threads", "1"]) == 0
    assert list(work.iterdir()) == []  # the default run wrote in a scratch folder of its own
    r = json.loads((out / "gpu.json").read_text())
    assert r["finished"] and r["tiny"] and r["command"].startswith("python -m lab gpu --out")
    assert {"name", "torch", "cuda", "cudnn", "tf32"} <= set(r["device"]) and r["device"]["type"] == "cpu"
    assert positive(r["matmul_peak_gflops"]["fp32"]) and positive(r["matmul_peak_gflops"]["bf16"])
    assert [s.split(":")[0] for s in r["skipped"]] == [*left_out_here(), "compile"]
    assert all("needs a CPU with native bf16" in s for s in r["skipped"][:-1])
    assert r["skipped"][-1].startswith("compile: not under --tiny")
    assert "compile" not in r["parts"] and "error" not in json.dumps(r)

    rows = r["parts"]["training"]["rows"]
    assert list(rows) == ARCHITECTURES
    for name in ARCHITECTURES:
        assert list(rows[name]) == ["fused", "clipped"]
        for lstm in ("fused", "clipped"):
            assert list(rows[name][lstm]) == precisions_here()
            for row in rows[name][lstm].values():
                rate = row["tokens_per_second"]["per_direction"]
                assert positive(rate) and positive(row["peak_fraction"]) and positive(row["flops_per_step"])
                assert math.isclose(rate, row["tokens_per_step"] / row["seconds_per_step"])
                assert len(row["seconds_runs"]) == gpu.TINY_SIZES["steps"] and row["batch_windows"] == gpu.TINY_SIZES["batch"]
            for precision, row in rows[name][lstm].items():
                assert row["lstm_dtype"] == {"bf16": "bfloat16", "fp32": "float32"}[precision]
                assert row["step_operators"]["reading_operators"] == {}  # the step the library trains with
                assert row["step_operators"]["operators"] > 0 and "synchronizations" not in row["step_operators"]
    assert rows["tiny-original"]["fused"]["fp32"]["parameters"] > rows["tiny-small"]["fused"]["fp32"]["parameters"]
    large = r["parts"]["training"]["large"]
    assert large["batch_windows"] == gpu.TINY_SIZES["large_batch"] and list(large["rows"]) == ["tiny-original"]
    for lstm in ("fused", "clipped"):
        assert list(large["rows"]["tiny-original"][lstm]) == precisions_here()
        for row in large["rows"]["tiny-original"][lstm].values():
            assert row["batch_windows"] == gpu.TINY_SIZES["large_batch"] and positive(row["seconds_per_step"])
            assert row["tokens_per_step"] > rows["tiny-original"][lstm]["fp32"]["tokens_per_step"]
            assert "gpu_busy" not in row  # measured on CUDA only

    inference = r["parts"]["inference"]
    assert inference["model"] == "tiny-original" and inference["sentences"] == gpu.TINY_SIZES["sentences"]
    for row in inference["rows"].values():
        assert positive(row["sentences_per_second"]) and positive(row["peak_fraction"])
        assert math.isclose(row["tokens_per_second"] / row["sentences_per_second"],
                            inference["tokens"] / inference["sentences"])
    assert list(inference["rows"]) == precisions_here()
    assert all(row["lstm_dtype"] == {"bf16": "bfloat16", "fp32": "float32"}[p] for p, row in inference["rows"].items())
    assert inference["large"]["batch"] == gpu.TINY_SIZES["large_embed_batch"]
    assert list(inference["large"]["rows"]) == precisions_here()
    assert all(positive(row["sentences_per_second"]) for row in inference["large"]["rows"].values())

    scripts = r["parts"]["default_run"]["scripts"]
    lm, cls = scripts["ELMO.py"], scripts["classification.py"]
    assert positive(lm["seconds"]) and positive(cls["seconds"]) and positive(lm["peak_rss_mb"])
    assert set(lm["phase_seconds"]) == {"data", "word2vec", "training", "evaluation", "plots", "saving", "start_and_exit"}
    assert set(cls["phase_seconds"]) == {"data", "layer_cache", "training", "plots", "saving", "start_and_exit"}
    for row in (lm, cls):
        assert math.isclose(sum(row["phase_seconds"].values()), row["seconds"])  # the phases and the rest add up
    assert all(p > 1 for split in lm["perplexity"].values() for p in split.values())
    assert set(cls["mixes"]) == set(LAYER_MIXES) and cls["best_mix"] in LAYER_MIXES
    assert all(0 <= m["test_accuracy"] <= 1 and m["epochs"] == 1 for m in cls["mixes"].values())
    written = json.loads((out / "default_run" / "lm.json").read_text())
    assert written["test"]["forward_perplexity"] == lm["perplexity"]["test"]["forward"]
    assert (out / "default_run" / "classification.json").is_file()


def test_what_the_budget_leaves_out_is_listed(tmp_path, tiny_agnews):
    out = tmp_path / "gpu"
    r = gpu.measure_gpu(gpu.GpuArgs(tiny=True, data_dir=str(tiny_agnews), out=str(out), budget=1, threads=1))
    assert r == json.loads((out / "gpu.json").read_text())
    rows = r["parts"]["training"]["rows"]
    assert r["finished"] and not any(row for lstms in rows.values() for row in lstms.values())
    assert r["parts"]["inference"]["rows"] == {}
    assert r["parts"]["default_run"]["scripts"] == {}
    expected = (training_labels() + inference_labels() + ["default run ELMO.py", "default run classification.py"])
    assert [s.split(":")[0] for s in r["skipped"]] == [*expected, "compile"]


def test_parts_runs_only_those_named(tmp_path, tiny_agnews):
    r = gpu.measure_gpu(gpu.GpuArgs(tiny=True, data_dir=str(tiny_agnews), out=str(tmp_path), threads=1,
                                    parts=("inference",)))
    assert r["order"] == ["inference"] and list(r["parts"]) == ["inference"]
    assert [s.split(":")[0] for s in r["skipped"]] == [s for s in left_out_here() if s.startswith("inference")]
    assert list(r["parts"]["inference"]["rows"]) == precisions_here()
    with pytest.raises(ElmoError, match="--parts takes training, inference, default_run, larger_steps, compile, got speed"):
        gpu.GpuArgs(parts=("training", "speed")).check()


def test_a_cpu_is_refused_without_tiny(tmp_path, tiny_agnews, capsys):
    out = tmp_path / "gpu"
    assert cli.main(["gpu", "--device", "cpu", "--data-dir", str(tiny_agnews), "--out", str(out)]) == 2
    assert "--tiny" in capsys.readouterr().err and not out.exists()


def test_a_missing_data_folder_is_named(tmp_path, capsys):
    assert cli.main(["gpu", "--tiny", "--data-dir", str(tmp_path / "none"), "--out", str(tmp_path / "gpu")]) == 2
    assert f"--data-dir {tmp_path / 'none'} has no train.csv" in capsys.readouterr().err


def test_a_script_past_its_time_is_ended(tmp_path):
    with pytest.raises(ElmoError, match="ran out of its 1 s"):
        run_script(["-c", "import time; time.sleep(60)"], timeout=1)


@pytest.mark.cpu_features
def test_without_native_bf16_the_bf16_rows_are_left_out_with_the_librarys_reason(tmp_path, tiny_agnews, monkeypatch):
    """Any CPU: native bf16 hidden from the library; training and inference follow the same rule."""
    monkeypatch.setattr(device_module, "cpu_has_bf16", lambda: False)
    r = gpu.measure_gpu(gpu.GpuArgs(tiny=True, data_dir=str(tiny_agnews), out=str(tmp_path), threads=1,
                                    parts=("training", "inference")))
    rows = r["parts"]["training"]["rows"]
    assert all(list(rows[name][lstm]) == ["fp32"] for name in ARCHITECTURES for lstm in ("fused", "clipped"))
    assert list(r["parts"]["inference"]["rows"]) == ["fp32"]
    assert [s.split(":")[0] for s in r["skipped"]] == [*training_labels(("bf16",)), *inference_labels(("bf16",))]
    assert all(s.endswith("(auto picks fp32 here))") and ": left out (--precision bf16 needs a CPU with native bf16" in s
               for s in r["skipped"])
    assert "error" not in json.dumps(r)


@pytest.mark.cpu_features
@needs_native_bf16()
def test_with_native_bf16_every_row_runs_in_both_precisions(tmp_path, tiny_agnews):
    r = gpu.measure_gpu(gpu.GpuArgs(tiny=True, data_dir=str(tiny_agnews), out=str(tmp_path), threads=1,
                                    parts=("training", "inference")))
    rows = r["parts"]["training"]["rows"]
    assert all(list(rows[name][lstm]) == ["bf16", "fp32"] for name in ARCHITECTURES for lstm in ("fused", "clipped"))
    assert list(r["parts"]["inference"]["rows"]) == ["bf16", "fp32"] and r["skipped"] == []


@pytest.mark.slow
def test_larger_steps_compares_scaled_learning_rates_at_the_same_tokens(tmp_path, tiny_agnews):
    r = gpu.measure_gpu(gpu.GpuArgs(tiny=True, data_dir=str(tiny_agnews), out=str(tmp_path / "gpu"), threads=1,
                                    parts=("larger_steps",)))
    assert r["order"] == ["larger_steps"] and r["skipped"] == []
    runs = r["parts"]["larger_steps"]["runs"]
    assert list(runs) == list(gpu.LARGER_STEPS) == ["base", "sqrt_2x", "sqrt_4x"]
    base = runs["base"]
    assert "test_change" not in base and base["tokens_per_step"] < runs["sqrt_2x"]["tokens_per_step"]
    for name in ("sqrt_2x", "sqrt_4x"):
        run = runs[name]
        assert run["test_change"] == pytest.approx(run["test_mean"] / base["test_mean"] - 1)
        assert f"--lr {0.004 * gpu.LARGER_STEPS[name][1]:g}" in run["command"]
    for name, run in runs.items():
        assert all(p > 1 for split in run["perplexity"].values() for p in split.values())
        kept = json.loads((tmp_path / "gpu" / "larger_steps" / f"{name}.json").read_text())
        assert kept["test"]["forward_perplexity"] == run["perplexity"]["test"]["forward"]
