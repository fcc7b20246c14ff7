"""Property-based tests (hypothesis): arbitrary Unicode never crashes the tokeniser or the CSV reader."""

from __future__ import annotations

import csv
import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elmo.data.agnews import read_agnews
from elmo.data.text import tokenize
from elmo.errors import ElmoError

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200)  # any encodable code point
PROFILE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@PROFILE
@given(TEXT)
def test_tokenize_never_crashes_and_returns_lowercase_tokens_without_spaces(text):
    tokens = tokenize(text)
    assert isinstance(tokens, list) and all(isinstance(t, str) and t for t in tokens)
    assert all(not any(c.isspace() for c in t) for t in tokens)
    assert tokens == tokenize(" ".join(tokens))  # tokenising its own output changes nothing
    assert all(t == t.lower() for t in tokens)


@PROFILE
@given(st.lists(st.tuples(st.sampled_from(["1", "2", "3", "4", "0", "5", "x", ""]), TEXT, TEXT), min_size=1, max_size=8))
def test_reader_returns_every_good_row_or_raises_its_own_error(tmp_path, rows):
    buffer = io.StringIO()
    csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    path = tmp_path / "train.csv"
    path.write_text(buffer.getvalue(), encoding="utf-8")
    try:
        corpus = read_agnews(path)
    except ElmoError as exc:
        assert str(path) in str(exc)  # every error names the file
        return
    assert len(corpus) == len(rows)  # nothing dropped silently: success means every row was used
    assert set(corpus.labels.tolist()) <= {0, 1, 2, 3} and all(corpus.tokens)


@PROFILE
@given(st.binary(max_size=300))
def test_reader_on_arbitrary_bytes_returns_rows_or_raises_its_own_error(tmp_path, data):
    path = tmp_path / "train.csv"
    path.write_bytes(data)
    try:
        corpus = read_agnews(path, skip_bad_rows=True)
    except ElmoError as exc:
        assert str(path) in str(exc)
        return
    assert len(corpus) >= 1 and set(corpus.labels.tolist()) <= {0, 1, 2, 3}
