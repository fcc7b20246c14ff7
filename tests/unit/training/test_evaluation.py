"""Language-model evaluation (elmo.training.evaluation): the fast perplexity is the exact full-softmax one, and the
exact word metrics scored a fixed number of rows at a time are those of scoring each batch whole."""

from __future__ import annotations

import math

import pytest
import torch

from elmo.data.corpus import EncodedCorpus
from elmo.errors import ElmoError
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.language_model import LanguageModel
from elmo.training.evaluation import evaluate_words, perplexity

V = 40


def make_bilm() -> BiLM:
    torch.manual_seed(0)
    return BiLM(BiLMConfig(vocab_size=V, embedding_dim=8, hidden_size=8, dropout=0.0, cutoffs=(10, 20))).eval()


def test_adaptive_loss_perplexity_equals_full_softmax_perplexity():
    bilm = make_bilm()
    g = torch.Generator().manual_seed(1)
    corpus = EncodedCorpus([torch.randint(4, V, (int(n),), generator=g).tolist() for n in torch.randint(1, 9, (20,), generator=g)])
    for lm in (bilm.forward_lm, bilm.backward_lm):
        fast = perplexity(lm, corpus, torch.device("cpu"))
        exact, targets, top5 = evaluate_words(lm, corpus, torch.device("cpu"))
        assert fast == pytest.approx(exact["perplexity"], rel=1e-4)
        assert len(targets) == corpus.num_tokens + len(corpus)  # every word plus one boundary word
        assert 1 < exact["perplexity"] < 10 * V and top5.shape == (len(targets), 5)
        assert exact["top1_accuracy"] <= exact["top5_accuracy"]


def test_perplexity_of_uniform_model_is_vocabulary_size():
    lm = LanguageModel(BiLMConfig(vocab_size=V, embedding_dim=8, hidden_size=8, cutoffs=(10,)), "forward")
    with torch.no_grad():
        for p in lm.softmax.parameters():
            p.zero_()
    corpus = EncodedCorpus([[5, 6, 25]])  # targets 5, 6, 25, <eos>: word 25 is in the tail
    # head: 10 words + 1 cluster equally likely; the cluster spreads its mass over 30 words
    expected = math.exp(-(3 * math.log(1 / 11) + math.log(1 / 11 / 30)) / 4)
    assert perplexity(lm, corpus, torch.device("cpu")) == pytest.approx(expected, rel=1e-5)


def scored_batch_by_batch(lm, corpus: EncodedCorpus, max_tokens: int):
    """The reference: each batch's predicted words scored at once (``lm.log_probs``)."""
    nll, targets, top5 = 0.0, [], []
    for _, batch in corpus.eval_batches(64, max_tokens):
        log_probs, target = lm.log_probs(batch["ids"], batch["lengths"])
        nll -= float(log_probs.gather(1, target.unsqueeze(1)).sum())
        targets.append(target)
        top5.append(log_probs.topk(5, dim=1).indices)
    targets = torch.cat(targets)
    return math.exp(nll / len(targets)), targets.numpy(), torch.cat(top5).numpy()


@pytest.mark.parametrize("rows", [1, 7, 128, 10_000])
def test_words_scored_rows_at_a_time_across_batches_give_the_batch_by_batch_metrics(rows):
    lm = make_bilm().forward_lm
    g = torch.Generator().manual_seed(2)
    corpus = EncodedCorpus([torch.randint(4, V, (int(n),), generator=g).tolist() for n in torch.randint(1, 30, (90,), generator=g)])
    ppl, want_targets, want_top5 = scored_batch_by_batch(lm, corpus, 64)
    seen: list[int] = []
    score = lm.vocabulary_log_probs
    lm.vocabulary_log_probs = lambda states: seen.append(len(states)) or score(states)
    metrics, targets, top5 = evaluate_words(lm, corpus, torch.device("cpu"), max_tokens=64, rows=rows)
    assert metrics["perplexity"] == pytest.approx(ppl, rel=1e-6)
    assert (targets == want_targets).all() and (top5 == want_top5).all()
    # every matrix but the last has the same number of rows, whatever the batches' sizes
    assert sum(seen) == len(targets) and set(seen[:-1]) <= {rows} and 0 < seen[-1] <= rows


def test_evaluate_words_names_bad_rows_and_an_empty_corpus():
    lm = make_bilm().forward_lm
    with pytest.raises(ElmoError, match="rows must be >= 1, got 0"):
        evaluate_words(lm, EncodedCorpus([[5, 6]]), torch.device("cpu"), rows=0)
    with pytest.raises(ElmoError, match="empty corpus"):
        evaluate_words(lm, EncodedCorpus([]), torch.device("cpu"))


def test_scores_kept_on_the_device_are_the_scores_read_back_per_block():
    from elmo.training.evaluation import _DeviceWordRows, _WordRows
    g = torch.Generator().manual_seed(0)
    blocks = [(torch.log_softmax(torch.randn(n, V, generator=g), dim=1), torch.randint(0, V, (n,), generator=g))
              for n in (7, 3, 7)]
    host, device = _WordRows(capacity=4), _DeviceWordRows()  # capacity 4: the host arrays grow twice
    for log_probs, target in blocks:
        host.score(log_probs, target)
        device.score(log_probs, target)
    (nll_h, targets_h, top5_h), (nll_d, targets_d, top5_d) = host.result(), device.result()
    assert nll_d == pytest.approx(nll_h, rel=1e-6) and nll_h > 0
    assert (targets_h == targets_d).all() and (top5_h == top5_d).all() and top5_d.shape == (17, 5)
    assert targets_d.dtype == top5_d.dtype == targets_h.dtype
    assert _DeviceWordRows().result()[1].shape == (0,)


def test_a_gpu_scores_blocks_as_large_as_a_gigabyte_of_log_probabilities_allows():
    from elmo.training.evaluation import GPU_SCORED_ELEMENTS, GPU_SCORED_ROWS, SCORED_ROWS, gpu_scored_rows
    assert gpu_scored_rows(30_000) == GPU_SCORED_ROWS == 4096  # AG News: the cap
    assert gpu_scored_rows(800_000) == 335 and 335 * 800_000 <= GPU_SCORED_ELEMENTS  # the 1B Word Benchmark's
    assert gpu_scored_rows(10**7) == SCORED_ROWS
    lm = LanguageModel(BiLMConfig(vocab_size=V, embedding_dim=8, hidden_size=8, cutoffs=(10,)), "forward")
    assert lm.vocab_size == V
    from elmo.model.bilm import BiLM
    published = BiLM(BiLMConfig.bilm_tf(char_dim=4, filters=((1, 4),), num_highway=1, hidden_size=8,
                                                  projection_dim=4, vocab_size=V))
    assert published.direction("backward").vocab_size == V
