"""The Elmo module (elmo.model.elmo): mixed layers, mask, dropout, frozen or fine-tuned biLM."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from elmo import Elmo, ElmoError
from elmo.data.vocab import SPECIALS
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig

WORDS = list(SPECIALS) + ["the", "market", "rallied", "on", "friday", "team", "won", "match", "."]


def tiny_bilm(**options) -> BiLM:
    torch.manual_seed(0)
    sizes = {"vocab_size": len(WORDS), "embedding_dim": 8, "hidden_size": 8, "cutoffs": (6,), "dropout": 0.0}
    return BiLM(BiLMConfig(**(sizes | options))).eval()


def test_elmo_module_shapes_mask_and_outputs():
    bilm = tiny_bilm()
    elmo = Elmo(bilm, num_output_representations=2, mix="frozen_lambda", dropout=0.5)
    ids = torch.tensor([[4, 5, 6], [7, 8, 0]])
    out = elmo(ids)
    reps, mask = out["elmo_representations"], out["mask"]
    assert len(reps) == 2 and all(r.shape == (2, 3, 16) for r in reps)
    assert mask.tolist() == [[True, True, True], [True, True, False]]
    assert reps[0][1, 2].abs().sum() == 0  # padding is zero
    assert not torch.allclose(reps[0], reps[1])  # each output has its own mix (frozen draws seed, seed + 1)
    elmo.eval()
    with torch.no_grad():
        layers = bilm(ids, torch.tensor([3, 2]))
        weights = torch.softmax(elmo.mixes[0].weights, 0)
        expected = torch.einsum("l,lbtd->btd", weights, layers)
        np.testing.assert_allclose(elmo(ids)["elmo_representations"][0], expected, atol=1e-6)
    elmo.train()
    assert not elmo.bilm.training  # the biLM never trains its dropout
    a, b = elmo(ids)["elmo_representations"][0], elmo(ids)["elmo_representations"][0]
    assert not torch.equal(a, b)  # dropout on the ELMo vector in training mode


def test_elmo_module_freezes_or_fine_tunes_the_bilm():
    ids = torch.tensor([[4, 5, 6]])
    frozen = Elmo(tiny_bilm(), dropout=0.0)
    frozen(ids)["elmo_representations"][0].sum().backward()
    assert all(p.grad is None for p in frozen.bilm.parameters())
    assert frozen.mixes[0].weights.grad is not None and frozen.penalty().item() == 0.0
    tuned = Elmo(tiny_bilm(), dropout=0.0, requires_grad=True)
    tuned(ids)["elmo_representations"][0].sum().backward()
    assert tuned.bilm.forward_lm.layers[1].weight_ih_l0.grad is not None
    with pytest.raises(ElmoError, match="empty sequence"):
        frozen(torch.tensor([[4, 5], [0, 0]]))
    with pytest.raises(ElmoError, match="unknown layer mix"):
        Elmo(tiny_bilm(), mix="average")


# --- AllenNLP's constructor and call (tests/unit/model/test_elmo_allennlp.py compares the numbers with AllenNLP's) ---

SENTENCES = [["The", "minister", "said", "the", "profit", "fell", "."], ["Zyxquv", "naïve", "!"], ["a"]]


def test_elmo_opens_bilm_tf_files_a_bilm_object_or_a_folder_alike(tmp_path):
    from published_reference import OPTIONS, WEIGHTS

    from elmo import batch_to_ids
    from elmo.model.published_io import load_published_bilm

    character_ids = batch_to_ids(SENTENCES)
    export = tmp_path / "export"  # python -m elmo export's folder: options.json + weights.hdf5
    export.mkdir()
    (export / "options.json").write_bytes(OPTIONS.read_bytes())
    (export / "weights.hdf5").write_bytes(WEIGHTS.read_bytes())
    load_published_bilm(OPTIONS, WEIGHTS).save_pretrained(tmp_path / "saved")
    layers = [Elmo(OPTIONS, WEIGHTS, 2, dropout=0.0), Elmo(str(OPTIONS), str(WEIGHTS), num_output_representations=2),
              Elmo(load_published_bilm(OPTIONS, WEIGHTS), num_output_representations=2), Elmo(export, None, 2),
              Elmo(tmp_path / "saved", num_output_representations=2)]
    with torch.no_grad():
        expected = layers[0].eval()(character_ids)
        for elmo in layers[1:]:
            out = elmo.eval()(character_ids)
            assert torch.equal(out["mask"], expected["mask"])
            assert all(torch.allclose(x, y, atol=1e-6) for x, y in zip(out["elmo_representations"], expected["elmo_representations"]))
        # the project's call on the same biLM: word ids (B, T), lengths, chars: the same vectors without layer norm
        lengths = expected["mask"].sum(1)
        ours = layers[0](expected["mask"].long(), lengths, character_ids)
    assert torch.equal(ours["mask"], expected["mask"]) and expected["mask"].sum(1).tolist() == [7, 3, 1]
    assert torch.allclose(ours["elmo_representations"][0], expected["elmo_representations"][0], atol=1e-6)
    assert layers[0].get_output_dim() == 32 and expected["elmo_representations"][0].shape == (3, 7, 32)
    assert all(not p.requires_grad for p in layers[0].bilm.parameters())  # requires_grad=False freezes the biLM


def test_elmo_allennlp_call_options_and_round_trip(tmp_path):
    from published_reference import OPTIONS, WEIGHTS

    from elmo import batch_to_ids

    character_ids = batch_to_ids(SENTENCES)
    vocab = ["@@PADDING@@", *sorted({w for s in SENTENCES for w in s})]
    words = torch.zeros(character_ids.shape[:2], dtype=torch.long)
    for b, sentence in enumerate(SENTENCES):
        words[b, : len(sentence)] = torch.tensor([vocab.index(w) for w in sentence])
    plain = Elmo(OPTIONS, WEIGHTS, 1, dropout=0.0).eval()
    cached = Elmo(OPTIONS, WEIGHTS, 1, dropout=0.0, vocab_to_cache=vocab).eval()
    with torch.no_grad():
        expected = plain(character_ids)["elmo_representations"][0]
        assert torch.allclose(cached(character_ids, words)["elmo_representations"][0], expected, atol=1e-6)
        assert torch.allclose(cached(character_ids)["elmo_representations"][0], expected, atol=1e-6)
        unknown = words.clone()
        unknown[0, 0] = len(vocab)  # not cached: the characters are read (AllenNLP's fallback)
        assert torch.allclose(cached(character_ids, unknown)["elmo_representations"][0], expected, atol=1e-6)
        with pytest.warns(UserWarning, match="no vocab_to_cache"):
            assert torch.allclose(plain(character_ids, words)["elmo_representations"][0], expected, atol=1e-6)
        kept = Elmo(OPTIONS, WEIGHTS, 1, dropout=0.0, keep_sentence_boundaries=True).eval()(character_ids)
    assert kept["mask"].sum(1).tolist() == [9, 5, 3] and kept["elmo_representations"][0].shape == (3, 9, 32)
    assert torch.allclose(kept["elmo_representations"][0][0, 1:8], expected[0], atol=1e-6)  # tokens between <S>, </S>
    fixed = Elmo(OPTIONS, WEIGHTS, 2, scalar_mix_parameters=[-9e10, 1.0, -9e10], keep_sentence_boundaries=True,
                 vocab_to_cache=vocab, dropout=0.0)
    assert not any(p.requires_grad for p in fixed.mixes.parameters())
    fixed.save_pretrained(tmp_path / "elmo")
    loaded = Elmo.from_pretrained(tmp_path / "elmo")
    assert (loaded.scalar_mix_parameters, loaded.keep_sentence_boundaries, loaded.vocab_to_cache) == \
        ([-9e10, 1.0, -9e10], True, vocab)
    with torch.no_grad():
        for x, y in zip(fixed.eval()(character_ids, words)["elmo_representations"],
                        loaded(character_ids, words)["elmo_representations"]):
            assert torch.allclose(x, y, atol=1e-6)


def test_elmo_errors_are_one_line_and_name_both_values(tmp_path):
    from published_reference import OPTIONS, WEIGHTS

    from elmo import batch_to_ids

    bilm = tiny_bilm()
    cases = [
        (lambda: Elmo(bilm, 2), "weight_file=2.*num_output_representations=... by name"),
        (lambda: Elmo(OPTIONS), "options file needs its weight_file"),
        (lambda: Elmo(tmp_path, WEIGHTS), "is a folder: give it alone"),
        (lambda: Elmo(tmp_path / "missing.json", WEIGHTS), "missing.json"),
        (lambda: Elmo(OPTIONS, tmp_path / "missing.hdf5"), "missing.hdf5: weight file not found"),
        (lambda: Elmo(tmp_path / "nowhere"), "nowhere holds no biLM"),
        (lambda: Elmo(OPTIONS, WEIGHTS, scalar_mix_parameters=[1.0, 2.0]), "has 2 values, but the biLM has 3 layers"),
        (lambda: Elmo(OPTIONS, WEIGHTS, scalar_mix_parameters=[1, 2, 3], mix="learned_function"), "learned_function"),
        (lambda: Elmo(bilm, keep_sentence_boundaries=True), "needs a character biLM: this one reads word ids"),
        (lambda: Elmo(bilm, vocab_to_cache=["the"]), "needs a character biLM: this one reads word ids"),
        (lambda: Elmo(bilm)(torch.zeros(3, dtype=torch.long)), r"character ids \(B, T, C\) or word ids \(B, T\), got"),
        (lambda: Elmo(bilm)(batch_to_ids(SENTENCES)), "reads word ids"),
        (lambda: Elmo(bilm)(torch.tensor([[4, 5]]), torch.tensor([[2]])), r"lengths must have shape \(1,\), got \(1, 1\)"),
        (lambda: Elmo(OPTIONS, WEIGHTS)(batch_to_ids(SENTENCES)[..., :20]), "20 characters per token, but the biLM reads 50"),
        (lambda: Elmo(OPTIONS, WEIGHTS, vocab_to_cache=["a"])(batch_to_ids(SENTENCES), torch.zeros(3, 2, dtype=torch.long)),
         r"word_inputs have shape \(3, 2\), but the character ids' tokens have shape \(3, 7\)"),
        (lambda: Elmo(OPTIONS, WEIGHTS)(batch_to_ids([["a", "b"]]).index_fill(1, torch.tensor([0]), 0)), "right-padded"),
        (lambda: Elmo(OPTIONS, WEIGHTS)(batch_to_ids(SENTENCES), chars=batch_to_ids(SENTENCES)), "AllenNLP's call"),
        (lambda: Elmo(OPTIONS, WEIGHTS, keep_sentence_boundaries=True)(torch.tensor([[1]]), chars=batch_to_ids([["a"]])),
         "keep_sentence_boundaries applies to AllenNLP's call"),
    ]
    for make, message in cases:
        with pytest.raises(ElmoError, match=message) as raised:
            make()
        assert "\n" not in str(raised.value)


def test_batch_to_ids_refuses_untokenised_text():
    from elmo import batch_to_ids

    assert batch_to_ids([["a"], []]).shape == (2, 1, 50) and not batch_to_ids([["a"], []])[1].any()
    for bad in ("a sentence", ["a sentence"], [["a", 3]]):
        with pytest.raises(ElmoError, match="batch_to_ids"):
            batch_to_ids(bad)


def test_allennlps_call_on_our_character_bilm_reads_its_own_numbering():
    from elmo.data.chars import batch_char_ids

    bilm = tiny_bilm(token_encoder="char", max_chars=12)
    sentences = [["the", "market", "rallied"], ["team", "won"]]
    chars = batch_char_ids(sentences, 12, "elmo")
    ids = torch.tensor([[WORDS.index(w) for w in sentences[0]], [WORDS.index(w) for w in sentences[1]] + [0]])
    elmo = Elmo(bilm, dropout=0.0).eval()
    with torch.no_grad():
        allennlps, ours = elmo(chars), elmo(ids, chars=chars)
    assert torch.equal(allennlps["mask"], ours["mask"])
    torch.testing.assert_close(allennlps["elmo_representations"][0], ours["elmo_representations"][0], atol=1e-6, rtol=0)


def test_our_character_bilm_takes_allennlps_boundaries_and_cached_words():
    from elmo.data.chars import batch_char_ids

    bilm = tiny_bilm(token_encoder="char", max_chars=12)
    sentences = [["the", "market", "rallied"], ["team", "won"]]
    chars = batch_char_ids(sentences, 12, "elmo")
    cache = ["@@PADDING@@", "the", "market", "rallied", "team", "won"]
    words = torch.tensor([[1, 2, 3], [4, 5, 0]])
    with torch.no_grad():
        plain = Elmo(bilm, dropout=0.0).eval()(chars)
        cached = Elmo(bilm, dropout=0.0, vocab_to_cache=cache).eval()(chars, words)
        kept = Elmo(bilm, dropout=0.0, keep_sentence_boundaries=True, scalar_mix_parameters=[1.0, 1.0, 1.0]).eval()(chars)
        layers = bilm.contextual(bilm.token_vectors(chars), torch.tensor([3, 2]), boundaries=True)[0]
    torch.testing.assert_close(cached["elmo_representations"][0], plain["elmo_representations"][0], atol=1e-6, rtol=0)
    assert kept["mask"].tolist() == [[True] * 5, [True] * 4 + [False]]
    torch.testing.assert_close(kept["elmo_representations"][0], layers.mean(0), atol=1e-6, rtol=0)  # <bos> .. <eos>
