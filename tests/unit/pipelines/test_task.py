"""The downstream task recipe (elmo.pipelines.task, elmo.pipelines.classification): flags, x_k, fine-tuning."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from elmo.errors import ElmoError
from elmo.model.bilm import BiLM
from elmo.model.bilm_config import BiLMConfig
from elmo.model.classifier import ClassifierConfig, ElmoClassifier, StaticClassifierConfig, StaticEmbeddingClassifier


def make_classifier(setting: str, token_dim: int = 0) -> ElmoClassifier:
    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig(vocab_size=30, embedding_dim=8, hidden_size=8, cutoffs=(10,)))
    return ElmoClassifier(bilm, ClassifierConfig(mix=setting, encoder_hidden=6, dropout=0.2,
                                                 token_embedding_dim=token_dim))


def test_concat_token_embedding_flag_controls_x_k():
    from elmo.pipelines.classification import ClassifyArgs

    assert ClassifyArgs().classifier_config("trainable_lambda").token_embedding_dim == 128
    assert ClassifyArgs(concat_token_embedding=False).classifier_config("trainable_lambda").token_embedding_dim == 0
    config = ClassifyArgs(elmo_dropout=0.5, mix_l2=0.01, unfreeze_bilm=True).classifier_config("frozen_lambda")
    assert (config.elmo_dropout, config.mix_l2, config.unfreeze_bilm, config.mix) == (0.5, 0.01, True, "frozen_lambda")
    with pytest.raises(ElmoError, match="ClassifierConfig.elmo_dropout"):
        ClassifyArgs(elmo_dropout=1.0).check()


def test_fine_tuning_uses_discriminative_rates_and_unfreezes_top_layer_first():
    from elmo.pipelines.classification import ClassifyArgs
    from elmo.pipelines.task import fine_tuning

    torch.manual_seed(0)
    bilm = BiLM(BiLMConfig(vocab_size=30, embedding_dim=8, hidden_size=8, cutoffs=(10,)))
    before = {k: v.clone() for k, v in bilm.state_dict().items()}
    config = ClassifyArgs(lr=0.01, lr_decay=2.0, unfreeze_bilm=True)
    model = ElmoClassifier(bilm, config.classifier_config("trainable_lambda"))
    args = fine_tuning(model, config)
    assert [g["lr"] for g in args.param_groups] == [0.01, 0.005, 0.0025, 0.00125]
    top, middle, embeddings = model.bilm.layer_groups()
    assert top[0] is bilm.forward_lm.layers[1].weight_ih_l0 and embeddings[0] is bilm.forward_lm.embedding.weight

    def step():
        model.train()
        loss = torch.nn.functional.cross_entropy(model(torch.tensor([[5, 6, 7]]), torch.tensor([3])), torch.tensor([1]))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    optimizer = torch.optim.Adam(args.param_groups)
    args.on_epoch_start(0)  # epoch 1: the task model only
    step()
    assert all(torch.equal(v, bilm.state_dict()[k]) for k, v in before.items())
    args.on_epoch_start(1)  # epoch 2: + the top LSTM layer
    step()
    changed = {k for k, v in before.items() if not torch.equal(v, bilm.state_dict()[k])}
    assert changed and all(".layers.1." in k for k in changed)
    args.on_epoch_start(3)  # epoch 4: everything
    step()
    changed = {k for k, v in before.items() if not torch.equal(v, bilm.state_dict()[k])}
    assert any("embedding" in k for k in changed) and any(".layers.0." in k for k in changed)
    assert any(k.startswith("elmo.bilm.") for k in model.task_state_dict())  # a fine-tuned biLM is saved
    assert fine_tuning(make_classifier("trainable_lambda"), ClassifyArgs()) is None


def test_token_embedding_init_copies_vectors_into_x_k_only():

    from elmo.pipelines.task import TaskData

    token_vectors = np.random.default_rng(0).standard_normal((12, 3)).astype(np.float32)
    token_vectors[[0, 2]] = 0.0  # <pad> and a word Word2Vec never saw
    started = type("StartedRun", (), {"device": torch.device("cpu")})()
    task = TaskData(started, None, None, {}, {}, token_vectors)
    torch.manual_seed(0)
    model = StaticEmbeddingClassifier(torch.randn(12, 5), StaticClassifierConfig(vectors="svd", encoder_hidden=4,
                                                                                 token_embedding_dim=3))
    untouched = model.token_embedding.weight[2].clone()
    frozen = model.embedding.weight.clone()
    task.to_device(model)
    torch.testing.assert_close(model.token_embedding.weight[5], torch.from_numpy(token_vectors[5]))
    torch.testing.assert_close(model.token_embedding.weight[2], untouched)
    torch.testing.assert_close(model.embedding.weight, frozen)
    assert model.token_embedding.weight.requires_grad  # x_k is still trained


@pytest.mark.parametrize("select_by", ["f1", "loss"])
def test_model_selection_metric_and_tracked_test_accuracy(select_by):
    from elmo.data.corpus import EncodedCorpus
    from elmo.pipelines.classification import ClassifyArgs
    from elmo.pipelines.common import StartedRun
    from elmo.pipelines.task import train_and_evaluate
    from elmo.runtime import distributed

    rng = np.random.default_rng(0)

    def split(n):
        labels = rng.integers(0, 4, size=n)
        # the label's own word in every document, so a few epochs learn something
        return EncodedCorpus([[4 + int(y)] + rng.integers(8, 30, size=rng.integers(1, 6)).tolist() for y in labels],
                             labels=labels)

    data = {"train": split(64), "val": split(24), "test": split(24)}
    config = ClassifyArgs(epochs=3, patience=3, batch_size=16, lr=0.02, select_by=select_by, track_test=True, quiet=True)
    run = StartedRun(distributed.context(), torch.device("cpu"), None, 1, None, lambda *a: None)
    entry = train_and_evaluate(make_classifier("trainable_lambda"), data, config, run)
    history = entry["history"]
    assert [set(row) >= {"val_f1", "val_loss", "test_accuracy"} for row in history] == [True] * 3
    assert all(0 <= row["test_accuracy"] <= 1 and row["val_loss"] > 0 for row in history)
    key, pick = ("val_f1", max) if select_by == "f1" else ("val_loss", min)
    best = pick(range(3), key=lambda e: history[e][key])
    assert entry["best_epoch"] == best + 1  # selection follows --select-by
    assert entry["test"]["accuracy"] == pytest.approx(history[best]["test_accuracy"])  # the restored weights
    assert entry["val"]["loss"] == pytest.approx(history[best]["val_loss"], rel=1e-5)


def test_cross_entropy_in_metrics():
    from elmo.training.metrics import classification_metrics

    labels = np.array([0, 1, 2, 3])
    uniform = classification_metrics(labels, labels, 4, probabilities=np.full((4, 4), 0.25))
    assert uniform["loss"] == pytest.approx(np.log(4)) and uniform["accuracy"] == 1.0
    assert "loss" not in classification_metrics(labels, labels, 4)
    with pytest.raises(ElmoError, match="select-by"):
        __import__("elmo.pipelines.classification", fromlist=["x"]).ClassifyArgs(select_by="auc").check()
