"""AllenNLP's own ELMo code reads what ``python -m elmo export`` writes: ``allennlp.modules.elmo._ElmoBiLm`` on the
exported ``options.json`` + ``weights.hdf5`` gives the layers our trained :class:`~elmo.model.bilm.BiLM`
(its ``save_pretrained`` folder) computes, for a tiny ``pretrain --architecture`` run and for a ``finetune`` of its export.

Needs AllenNLP 2.10.1 without its dependencies, plus the few small packages that its package ``__init__`` files import
(``allennlp_reference.INSTALL``; ``.ci/run`` installs them, docs/testing.md). The heavy ones it imports for other
models (spaCy, transformers, torchvision, fairscale, the Hugging Face hub, ``cached_path``'s cloud back ends) are stood
in for while it is imported (``allennlp_reference.import_allennlp_elmo``, shared with
tests/unit/model/test_elmo_allennlp.py); AllenNLP's own files run unchanged. Skipped when AllenNLP is not installed;
under CI (``CI=true``) that is a failure, not a skip.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from allennlp_reference import allennlp_marks, import_allennlp_elmo
from published_reference import TOLERANCE
from support import run_script, write_tiny_agnews
from unit.pipelines.test_finetuning import FLAGS as FINETUNE_FLAGS
from unit.pipelines.test_finetuning import domain_text
from unit.pipelines.test_published_pretraining import TINY_OPTIONS

from elmo.cli import run
from elmo.data.chars import TF_MAX_CHARS, batch_char_ids
from elmo.model.serialization import open_bilm

pytestmark = [pytest.mark.slow, *allennlp_marks()]

#: different lengths (1 to 12 tokens), non-ASCII bytes and a word past the 48 bytes a token keeps
SENTENCES = [["The", "minister", "said", "the", "quarterly", "profit", "fell", "after", "the", "talks", "ended", "."],
             ["Zyxquv", "naïve", "École", "antidisestablishmentarianism-and-more-than-fifty-characters-long", "!"],
             ["Goal", "!"], ["a"]]


@pytest.fixture(scope="module")
def allennlp():
    return import_allennlp_elmo()


@dataclass(frozen=True)
class Export:
    """A trained published biLM (``models``, the ``save_pretrained`` folder it is) and what ``export`` wrote from it (``out``)."""

    models: Path
    out: Path


def trained_and_exported(command: str, root: Path, data: Path, *flags: str) -> Export:
    """``python -m elmo <command> *flags`` into ``root``, then ``python -m elmo export`` of its models into
    ``root/export`` (in this process: it only reads and writes files)."""
    done = run_script(f"-m elmo {command}", root, data, *flags)
    assert done.returncode == 0, done.stderr
    assert run("export", ["--models-dir", str(root / "models"), "--out", str(root / "export"), "--quiet"]) == 0
    return Export(root / "models", root / "export")


def pretrain_tiny(tmp_path_factory, name: str, *flags: str) -> Export:
    """A few seconds of ``pretrain --architecture`` (the tiny options of the in-process tests) on the tiny corpus,
    with ``flags`` added, then ``export``."""
    root = tmp_path_factory.mktemp(name)
    options = root / "options.json"
    options.write_text(json.dumps(TINY_OPTIONS))
    return trained_and_exported("pretrain", root, write_tiny_agnews(root / "data"), "--architecture", str(options), *flags,
                                "--epochs", "1", "--batch-size", "32", "--softmax", "sampled", "--softmax-samples", "20",
                                "--threads", "1", "--precision", "fp32", "--quiet")


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory) -> Export:
    """``pretrain --architecture`` with the published clipped cell."""
    return pretrain_tiny(tmp_path_factory, "pretrained")


@pytest.fixture(scope="module")
def pretrained_fused(tmp_path_factory) -> Export:
    """The same run with ``--lstm fused`` (no clipping, PyTorch's fused LSTM kernel; exported with null clips)."""
    return pretrain_tiny(tmp_path_factory, "pretrained_fused", "--lstm", "fused")


@pytest.fixture(scope="module")
def finetuned(pretrained, tmp_path_factory) -> Export:
    """``finetune`` of that export on a domain's text (the in-process tests' flags; one epoch, a faster learning
    rate)."""
    root = tmp_path_factory.mktemp("finetuned")
    train, test = domain_text(root)
    return trained_and_exported("finetune", root, root / "absent", "--options-file", str(pretrained.out / "options.json"),
                                "--weight-file", str(pretrained.out / "weights.hdf5"), "--train-file", str(train),
                                "--text-column", "text", "--test-file", str(test), *FINETUNE_FLAGS, "--epochs", "1",
                                "--lr", "1e-2")


#: the fixtures whose exports AllenNLP must read: one more way of training a published biLM is one more name here
EXPORTS = ["pretrained", "finetuned", "pretrained_fused"]


@pytest.fixture(scope="module", params=EXPORTS)
def exported(request) -> Export:
    return request.getfixturevalue(request.param)


def allennlp_layers(allennlp, export: Export, chars: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """AllenNLP's ``_ElmoBiLm`` (new, so its LSTM states start at zero) on the exported files: its layers without
    the sentence boundaries ``(L + 1, B, T, D)`` and their mask ``(B, T)``, after checking that its own mask,
    boundaries included, covers ``n + 2`` positions per sentence and its layers are zero past them."""
    bilm = allennlp.ElmoBiLm(str(export.out / "options.json"), str(export.out / "weights.hdf5")).eval()
    with torch.no_grad():
        out = bilm(chars)
    lengths = torch.tensor([len(s) for s in SENTENCES])
    assert out["mask"].tolist() == (torch.arange(chars.shape[1] + 2) < (lengths + 2)[:, None]).tolist()
    layers, masks = zip(*(allennlp.remove_sentence_boundaries(a, out["mask"]) for a in out["activations"]))
    assert all((a[~out["mask"]] == 0).all() for a in out["activations"])
    return torch.stack(layers), masks[0]


def test_allennlp_elmo_bilm_reads_the_export_as_our_trained_model_computes_it(allennlp, exported):
    chars = allennlp.batch_to_ids(SENTENCES)
    assert torch.equal(chars, batch_char_ids(SENTENCES, TF_MAX_CHARS, "bilm_tf"))  # the same ids, padding all zero
    theirs, mask = allennlp_layers(allennlp, exported, chars)
    lengths = torch.tensor([len(s) for s in SENTENCES])
    assert mask.tolist() == (torch.arange(chars.shape[1]) < lengths[:, None]).tolist()
    bilm = open_bilm(exported.models).bilm
    with torch.no_grad():
        ours = bilm(None, lengths, chars)
    assert ours.shape == theirs.shape == (3, len(SENTENCES), chars.shape[1], 2 * TINY_OPTIONS["lstm"]["projection_dim"])
    assert (ours[:, ~mask] == 0).all()
    differences = [float((theirs[k] - ours[k]).abs().max()) for k in range(3)]
    print(f"{exported.models}: max |AllenNLP - ours| per layer {differences}")  # shown with -s
    for k in range(3):  # each layer: token layer [x; x], then both directions' LSTM layers 1 and 2 (fp32)
        assert differences[k] <= TOLERANCE, k
        assert theirs[k][mask].abs().max() > 100 * TOLERANCE, k  # no agreement of near-zero layers


def test_the_finetuned_export_is_not_the_pretrained_one(allennlp, pretrained, finetuned):
    chars = allennlp.batch_to_ids(SENTENCES)
    before, mask = allennlp_layers(allennlp, pretrained, chars)
    after, _ = allennlp_layers(allennlp, finetuned, chars)
    assert all((before[k] - after[k])[mask].abs().max() > 1e-3 for k in range(3))
