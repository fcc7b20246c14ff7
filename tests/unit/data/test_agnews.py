"""AG News files (elmo.data.agnews): both CSV layouts, bad input with clear errors, the splits."""

from __future__ import annotations

import pytest
from support import make_rows, write_csv

from elmo.data.agnews import find_split, load_agnews, read_agnews
from elmo.errors import ElmoError


def test_reads_original_layout(tmp_path):
    path = write_csv(tmp_path / "train.csv", [(3, "Title", "Shares #39;rise"), (1, "T", "Troops move.")])
    corpus = read_agnews(path)
    assert corpus.labels.tolist() == [2, 0]
    assert corpus.texts == ["Shares #39;rise", "Troops move."]
    assert corpus.tokens == [["shares", "'rise"], ["troops", "move", "."]]


@pytest.mark.parametrize("header, rows", [
    (["Class Index", "Description"], [(4, "New chip"), (2, "Late goal")]),
    (["Class Index", "Title", "Description"], [(4, "t", "New chip"), (2, "t", "Late goal")]),
])
def test_reads_course_layout_by_header(tmp_path, header, rows):
    corpus = read_agnews(write_csv(tmp_path / "train.csv", rows, header=header))
    assert corpus.labels.tolist() == [3, 1]
    assert corpus.tokens == [["new", "chip"], ["late", "goal"]]


def test_bom_and_crlf_simply_work(tmp_path):
    path = tmp_path / "train.csv"
    path.write_bytes(b'\xef\xbb\xbf"1","t","Alpha beta"\r\n"2","t","Gamma"\r\n')
    corpus = read_agnews(path)
    assert corpus.labels.tolist() == [0, 1] and corpus.tokens == [["alpha", "beta"], ["gamma"]]


def test_bad_label_names_file_and_line(tmp_path):
    path = write_csv(tmp_path / "train.csv", [(1, "t", "fine"), (5, "t", "bad label"), (0, "t", "also bad")])
    with pytest.raises(ElmoError, match=r"train\.csv: 2 row\(s\) with a label that is not 1-4 \(line 2, 3\)"):
        read_agnews(path)


def test_empty_description_names_line_and_skip_flag_counts(tmp_path, capsys):
    path = write_csv(tmp_path / "train.csv", [(1, "t", "fine"), (2, "t", "   "), (3, "t", "ok too")])
    with pytest.raises(ElmoError, match=r"empty description \(line 2\)"):
        read_agnews(path)
    corpus = read_agnews(path, skip_bad_rows=True)
    assert corpus.labels.tolist() == [0, 2]
    assert "skipped 1 row(s) with an empty description" in capsys.readouterr().err


def test_wrong_number_of_columns(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text('"1","only two"\n"2","x"\n')
    with pytest.raises(ElmoError, match="2 columns and no header"):
        read_agnews(path)
    path.write_text('"1","a","b"\n"2","a","b","c"\n')
    with pytest.raises(ElmoError, match="malformed CSV"):
        read_agnews(path)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(ElmoError, match="download=False.*python -m elmo fetch"):
        find_split(tmp_path, "train", download=False)
    (tmp_path / "train.csv").write_text("")
    with pytest.raises(ElmoError, match="empty"):
        read_agnews(tmp_path / "train.csv")


def test_undecodable_bytes(tmp_path):
    path = tmp_path / "train.csv"
    path.write_bytes(b'"1","t","caf\xe9 au lait"\n')
    with pytest.raises(ElmoError, match="not valid UTF-8"):
        read_agnews(path)


def test_load_agnews_splits_without_overlap_and_honours_max_docs(tiny_agnews):
    train, val, test = load_agnews(tiny_agnews, val_fraction=0.1, seed=3, max_docs=100)
    assert len(train) + len(val) == 100 and len(val) == 10 and len(test) == 80
    assert not set(train.texts) & set(val.texts)
    with pytest.raises(ElmoError, match="max_docs"):
        load_agnews(tiny_agnews, max_docs=0)


def test_the_validation_split_is_seeded(tiny_agnews):
    (a, b, _), (c, d, _) = (load_agnews(tiny_agnews, 0.05, seed=7, max_docs=100) for _ in range(2))
    assert a.texts == c.texts and b.texts == d.texts and len(b) == 5
    assert load_agnews(tiny_agnews, 0.05, seed=8, max_docs=100)[1].texts != b.texts
    assert sorted(a.texts + b.texts) == sorted(read_agnews(tiny_agnews / "train.csv", max_rows=100).texts)
    with pytest.raises(ElmoError, match="val_fraction"):
        load_agnews(tiny_agnews, 1.5, 0)


def test_support_rows_round_trip(tmp_path):
    rows = make_rows(8, seed=0)
    corpus = read_agnews(write_csv(tmp_path / "x.csv", rows))
    assert corpus.labels.tolist() == [r[0] - 1 for r in rows]
