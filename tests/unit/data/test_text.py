"""Text cleaning and tokenisation (elmo.data.text)."""

from __future__ import annotations

import pytest

from elmo.data.text import clean_text, tokenize
from elmo.errors import ElmoError


@pytest.mark.parametrize("raw, expected", [
    ("Warren Buffett #39;s Berkshire", "Warren Buffett's Berkshire"),
    ("cost the company US\\$1.", "cost the company US$1."),
    ("Optimizers\\\\I have yet", "Optimizers I have yet"),
    ("growing\\anger among", "growing anger among"),
    ("first line\\nsecond", "first line second"),
    ("Ryder Cup &lt;b&gt;...&lt;/b&gt;", "Ryder Cup ..."),
    ("AT&amp;T &quot;wireless&quot;", 'AT&T "wireless"'),
    ("a &lt;A HREF=\"http://x.com/q?t=1\"&gt;link&lt;/A&gt; here", "a link here"),
    ("  many   spaces ", "many spaces"),
])
def test_clean_text_undoes_agnews_escapes(raw, expected):
    assert clean_text(raw) == expected


def test_tokenize_lowercases_and_splits_punctuation_numbers_clitics():
    assert tokenize("IBM #39;s PC unit sold for \\$1,250.5 million in the U.S. today!") == [
        "ibm", "'s", "pc", "unit", "sold", "for", "$", "1,250.5", "million", "in", "the", "u.s.", "today", "!"]
    assert tokenize("Asia-Pacific") == ["asia", "-", "pacific"]
    assert tokenize("   ") == []


def test_tokenize_rejects_non_strings():
    with pytest.raises(ElmoError, match="expects a str"):
        tokenize(None)




def test_nested_tags_are_removed_whole_so_tokenising_is_idempotent():
    # found by the property test: removing the inner "<>" of "<<>>" left "< >", itself a tag
    assert tokenize("<<>>") == [] and tokenize("a <<b>> c") == ["a", "c"]
    assert tokenize(" ".join(tokenize("<<>>"))) == tokenize("<<>>")
