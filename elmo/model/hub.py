"""Model folders as PyTorch shares them (the one place that lays them out; what each file holds: docs/library.md,
"Sharing a model"): ``model.save_pretrained(folder)`` writes ``config.json`` (``elmo_kind``, ``format_version``,
:meth:`HubMixin.hub_config`, ``card``), ``model.safetensors``, ``vocab.txt`` and a ``README.md`` model card,
``Class.from_pretrained(folder or Hub id)`` reads them back, ``push_to_hub(repo_id)`` uploads them. :class:`HubMixin`
adds this to :class:`~elmo.model.bilm.BiLM` (either architecture), :class:`~elmo.model.elmo.Elmo` and
:class:`~elmo.model.classifier.ElmoClassifier` on huggingface_hub's ``PyTorchModelHubMixin``, with our own loading so
that a bad file gets a one-line error; the training commands write one (:attr:`elmo.artifacts.Outputs.pretrained_dir`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, ClassVar

import torch
from huggingface_hub import ModelCard, ModelCardData, PyTorchModelHubMixin, snapshot_download

from ..artifacts import PRETRAINED_FILES, atomic_write_bytes, check_writable
from ..data.vocab import Vocabulary
from ..errors import ElmoError

CONFIG, WEIGHTS, VOCAB, CARD = PRETRAINED_FILES
#: the ``config.json`` layout version this code writes; it reads no other
FORMAT_VERSION = 1
PAPER = "https://arxiv.org/abs/1802.05365"
#: the model card's title of each kind
TITLES = {"bilm": "ELMo biLM", "published_bilm": "ELMo biLM (the published architecture)",
          "published_lm": "ELMo biLM with its training softmax (the published architecture)", "elmo": "ELMo layer",
          "elmo_classifier": "ELMo text classifier"}

CARD_TEMPLATE = """---
{{ card_data }}
---

# {{ title }}

{{ description }}

## Training

{{ training }}

## Results

{{ results }}

## How to load

```python
{{ usage }}
```

Saved with the `elmo` toolkit's `save_pretrained` ([ELMo, Peters et al. 2018]({{ paper_url }})): `config.json`,
float32 weights in `model.safetensors`{{ vocab_note }}.
"""


def is_hub_id(path: str | os.PathLike) -> bool:
    """Whether ``path``, which is no file or folder here, reads as a Hub model id (``owner/name``)."""
    return bool(re.fullmatch(r"[\w.-]+/[\w.-]+", str(path))) and not Path(path).exists()


def hub_failure(exc: BaseException) -> str:
    """Why a Hub call failed, in one line, whatever the HTTP client: ``exc``'s first message line, else its type."""
    return str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__


def renamed_key(key: str) -> str:
    """This version's name of a weight an earlier version named ``key``, at any depth: earlier versions named the LSTM
    layers of bilm-tf's architecture ``forward_layers.j`` / ``backward_layers.j``, now ``forward_lm.layers.j``."""
    return re.sub(r"(^|\.)(forward|backward)_layers\.", r"\1\2_lm.layers.", key)


def earlier_key(key: str) -> str:
    """The name earlier versions gave the weight this version names ``key``: the inverse of :func:`renamed_key`."""
    return re.sub(r"(^|\.)(forward|backward)_lm\.layers\.", r"\1\2_layers.", key)


class HubMixin(PyTorchModelHubMixin, library_name="elmo-toolkit", paper_url=PAPER, model_card_template=CARD_TEMPLATE,
               tags=["elmo", "bilm", "contextual-embeddings"], license="mit"):
    """``save_pretrained`` / ``from_pretrained`` / ``push_to_hub`` for our modules (module docstring); a subclass sets
    :attr:`hub_kind` and defines :meth:`hub_config` and :meth:`from_hub_config`. :attr:`vocab`: the
    :class:`~elmo.data.vocab.Vocabulary` written as ``vocab.txt`` (``None``: none is written); :attr:`card`: model-card
    facts from the training run (``text``, ``train_tokens``, ``perplexity``, ``accuracy``, ``command``), set by the
    loaders."""

    hub_kind: ClassVar[str] = ""
    kinds: ClassVar[dict[str, type]] = {}
    vocab: Vocabulary | None = None
    card: dict[str, Any] | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("hub_kind"):
            HubMixin.kinds[cls.hub_kind] = cls

    def hub_config(self) -> dict[str, Any]:
        """What ``config.json`` holds to rebuild this module (JSON values)."""
        raise NotImplementedError

    @classmethod
    def from_hub_config(cls, config: dict[str, Any], vocab: Vocabulary | None) -> "HubMixin":
        """The module :meth:`hub_config` describes, with fresh weights. Raises KeyError/TypeError/ElmoError."""
        raise NotImplementedError

    @staticmethod
    def renamed_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A ``model.safetensors`` state with this version's names (:func:`renamed_key` of each, at any depth)."""
        return {renamed_key(k): v for k, v in state.items()}

    def loaded(self, folder: Path) -> None:
        """Called on every :class:`HubMixin` inside a module after its weights were read from ``folder``."""

    def save_pretrained(self, save_directory: str | os.PathLike, *, push_to_hub: bool = False, repo_id: str | None = None,
                        **kwargs: Any) -> str | None:
        """Write the four files into ``save_directory`` (created if missing; how, replacing files of these names
        whichever model wrote them: docs/library.md; :meth:`saved_difference` tells first), ``vocab.txt`` only with a
        vocabulary (:meth:`saved_vocab`; else an old one is removed). ``push_to_hub=True`` then uploads the folder to
        ``repo_id`` (default: the folder's name) with the other ``kwargs`` of ``push_to_hub``; returns the commit URL
        when pushed, else ``None``. Raises ElmoError: the folder (or a part of its path) is a file or unwritable; the
        push failed (folder written)."""
        from safetensors.torch import save

        target = Path(save_directory)
        repo = repo_id or target.name
        check_writable(target, flags=("save_directory",))
        card_repo = (kwargs.pop("model_card_kwargs", None) or {}).get("repo_id") or repo
        kwargs.pop("config", None)  # push_to_hub passes it; config.json is ours
        atomic_write_bytes(target / WEIGHTS, save(self.saved_state(), metadata={"format": "pt", "elmo_kind": self.hub_kind}))
        vocab = self.saved_vocab()
        if vocab is not None:
            atomic_write_bytes(target / VOCAB, ("\n".join(vocab.itos) + "\n").encode("utf-8"))
        else:
            (target / VOCAB).unlink(missing_ok=True)  # one left by another model would not be this one's
        atomic_write_bytes(target / CARD, str(self.generate_model_card(repo_id=card_repo)).encode("utf-8"))
        config = {**self.saved_config(), "card": self.card or {}}
        atomic_write_bytes(target / CONFIG, (json.dumps(config, indent=2, sort_keys=True) + "\n").encode("utf-8"))
        if push_to_hub:
            try:
                return self.push_to_hub(repo, model_card_kwargs={"repo_id": repo}, **kwargs)
            except Exception as exc:  # network, authentication, permissions: one line, as load_pretrained says it
                raise ElmoError(f"wrote {target}, but could not push it to the Hub model {repo}: "
                                f"{hub_failure(exc)}") from None
        return None

    def saved_state(self) -> dict[str, torch.Tensor]:
        """The tensors ``model.safetensors`` holds: the state dict on the CPU, floating point ones as float32."""
        return {k: (v.detach().float() if v.is_floating_point() else v.detach()).contiguous().cpu()
                for k, v in self.state_dict().items()}

    def saved_config(self) -> dict[str, Any]:
        """What ``config.json`` holds besides ``card``, as JSON reads it back (tuples as lists)."""
        return json.loads(json.dumps({"format_version": FORMAT_VERSION, **nested_config(self)}))

    def saved_difference(self, save_directory: str | os.PathLike) -> tuple[Path, str] | None:
        """``(file, what it is)`` for the first file :meth:`save_pretrained` would replace in ``save_directory`` that is
        not this model's; ``None`` when there is none of the four, or this model's own earlier save (same kind,
        configuration, vocabulary and weights bit for bit; the card may differ). Raises nothing: an unreadable file is
        a difference (``"a file that does not load"``)."""
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        folder = Path(save_directory)
        present = [folder / name for name in (CONFIG, WEIGHTS, VOCAB, CARD) if (folder / name).exists()]
        if not present:
            return None
        if not (folder / CONFIG).is_file() or not (folder / WEIGHTS).is_file():
            return present[0], "not a folder save_pretrained wrote (config.json or model.safetensors missing)"
        try:
            config = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return folder / CONFIG, "a file that does not load"
        if not isinstance(config, dict) or {k: v for k, v in config.items() if k != "card"} != self.saved_config():
            kind = config.get("elmo_kind") if isinstance(config, dict) else None
            return folder / CONFIG, (f"a model of another kind ({kind})" if kind != self.hub_kind else
                                     f"another {kind} (another configuration)")
        try:
            saved = load_file(str(folder / WEIGHTS))
        except (SafetensorError, OSError, ValueError):
            return folder / WEIGHTS, "a file that does not load"
        ours = self.saved_state()
        if saved.keys() != ours.keys() or not all(torch.equal(saved[k], v) for k, v in ours.items()):
            return folder / WEIGHTS, f"another {self.hub_kind} (other weights)"
        vocab = self.saved_vocab()
        try:
            lines = (folder / VOCAB).read_text(encoding="utf-8").splitlines() if (folder / VOCAB).is_file() else None
        except (OSError, UnicodeDecodeError):
            return folder / VOCAB, "a file that does not load"
        if lines != (None if vocab is None else list(vocab.itos)):
            return folder / VOCAB, "another vocabulary"
        return None

    def saved_vocab(self) -> Vocabulary | None:
        """The vocabulary ``vocab.txt`` holds: :attr:`vocab`, else that of the biLM inside (an Elmo layer's)."""
        inner = (m.vocab for m in self.modules() if isinstance(m, HubMixin) and m.vocab is not None)
        return self.vocab if self.vocab is not None else next(inner, None)

    def describe(self) -> str:
        """One paragraph for the model card: what the model is."""
        return type(self).__name__

    def usage(self, repo_id: str) -> str:
        """The code that loads it, for the model card: a biLM's, through ``ElmoEmbedder`` (others override it)."""
        return (f"from elmo import ElmoEmbedder\nembedder = ElmoEmbedder.from_pretrained({repo_id!r})\n"
                "layers = embedder.embed_sentence([\"Stocks\", \"rallied\", \"on\", \"Friday\", \".\"])  # (3, 5, D)")

    def generate_model_card(self, *args: Any, repo_id: str = "path/to/folder", **kwargs: Any) -> ModelCard:
        """The ``README.md`` model card: :meth:`describe`, :attr:`card` (training and results) and :meth:`usage`."""
        facts = self.card or {}
        training = [f"- Text: {facts['text']}" if facts.get("text") else "- Text: not recorded",
                    *([f"- Tokens: {facts['train_tokens']:,}"] if facts.get("train_tokens") else []),
                    f"- Command: `{facts['command']}`" if facts.get("command") else "- Command: not recorded"]
        results = [f"- {split} perplexity: " + ", ".join(f"{d} {p:.2f}" for d, p in per.items())
                   for split, per in (facts.get("perplexity") or {}).items() if per]
        results += [f"- {split} accuracy {m['accuracy']:.4f}, macro-F1 {m['macro_f1']:.4f}"
                    for split, m in (facts.get("accuracy") or {}).items()]
        data = ModelCardData(library_name="elmo-toolkit", license="mit", tags=sorted(self._hub_mixin_info.model_card_data.tags or []))
        return ModelCard.from_template(data, template_str=CARD_TEMPLATE, title=TITLES[self.hub_kind],
                                       description=self.describe(), training="\n".join(training),
                                       results="\n".join(results) or "Not recorded.", usage=self.usage(repo_id),
                                       paper_url=PAPER, vocab_note=", its vocabulary in `vocab.txt`" if self.saved_vocab() else "")

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike, **kwargs: Any) -> "HubMixin":
        """The module saved in a folder or a Hub model id (``owner/name``; ``revision``, ``cache_dir``, ``token``,
        ``force_download``, ``local_files_only`` as ``huggingface_hub`` takes them), in eval mode on the CPU. Raises
        ElmoError, one line naming the file and the key: no such folder or Hub model; ``config.json`` or
        ``model.safetensors`` missing, truncated or not matching each other; another kind of model."""
        download = {k: kwargs[k] for k in ("revision", "cache_dir", "token", "force_download", "local_files_only")
                    if k in kwargs}
        model = load_pretrained(pretrained_model_name_or_path, **download)
        if not isinstance(model, cls):
            raise ElmoError(f"{pretrained_model_name_or_path}: holds a {type(model).__name__} (elmo_kind "
                            f"{model.hub_kind!r}), not a {cls.__name__}")
        return model


def nested_config(module: HubMixin) -> dict[str, Any]:
    """The entry of a module inside another's ``config.json`` (the biLM of an Elmo layer or a classifier)."""
    return {"elmo_kind": module.hub_kind, **module.hub_config()}


def from_nested_config(config: dict[str, Any], vocab: Vocabulary | None) -> HubMixin:
    """Inverse of :func:`nested_config`, fresh weights. Raises KeyError (an unknown kind too), TypeError, ElmoError."""
    return HubMixin.kinds[config["elmo_kind"]].from_hub_config(config, vocab)


def read_config(folder: Path) -> dict[str, Any]:
    """A ``save_pretrained`` folder's ``config.json``. Raises ElmoError (naming the file and key): missing, not JSON,
    an unknown ``elmo_kind`` or another ``format_version``."""
    file = folder / CONFIG
    if not file.is_file():
        raise ElmoError(f"{file} not found: not a folder written by save_pretrained")
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ElmoError(f"{file}: not valid JSON ({exc})") from None
    if not isinstance(config, dict) or config.get("elmo_kind") not in HubMixin.kinds:
        kind = config.get("elmo_kind") if isinstance(config, dict) else None
        raise ElmoError(f"{file}: key elmo_kind is {kind!r}, not one of {', '.join(sorted(HubMixin.kinds))}")
    if config.get("format_version") != FORMAT_VERSION:
        raise ElmoError(f"{file}: key format_version is {config.get('format_version')!r}; this version of the toolkit "
                        f"reads {FORMAT_VERSION}")
    return config


def load_pretrained(path: str | os.PathLike, **download: Any) -> HubMixin:
    """Whichever module a ``save_pretrained`` folder (or the Hub snapshot of a model id's four files:
    ``huggingface_hub.snapshot_download`` with ``download``: ``revision``, ``cache_dir``, ``token``, ...) holds, in eval
    mode on the CPU, with its :attr:`~HubMixin.vocab` and :attr:`~HubMixin.card`, every key and shape of
    ``model.safetensors`` checked. Raises ElmoError as :meth:`HubMixin.from_pretrained`, a failed download in one line."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(path)
    if not folder.is_dir():
        if not is_hub_id(path):
            raise ElmoError(f"{path}: no such folder (nor a Hub model id, owner/name)")
        try:
            folder = Path(snapshot_download(str(path), allow_patterns=list(PRETRAINED_FILES), **download))
        except Exception as exc:  # network, authentication, missing repository: one line, whatever the cause
            raise ElmoError(f"{path}: no such folder, and the Hub model could not be downloaded: "
                            f"{hub_failure(exc)}") from None
    config, file, weights, vocab_file = read_config(folder), folder / CONFIG, folder / WEIGHTS, folder / VOCAB
    try:
        vocab = Vocabulary(vocab_file.read_text(encoding="utf-8").splitlines()) if vocab_file.is_file() else None
    except (OSError, UnicodeDecodeError, ElmoError) as exc:
        raise ElmoError(f"{vocab_file}: {exc}") from None
    try:  # the module config.json describes, fresh weights
        model = from_nested_config(config, vocab)
    except KeyError as exc:
        raise ElmoError(f"{file}: no key {exc}") from None
    except (TypeError, ValueError) as exc:
        raise ElmoError(f"{file}: a key does not fit {config.get('elmo_kind')}: {str(exc).splitlines()[0]}") from None
    except ElmoError as exc:
        raise ElmoError(f"{file}: {exc}") from None
    if not weights.is_file():
        raise ElmoError(f"{weights} not found: not a folder written by save_pretrained")
    try:
        state = load_file(str(weights))
    except (SafetensorError, OSError, ValueError) as exc:
        raise ElmoError(f"{weights}: not a complete safetensors file ({str(exc).splitlines()[0]})") from None
    state, expected = model.renamed_state(state), model.state_dict()
    for key, tensor in expected.items():
        if key not in state:
            raise ElmoError(f"{weights}: no key {key!r}, which the model of {file} has")
        if tuple(state[key].shape) != tuple(tensor.shape):
            raise ElmoError(f"{weights}: key {key!r} has shape {tuple(state[key].shape)}, but the model of {file} "
                            f"needs {tuple(tensor.shape)}")
    if extra := sorted(set(state) - set(expected)):
        raise ElmoError(f"{weights}: key {extra[0]!r} is not in the model of {file}")
    model.load_state_dict(state)
    model.vocab, model.card = vocab, config.get("card") or {}
    for module in model.modules():
        if isinstance(module, HubMixin):
            module.loaded(folder)
    return model.eval()
