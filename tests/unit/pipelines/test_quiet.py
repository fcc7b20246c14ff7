"""``--quiet`` drops the progress bars and the per-epoch lines and nothing else, in every command that has it
(docs/commands.md): the output folders, the data and batch lines, the results and the final table still print
(``pretrain`` and ``classify`` through ``ELMO.py``: tests/integration/test_stale_classifiers.py). ``export
--quiet`` prints nothing but errors, as its help says."""

from __future__ import annotations

import torch
from published_reference import OPTIONS, WEIGHTS
from support import make_rows, run_in_process

from elmo.cli import main

TINY_LM = ["--embedding-dim", "16", "--hidden-size", "16", "--epochs", "1", "--max-docs", "120", "--threads", "1",
           "--init-embeddings", "none", "--quiet"]


def test_quiet_training_commands_keep_every_line_but_the_per_epoch_ones(tmp_path, tiny_agnews, capsys):
    assert run_in_process("pretrain", tmp_path, tiny_agnews, *TINY_LM) == 0
    pretrained = capsys.readouterr().out
    assert pretrained.startswith(f"output folders: models {tmp_path / 'models'}, results {tmp_path / 'results'}, ")
    for line in ("batches: up to 8 documents (114 training documents: at least 15 steps per epoch;", "data: ",
                 "forward LM: val perplexity", "backward LM: val perplexity", "direction   val ppl"):
        assert line in pretrained, line
    assert "LM epoch 1:" not in pretrained
    assert run_in_process("baselines", tmp_path, tiny_agnews, "--methods", "tfidf_logreg", "--max-docs", "120",
                          "--threads", "1", "--quiet") == 0
    baselines = capsys.readouterr().out
    assert "output folders: " in baselines and "tfidf_logreg: test accuracy" in baselines
    assert "method              split  accuracy" in baselines  # the final table

    (tmp_path / "domain.txt").write_text("\n".join(r[2] for r in make_rows(40, seed=5)) + "\n", encoding="utf-8")
    assert run_in_process("finetune", tmp_path / "finetuned", tmp_path / "absent", "--options-file", str(OPTIONS),
                          "--weight-file", str(WEIGHTS), "--train-file", str(tmp_path / "domain.txt"), "--epochs", "1",
                          "--softmax-samples", "20", "--precision", "fp32", "--threads", "1", "--quiet") == 0
    finetuned = capsys.readouterr().out
    for line in ("output folders: ", "batches: up to 8 documents", "fine-tuning ", "before: ", "after:  ",
                 "direction   val ppl"):
        assert line in finetuned, line
    assert "biLM epoch 1:" not in finetuned


def test_quiet_embed_keeps_its_summary_line_and_quiet_export_prints_nothing(tmp_path, capsys):
    threads = torch.get_num_threads()
    (tmp_path / "in.txt").write_text("the cat sat\na dog\n", encoding="utf-8")
    published = ["--options-file", str(OPTIONS), "--weight-file", str(WEIGHTS)]
    try:
        assert main(["embed", str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--top", *published,
                     "--device", "cpu", "--threads", "1", "--quiet"]) == 0
    finally:
        torch.set_num_threads(threads)
    embedded = capsys.readouterr()
    assert embedded.err.startswith(f"wrote 2 sentences (5 tokens) to {tmp_path / 'out.hdf5'} in ")
    assert embedded.err.count("\n") == 1 and embedded.out == ""  # no progress bar
    assert main(["export", "--out", str(tmp_path / "export"), *published, "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")

