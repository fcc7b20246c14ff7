"""ElmoEmbedder (AllenNLP's interface) on the published biLM (tests/fixtures/bilm_tf) and on our own, through one
path: exact vectors, stateless vs stateful (ours too), AllenNLP's per-row state rule, the weight sources, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from published_reference import OPTIONS, TOLERANCE, WEIGHTS, reference_batches, reference_top

from elmo import ElmoEmbedder, ElmoError
from elmo.data.chars import batch_char_ids
from elmo.data.vocab import SPECIALS, Vocabulary
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.serialization import load_bilm, save_bilm


@pytest.fixture(scope="module")
def embedder() -> ElmoEmbedder:
    return ElmoEmbedder(options_file=str(OPTIONS), weight_file=str(WEIGHTS), cuda_device=-1)


def test_embed_sentence_matches_bilm_tf_and_keeps_the_case(embedder):
    sentence = reference_batches()[0][0]
    vectors = embedder.embed_sentence(sentence)
    assert vectors.shape == (3, len(sentence), 32) and vectors.dtype == np.float32
    assert np.abs(vectors[2] - reference_top(0)).max() < TOLERANCE
    assert np.array_equal(vectors[0, :, :16], vectors[0, :, 16:])  # one token layer for both directions
    lower = embedder.embed_sentence([t.lower() for t in sentence])
    assert np.abs(lower - vectors).max() > 1e-3  # "The" is not "the" for the published models
    assert embedder.tokenize("The U.S. rallied.") == ["The", "U.S.", "rallied", "."]


def test_a_sentence_does_not_depend_on_its_batch(embedder):
    batches = reference_batches()
    sentences = [batches[i][k] for i in range(4) for k in range(3)] + [[]]
    alone = [embedder.embed_sentence(s) for s in sentences]
    together = embedder.embed_batch(sentences)
    streamed = list(embedder.embed_sentences(iter(sentences), batch_size=5))
    assert together[-1].shape == (3, 0, 32)
    for a, b, c in zip(alone, together, streamed):
        assert a.shape == b.shape == c.shape
        assert np.abs(a - b).max(initial=0) < TOLERANCE and np.abs(a - c).max(initial=0) < TOLERANCE


def test_stateful_reproduces_all_ten_reference_batches():
    stateful = ElmoEmbedder(str(OPTIONS), str(WEIGHTS), device="cpu", stateful=True)
    for i, batch in enumerate(reference_batches()):
        assert np.abs(stateful.embed_batch(batch)[0][2] - reference_top(i)).max() < TOLERANCE, f"batch {i}"
    stateful.reset_states()
    stream = stateful.embed_sentences((s for batch in reference_batches() for s in batch), batch_size=3)
    for i in range(10):
        rows = [next(stream) for _ in range(3)]
        assert np.abs(rows[0][2] - reference_top(i)).max() < TOLERANCE, f"streamed batch {i}"


def manual(bilm, sentences, states):
    """One stateful step written out with the model: ``(top layers per row, final states)``."""
    chars, lengths = batch_char_ids(sentences, 50, "bilm_tf"), torch.tensor([len(s) for s in sentences])
    with torch.no_grad():
        layers, final = bilm.contextual(bilm.token_vectors(chars), lengths, states, carry=True)
    return [layers[:, r, : len(s)].numpy() for r, s in enumerate(sentences)], final


def zeros(bilm, rows):
    return [(torch.zeros(rows, 16), torch.zeros(rows, 64)) for _ in range(2 * bilm.config.num_layers)]


def test_stateful_states_are_kept_per_row_across_batches_of_other_sizes(embedder):
    e = ElmoEmbedder(str(OPTIONS), str(WEIGHTS), device="cpu", stateful=True)
    a, b, c = reference_batches()[:3]
    got = [e.embed_batch(a), e.embed_batch(b[:1]), e.embed_batch(c + [a[0]])]
    # by hand: 3 rows; then only row 0 is used and updated; then rows 0-2 continue and row 3 starts from zeros
    first, s1 = manual(e.bilm, a, zeros(e.bilm, 3))
    second, s2 = manual(e.bilm, b[:1], [(h[:1], c_[:1]) for h, c_ in s1])
    kept = [(torch.cat([h2, h1[1:], torch.zeros(1, 16)]), torch.cat([c2, c1[1:], torch.zeros(1, 64)]))
            for (h1, c1), (h2, c2) in zip(s1, s2)]
    third, _ = manual(e.bilm, c + [a[0]], kept)
    for ours, theirs in zip(got, (first, second, third)):
        for x, y in zip(ours, theirs):
            assert np.abs(x - y).max() < TOLERANCE
    assert np.abs(got[2][3] - embedder.embed_sentence(a[0])).max() < TOLERANCE  # a new row starts from zeros
    assert np.abs(got[2][0] - embedder.embed_sentence(c[0])).max() > 1e-3  # an old one does not


def test_stateful_empty_sentences_read_the_boundaries_like_allennlp():
    e = ElmoEmbedder(str(OPTIONS), str(WEIGHTS), device="cpu", stateful=True)
    assert [v.shape for v in e.embed_batch([[], ["A", "cat"]])] == [(3, 0, 32), (3, 2, 32)]
    assert e._states[0][0].shape[0] == 2 and e._states[0][0][0].abs().sum() > 0  # row 0 read <S> </S>


def test_vocab_to_cache_gives_the_same_vectors(embedder):
    sentence = reference_batches()[0][0]
    cached = ElmoEmbedder(str(OPTIONS), str(WEIGHTS), device="cpu", vocab_to_cache=sentence[:10] + ["unused"])
    assert np.abs(cached.embed_sentence(sentence) - embedder.embed_sentence(sentence)).max() < 1e-6


def test_our_own_biLM_through_the_same_class(tmp_path):
    words = list(SPECIALS) + ["the", "market", "rallied"]
    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig(vocab_size=len(words), embedding_dim=8, hidden_size=8, cutoffs=(5,), dropout=0.0)).eval()
    save_bilm(bilm, Vocabulary(words), tmp_path / "bilstm.pt", {})
    for source in (tmp_path, tmp_path / "bilstm.pt"):
        ours = ElmoEmbedder(str(source), device="cpu")
        vectors = ours.embed_sentence(["The", "market", "rallied"])
        assert vectors.shape == (3, 3, 16)
        assert np.allclose(vectors, ElmoEmbedder.from_pretrained(tmp_path, device="cpu")
                           .embed_sentence(["the", "market", "rallied"]), atol=1e-6)
    loaded, vocab, _ = load_bilm(tmp_path / "bilstm.pt")
    from_object = ElmoEmbedder(bilm=loaded, vocab=vocab, device="cpu")  # a biLM object: the same class
    assert from_object.amp_dtype is None  # fp32 by default, whatever the weight source
    assert np.allclose(vectors, from_object.embed_sentence(["the", "market", "rallied"]), atol=1e-6)
    assert ElmoEmbedder.from_pretrained(tmp_path, device="cpu").dim == 16
    stateful = ElmoEmbedder(str(tmp_path), device="cpu", stateful=True, vocab_to_cache=["The", "market"])
    first = stateful.embed_batch([["the", "market"], ["rallied"]])
    assert np.allclose(first[0], from_object.embed_sentence(["the", "market"]), atol=1e-6)  # from zero states
    second = stateful.embed_sentence(["the", "market"])  # row 0 starts where row 0 of the last call ended
    assert np.abs(second[1:] - first[0][1:]).max() > 1e-4 and np.allclose(second[0], first[0][0])
    with pytest.raises(ElmoError, match="not both"):
        ElmoEmbedder(str(tmp_path), bilm=loaded, vocab=vocab)
    assert ElmoEmbedder(bilm=loaded).vocab == vocab  # the vocabulary open_bilm / load_bilm gave the biLM
    loaded.vocab = None
    with pytest.raises(ElmoError, match="needs its vocabulary"):
        ElmoEmbedder(bilm=loaded)


def test_bad_arguments_and_files(tmp_path):
    with pytest.raises(ElmoError, match="give options_file and weight_file"):
        ElmoEmbedder()
    with pytest.raises(ElmoError, match="needs both files"):
        ElmoEmbedder(str(OPTIONS))
    with pytest.raises(ElmoError, match="weight file not found"):
        ElmoEmbedder(str(OPTIONS), str(tmp_path / "nowhere.hdf5"))
    with pytest.raises(ElmoError, match="options file not found"):
        ElmoEmbedder(str(tmp_path / "nowhere.json"), str(WEIGHTS))
    with pytest.raises(ElmoError, match="not both"):
        ElmoEmbedder(str(OPTIONS), str(WEIGHTS), cuda_device=-1, device="cpu")
    with pytest.raises(ElmoError, match="holds no biLM: looked for bilstm.pt, published_lm.pt"):
        ElmoEmbedder(str(tmp_path))
    with pytest.raises(ElmoError, match="expected a list of str tokens"):
        ElmoEmbedder(str(OPTIONS), str(WEIGHTS), device="cpu").embed_batch(["not tokenised"])
