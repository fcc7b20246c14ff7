"""Architecture rules that import-linter's contracts (pyproject.toml) do not cover, over both packages: the library
(``elmo``) and the lab (``lab``), imports inside functions included."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the project's two packages: what users import and run, and how the project measures itself
PACKAGES = ("elmo", "lab")
MODULES = sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
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


def ours(module: str) -> bool:
    """Whether ``module`` is one of :data:`PACKAGES` or inside one."""
    return module.split(".")[0] in PACKAGES


def private_imports(code: str, path: Path) -> list[str]:
    """``from <another module of elmo or lab> import _name`` (and ``import elmo.x._private``) in ``code``, the text
    of the module at ``path`` (relative imports are resolved from there)."""
    found = []
    this = module_name(path)
    for node in ast.walk(ast.parse(code, str(path))):
        if isinstance(node, ast.ImportFrom):
            source = imported_module(node, path)
            if ours(source) and source != this:
                for alias in node.names:
                    if alias.name.startswith("_") and alias.name != "__version__":
                        found.append(f"line {node.lineno}: from {source} import {alias.name}")
                if any(part.startswith("_") for part in source.split(".")[1:]):
                    found.append(f"line {node.lineno}: from {source} import ... (a private module)")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if ours(alias.name) and any(p.startswith("_") for p in alias.name.split(".")[1:]):
                    found.append(f"line {node.lineno}: import {alias.name}")
    return found


def imported_modules(code: str, path: Path, modules: set[str] = frozenset()) -> set[str]:
    """Every module of elmo or lab that ``code`` (the module at ``path``) imports, anywhere in it; ``from package
    import name`` counts as importing ``package.name`` where that is one of ``modules``."""
    found = set()
    for node in ast.walk(ast.parse(code, str(path))):
        if isinstance(node, ast.ImportFrom):
            source = imported_module(node, path)
            found |= {f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return {m for m in found if ours(m)}


def test_the_walk_sees_the_whole_package():
    names = {module_name(p) for p in MODULES}
    assert {"elmo", "elmo.cli", "elmo.artifacts", "elmo.model.bilm", "elmo.data.agnews"} <= names
    assert {"lab", "lab.cli", "lab.report", "lab.bench.speed", "lab.study"} <= names
    assert len([n for n in names if n.startswith("elmo")]) > 40


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_no_module_imports_a_private_name_from_another_module(path):
    assert private_imports(path.read_text(encoding="utf-8"), path) == [], f"{path.relative_to(ROOT)} reaches into another module's private names"


@pytest.mark.parametrize("path", [p for p in MODULES if module_name(p).split(".")[0] == "elmo"], ids=module_name)
def test_the_library_never_imports_the_lab_not_even_inside_a_function(path):
    assert not {m for m in imported_modules(path.read_text(encoding="utf-8"), path) if m.split(".")[0] == "lab"}


def test_no_import_circles_not_even_through_imports_inside_functions():
    names = {module_name(p): p for p in MODULES}
    graph = {name: imported_modules(path.read_text(encoding="utf-8"), path, set(names)) & set(names) - {name}
             for name, path in names.items()}
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as error:
        pytest.fail(f"an import circle: {' -> '.join(error.args[1])}")


ELMO_MODULE, LAB_MODULE = ROOT / "elmo" / "model" / "classifier.py", ROOT / "lab" / "report" / "pdf.py"


@pytest.mark.parametrize("path, code, expected", [
    (ELMO_MODULE, "from ..data.batching import _cut", ["line 1: from elmo.data.batching import _cut"]),
    (ELMO_MODULE, "from .bilm import BiLM, _helper", ["line 1: from elmo.model.bilm import _helper"]),
    (ELMO_MODULE, "from elmo.runtime.device import _sync", ["line 1: from elmo.runtime.device import _sync"]),
    (ELMO_MODULE, "from . import _private", ["line 1: from elmo.model import _private"]),
    (ELMO_MODULE, "import elmo.data._impl", ["line 1: import elmo.data._impl"]),
    (ELMO_MODULE, "from elmo.data._impl import tokenize", ["line 1: from elmo.data._impl import ... (a private module)"]),
    (LAB_MODULE, "def f():\n    from ...elmo_x import _y\n    from ..bench.children import _in_child", [
        "line 3: from lab.bench.children import _in_child"]),  # imports inside functions count too
    (LAB_MODULE, "from elmo.cli import _flag_type", ["line 1: from elmo.cli import _flag_type"]),  # the lab is held to it too
    (LAB_MODULE, "import lab.bench._impl", ["line 1: import lab.bench._impl"]),
    (LAB_MODULE, "from lab.bench.children import in_child as _in_child", []),  # a private alias of a public name is fine
    (LAB_MODULE, "from .pdf import _own", []),  # only another module's names: a module may use its own
    (ELMO_MODULE, "from .classifier import _own", []),
    (ELMO_MODULE, "from numpy import _globals", []),  # other packages are not this test's business
])
def test_the_check_resolves_relative_and_absolute_imports(path, code, expected):
    assert private_imports(code, path) == expected


def test_the_import_graph_sees_imports_inside_functions_and_submodules_named_in_from_imports():
    code = "def f():\n    from lab.report import make_report\n    import lab.bench.speed\n    from ..errors import E"
    assert imported_modules(code, ELMO_MODULE) == {"lab.report", "lab.bench.speed", "elmo.errors"}
    code = "from ..bench import speed, children\nfrom . import pdf\nimport numpy"
    assert imported_modules(code, LAB_MODULE, {"lab.bench.speed"}) == {"lab.bench.speed", "lab.bench", "lab.report"}
