"""Text cleaning and the word tokeniser shared by training, baselines and inference: :func:`clean_text` undoes AG News'
escapes and markup (``#39;`` for an apostrophe, ``&lt;b&gt;``, ``\\$``) and :func:`tokenize` lower-cases and splits the
result with :data:`TOKEN_PATTERN`. Deterministic and offline (no downloaded tokeniser models).
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

from ..errors import ElmoError

_NUMERIC_ENTITY = re.compile(r" ?#(\d{1,6});")  # AG News writes &#39; as " #39;"
_HTML_TAG = re.compile(r"<[^<>]{0,300}>")
_MAX_TAG_DEPTH = 50  # nested tags removed per text (each pass is linear; real text needs one or two)
_LINE_BREAK = re.compile(r"\\n|\\\\|\\(?=[^\W\d_])")  # \n, \\ and a lone \ before a letter
_ESCAPED_CHAR = re.compile(r"\\(.)")  # \$ -> $ and any other escaped symbol
_SPACES = re.compile(r"\s+")

#: The tokeniser, applied to cleaned (by default lower-cased) text. In order of preference a token is an abbreviation
#: with dots, a number with inner separators, a run of letters, a clitic, or any other single non-space symbol.
TOKEN_PATTERN = re.compile(
    r"(?:[^\W\d_]\.){2,}"  # u.s.  e.g.
    r"|\d+(?:[.,:]\d+)*"  # 1,000  3.5  10:30
    r"|[^\W\d_]+"  # words (any script)
    r"|'[^\W\d_]+"  # 's 're 't
    r"|[^\w\s]"  # any other symbol, one per token
)


def clean_text(text: str) -> str:
    """Undo AG News' escapes and markup in one raw Description field and collapse whitespace (the result may be empty;
    no ``str`` makes it raise): numeric entities written as `` #39;`` (the space is an artefact), HTML entities
    (``&lt;b&gt;``, ``&amp;``, ``&quot;``) and the tags they encode, ``\\n``, ``\\\\`` and a lone backslash before
    a letter (line breaks in the source), and backslash-escaped symbols (``\\$``)."""
    text = _NUMERIC_ENTITY.sub(lambda m: html.unescape(f"&#{m.group(1)};"), text)
    text = html.unescape(html.unescape(text))  # some fields are escaped twice (&amp;lt;)
    for _ in range(_MAX_TAG_DEPTH):  # removing "<b>" from "<<b>>" leaves "< >", itself a tag: until none is left
        text, found = _HTML_TAG.subn(" ", text)
        if not found:
            break
    text = _LINE_BREAK.sub(" ", text)
    text = _ESCAPED_CHAR.sub(r"\1", text)
    return _SPACES.sub(" ", text).strip()


def tokenize(text: str, lowercase: bool = True) -> list[str]:
    """Clean (:func:`clean_text`), lower-case and split raw or cleaned ``text`` into word tokens with
    :data:`TOKEN_PATTERN`; ``[]`` when it holds none. ``lowercase=False`` keeps the case (for the published ELMo
    models, which read cased text). Raises ElmoError if ``text`` is not a ``str``."""
    if not isinstance(text, str):
        raise ElmoError(f"tokenize() expects a str, got {type(text).__name__}")
    text = clean_text(text)
    return TOKEN_PATTERN.findall(text.lower() if lowercase else text)


def read_lines(path: str | os.PathLike, what: str = "file") -> tuple[list[str], list[int], int]:
    """The non-blank lines of a UTF-8 text file at ``path`` (stripped; a BOM is accepted), their 1-based line numbers
    and how many blank lines were skipped. ``what`` names the file in error messages (e.g. ``"--input-file"``). Raises
    ElmoError when the file is missing, not UTF-8, or has no non-blank line."""
    try:
        lines = Path(path).read_text(encoding="utf-8-sig").splitlines()
    except FileNotFoundError:
        raise ElmoError(f"{what} {path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise ElmoError(f"{what} {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    kept = [(i + 1, line.strip()) for i, line in enumerate(lines) if line.strip()]
    if not kept:
        raise ElmoError(f"{what} {path}: no text in it")
    return [t for _, t in kept], [n for n, _ in kept], len(lines) - len(kept)
