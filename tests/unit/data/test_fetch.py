"""Downloading AG News (elmo.data.agnews.fetch / find_split) from file:// URLs the tests write: never the network."""

from __future__ import annotations

import hashlib
import urllib.request
from pathlib import Path

import pytest
from support import make_rows, write_csv

import elmo.data.agnews as agnews
from elmo.cli import run as cli_run
from elmo.data.agnews import fetch, find_split, read_agnews
from elmo.errors import ElmoError


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any URL other than file:// fails the test instead of reaching out."""
    real = urllib.request.urlopen

    def urlopen(url, *args, **kwargs):
        assert str(url).startswith("file://"), f"a test tried to open {url}"
        return real(url, *args, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)


@pytest.fixture
def source(tmp_path) -> tuple[str, dict[str, str]]:
    """A folder served as ``file://.../`` with train.csv and test.csv, and their md5s."""
    folder = tmp_path / "mirror"
    write_csv(folder / "train.csv", make_rows(40, seed=1))
    write_csv(folder / "test.csv", make_rows(12, seed=2))
    sums = {name: hashlib.md5((folder / name).read_bytes()).hexdigest() for name in ("train.csv", "test.csv")}
    return folder.as_uri() + "/", sums


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_fetch_with_matching_md5s_puts_both_files_in_place(source, tmp_path):
    url, sums = source
    target = tmp_path / "data"
    written = fetch(target, base_url=url, checksums=sums, quiet=True)
    assert written == [target / "train.csv", target / "test.csv"]
    assert leftovers(target) == ["test.csv", "train.csv"]  # no temporary file left behind
    assert {name: hashlib.md5((target / name).read_bytes()).hexdigest() for name in sums} == sums
    assert len(read_agnews(target / "train.csv")) == 40
    assert find_split(target, "test", download=False) == target / "test.csv"


def test_present_files_are_checked_not_downloaded_again(source, tmp_path, capsys):
    url, sums = source
    target = tmp_path / "data"
    fetch(target, base_url=url, checksums=sums, quiet=True)
    before = (target / "train.csv").stat().st_mtime_ns
    fetch(target, base_url=(tmp_path / "gone").as_uri() + "/", checksums=sums, quiet=True)  # the URL is never read
    assert (target / "train.csv").stat().st_mtime_ns == before
    assert "present, md5 ok" in capsys.readouterr().err
    (target / "train.csv").write_text("edited\n")
    with pytest.raises(ElmoError, match="exists but its md5 is not the official .*force=True"):
        fetch(target, base_url=url, checksums=sums, quiet=True)
    fetch(target, base_url=url, checksums=sums, quiet=True, force=True)
    assert hashlib.md5((target / "train.csv").read_bytes()).hexdigest() == sums["train.csv"]


def test_a_checksum_mismatch_raises_and_writes_nothing(source, tmp_path):
    url, sums = source
    target = tmp_path / "data"
    wrong = {"train.csv": "0" * 32, "test.csv": sums["test.csv"]}
    with pytest.raises(ElmoError, match=rf"train\.csv: md5 {sums['train.csv']} does not match the official 0{{32}}; not saved"):
        fetch(target, base_url=url, checksums=wrong, quiet=True)
    assert leftovers(target) == []  # neither the file nor its temporary copy


def test_an_unreachable_url_raises_naming_the_url(tmp_path):
    url = (tmp_path / "nowhere").as_uri() + "/"
    target = tmp_path / "data"
    with pytest.raises(ElmoError, match=f"could not download {url}train.csv"):
        fetch(target, base_url=url, checksums={"train.csv": "0" * 32}, quiet=True)
    assert leftovers(target) == []


def test_a_failed_download_removes_the_folders_it_created_and_keeps_existing_ones(tmp_path):
    url = (tmp_path / "nowhere").as_uri() + "/"
    with pytest.raises(ElmoError):
        fetch(tmp_path / "new" / "ag_news", base_url=url, checksums={"train.csv": "0" * 32}, quiet=True)
    assert not (tmp_path / "new").exists()  # a later run must not find an empty data folder
    (tmp_path / "kept").mkdir()
    with pytest.raises(ElmoError):
        fetch(tmp_path / "kept", base_url=url, checksums={"train.csv": "0" * 32}, quiet=True)
    assert (tmp_path / "kept").is_dir() and leftovers(tmp_path / "kept") == []


def test_find_split_without_download_names_the_flag_and_the_fetch_command(tmp_path):
    with pytest.raises(ElmoError) as error:
        find_split(tmp_path / "empty", "train", download=False)
    message = str(error.value)
    assert "train.csv not found (and download=False is set)" in message
    assert f"python -m elmo fetch --data-dir {tmp_path / 'empty'}" in message
    assert not (tmp_path / "empty").exists()


def test_find_split_downloads_a_missing_file_or_explains_the_failure(monkeypatch, tmp_path, capsys):
    calls = []

    def fake_fetch(data_dir):
        calls.append(Path(data_dir))
        write_csv(Path(data_dir) / "train.csv", make_rows(4, seed=0))

    monkeypatch.setattr(agnews, "fetch", fake_fetch)
    assert find_split(tmp_path, "train") == tmp_path / "train.csv" and calls == [tmp_path]
    assert "downloading the official AG News files" in capsys.readouterr().err

    def failing_fetch(data_dir):
        raise ElmoError("could not download https://example.invalid/test.csv: offline")

    monkeypatch.setattr(agnews, "fetch", failing_fetch)
    with pytest.raises(ElmoError, match=r"test\.csv not found and the download failed \(could not download .*offline\)"
                                        r"\. Put the AG News CSV files"):
        find_split(tmp_path, "test")


def test_fetch_command_reports_a_bad_download_and_exits_2(source, tmp_path, capsys):
    url, _ = source  # the test files are not the official ones: their md5s differ from OFFICIAL_MD5
    target = tmp_path / "data"
    assert cli_run("fetch", ["--data-dir", str(target), "--url", url]) == 2
    err = capsys.readouterr().err
    assert f"error: {url}train.csv: md5" in err and "does not match the official" in err
    assert leftovers(target) == []
