"""``from elmo import Elmo, batch_to_ids`` as drop-ins for AllenNLP 2.10.1's: AllenNLP's own ``Elmo`` module
(``allennlp.modules.elmo``, imported as ``allennlp_reference.import_allennlp_elmo`` does) and ours on the same bilm-tf
weights (tests/fixtures/bilm_tf), called as AllenNLP documents it, give the same vectors (to 1e-5) and masks, for each
of AllenNLP's options; ``batch_to_ids`` gives the same ids. Skipped without AllenNLP, a failure under CI (``CI=true``).
"""

from __future__ import annotations

import pytest
import torch
from allennlp_reference import allennlp_marks, import_allennlp_elmo
from published_reference import OPTIONS, TOLERANCE, WEIGHTS

from elmo import Elmo, batch_to_ids

pytestmark = allennlp_marks()

#: ragged lengths (1 to 11 tokens), non-ASCII bytes (2-, 3- and 4-byte UTF-8), a word past the 48 bytes a token keeps,
#: bilm-tf's boundary token spelt as a word, punctuation and digits
SENTENCES = [["The", "minister", "said", "the", "quarterly", "profit", "fell", "after", "talks", "ended", "."],
             ["Zyxquv", "naïve", "École", "antidisestablishmentarianism-and-more-than-fifty-characters-long", "!"],
             ["東京", "株式", "🙂", "<S>", "1,024.5"], ["Goal", "!"], ["a"]]
VOCAB = ["@@PADDING@@", *sorted({w for s in SENTENCES for w in s})]  # AllenNLP's vocabulary: index 0 is padding
#: AllenNLP's options, each compared on its own and with the others it combines with (``word_inputs``: ``vocab_to_cache``)
CONFIGS = {
    "defaults": {},
    "keep_sentence_boundaries": {"keep_sentence_boundaries": True},
    "scalar_mix_parameters": {"scalar_mix_parameters": [-1.0, 0.5, 2.0]},
    "do_layer_norm": {"do_layer_norm": True},
    "do_layer_norm+keep_sentence_boundaries": {"do_layer_norm": True, "keep_sentence_boundaries": True},
    "do_layer_norm+scalar_mix_parameters": {"do_layer_norm": True, "scalar_mix_parameters": [0.3, -2.0, 1.0]},
    "vocab_to_cache+word_inputs": {"vocab_to_cache": VOCAB},
    "requires_grad": {"requires_grad": True},
}


@pytest.fixture(scope="module")
def allennlp():
    return import_allennlp_elmo()


def word_ids(sentences: list[list[str]]) -> torch.Tensor:
    """``(B, T)`` indices into :data:`VOCAB`, 0 at padding (AllenNLP's ``word_inputs``)."""
    ids = torch.zeros(len(sentences), max(map(len, sentences)), dtype=torch.long)
    for b, sentence in enumerate(sentences):
        ids[b, : len(sentence)] = torch.tensor([VOCAB.index(w) for w in sentence])
    return ids


def both(allennlp, options: dict) -> tuple[torch.nn.Module, Elmo]:
    """AllenNLP's ``Elmo`` (new: its LSTM states start at zero) and ours, ``num_output_representations=2``,
    ``dropout=0``, their trainable mixes set to the same non-uniform weights."""
    theirs = allennlp.Elmo(str(OPTIONS), str(WEIGHTS), 2, dropout=0, **options)
    ours = Elmo(str(OPTIONS), str(WEIGHTS), 2, dropout=0, **options)
    if "scalar_mix_parameters" not in options:
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for k, mix in enumerate(ours.mixes):
                weights, gamma = torch.randn(3, generator=generator), 0.5 + k
                mix.weights.copy_(weights)
                mix.gamma.fill_(gamma)
                for parameter, w in zip(getattr(theirs, f"scalar_mix_{k}").scalar_parameters, weights):
                    parameter.fill_(float(w))
                getattr(theirs, f"scalar_mix_{k}").gamma.fill_(gamma)
    return theirs, ours


def assert_same(theirs_out: dict, ours_out: dict, name: str, padding_as_allennlp: bool = True) -> float:
    """Same masks (bool), shapes and vectors to :data:`TOLERANCE` (on real positions only, and ours zero at padding,
    where ``padding_as_allennlp`` is False); returns the largest difference."""
    mask = theirs_out["mask"]
    assert mask.dtype == ours_out["mask"].dtype == torch.bool and torch.equal(ours_out["mask"], mask)
    assert len(theirs_out["elmo_representations"]) == len(ours_out["elmo_representations"]) == 2
    worst = 0.0
    for theirs, ours in zip(theirs_out["elmo_representations"], ours_out["elmo_representations"]):
        assert theirs.shape == ours.shape == (*mask.shape, 32)
        theirs, ours = theirs.detach(), ours.detach()
        if padding_as_allennlp:
            worst = max(worst, float((theirs - ours).abs().max()))
        else:
            worst = max(worst, float((theirs - ours)[mask].abs().max()))
            assert (ours[~mask] == 0).all()
        assert theirs[mask].abs().max() > 100 * TOLERANCE  # no agreement of near-zero vectors
    print(f"{name}: max |AllenNLP - ours| = {worst:.3g}")  # shown with -s
    assert worst <= TOLERANCE, name
    return worst


def test_batch_to_ids_is_allennlps(allennlp):
    ours = batch_to_ids(SENTENCES)
    assert ours.dtype == torch.int64 and ours.shape == (len(SENTENCES), 11, 50)
    assert torch.equal(ours, allennlp.batch_to_ids(SENTENCES))
    assert torch.equal(batch_to_ids([["x" * 200]]), allennlp.batch_to_ids([["x" * 200]]))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_elmo_gives_allennlps_vectors_and_mask(allennlp, name):
    options = CONFIGS[name]
    theirs, ours = both(allennlp, options)
    character_ids = batch_to_ids(SENTENCES)
    args = (character_ids, word_ids(SENTENCES)) if "vocab_to_cache" in options else (character_ids,)
    theirs_out, ours_out = theirs(*args), ours(*args)
    steps = character_ids.shape[1] + (2 if options.get("keep_sentence_boundaries") else 0)
    assert ours_out["mask"].shape == (len(SENTENCES), steps)
    # AllenNLP leaves -mean / sd at padded positions when it normalises and keeps the boundaries; ours are zero there
    assert_same(theirs_out, ours_out, name, padding_as_allennlp=not (options.get("do_layer_norm")
                                                                     and options.get("keep_sentence_boundaries")))
    if options.get("requires_grad"):  # both fine-tune: the same gradient reaches the character embedding
        theirs_out["elmo_representations"][0].sum().backward()
        ours_out["elmo_representations"][0].sum().backward()
        theirs_grad = theirs._elmo_lstm._token_embedder._char_embedding_weights.grad[1:]  # AllenNLP's row 0: padding
        ours_grad = ours.bilm.token_encoder.char_embedding.weight.grad[1:]
        assert ours_grad.abs().max() > 0 and float((theirs_grad - ours_grad).abs().max()) <= 1e-4


def test_elmo_gives_allennlps_vectors_for_more_dimensions_and_an_empty_row(allennlp):
    others = [SENTENCES[3], SENTENCES[0], SENTENCES[4]]
    character_ids = torch.stack([batch_to_ids(SENTENCES[:3]), batch_to_ids(others)])  # (2, 3, 11, 50)
    character_ids[0, 1] = 0  # an empty row: AllenNLP reads <S> </S>, its vectors are zero
    for name in ("defaults", "do_layer_norm"):
        theirs, ours = both(allennlp, CONFIGS[name])
        with torch.no_grad():
            theirs_out, ours_out = theirs(character_ids), ours(character_ids)
        assert ours_out["mask"].shape == (2, 3, 11) and not ours_out["mask"][0, 1].any()
        assert_same(theirs_out, ours_out, f"(2, 3, 11, 50) {name}")
