"""Which line of a text edge file is a header, and what a header's column names say (no JAX).

Shared by the positional reader (``loaders.split_rows``), the header-driven one (``edge_file``) and the
snapshot-folder one (``snapshots``), so that all three tell a header from a row the same way.
"""

from __future__ import annotations

import re


def is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


# The words a header's column names are made of (``words``): edge_file.py reads the roles from them.
ROLE_WORDS = {
    "src": {"src", "source", "from", "sender", "u", "user", "node1", "origin", "head"},
    "dst": {"dst", "target", "to", "destination", "dest", "receiver", "v", "item", "node2", "tail"},
    "time": {"time", "timestamp", "ts", "t", "date", "datetime", "unixtime", "epoch", "seconds", "utc"},
    "weight": {"weight", "w", "rating", "sign", "value", "score", "count", "amount"},
}
COLUMN_WORDS = set().union(*ROLE_WORDS.values(), {"snapshot", "first", "last", "id", "node", "label", "edge"})


def words(name: str) -> set[str]:
    """A column name's words: lower case, split at anything not a letter or digit (``SOURCE_SUBREDDIT``
    -> {source, subreddit})."""
    return {w for w in re.split(r"[^0-9a-z]+", name.strip().strip("\"'").lower()) if w}


SEPARATORS = str.maketrans({",": " ", ";": " ", "|": " ", '"': " "})  # fields split here and at whitespace


def first_lines(text: str, n: int = 2) -> list[tuple[int, str, list[str]]]:
    """The first ``n`` data lines of ``text`` — not blank, not a ``#`` / ``%`` comment, as ``split_rows``
    tells them — as (0-based line index, the line, its fields split as ``split_rows`` splits them)."""
    out = []
    for i, line in enumerate(text.splitlines()):
        fields = line.translate(SEPARATORS).split()
        if fields and fields[0][0] not in "#%":
            out.append((i, line, fields))
            if len(out) == n:
                break
    return out


def integer_ids(src: str, dst: str) -> bool:
    """Whether a file's first row numbers its nodes (two integers), else it names them."""
    # ASCII digits only: Python's isdigit() is true of other scripts' digits, which int() then reads
    return all(x.isascii() and x.isdigit() for x in (src.lstrip("+-"), dst.lstrip("+-")))


def is_header(first: list[str], second: list[str] | None) -> bool:
    """Whether a file's first data line (``first``, its fields; ``second``: the next data line's, None
    if none) is a header: none of its fields is a number, and the next line has one (a header over
    numeric rows) or its fields name columns (a header alone, or over rows of node names: ``alice bob``
    is a row)."""
    if any(is_number(f) for f in first):
        return False
    if second is not None and any(is_number(f) for f in second):
        return True
    return any(words(f) & COLUMN_WORDS for f in first)


def first_odd_token(tokens: list[str]) -> int | None:
    """The index of the first token that Python's int() / float() would read but a text file of numbers
    does not mean as one: an underscore (``1_0`` is 10 to Python) or a non-ASCII character (``١٠``,
    Arabic-Indic digits, is 10 too); None when every token is plain ASCII without underscores."""
    joined = "".join(tokens)
    if joined.isascii() and "_" not in joined:
        return None
    return next(k for k, t in enumerate(tokens) if not t.isascii() or "_" in t)
