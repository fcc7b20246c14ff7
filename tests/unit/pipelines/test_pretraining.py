"""The pre-training pipeline's pieces (elmo.pipelines.pretraining), in process."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from support import TOPIC_WORDS, make_rows, run_in_process

from elmo.data.chars import batch_char_ids
from elmo.data.text import tokenize
from elmo.data.vocab import Vocabulary
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.static import word2vec_vectors
from elmo.pipelines.pretraining import PretrainArgs, init_embeddings


@pytest.fixture(scope="module")
def toy():
    """Tokenised toy topics: words of one topic share contexts, words of different topics do not."""
    tokens = [tokenize(r[2]) for r in make_rows(800, seed=3)]
    vocab = Vocabulary.build(tokens, min_freq=2)
    return tokens, vocab


def test_init_embeddings_copies_word2vec_into_both_language_models(toy):
    tokens, vocab = toy
    bilm = BiLM(BiLMConfig(vocab_size=len(vocab), embedding_dim=8, hidden_size=8))
    bos_before = bilm.forward_lm.embedding.weight[2].clone()
    config = PretrainArgs(init_embeddings="word2vec", embedding_dim=8, hidden_size=8)
    info = init_embeddings(bilm, vocab, tokens, config, say=lambda *a: None)
    expected, _ = word2vec_vectors(tokens, vocab, dim=8, seed=0)
    word = vocab.stoi[TOPIC_WORDS[0][0]]
    for lm in (bilm.forward_lm, bilm.backward_lm):
        torch.testing.assert_close(lm.embedding.weight[word], torch.from_numpy(expected[word]))
        assert not lm.embedding.weight[0].any()  # <pad> stays zero
    torch.testing.assert_close(bilm.forward_lm.embedding.weight[2], bos_before)  # <bos> never occurs: kept
    assert info["method"] == "word2vec" and info["dim"] == 8
    untouched = BiLM(BiLMConfig(vocab_size=len(vocab), embedding_dim=8, hidden_size=8))
    none = PretrainArgs(init_embeddings="none")
    assert init_embeddings(untouched, vocab, tokens, none, say=lambda *a: None) == {"method": "none"}


def test_centered_word2vec_init_removes_the_shared_direction(toy):
    import numpy as np

    from elmo.model.static import center_vectors, common_direction_cosine

    tokens, vocab = toy
    raw, _ = word2vec_vectors(tokens, vocab, dim=8, seed=0)
    centered = center_vectors(raw)
    seen = np.abs(raw).sum(1) > 0
    assert np.array_equal(np.abs(centered).sum(1) > 0, seen)  # <pad> and unseen words stay zero
    assert np.allclose(centered[seen].mean(0), 0, atol=1e-5) and centered[seen].std() == pytest.approx(1, rel=0.1)  # standardize() counts the zero rows too
    assert common_direction_cosine(centered) < 0.05 < common_direction_cosine(raw + 3)  # a shared offset dominates
    bilm = BiLM(BiLMConfig(vocab_size=len(vocab), embedding_dim=8, hidden_size=8))
    config = PretrainArgs(init_embeddings="word2vec-centered", embedding_dim=8, hidden_size=8)
    info = init_embeddings(bilm, vocab, tokens, config, say=lambda *a: None)
    assert info["centered"] and info["common_direction_cosine"] == pytest.approx(common_direction_cosine(raw))
    word = vocab.stoi[TOPIC_WORDS[0][0]]
    torch.testing.assert_close(bilm.backward_lm.embedding.weight[word], torch.from_numpy(centered[word]))


def started(threads: int, device: str = "cpu", world_size: int = 1):
    """A :class:`~elmo.pipelines.common.StartedRun` with only what ``direction_threads`` reads."""
    from elmo.artifacts import Outputs
    from elmo.pipelines.common import StartedRun
    from elmo.runtime.distributed import Context

    return StartedRun(Context(world_size=world_size), torch.device(device), None, threads, Outputs(), print)


@pytest.mark.parametrize("choice, threads, expected", [
    ("auto", 2, 1), ("auto", 8, 4), ("auto", 1, None), ("auto", 3, 1),  # half of --threads each, from two threads on
    ("on", 1, 1), ("on", 4, 2), ("off", 8, None),
])
def test_concurrent_directions_splits_the_threads_between_the_two_processes(choice, threads, expected):
    from elmo.pipelines.pretraining import direction_threads

    assert direction_threads(PretrainArgs(concurrent_directions=choice), started(threads)) == expected


def test_concurrent_directions_stays_sequential_under_torchrun_on_cuda_and_with_architecture():
    from elmo.errors import ElmoError
    from elmo.pipelines.pretraining import direction_threads

    for run in (started(4, world_size=2), started(4, device="cuda")):
        assert direction_threads(PretrainArgs(), run) is None  # auto
        with pytest.raises(ElmoError, match="--concurrent-directions on trains the two directions in two processes"):
            direction_threads(PretrainArgs(concurrent_directions="on"), run)
    assert direction_threads(PretrainArgs(architecture="elmo-small"), started(4)) is None
    with pytest.raises(ElmoError, match="--concurrent-directions on: --architecture elmo-small trains both"):
        PretrainArgs(architecture="elmo-small", concurrent_directions="on").check()


def test_a_flag_value_other_than_auto_on_off_is_refused(capsys):
    from elmo.cli import run

    with pytest.raises(SystemExit) as exit_:
        run("pretrain", ["--concurrent-directions", "yes"])
    assert exit_.value.code == 2 and "invalid choice: 'yes'" in capsys.readouterr().err


def test_a_direction_whose_process_fails_names_it_and_its_log_and_writes_no_results(tiny_agnews, tmp_path, capsys,
                                                                                     monkeypatch):
    """Both directions' processes crash (the function they run is replaced by one that raises TypeError): exit 2,
    one line naming the direction, its exit status and its log (which holds the traceback); the results of an
    earlier run stay as they were."""
    from elmo.pipelines import pretraining

    monkeypatch.setattr(pretraining, "train_direction", len)  # len(job): TypeError in the child process
    earlier = tmp_path / "results" / "lm.json"
    earlier.parent.mkdir()
    earlier.write_text('{"earlier": true}')
    status = run_in_process("pretrain", tmp_path, tiny_agnews, "--embedding-dim", "8", "--hidden-size", "8",
                            "--epochs", "1", "--max-docs", "120", "--init-embeddings", "none", "--quiet",
                            "--threads", "2", "--concurrent-directions", "on")
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert re.fullmatch(r"error: (forward|backward) LM: its process failed with exit status 1; its log (\S+\.log): "
                        r"TypeError: object of type 'DirectionJob' has no len\(\)", err), err
    log = Path(re.search(r"its log (\S+\.log)", err).group(1))
    assert log.parent == tmp_path / "models" / "checkpoints" and "Traceback" in log.read_text()
    assert earlier.read_text() == '{"earlier": true}' and not (tmp_path / "models" / "bilstm.pt").exists()


@pytest.mark.parametrize("softmax, lstm, encoder", [("sampled", "fused", "word"), ("adaptive", "clipped", "word"),
                                                    ("sampled", "clipped", "word"), ("sampled", "clipped", "char")])
def test_our_bilm_trains_with_either_softmax_and_either_cell(tiny_agnews, tmp_path, softmax, lstm, encoder):
    """``--softmax`` and ``--lstm`` on our biLM (the default, adaptive and fused, is every other run's): it trains,
    its held-out perplexities are finite, and ``bilstm.pt`` rebuilds it with that softmax and cell."""
    import json

    from elmo.model.serialization import load_bilm

    status = run_in_process("pretrain", tmp_path, tiny_agnews, "--hidden-size", "12", "--proj-size", "8",
                            "--softmax", softmax, "--softmax-samples", "20", "--lstm", lstm, "--epochs", "1",
                            "--max-docs", "120", "--init-embeddings", "none", "--quiet", "--threads", "1",
                            "--precision", "fp32", "--token-encoder", encoder, "--char-filters", "1:4", "2:4")
    assert status == 0
    lm = json.loads((tmp_path / "results" / "lm.json").read_text())
    assert lm["softmax"] == softmax and lm["bilm_config"]["token_encoder"] == encoder and lm["bilm_config"]["cell_clip"] == (3.0 if lstm == "clipped" else None)
    assert all(1 < lm["test"][f"{d}_perplexity"] < 1e4 for d in ("forward", "backward"))
    bilm, vocab, _ = load_bilm(tmp_path / "models" / "bilstm.pt")
    assert type(bilm.forward_lm.softmax).__name__ == {"sampled": "SampledSoftmax", "adaptive": "AdaptiveSoftmax"}[softmax]
    assert {type(layer).__name__ for layer in bilm.backward_lm.layers} == \
        {"ProjectedLSTM" if lstm == "clipped" else "AutocastLSTM"}
    words = ["the", "market", "rallied"]
    ids, lengths = torch.tensor([vocab.encode(words)]), torch.tensor([3])
    chars = batch_char_ids([words], bilm.config.max_chars) if encoder == "char" else None
    with torch.no_grad():
        assert bilm.eval()(ids, lengths, chars).shape == (3, 1, 3, 16)
