"""Both biLM families answer :class:`~elmo.model.bilm.BiLM`'s questions themselves (code that takes either asks
them instead of the class): the layer groups for fine-tuning, whether bilm-tf's files can hold it, whether it reads
cased text, where it was read from."""

from __future__ import annotations

from pathlib import Path

import pytest
from unit.model.test_bilm_identity import BILM_TF, our_bilm

from elmo.errors import ElmoError
from elmo.model.published_io import load_published_bilm
from elmo.pipelines.export import bilm_tf_refusal, export_bilm


def published():
    return load_published_bilm(BILM_TF / "options.json", BILM_TF / "lm_weights.hdf5")


@pytest.mark.parametrize("kind", ["word", "char", "published"])
def test_layer_groups_cover_the_elmo_layers_parameters_once_from_the_top_down(kind):
    bilm = published() if kind == "published" else our_bilm(kind)[0]
    groups = bilm.layer_groups()
    assert len(groups) == bilm.num_layers  # L LSTM layers, then the token layer
    seen = [id(p) for group in groups for p in group]
    assert len(seen) == len(set(seen))
    softmax = set() if kind == "published" else {id(p) for lm in (bilm.forward_lm, bilm.backward_lm)
                                                 for p in lm.softmax.parameters()}
    assert set(seen) == {id(p) for p in bilm.parameters()} - softmax
    top = bilm.forward_lm.layers[-1]
    assert {id(p) for p in top.parameters()} <= {id(p) for p in groups[0]}


@pytest.mark.parametrize("kind", ["word", "char"])
def test_our_biLM_names_why_bilm_tf_files_cannot_hold_it_and_export_refuses_with_that(kind, tmp_path: Path):
    bilm, _ = our_bilm(kind)
    blockers = bilm.bilm_tf_blockers()
    assert blockers and ("word-input variant" in blockers[-1] if kind == "word" else "character CNN" in blockers[-1])
    assert not bilm.cased and bilm.source is None
    with pytest.raises(ElmoError) as raised:
        export_bilm(bilm, tmp_path / "out")
    assert str(raised.value) == bilm_tf_refusal(bilm) and all(reason in str(raised.value) for reason in blockers)
    assert not (tmp_path / "out").exists()


def test_a_published_biLM_has_no_blockers_reads_cased_text_and_knows_its_files():
    bilm = published()
    assert bilm.bilm_tf_blockers() == [] and bilm.cased
    assert [Path(p).name for p in bilm.source] == ["options.json", "lm_weights.hdf5"]
