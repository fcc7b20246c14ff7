"""``python -m lab readme``: README.md's generated blocks and lab/results.md, from the committed results/."""

import shutil

import pytest
from support import ROOT

from elmo.errors import ElmoError
from lab.cli import COMMANDS, main
from lab.readme import BLOCKS, WIDTH, ReadmeArgs, cpu_label, fill, gpu_lines, timing_lines, write_readme


def test_fill_replaces_only_what_lies_between_the_markers():
    text = "a\n<!-- generated:x -->\nold\n<!-- /generated:x -->\nb\n"
    assert fill(text, "x", "new") == "a\n<!-- generated:x -->\nnew\n<!-- /generated:x -->\nb\n"
    with pytest.raises(ElmoError, match="generated:y"):
        fill(text, "y", "new")


def test_the_committed_timing_gives_one_line_per_cpu():
    lines = timing_lines(ROOT / "results")
    assert len(lines) == len({line.split(":")[0] for line in lines}) >= 1
    assert all(line.startswith("* 2-core AMD EPYC (family 25") and len(line) <= 200 for line in lines)
    assert cpu_label(ROOT / "results" / "timing" / "lscpu.txt").endswith("AVX512-BF16)")


def test_the_committed_gpu_run_gives_its_line_and_a_folder_without_one_none(tmp_path):
    import json

    [line] = gpu_lines(ROOT / "results")
    run = json.loads((ROOT / "results" / "gpu" / "gpu.json").read_text())
    scripts = run["parts"]["default_run"]["scripts"]
    minutes = (scripts["ELMO.py"]["seconds"] + scripts["classification.py"]["seconds"]) / 60
    assert line.startswith(f"* one {run['device']['name']} (") and f"{minutes:.1f} min" in line
    assert f"{scripts['ELMO.py']['perplexity']['test']['forward']:.2f}" in line
    assert gpu_lines(tmp_path) == []


def test_readme_command_fills_the_blocks_and_writes_the_results_page(tmp_path):
    assert COMMANDS["readme"].args is ReadmeArgs
    readme = tmp_path / "README.md"
    readme.write_text("# t\n" + "".join(f"<!-- generated:{b} -->\nx\n<!-- /generated:{b} -->\n" for b in BLOCKS))
    shutil.copytree(ROOT / "results", tmp_path / "results")
    assert main(["readme", "--results-dir", str(tmp_path / "results"), "--readme", str(readme),
                 "--results-page", str(tmp_path / "lab" / "results.md")]) == 0
    text, page = readme.read_text(), (tmp_path / "lab" / "results.md").read_text()
    assert "\nx\n" not in text and "test accuracy over" in text and "| ELMo, trainable λ |" in text
    assert "## When ELMo pays: the learning curve over labelled data" in page
    prose = [line for line in (text + page).splitlines() if not line.startswith(("|", "* 2-core", "* one "))]
    assert max(map(len, prose)) <= WIDTH


def test_a_readme_without_its_markers_is_refused(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    with pytest.raises(ElmoError, match="generated:headline"):
        ReadmeArgs(readme=str(readme)).check()
    with pytest.raises(ElmoError, match="generated:headline"):
        write_readme(ReadmeArgs(results_dir=str(ROOT / "results"), readme=str(readme)))


def test_the_committed_readme_is_what_the_command_writes(tmp_path):
    readme = tmp_path / "README.md"
    shutil.copy(ROOT / "README.md", readme)
    write_readme(ReadmeArgs(results_dir=str(ROOT / "results"), readme=str(readme),
                            results_page=str(tmp_path / "results.md")))
    assert readme.read_text() == (ROOT / "README.md").read_text()  # regenerate with `python -m lab readme`
    assert len(readme.read_text().splitlines()) <= 120
