"""AllenNLP 2.10.1's own ELMo code, imported without its heavy dependencies, for the tests that compare against it
(importable as ``allennlp_reference``): ``tests/integration/test_allennlp_reads_export.py`` (AllenNLP reads our
exports) and ``tests/unit/model/test_elmo_allennlp.py`` (our ``Elmo`` and ``batch_to_ids`` as drop-ins for AllenNLP's).

Needs AllenNLP without its dependencies, plus the few small packages that its package ``__init__`` files import
(:data:`INSTALL`; ``.ci/run`` installs them, docs/testing.md). The heavy ones it imports for other models (spaCy,
transformers, torchvision, fairscale, the Hugging Face hub, ``cached_path``'s cloud back ends) are stood in for while
it is imported (:func:`import_allennlp_elmo`); AllenNLP's own files run unchanged. A test module using it sets
``pytestmark`` with :func:`allennlp_marks`: skipped when AllenNLP is not installed, except under CI (``CI=true``),
where that is a failure.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import sys
import types
from pathlib import Path

import pytest

INSTALL = "pip install --no-deps allennlp==2.10.1 base58==2.1.1 dill==0.4.1 lmdb==3.0.0 more-itertools==11.2.1"
#: what AllenNLP's package ``__init__`` files import for models other than ELMo, stood in for while it is imported
STAND_INS = ("transformers", "spacy", "torchvision", "fairscale", "huggingface_hub", "cached_path")


def allennlp_marks() -> list[pytest.MarkDecorator]:
    """The marks of a module that needs AllenNLP: none when it is installed, a skip when not; under CI (``CI`` set)
    a missing AllenNLP fails the module instead."""
    if importlib.util.find_spec("allennlp") is not None:
        return []
    if os.environ.get("CI"):
        pytest.fail(f"CI run without AllenNLP: .ci/run must `{INSTALL}`", pytrace=False)
    return [pytest.mark.skip(reason=f"AllenNLP not installed ({INSTALL})")]


class _StandIn(types.ModuleType):
    """A package whose every attribute is a new empty class (enough for ``from x import Y`` and ``class Z(Y)``)."""

    __path__: list[str] = []

    def __getattr__(self, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        value = type(name, (), {"__init__": lambda self, *args, **kwargs: None})
        setattr(self, name, value)
        return value


class _StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of :data:`STAND_INS` (and their submodules) → :class:`_StandIn`; ``cached_path.cached_path`` is the
    local path itself (what the real one returns for a local file: the exported files are local)."""

    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in STAND_INS:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StandIn(spec.name)
        if spec.name == "cached_path":
            module.cached_path = lambda path, **_: Path(path)
        return module

    def exec_module(self, module):
        pass


def import_allennlp_elmo() -> types.SimpleNamespace:
    """AllenNLP's ``Elmo``, ``_ElmoBiLm`` (as ``ElmoBiLm``), ``batch_to_ids`` and ``remove_sentence_boundaries``,
    imported with :data:`STAND_INS` stood in for; afterwards ``sys.modules`` holds those names as before (AllenNLP
    keeps its references), and ``logging``'s logger class, which AllenNLP replaces, is put back. Skips (fails under
    CI) when a package AllenNLP's ELMo needs is missing."""
    def standing_in(name):
        return name.split(".")[0] in STAND_INS

    saved = {name: module for name, module in sys.modules.items() if standing_in(name)}
    logger_class = logging.getLoggerClass()
    finder = _StandIns()
    sys.meta_path.insert(0, finder)
    for name in saved:
        del sys.modules[name]
    try:
        from allennlp.modules.elmo import Elmo, _ElmoBiLm, batch_to_ids
        from allennlp.nn.util import remove_sentence_boundaries
    except ModuleNotFoundError as error:
        message = f"AllenNLP's ELMo needs {error.name}: {INSTALL}"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    finally:
        sys.meta_path.remove(finder)
        for name in [name for name in sys.modules if standing_in(name)]:
            del sys.modules[name]
        sys.modules.update(saved)
        logging.setLoggerClass(logger_class)
    return types.SimpleNamespace(Elmo=Elmo, ElmoBiLm=_ElmoBiLm, batch_to_ids=batch_to_ids,
                                 remove_sentence_boundaries=remove_sentence_boundaries)
