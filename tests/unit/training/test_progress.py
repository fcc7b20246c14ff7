"""The training progress bar (elmo.training.trainer): its total is the number of batches of an epoch, so a user
sees how long an epoch takes and the time left; a streamed corpus, whose count is unknown, gives no total."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from elmo.data.corpus import EncodedCorpus
from elmo.data.stream import StreamedCorpus, TextSource
from elmo.data.vocab import Vocabulary
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.training import trainer
from elmo.training.trainer import Objective, Progress, TrainConfig, fit

V = 30


def corpus_of(n: int = 50) -> EncodedCorpus:
    rng = np.random.default_rng(0)
    return EncodedCorpus([rng.integers(4, V, size=rng.integers(2, 12)).tolist() for _ in range(n)])


def bar_totals(monkeypatch, train, epochs: int = 2) -> list[dict]:
    """Train an LM for ``epochs`` on ``train`` (a corpus with ``epoch_batches``); the keyword arguments each
    epoch's progress bar was made with."""
    made: list[dict] = []
    real = trainer.tqdm

    def spy(iterable, **kwargs):
        made.append(kwargs)
        return real(iterable, **kwargs)

    monkeypatch.setattr(trainer, "tqdm", spy)
    torch.manual_seed(0)
    lm = BiLM(BiLMConfig(vocab_size=V, embedding_dim=8, hidden_size=8, dropout=0.0, cutoffs=(10, 20))).forward_lm
    objective = Objective(lambda epoch: train.epoch_batches(8, 64, seed=epoch),
                          lambda model, batch: model(batch["ids"], batch["lengths"]),
                          lambda: {"loss": 1.0}, "loss", False)
    fit(lm, objective, TrainConfig(epochs=epochs, patience=5), torch.device("cpu"), progress=Progress(quiet=True))
    return made


def test_the_bar_total_is_the_number_of_batches_of_the_epoch(monkeypatch):
    corpus = corpus_of()
    made = bar_totals(monkeypatch, corpus)
    assert [m["total"] for m in made] == [len(corpus.batches(8, 64, shuffle=True, seed=e)) for e in (0, 1)]
    assert made[0]["total"] > 1


@pytest.mark.parametrize("shard", [(0, 1), (0, 3), (2, 3)])
def test_epoch_batches_know_their_count_before_they_are_made_on_every_rank(shard):
    corpus = corpus_of(40)
    batches = corpus.epoch_batches(8, 64, seed=3, shard=shard)
    assert len(batches) == len(corpus.batches(8, 64, shuffle=True, seed=3)) == len(list(batches))
    assert len(list(batches)) == len(batches)  # iterable again, the same count


def test_a_streamed_corpus_has_no_total(tmp_path, monkeypatch):
    path = tmp_path / "c.txt"
    path.write_text("\n".join(" ".join(f"w{(i * 7 + j) % 13}" for j in range(3 + i % 5)) for i in range(60)) + "\n",
                    encoding="utf-8")
    source = TextSource(path)
    vocab = Vocabulary.build(source.documents(), min_freq=1)
    stream = StreamedCorpus(source, vocab, max_length=16, buffer_tokens=100)
    assert [m["total"] for m in bar_totals(monkeypatch, stream)] == [None, None]
