"""Model files (elmo.model.serialization, elmo.artifacts): weights-only round trips, clear errors, fingerprints."""

from __future__ import annotations

import pytest
import torch

from elmo.artifacts import load_checkpoint, save_checkpoint
from elmo.data.chars import char_table
from elmo.data.vocab import SPECIALS, Vocabulary
from elmo.errors import ElmoError
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.classifier import (
    ClassifierConfig,
    ElmoClassifier,
    bilm_fingerprint,
    classifier_checkpoint,
    load_classifier,
)
from elmo.model.serialization import lm_checkpoint, load_bilm, save_bilm

V = 40
WORDS = list(SPECIALS) + [f"w{i}" for i in range(V - 4)]
VARIANTS = {
    "char": {"token_encoder": "char", "char_dim": 4, "char_filters": ((1, 4), (2, 6), (3, 6)), "max_chars": 6},
    "proj": {"hidden_size": 12, "proj_size": 8},
}


def make_bilm(**options) -> BiLM:
    torch.manual_seed(0)
    sizes = {"vocab_size": V, "embedding_dim": 8, "hidden_size": 8, "dropout": 0.0, "cutoffs": (10, 20)} | options
    return BiLM(BiLMConfig(**sizes)).eval()


def chars_of(bilm: BiLM, ids: torch.Tensor) -> torch.Tensor | None:
    if not bilm.config.chars_per_token:
        return None
    return torch.from_numpy(char_table(WORDS, bilm.config.max_chars)[ids.numpy()]).long()


@pytest.mark.parametrize("variant", ["char", "proj"])
def test_option_checkpoints_round_trip_with_weights_only(tmp_path, variant):
    bilm = make_bilm(**VARIANTS[variant])
    save_bilm(bilm, Vocabulary(WORDS), tmp_path / "bilstm.pt", {})
    loaded, _, _ = load_bilm(tmp_path / "bilstm.pt")
    assert loaded.config == bilm.config
    ids, lengths = torch.tensor([[5, 6, 7]]), torch.tensor([3])
    with torch.no_grad():
        assert torch.equal(loaded(ids, lengths, chars_of(bilm, ids)), bilm(ids, lengths, chars_of(bilm, ids)))


def test_bilstm_checkpoint_round_trip_with_weights_only(tmp_path):
    bilm = make_bilm()
    vocab = Vocabulary(WORDS)
    save_bilm(bilm, vocab, tmp_path / "bilstm.pt", {"seed": 0})
    raw = torch.load(tmp_path / "bilstm.pt", weights_only=True)
    assert raw["format"] == "elmo.bilm" and raw["vocab"] == vocab.itos
    loaded, loaded_vocab, _ = load_bilm(tmp_path / "bilstm.pt")
    ids, lengths = torch.tensor([[5, 6, 7]]), torch.tensor([3])
    with torch.no_grad():
        assert torch.equal(loaded(ids, lengths), bilm(ids, lengths))
    assert loaded_vocab == vocab
    save_checkpoint(lm_checkpoint(bilm.forward_lm, vocab, {}), tmp_path / "forward.pt")
    assert load_checkpoint(tmp_path / "forward.pt", "elmo.lm")["direction"] == "forward"


def test_bad_model_files_give_clear_errors(tmp_path):
    with pytest.raises(ElmoError, match="not found"):
        load_bilm(tmp_path / "missing.pt")
    bilm = make_bilm()
    vocab = Vocabulary(WORDS)
    save_bilm(bilm, vocab, tmp_path / "bilstm.pt", {})
    data = (tmp_path / "bilstm.pt").read_bytes()
    (tmp_path / "truncated.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(ElmoError, match="not a loadable ELMo checkpoint"):
        load_bilm(tmp_path / "truncated.pt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(ElmoError, match="expected a checkpoint of format elmo.bilm"):
        load_bilm(tmp_path / "other.pt")
    save_checkpoint(lm_checkpoint(bilm.forward_lm, vocab, {}), tmp_path / "forward.pt")
    with pytest.raises(ElmoError, match="found 'elmo.lm'"):
        load_bilm(tmp_path / "forward.pt")


def test_bilm_fingerprint_is_unchanged_for_files_written_before_the_paper_options():
    import hashlib
    from dataclasses import asdict

    from elmo.data.vocab import SPECIALS, Vocabulary
    from elmo.model.classifier import bilm_fingerprint

    vocab = Vocabulary(list(SPECIALS) + [f"w{i}" for i in range(26)])
    config = BiLMConfig(vocab_size=30, embedding_dim=8, hidden_size=8, cutoffs=(10,))
    original = ("vocab_size", "embedding_dim", "hidden_size", "num_layers", "dropout", "cutoffs", "div_value")
    text = repr(sorted((k, v) for k, v in asdict(config).items() if k in original)) + "\n" + "\n".join(vocab.itos)
    assert bilm_fingerprint(BiLM(config), vocab) == hashlib.sha256(text.encode()).hexdigest()[:16]
    residual = BiLMConfig(vocab_size=30, embedding_dim=8, hidden_size=8, cutoffs=(10,), residual=True)
    assert bilm_fingerprint(BiLM(residual), vocab) != bilm_fingerprint(BiLM(config), vocab)


def test_a_classifier_file_recording_its_layer_mix_as_setting_still_loads(tmp_path):
    bilm, vocab = make_bilm(), Vocabulary(WORDS)
    model = ElmoClassifier(bilm, ClassifierConfig(mix="frozen_lambda", encoder_hidden=4, learned_function="gate"))
    saved = classifier_checkpoint(model, bilm_fingerprint(bilm, vocab), ["a", "b", "c", "d"], {})
    config = dict(saved["config"])
    config["setting"] = config.pop("mix")  # the key files of other versions hold
    del config["learned_function"]  # and files without it hold the MLP
    del config["encoder_projection"]  # nor an encoder projection
    config["fine_tune"] = config.pop("unfreeze_bilm")  # the name before 0.4.0
    save_checkpoint({**saved, "config": config}, tmp_path / "classifier.pt")
    loaded, names = load_classifier(tmp_path / "classifier.pt", bilm, vocab)
    assert (loaded.config.mix, loaded.config.learned_function, names) == ("frozen_lambda", "mlp", ["a", "b", "c", "d"])
    assert loaded.config.encoder_projection == 0 and loaded.projection is None and loaded.config.unfreeze_bilm is False
    ids = torch.tensor([[4, 5, 6]])
    assert torch.equal(loaded(ids, torch.tensor([3])), model.eval()(ids, torch.tensor([3])))


def test_a_classifier_with_an_encoder_projection_loads_to_the_same_logits(tmp_path):
    bilm, vocab = make_bilm(), Vocabulary(WORDS)
    model = ElmoClassifier(bilm, ClassifierConfig(mix="trainable_lambda", encoder_hidden=4, encoder_projection=3))
    save_checkpoint(classifier_checkpoint(model, bilm_fingerprint(bilm, vocab), ["a", "b", "c", "d"], {}),
                    tmp_path / "classifier.pt")
    loaded, _ = load_classifier(tmp_path / "classifier.pt", bilm, vocab)
    assert loaded.config.encoder_projection == 3
    ids = torch.tensor([[4, 5, 6]])
    assert torch.equal(loaded(ids, torch.tensor([3])), model.eval()(ids, torch.tensor([3])))


def test_a_classifier_file_with_older_mix_keys_loads_and_one_with_missing_weights_is_named(tmp_path):
    bilm, vocab = make_bilm(), Vocabulary(WORDS)
    model = ElmoClassifier(bilm, ClassifierConfig(mix="trainable_lambda", encoder_hidden=4))
    with torch.no_grad():
        model.mix.weights.copy_(torch.tensor([0.3, -1.2, 0.8]))
    saved = classifier_checkpoint(model, bilm_fingerprint(bilm, vocab), ["a", "b", "c", "d"], {})
    older = {k.replace("elmo.mixes.0.", "mix."): v for k, v in saved["state_dict"].items()}  # mix.weights, mix.gamma
    assert "mix.weights" in older
    save_checkpoint({**saved, "state_dict": older}, tmp_path / "older.pt")
    loaded, _ = load_classifier(tmp_path / "older.pt", bilm, vocab)
    assert torch.equal(loaded.mix.weights, model.mix.weights)
    ids = torch.tensor([[4, 5, 6]])
    assert torch.equal(loaded(ids, torch.tensor([3])), model.eval()(ids, torch.tensor([3])))
    broken = {k: v for k, v in saved["state_dict"].items() if k != "head.bias"}
    save_checkpoint({**saved, "state_dict": {**broken, "extra.weight": torch.zeros(1)}}, tmp_path / "broken.pt")
    with pytest.raises(ElmoError, match=r"broken\.pt: inconsistent classifier checkpoint: missing keys \['head\.bias'\], "
                                        r"unexpected keys \['extra\.weight'\]"):
        load_classifier(tmp_path / "broken.pt", bilm, vocab)
    shaped = {**saved["state_dict"], "head.bias": torch.zeros(7)}
    save_checkpoint({**saved, "state_dict": shaped}, tmp_path / "shaped.pt")
    with pytest.raises(ElmoError, match=r"shaped\.pt: inconsistent classifier checkpoint: Error\(s\) in loading"):
        load_classifier(tmp_path / "shaped.pt", bilm, vocab)
