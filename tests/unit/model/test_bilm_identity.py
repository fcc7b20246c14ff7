"""What a biLM *is* to its files and to the classifiers trained on it, pinned before the biLM classes are merged into
one: the state-dict keys and shapes of ``bilstm.pt``, of a published biLM and of one with its training softmax (the
``bilm/`` folder of ``pretrain --architecture``), the config each writes (``config.json`` of ``save_pretrained``), the identities a classifier file records (:func:`bilm_fingerprint`, the
published weights' two digests) and the vectors (L+1, B, T, D) of a fixed batch.

The pinned values are ``tests/fixtures/bilm_identity.json``. A change that moves them on purpose re-records them with
``python tests/unit/model/test_bilm_identity.py`` (and says why in its commit); one that does not must leave them
as they are. Weights are set by a formula, not drawn, so nothing here depends on the random generator."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from support import old_name

from elmo.data.chars import TF_MAX_CHARS, batch_char_ids
from elmo.data.vocab import SPECIALS, Vocabulary
from elmo.model.bilm import BiLM, weights_digest
from elmo.model.bilm_config import BiLMConfig
from elmo.model.classifier import bilm_fingerprint
from elmo.model.published_io import load_published_bilm
from elmo.model.serialization import load_bilm, open_bilm, save_bilm

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
PINNED = FIXTURES / "bilm_identity.json"
BILM_TF = FIXTURES / "bilm_tf"
WORDS = [*SPECIALS, "the", "market", "rallied", "shares"]
SENTENCES = [["the", "market", "rallied"], ["shares", "the"], ["rallied"]]
#: our biLM's two shapes: word tokens without a residual, character tokens with a residual and LSTM projections
OURS = {
    "word": BiLMConfig(vocab_size=len(WORDS), embedding_dim=8, hidden_size=8, cutoffs=(6,)),
    "char": BiLMConfig(vocab_size=len(WORDS), embedding_dim=4, hidden_size=8, proj_size=4, cutoffs=(6,),
                       token_encoder="char", char_dim=3, char_filters=((1, 4), (2, 4)), num_highway=1, max_chars=8,
                       residual=True),
}
#: float32 rounding of other CPUs' kernels moves the vectors by less than this; a changed computation moves them more
TOLERANCE = 1e-5


def set_weights(module: torch.nn.Module) -> None:
    """Every parameter and buffer of floating dtype from a formula of its position: 0.3 · sin(0.37 k + i) for the
    k-th value of the i-th tensor."""
    with torch.no_grad():
        for i, tensor in enumerate(module.state_dict().values()):
            if tensor.is_floating_point():
                k = torch.arange(tensor.numel(), dtype=torch.float64)
                tensor.copy_((0.3 * torch.sin(0.37 * k + i)).view_as(tensor))


def shapes(state: dict[str, torch.Tensor]) -> dict[str, list[int]]:
    return {name: list(t.shape) for name, t in state.items()}


def vector_summary(layers: torch.Tensor) -> list[list[float]]:
    """Per layer of ``(L+1, B, T, D)``: the sum, the sum of absolute values and the first 3 values of the first token."""
    return [[float(layer.sum()), float(layer.abs().sum()), *map(float, layer[0, 0, :3])] for layer in layers.double()]


def our_bilm(kind: str) -> tuple[BiLM, Vocabulary]:
    bilm = BiLM(OURS[kind]).eval()
    set_weights(bilm)
    return bilm, Vocabulary(WORDS)


def our_layers(bilm: BiLM, vocab: Vocabulary) -> torch.Tensor:
    ids = torch.tensor([vocab.encode(s) + [0] * (3 - len(s)) for s in SENTENCES])
    lengths = torch.tensor([len(s) for s in SENTENCES])
    chars = None
    if bilm.config.token_encoder == "char":
        chars = batch_char_ids(SENTENCES, bilm.config.max_chars)
    with torch.no_grad():
        return bilm(ids, lengths, chars)


def identity_of_ours(kind: str, folder: Path) -> dict:
    bilm, vocab = our_bilm(kind)
    save_bilm(bilm, vocab, folder / "bilstm.pt", {})
    saved = torch.load(folder / "bilstm.pt", weights_only=True)
    bilm.save_pretrained(folder / "hub")
    return {"config": json.loads(json.dumps(bilm.config.saved())), "bilstm_keys": sorted(saved),
            "forward": shapes(saved["forward"]), "backward": shapes(saved["backward"]),
            "fingerprint": bilm_fingerprint(bilm, vocab),
            "config_json": json.loads((folder / "hub" / "config.json").read_text()),
            "vectors": vector_summary(our_layers(bilm, vocab))}


def published_layers(bilm) -> torch.Tensor:
    chars = batch_char_ids(SENTENCES, TF_MAX_CHARS, scheme="bilm_tf")
    with torch.no_grad():
        return bilm(None, torch.tensor([len(s) for s in SENTENCES]), chars)


def identity_of_published(folder: Path) -> dict:
    bilm = load_published_bilm(BILM_TF / "options.json", BILM_TF / "lm_weights.hdf5")
    bilm.save_pretrained(folder / "hub")
    return {"config": json.loads(json.dumps(bilm.config.saved())), "state": shapes(bilm.state_dict()),
            "weights_digest": weights_digest(bilm), "fingerprint": bilm_fingerprint(bilm, Vocabulary(WORDS)),
            "config_json": json.loads((folder / "hub" / "config.json").read_text()),
            "vectors": vector_summary(published_layers(bilm))}


def identity_of_published_lm(folder: Path) -> dict:
    """The published biLM with a training softmax, as ``pretrain --architecture`` writes it (``bilm/``), and opened."""
    vocab = Vocabulary(WORDS)
    config = load_published_bilm(BILM_TF / "options.json", BILM_TF / "lm_weights.hdf5").config
    model = BiLM(replace(config, vocab_size=len(vocab), cutoffs=(6,)))
    set_weights(model)
    model.vocab = vocab
    model.save_pretrained(folder / "bilm")
    opened = open_bilm(folder).bilm
    return {"state": shapes(model.state_dict()), "config_json": json.loads((folder / "bilm" / "config.json").read_text()),
            "weights_digest": opened.config.weights_digest, "fingerprint": bilm_fingerprint(opened, vocab),
            "vectors": vector_summary(published_layers(opened))}


def identities(folder: Path) -> dict:
    return {**{kind: identity_of_ours(kind, folder / kind) for kind in OURS},
            "published": identity_of_published(folder / "published"),
            "published_lm": identity_of_published_lm(folder / "published_lm")}


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> dict:
    return identities(tmp_path_factory.mktemp("identity"))


@pytest.fixture(scope="module")
def pinned() -> dict:
    return json.loads(PINNED.read_text())


@pytest.mark.parametrize("kind", [*OURS, "published", "published_lm"])
def test_keys_shapes_configs_and_identities_are_the_pinned_ones(measured, pinned, kind):
    now, then = measured[kind], pinned[kind]
    if kind.startswith("published"):  # pinned as earlier versions named the weights: one map renames them all
        then = {**then, "state": BiLM.renamed_state(then["state"])}
    assert {k: v for k, v in now.items() if k != "vectors"} == {k: v for k, v in then.items() if k != "vectors"}


@pytest.mark.parametrize("kind", [*OURS, "published", "published_lm"])
def test_the_vectors_of_a_fixed_batch_are_the_pinned_ones(measured, pinned, kind):
    now, then = measured[kind]["vectors"], pinned[kind]["vectors"]
    assert len(now) == len(then)
    for layer, (a, b) in enumerate(zip(now, then)):
        assert all(math.isclose(x, y, rel_tol=TOLERANCE, abs_tol=TOLERANCE) for x, y in zip(a, b)), (layer, a, b)


def test_a_published_lm_folder_of_an_earlier_version_opens_to_the_same_identity(measured, pinned, tmp_path):
    """Its ``model.safetensors`` names the weights as the pin records them (the biLM under ``bilm.``)."""
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "published_lm"
    identity_of_published_lm(folder)
    state = load_file(str(folder / "bilm" / "model.safetensors"))
    old = {old_name(k): v for k, v in state.items()}
    assert shapes(old) == pinned["published_lm"]["state"]
    save_file(old, str(folder / "bilm" / "model.safetensors"))
    opened = open_bilm(folder).bilm
    assert opened.config.weights_digest == pinned["published_lm"]["weights_digest"]
    assert bilm_fingerprint(opened, Vocabulary(WORDS)) == pinned["published_lm"]["fingerprint"]
    assert vector_summary(published_layers(opened)) == measured["published_lm"]["vectors"]
    assert BiLM.from_pretrained(folder / "bilm").softmax.head.weight.shape[1] == opened.config.output_size


def test_a_saved_bilstm_pt_opens_to_the_same_vectors(tmp_path):
    bilm, vocab = our_bilm("char")
    save_bilm(bilm, vocab, tmp_path / "bilstm.pt", {})
    loaded, loaded_vocab, _ = load_bilm(tmp_path / "bilstm.pt")
    assert loaded_vocab.itos == vocab.itos
    assert torch.equal(our_layers(loaded, loaded_vocab), our_layers(bilm, vocab))


if __name__ == "__main__":
    import re
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        text = json.dumps(identities(Path(scratch)), indent=1)
    # every list of numbers on one line
    PINNED.write_text(re.sub(r"\[[^\[\]{}]*\]", lambda m: " ".join(m.group().split()), text) + "\n")
    print(f"wrote {PINNED}")
