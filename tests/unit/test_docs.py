"""Every snippet of README.md and docs/*.md runs, or at least parses, so that the pages cannot drift from the code.

* ```python blocks run (``exec``, in this process), in page order, in one folder per page: a copy of
  :func:`project`, where small stand-ins lie in place of what the pages' long jobs and downloads leave there
  (``models/`` of a tiny ``ELMO.py`` + ``classification.py`` run, AllenNLP's test biLM under the published ELMo's
  file names, a few text files: :data:`STAND_INS`).
* ```bash blocks, in the same folder and order: every command of the project (``python ELMO.py``,
  ``classification.py``, ``baselines.py``, ``python -m elmo`` / ``elmo``, ``python -m lab``, the script that
  ``torchrun`` starts) is parsed by its real parser and its arguments checked (``*Args.check()``): every flag exists
  and every value parses. The cheap commands (:data:`RUNS`: ``predict``, ``embed``, ``export``, and any ``--help``)
  also run and must exit with status 0. Parsed only: the training commands and the lab's (minutes to hours as the
  pages write them), ``fetch`` (network), ``torchrun`` (several processes, GPUs), and the commands of
  :data:`AFTER_A_LONG_JOB` (they read what a parsed-only training command writes). ``pip`` and ``pytest`` lines
  are other tools' and are not checked (:func:`invocation`).
* Blocks without a language (output, URLs, diagrams) hold no command line.
* Inline code: a span that starts with a command (`python -m elmo export --format hub`) names flags of that
  command, and every ``--flag`` on the pages is a flag of one of the project's commands or of another tool
  (:data:`OTHER_FLAGS`).

The README's library block is also run in a fresh interpreter, its output checked, by
``tests/integration/test_pipeline.py``.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import pkgutil
import re
import shlex
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from published_reference import OPTIONS, WEIGHTS
from support import CLASSIFY, ROOT, SMALL, process_state_kept, run_in_process, write_tiny_agnews

import elmo
from elmo import ElmoError, cli
from lab import cli as lab_cli

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```[ \t]*$", re.S | re.M)
#: the top-level scripts and the command each runs
SCRIPTS = {"ELMO.py": "pretrain", "classification.py": "classify", "baselines.py": "baselines"}
#: the commands of ``python -m elmo`` that take seconds on the stand-ins: these run, the others are parsed only
RUNS = {"predict", "embed", "export"}
#: cheap commands that read what a parsed-only training command of the page writes: parsed only (each still in a page)
AFTER_A_LONG_JOB = {
    "python -m elmo export --models-dir domain_elmo --out out/": "exports the model that `finetune` trains above it",
    "python -m elmo export --models-dir models/ --out out/": "exports the published_lm.pt of `pretrain --architecture`",
}
#: flags of the other tools the pages run: pip, pytest and torchrun
OTHER_FLAGS = {"--index-url", "--no-deps", "--dist", "--standalone", "--nnodes", "--nproc_per_node", "--rdzv-backend",
               "--rdzv-id", "--rdzv-endpoint"}
#: what the pages' long jobs and downloads leave in the folder their snippets run in, as small stand-ins: the
#: published ELMo's two files (under the names the pages give them, and the placeholders OPTIONS.json and
#: WEIGHTS.hdf5) and `export`'s out/ are AllenNLP's test biLM; models/ is :func:`project`'s tiny run
STAND_INS = {
    "elmo_2x4096_512_2048cnn_2xhighway_options.json": OPTIONS, "elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5": WEIGHTS,
    "OPTIONS.json": OPTIONS, "WEIGHTS.hdf5": WEIGHTS, "my_options.json": OPTIONS,
    "out/options.json": OPTIONS, "out/weights.hdf5": WEIGHTS,
}
#: the users' own text files the pages name
TEXTS = {"sentences.txt": "The cat sat on the mat .\nStocks rallied after the bank raised its forecast .\n",
         "texts.txt": "Stocks rallied on Friday.\n\nThe striker scored twice.\n",
         "words.txt": "the\ncat\nstocks\n",
         "corpus.txt": "the market rallied on friday\nthe team won the match\n"}


@dataclass(frozen=True)
class Block:
    """A fenced code block of a page: its language (``""`` when none) and text."""

    page: Path
    line: int
    lang: str
    code: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of ``page``, in order."""
    text = page.read_text(encoding="utf-8")
    return [Block(page, text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def command_lines(code: str) -> list[list[str]]:
    """The commands of a shell block, as words: continuation lines joined, comments dropped, ``&&`` split, the
    environment variables set in front of a command (``NAME=value python ...``) left out."""
    commands = []
    for line in code.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        while words:
            cut = words.index("&&") if "&&" in words else len(words)
            command = words[:cut]
            while command and re.fullmatch(r"[A-Za-z_]\w*=.*", command[0]):
                command = command[1:]
            commands.append(command)
            words = words[cut + 1:]
    return [c for c in commands if c]


@dataclass(frozen=True)
class Invocation:
    """What a command line runs: ``table[name]`` (:data:`elmo.cli.COMMANDS` or the lab's) with ``argv``."""

    table: dict
    name: str
    argv: tuple[str, ...]
    prog: str
    lab: bool = False  # with the lab's flags (python -m lab elmo)
    launcher: str = ""  # torchrun

    @property
    def library(self) -> bool:
        return self.table is cli.COMMANDS


def invocation(words: list[str]) -> Invocation | None:
    """The project's command that ``words`` runs; ``None`` for another tool's (``pip``, ``pytest``).

    Raises:
        AssertionError: a command line of no known form (teach this function how to check it).
    """
    python = words[0] in ("python", "python3")
    if words[0] == "torchrun":  # its own flags are torchrun's; the script's are checked
        script = next((i for i, w in enumerate(words) if w.endswith(".py")), None)
        assert script is not None, f"torchrun without a script: {shlex.join(words)}"
        return replace(invocation(["python", *words[script:]]), launcher="torchrun")
    if words[0] == "pip" or (python and words[1:3] == ["-m", "pytest"]):
        return None
    if python and len(words) > 1 and words[1] in SCRIPTS:
        return Invocation(cli.COMMANDS, SCRIPTS[words[1]], tuple(words[2:]), words[1])
    if python and words[1:4] == ["-m", "lab", "elmo"]:
        return Invocation(cli.COMMANDS, words[4], tuple(words[5:]), f"python -m lab elmo {words[4]}", lab=True)
    if python and words[1:3] == ["-m", "lab"]:
        return Invocation(lab_cli.COMMANDS, words[3], tuple(words[4:]), f"python -m lab {words[3]}")
    if python and words[1:3] == ["-m", "elmo"]:
        return Invocation(cli.COMMANDS, words[3], tuple(words[4:]), f"python -m elmo {words[3]}")
    if words[0] == "elmo":
        return Invocation(cli.COMMANDS, words[1], tuple(words[2:]), f"elmo {words[1]}")
    raise AssertionError(f"not a command line this test knows how to check: {shlex.join(words)}")


def parse(inv: Invocation, where: str) -> str:
    """Parse ``inv``'s arguments with the command's own parser and check them (``*Args.check()``); ``--help`` is
    printed and must exit with status 0. Returns what the parser printed (the help)."""
    assert inv.name in inv.table, f"{where}: no command {inv.name!r} ({inv.prog})"
    spec = inv.table[inv.name]
    parser = cli.command_parser(spec, inv.prog, inv.lab)
    parser.allow_abbrev = False  # the pages spell every flag in full (`--max-doc` would pass for `--max-docs`)
    out, err, status = io.StringIO(), io.StringIO(), None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = parser.parse_args(inv.argv)
    except SystemExit as done:
        status = done.code
    if status is None:
        spec.args(**vars(args)).check()
    else:  # argparse stopped: it printed --help (status 0), or refused the arguments (2)
        assert status == 0 and {"-h", "--help"} & set(inv.argv) and "usage:" in out.getvalue(), \
            f"{where}: {inv.prog} {shlex.join(inv.argv)}: {err.getvalue().strip()}"
    return out.getvalue()


def runs(inv: Invocation, words: list[str]) -> bool:
    """Whether ``inv`` runs (else it is parsed only, or was run by :func:`parse`, as ``--help`` is): a cheap library
    command, not after a long job."""
    return (inv.library and not inv.lab and not inv.launcher and inv.name in RUNS
            and not {"-h", "--help"} & set(inv.argv) and shlex.join(words) not in AFTER_A_LONG_JOB)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A folder as a user's checkout is after the pages' long jobs, made small: ``python ELMO.py`` and
    ``python classification.py`` (trainable λ only) on the tiny corpus in ``data/ag_news``, in this process, plus
    :data:`STAND_INS` and :data:`TEXTS`."""
    root = tmp_path_factory.mktemp("project")
    data = write_tiny_agnews(root / "data" / "ag_news")
    assert run_in_process("pretrain", root, data, *SMALL) == 0
    assert run_in_process("classify", root, data, *CLASSIFY, "--mixes", "trainable_lambda") == 0
    for name, source in STAND_INS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, root / name)
    for name, text in TEXTS.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_snippet_of_the_page_runs_or_parses(page, project, tmp_path, monkeypatch, capsys):
    folder = tmp_path / "project"
    shutil.copytree(project, folder)
    monkeypatch.chdir(folder)
    for block in blocks(page):
        if block.lang == "python":
            with process_state_kept():
                exec(compile(block.code, str(block), "exec"), {"__name__": "__main__"})  # noqa: S102 - our own docs
        elif block.lang in ("bash", "sh", "shell"):
            for words in command_lines(block.code):
                inv = invocation(words)
                if inv is None:
                    continue
                parse(inv, str(block))
                if runs(inv, words):
                    capsys.readouterr()
                    with process_state_kept():
                        status = cli.run(inv.name, list(inv.argv), prog=inv.prog)
                    assert status == 0, f"{block}: {shlex.join(words)} exited with {status}: {capsys.readouterr().err}"
        elif block.lang != "text":  # ```text: a diagram or output, commands in it included
            commands = [line for line in block.code.splitlines()
                        if re.match(r"\s*(python3?|torchrun|elmo|pip) ", line)]
            assert not commands, f"{block}: command lines in a block without a language (```bash): {commands}"


def test_the_check_runs_help_and_refuses_a_flag_a_value_or_a_command_that_is_not_there():
    assert "--max-docs" in parse(invocation(["python", "ELMO.py", "--help"]), "here")
    parse(invocation(["python", "-m", "lab", "elmo", "classify", "--labelled-fraction", "0.1"]), "here")
    for words, message in ((["python", "ELMO.py", "--max-doc", "6"], "unrecognized arguments: --max-doc 6"),
                           (["python", "-m", "elmo", "predict", "--threads", "two"], "invalid int value: 'two'"),
                           (["python", "classification.py", "--labelled-fraction", "0.1"], "unrecognized arguments"),
                           (["python", "-m", "elmo", "train"], "no command 'train'")):
        with pytest.raises(AssertionError, match=message):
            parse(invocation(words), "here")
    with pytest.raises(ElmoError, match="--epochs must be >= 1"):
        parse(invocation(["python", "ELMO.py", "--epochs", "0"]), "here")
    with pytest.raises(AssertionError, match="not a command line this test knows"):
        invocation(["python", "train.py"])
    assert invocation(["pip", "install", "-e", "."]) is None
    assert command_lines("A=1 python ELMO.py --epochs 2 \\\n  --quiet && python -m elmo fetch  # comment\n") == [
        ["python", "ELMO.py", "--epochs", "2", "--quiet"], ["python", "-m", "elmo", "fetch"]]


def test_the_commands_parsed_after_a_long_job_are_still_on_the_pages():
    written = {shlex.join(words) for page in PAGES for block in blocks(page) if block.lang == "bash"
               for words in command_lines(block.code)}
    assert set(AFTER_A_LONG_JOB) <= written, set(AFTER_A_LONG_JOB) - written  # else remove it from AFTER_A_LONG_JOB


def flags_of(inv: Invocation) -> set[str]:
    """Every option string of ``inv``'s command."""
    parser = cli.command_parser(inv.table[inv.name], inv.prog, inv.lab)
    return {s for action in parser._actions for s in action.option_strings}


def inline_spans(page: Path) -> list[str]:
    """The inline code spans of ``page`` outside its fenced blocks, a span broken over two lines joined."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [m.group(1).replace("\n", " ") for m in re.finditer(r"(?<!`)`([^`\n]+(?:\n[^`\n]+)?)`(?!`)", text)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_command_in_running_text_names_flags_it_has(page):
    """`python -m elmo export --format hub`, `ELMO.py --train-file`, `finetune --lr-gamma`: each ``--flag`` of the
    span is one of that command's (a bare command name, as in `finetune --lr-gamma`, with the lab's flags too).
    Placeholders (`IN OUT`, `[--force]`, `<command>`) are not checked."""
    wrong = []
    for span in inline_spans(page):
        words = span.replace("[", " ").replace("]", " ").replace("|", " ").split()
        if not words:
            continue
        if words[0] in SCRIPTS or words[0] in cli.COMMANDS:
            words = ["python", *words] if words[0] in SCRIPTS else ["python", "-m", "lab", "elmo", *words]
        if words[0] not in ("python", "python3", "elmo") or len(words) < 2:
            continue
        try:
            inv = invocation(words)
        except (AssertionError, IndexError):
            continue  # not one of the project's commands
        if inv is None or inv.name not in inv.table:
            continue  # another tool's, or a placeholder such as <command>
        flags = flags_of(inv)
        named = [f for w in inv.argv for f in w.split("/") if re.fullmatch(r"--[a-z][\w-]*", f)]
        wrong += [f"`{span}`: {f}" for f in named if f not in flags]
    assert not wrong, wrong


def test_every_flag_on_the_pages_is_a_flag_of_a_command():
    known = set(OTHER_FLAGS)
    for table in (cli.COMMANDS, lab_cli.COMMANDS):
        for name in table:
            known |= flags_of(Invocation(table, name, (), name, lab=True))
    unknown = {(str(page.relative_to(ROOT)), m.group(0)) for page in PAGES
               for m in re.finditer(r"(?<![\w#-])--[a-z][\w-]*", page.read_text(encoding="utf-8"))
               if m.group(0) not in known}
    assert not unknown, sorted(unknown)


def test_the_names_the_library_page_writes_without_a_module_import_from_elmo():
    """docs/library.md: `ElmoClassifier`, `load_bilm`, ... (a class or function of the package written without its
    module) is in ``elmo.__all__``; `open_bilm` is written `elmo.model.serialization.open_bilm` there."""
    defined = set()
    for module in pkgutil.walk_packages(elmo.__path__, "elmo."):
        if not module.name.endswith("__main__"):
            defined |= {name for name, value in vars(importlib.import_module(module.name)).items()
                        if (inspect.isclass(value) or inspect.isfunction(value)) and not name.startswith("_")
                        and value.__module__.startswith("elmo.")}
    text = (ROOT / "docs" / "library.md").read_text(encoding="utf-8")
    bare = set(re.findall(r"`([A-Za-z]\w*)`", text)) & defined - set(cli.COMMANDS)
    qualified = set(re.findall(r"`elmo\.[\w.]*\.(\w+)", text))
    missing = sorted(name for name in bare - qualified if name not in elmo.__all__)
    assert not missing, missing
    assert all(hasattr(elmo, name) for name in elmo.__all__)
