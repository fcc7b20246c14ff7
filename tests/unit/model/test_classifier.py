"""The task model: encoder equivalence, masked pooling, padding invariance, frozen biLM."""

from __future__ import annotations

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.classifier import ClassifierConfig, ElmoClassifier, MaskedBiLSTM, masked_mean_max
from elmo.model.mix import LAYER_MIXES


def test_masked_bilstm_equals_packed_bidirectional_lstm():
    torch.manual_seed(0)
    ours = MaskedBiLSTM(5, 4)
    ref = torch.nn.LSTM(5, 4, batch_first=True, bidirectional=True)
    with torch.no_grad():
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            getattr(ref, name).copy_(getattr(ours.forward_rnn, name))
            getattr(ref, name + "_reverse").copy_(getattr(ours.backward_rnn, name))
    x, lengths = torch.randn(3, 6, 5), torch.tensor([6, 2, 4])
    packed, _ = ref(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
    expected, _ = pad_packed_sequence(packed, batch_first=True, total_length=6)
    got = ours(x, lengths)
    for b, n in enumerate(lengths.tolist()):
        assert torch.allclose(got[b, :n], expected[b, :n], atol=1e-6)


def test_masked_mean_max_ignores_padding():
    states = torch.tensor([[[1.0], [3.0], [100.0]]])
    mask = torch.tensor([[True, True, False]])
    assert masked_mean_max(states, mask).tolist() == [[2.0, 3.0]]


def make_classifier(setting: str, token_dim: int = 0, projection: int = 0) -> ElmoClassifier:
    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig(vocab_size=30, embedding_dim=8, hidden_size=8, cutoffs=(10,)))
    return ElmoClassifier(bilm, ClassifierConfig(mix=setting, encoder_hidden=6, dropout=0.2,
                                                 token_embedding_dim=token_dim, encoder_projection=projection))


@pytest.mark.parametrize("token_dim, projection", [(0, 0), (5, 0), (5, 3)])
@pytest.mark.parametrize("setting", LAYER_MIXES)
def test_logits_do_not_depend_on_the_rest_of_the_batch(setting, token_dim, projection):
    model = make_classifier(setting, token_dim, projection).eval()
    batch = torch.tensor([[5, 6, 7, 0, 0], [8, 9, 10, 11, 12]])
    with torch.no_grad():
        together = model(batch, torch.tensor([3, 5]))
        alone = model(torch.tensor([[5, 6, 7]]), torch.tensor([3]))
    assert together.shape == (2, 4)
    assert torch.allclose(alone[0], together[0], atol=1e-5)


def test_training_step_leaves_the_biLM_frozen_and_in_eval_mode():
    model = make_classifier("trainable_lambda")
    model.train()
    assert not model.bilm.training and model.mix.training
    before = {k: v.clone() for k, v in model.bilm.state_dict().items()}
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.1)
    loss = torch.nn.functional.cross_entropy(model(torch.tensor([[5, 6, 7]]), torch.tensor([3])), torch.tensor([2]))
    loss.backward()
    opt.step()
    assert all(torch.equal(v, model.bilm.state_dict()[k]) for k, v in before.items())
    assert all(p.grad is None for p in model.bilm.parameters())
    assert model.mix.weights.grad is not None
    assert not any(k.startswith("elmo.bilm.") for k in model.task_state_dict())


def test_task_token_embedding_is_trained_and_stored():
    model = make_classifier("trainable_lambda", token_dim=5)
    assert model.encoder.forward_rnn.input_size == 16 + 5
    loss = model(torch.tensor([[5, 6]]), torch.tensor([2])).sum()
    loss.backward()
    assert model.token_embedding.weight.grad[5].abs().sum() > 0
    assert "token_embedding.weight" in model.task_state_dict()


def test_encoder_projection_feeds_the_bilstm_a_trained_projection_of_the_representation():
    plain, projected = make_classifier("trainable_lambda", token_dim=5), make_classifier("trainable_lambda", 5, 3)
    assert plain.projection is None and plain.encoder.forward_rnn.input_size == 16 + 5
    assert (projected.projection.in_features, projected.projection.out_features) == (16 + 5, 3)
    assert projected.encoder.forward_rnn.input_size == projected.encoder.backward_rnn.input_size == 3
    projected(torch.tensor([[5, 6, 7]]), torch.tensor([3])).sum().backward()
    assert projected.projection.weight.grad.abs().sum() > 0 and projected.mix.weights.grad is not None
    assert "projection.weight" in projected.task_state_dict()


def test_mix_l2_penalty_is_lambda_times_squared_weights_and_pulls_toward_the_average():
    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig(vocab_size=30, embedding_dim=8, hidden_size=8, cutoffs=(10,)))
    model = ElmoClassifier(bilm, ClassifierConfig(mix="trainable_lambda", encoder_hidden=6, mix_l2=0.5))
    with torch.no_grad():
        model.mix.weights.copy_(torch.tensor([1.0, -2.0, 0.5]))
    penalty = model.penalty()
    assert penalty.item() == pytest.approx(0.5 * (1 + 4 + 0.25))
    penalty.backward()
    assert torch.allclose(model.mix.weights.grad, torch.tensor([1.0, -2.0, 0.5]))  # d/dw 0.5‖w‖² = w
    frozen = ElmoClassifier(bilm, ClassifierConfig(mix="frozen_lambda", encoder_hidden=6, mix_l2=0.5))
    assert frozen.penalty().item() == 0.0  # nothing to regularise when λ is fixed
    assert make_classifier("trainable_lambda").penalty().item() == 0.0  # off by default


def test_configs_name_the_field_of_a_bad_value_and_keep_static_vectors_out_of_the_layer_mix():
    from elmo.errors import ElmoError
    from elmo.model.classifier import StaticClassifierConfig

    with pytest.raises(ElmoError, match=r"ClassifierConfig.mix must be one of trainable_lambda, frozen_lambda, "
                                        r"learned_function, got 'word2vec'") as error:
        ClassifierConfig(mix="word2vec")
    assert error.value.field == "ClassifierConfig.mix"
    with pytest.raises(ElmoError, match="ClassifierConfig.token_embedding_dim must be >= 0, got -1") as error:
        ClassifierConfig(token_embedding_dim=-1)
    assert error.value.field == "ClassifierConfig.token_embedding_dim"
    with pytest.raises(ElmoError, match="ClassifierConfig.encoder_projection must be >= 0, got -2") as error:
        ClassifierConfig(encoder_projection=-2)
    assert error.value.field == "ClassifierConfig.encoder_projection"
    with pytest.raises(ElmoError, match="StaticClassifierConfig.vectors must be one of word2vec, svd, got 'trainable"):
        StaticClassifierConfig(vectors="trainable_lambda")
    with pytest.raises(ElmoError, match="StaticClassifierConfig.dropout must be in"):
        StaticClassifierConfig(dropout=1.0)
    assert StaticClassifierConfig(vectors="svd").representation == "svd"
    assert ClassifierConfig(mix="frozen_lambda").representation == "frozen_lambda"
    assert ClassifierConfig.from_saved({"setting": "learned_function"}).mix == "learned_function"
