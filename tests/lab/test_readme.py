"""``python -m lab readme``: README.md's generated blocks and lab/results.md, from the committed results/.

The README's commands write into results/ of the checkout by default, so the tests read results/ as committed
(:func:`committed`), not whatever the last run there left."""

import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from support import ROOT

from elmo.errors import ElmoError
from lab.cli import COMMANDS, main
from lab.readme import BLOCKS, WIDTH, ReadmeArgs, cpu_label, fill, gpu_lines, timing_lines, write_readme


@pytest.fixture(scope="module")
def committed(tmp_path_factory) -> Path:
    """results/ as the checkout's last commit holds it (``git archive HEAD results``), or, outside a git checkout
    (an unpacked release), results/ as it is."""
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.strip()
        if Path(top).resolve() != ROOT.resolve():
            return ROOT / "results"  # the folder lies in another repository, which does not hold it as it is here
        archive = subprocess.run(["git", "archive", "--format=tar", "HEAD", "results"], cwd=ROOT, capture_output=True,
                                 check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ROOT / "results"
    out = tmp_path_factory.mktemp("committed")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(out, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    return out / "results"


def test_fill_replaces_only_what_lies_between_the_markers():
    text = "a\n<!-- generated:x -->\nold\n<!-- /generated:x -->\nb\n"
    assert fill(text, "x", "new") == "a\n<!-- generated:x -->\nnew\n<!-- /generated:x -->\nb\n"
    with pytest.raises(ElmoError, match="generated:y"):
        fill(text, "y", "new")


def test_the_committed_timing_gives_one_line_per_cpu(committed):
    lines = timing_lines(committed)
    assert len(lines) == len({line.split(":")[0] for line in lines}) >= 1
    assert all(line.startswith("* 2-core AMD EPYC (family 25") and len(line) <= 200 for line in lines)
    assert cpu_label(committed / "timing" / "lscpu.txt").endswith("AVX512-BF16)")


def test_the_committed_gpu_run_gives_its_line_and_a_folder_without_one_none(committed, tmp_path):
    [line] = gpu_lines(committed)
    run = json.loads((committed / "gpu" / "gpu.json").read_text())
    scripts = run["parts"]["default_run"]["scripts"]
    minutes = (scripts["ELMO.py"]["seconds"] + scripts["classification.py"]["seconds"]) / 60
    assert line.startswith(f"* one {run['device']['name']} (") and f"{minutes:.1f} min" in line
    assert f"{scripts['ELMO.py']['perplexity']['test']['forward']:.2f}" in line
    assert gpu_lines(tmp_path) == []


def test_readme_command_fills_the_blocks_and_writes_the_results_page(committed, tmp_path):
    assert COMMANDS["readme"].args is ReadmeArgs
    readme = tmp_path / "README.md"
    readme.write_text("# t\n" + "".join(f"<!-- generated:{b} -->\nx\n<!-- /generated:{b} -->\n" for b in BLOCKS))
    shutil.copytree(committed, tmp_path / "results")
    assert main(["readme", "--results-dir", str(tmp_path / "results"), "--readme", str(readme),
                 "--results-page", str(tmp_path / "lab" / "results.md")]) == 0
    text, page = readme.read_text(), (tmp_path / "lab" / "results.md").read_text()
    assert "\nx\n" not in text and "test accuracy over" in text and "| ELMo, trainable λ |" in text
    assert "## When ELMo pays: the learning curve over labelled data" in page
    prose = [line for line in (text + page).splitlines() if not line.startswith(("|", "* 2-core", "* one "))]
    assert max(map(len, prose)) <= WIDTH


def test_a_readme_without_its_markers_is_refused(committed, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    with pytest.raises(ElmoError, match="generated:headline"):
        ReadmeArgs(readme=str(readme)).check()
    with pytest.raises(ElmoError, match="generated:headline"):
        write_readme(ReadmeArgs(results_dir=str(committed), readme=str(readme)))


def test_a_results_file_without_a_key_it_needs_is_refused_in_one_line(committed, tmp_path, capsys):
    """An ``lm.json`` of ``ELMO.py --train-file F`` without ``--test-file`` (``"test": {}``) in place of the seed-0
    run's: exit status 2, one line naming the file and the key, and neither file written."""
    results = tmp_path / "results"
    shutil.copytree(committed, results)
    lm = json.loads((results / "lm.json").read_text())
    (results / "lm.json").write_text(json.dumps({**lm, "test": {}}))
    readme, page = tmp_path / "README.md", tmp_path / "results.md"
    shutil.copy(ROOT / "README.md", readme)
    before = readme.read_text()
    assert main(["readme", "--results-dir", str(results), "--readme", str(readme), "--results-page", str(page)]) == 2
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert line == f"error: {results / 'lm.json'}: no key 'test.forward_perplexity': it was written by a run that " \
                   "does not record it, so it cannot be read here"
    assert "Traceback" not in captured.out + captured.err
    assert readme.read_text() == before and not page.exists()


def test_the_committed_readme_is_what_the_command_writes(committed, tmp_path):
    readme = tmp_path / "README.md"
    shutil.copy(ROOT / "README.md", readme)
    write_readme(ReadmeArgs(results_dir=str(committed), readme=str(readme),
                            results_page=str(tmp_path / "results.md")))
    assert readme.read_text() == (ROOT / "README.md").read_text()  # regenerate with `python -m lab readme`
    assert len(readme.read_text().splitlines()) <= 120
