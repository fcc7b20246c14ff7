"""Architecture rules that import-linter's layer contracts (pyproject.toml) do not cover."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "elmo"
MODULES = sorted(PACKAGE.rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_module(node: ast.ImportFrom, path: Path) -> str:
    """The absolute module an ``ImportFrom`` names (``from ..data import x`` in elmo/model/bilm.py → elmo.data)."""
    if not node.level:
        return node.module or ""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def private_imports(code: str, path: Path) -> list[str]:
    """``from <another elmo module> import _name`` (and ``import elmo.x._private``) in ``code``, the text of the
    module at ``path`` (relative imports are resolved from there)."""
    found = []
    this = module_name(path)
    for node in ast.walk(ast.parse(code, str(path))):
        if isinstance(node, ast.ImportFrom):
            source = imported_module(node, path)
            if (source == "elmo" or source.startswith("elmo.")) and source != this:
                for alias in node.names:
                    if alias.name.startswith("_") and alias.name != "__version__":
                        found.append(f"line {node.lineno}: from {source} import {alias.name}")
                if any(part.startswith("_") for part in source.split(".")[1:]):
                    found.append(f"line {node.lineno}: from {source} import ... (a private module)")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("elmo.") and any(p.startswith("_") for p in alias.name.split(".")[1:]):
                    found.append(f"line {node.lineno}: import {alias.name}")
    return found


def test_the_walk_sees_the_whole_package():
    names = {module_name(p) for p in MODULES}
    assert {"elmo", "elmo.cli", "elmo.artifacts", "elmo.model.bilm", "elmo.data.agnews", "lab.report"} <= names
    assert len(MODULES) > 40


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_no_module_imports_a_private_name_from_another_elmo_module(path):
    assert private_imports(path.read_text(encoding="utf-8"), path) == [], f"{path.relative_to(PACKAGE.parent)} reaches into another module's private names"


@pytest.mark.parametrize("code, expected", [
    ("from ..data.batching import _cut", ["line 1: from elmo.data.batching import _cut"]),
    ("from .bilm import BiLM, _helper", ["line 1: from elmo.model.bilm import _helper"]),
    ("from elmo.runtime.device import _sync", ["line 1: from elmo.runtime.device import _sync"]),
    ("from . import _private", ["line 1: from elmo.model import _private"]),
    ("import elmo.data._impl", ["line 1: import elmo.data._impl"]),
    ("from elmo.data._impl import tokenize", ["line 1: from elmo.data._impl import ... (a private module)"]),
    ("def f():\n    from ...elmo_x import _y\n    from ..bench.children import _in_child", [
        "line 3: from lab.bench.children import _in_child"]),  # imports inside functions count too
    ("from lab.bench.children import in_child as _in_child", []),  # a private alias of a public name is fine
    ("from .classifier import _own", []),  # only another module's names: a module may use its own
    ("from numpy import _globals", []),  # other packages are not this test's business
])
def test_the_check_resolves_relative_and_absolute_imports(code, expected):
    assert private_imports(code, PACKAGE / "model" / "classifier.py") == expected
