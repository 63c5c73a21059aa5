"""Temporal edge files (``data.dataset: edges``): which column is what, node names and dates.

The columns are found one of two ways:

* **a header naming them** (the first non-comment line, none of whose fields is a number): the source
  (``src``, ``source``, ``from``, ``sender``, ``u``, ``user``, ``node1``, or a name holding one of them
  between underscores: ``SOURCE_SUBREDDIT``, ``user_id``), the target (``dst``, ``target``, ``to``,
  ``destination``, ``dest``, ``receiver``, ``v``, ``item``, ``node2``), the time (``time``,
  ``timestamp``, ``ts``, ``t``, ``date``, ``datetime``, ...) and at most one weight (``weight``, ``w``,
  ``rating``, ``sign``, ``value``, ``score``, ``count``, ``amount``), in any order; other columns are
  skipped (JODIE's ``state_label`` and feature list, Reddit's ``POST_ID`` and ``PROPERTIES``), and rows
  may hold more fields than the header names (JODIE's features). Fields are split as the header is: at
  tabs if it has one, else at commas (CSV quoting), else at semicolons or ``|``, else at whitespace — so
  a time with a space in it (``2014-01-31 16:39:58``) stays one field in a tab- or comma-separated file.
* **by position** otherwise (``read_edge_stream``): ``src dst time`` or ``src dst weight time``,
  whitespace, commas, semicolons or ``|``; a header naming the 3rd column a time swaps the last two (``src dst time
  weight``).

Node ids are integers, or **names** (any text: a subreddit, an account) when the first row's ids are not
integers: then every id is a name, one vocabulary for both ends, numbered in sorted order. A header whose
ends are named user and item (JODIE's ``user_id`` / ``item_id``) is **bipartite**: the two id spaces are
kept apart (item ids are shifted past the users; with names, a user and an item of the same name are two
nodes). Times are numbers, or **ISO dates** (``2014-01-31``, ``2014-01-31 16:39:58``,
``2014-01-31T16:39:58``, a trailing ``Z`` or a UTC offset ``+02:00``; UTC unless an offset says
otherwise) turned into whole Unix seconds. What was read is
returned as ``columns`` facts (``inspect`` prints them).
"""

from __future__ import annotations

import csv
import datetime
import math
import re
from pathlib import Path

import numpy as np

from ..errors import UserError
from .headers import (
    ROLE_WORDS,
    SEPARATORS,
    first_lines,
    first_odd_token,
    integer_ids,
    is_header,
    is_number,
    words,
)
from .loaders import columns, read_text, split_rows

NAMES_KEY = "_node_names"  # read_edge_file's facts: the names behind ids 0..K-1 (timerange takes it out)
_DATE = re.compile(
    r"^\d{4}-\d{2}(-\d{2})?([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$", re.ASCII
)
_ZONE = re.compile(r"[ T].*[+-]\d{2}:?\d{2}$", re.ASCII)  # a time with a UTC offset (+02:00)


def header_roles(names: list[str]) -> dict[str, int] | None:
    """{role: column index} for a header naming one source, one target and one time column (a weight
    optional); None when it does not (an unnamed or doubly named role: read by position)."""
    found: dict[str, list[int]] = {role: [] for role in ROLE_WORDS}
    for j, name in enumerate(names):
        said = words(name)
        hits = [role for role, vocab in ROLE_WORDS.items() if said & vocab]
        if len(hits) == 1:
            found[hits[0]].append(j)
    if any(len(found[r]) != 1 for r in ("src", "dst", "time")) or len(found["weight"]) > 1:
        return None
    return {role: idx[0] for role, idx in found.items() if idx}


def _header(text: str) -> tuple[int, str | None, list[str]] | None:
    """(0-based line index, delimiter, column names) of the file's header line (``loaders.is_header``),
    None without one. The delimiter is the first of tab, comma, semicolon and ``|`` the line holds (None:
    whitespace), and the names are split at it, so a name may hold blanks (pandas' ``Unnamed: 0``)."""
    found = first_lines(text)
    if not found:
        return None
    line = found[0][1]
    delim = next((d for d in "\t,;|" if d in line), None)
    names = _split(line, delim, len(line) + 1)
    fields = found[0][2] if delim is None else [f.strip(' "') for f in names]
    if not is_header(fields, found[1][2] if len(found) > 1 else None):
        return None
    return found[0][0], delim, names


def _check_positional(text: str, path) -> None:
    """A file read by position whose first data row is not 3 or 4 fields: a ``UserError`` that says a header
    can name the columns (``split_rows`` checks the rest)."""
    for i, line in enumerate(text.splitlines()):
        fields = line.translate(SEPARATORS).split()
        if fields and fields[0][0] not in "#%" and any(is_number(f) for f in fields):
            if len(fields) not in (3, 4):
                raise UserError(
                    f"{str(path)!r} line {i + 1}: {len(fields)} columns, expected src dst [weight] time: fix the "
                    "row format, or name the columns in a header line (src, dst, time, an optional weight; "
                    "other columns are skipped)"
                )
            return


def _split(line: str, delim: str | None, keep: int) -> list[str]:
    """The first ``keep`` fields of ``line`` (more fields are not split off)."""
    if delim is None:
        return line.split(None, keep)[:keep]
    return [f.strip() for f in line.split(delim, keep)[:keep]]


def _named_rows(text: str, start: int, delim: str | None, keep: int) -> tuple[list[list[str]], list[int]]:
    """Data rows after the header (line ``start``): their first ``keep`` fields and 1-based line numbers;
    split at ``delim`` (None: whitespace) unless the first row has none."""
    lines = text.splitlines()
    numbered = [
        (i + 1, line)
        for i, line in enumerate(lines[start + 1 :], start + 1)
        if line.strip() and line.lstrip()[0] not in "#%"
    ]
    if numbered and delim is not None and delim not in numbered[0][1]:
        delim = None  # a header with commas over whitespace-separated rows: the rows decide
    if delim is not None and '"' in text:  # CSV quoting: a quoted field may hold the delimiter
        parsed = csv.reader((line for _, line in numbered), delimiter=delim, skipinitialspace=True)
        rows = [[f.strip() for f in row[:keep]] for row in parsed]
    else:
        rows = [_split(line, delim, keep) for _, line in numbered]
    return rows, [n for n, _ in numbered]


def _convert(path, tokens: list[str], linenos: list[int], name: str, kind: str) -> np.ndarray:
    """One column as int64 (``kind`` "id") or finite float64 ("num"); a bad token is ``loaders.columns``'s
    one-line error naming its line."""
    try:
        if first_odd_token(tokens) is None:
            col = np.array(tokens, dtype=np.int64 if kind == "id" else np.float64)
            if kind == "id" or np.isfinite(col).all():
                return col
    except (ValueError, OverflowError):
        pass
    return columns(path, [[t] for t in tokens], linenos, [(name, kind)])[0]


def _ids(path, src: list[str], dst: list[str], linenos: list[int], bipartite: bool):
    """(src, dst, names): int64 ids as written (names None), or the names' numbers in sorted order and
    the names (bipartite: ``user:NAME`` / ``item:NAME``; module doc)."""
    if integer_ids(src[0], dst[0]):
        s, d = (
            _convert(path, t, linenos, name, "id")
            for t, name in ((src, "source node id"), (dst, "target node id"))
        )
        if bipartite:
            d = d - int(d.min()) + int(s.max()) + 1  # items after the users
        return s, d, None
    if bipartite:
        names, codes = np.unique(
            np.concatenate([["user:" + x for x in src], ["item:" + x for x in dst]]), return_inverse=True
        )
    else:
        names, codes = np.unique(np.asarray(src + dst, dtype=str), return_inverse=True)
    codes = codes.astype(np.int64)
    return codes[: len(src)], codes[len(src) :], names


def _times(path, tokens: list[str], linenos: list[int]) -> tuple[np.ndarray, bool]:
    """Times as float64 Unix seconds (numbers as written, ISO dates as UTC), and whether they were dates."""
    if not _DATE.match(tokens[0]):
        return _convert(path, tokens, linenos, "time", "num"), False
    bad = next((k for k, t in enumerate(tokens) if not _DATE.match(t)), None)
    if bad is not None:
        raise UserError(
            f"{str(path)!r} line {linenos[bad]}: time {tokens[bad]!r} is not an ISO date like the rows before it "
            "(2014-01-31 or 2014-01-31T16:39:58): fix or remove the row"
        )
    if any(_ZONE.search(t) for t in tokens):
        return _zoned(path, tokens, linenos), True
    try:
        seconds = np.array([t.rstrip("Z") for t in tokens], dtype="datetime64[s]").astype(np.int64)
    except ValueError:
        k = next(k for k, t in enumerate(tokens) if not _valid_date(t))
        raise UserError(
            f"{str(path)!r} line {linenos[k]}: time {tokens[k]!r} is not a calendar date: fix or remove the row"
        ) from None
    return seconds.astype(np.float64), True


def _zoned(path, tokens: list[str], linenos: list[int]) -> np.ndarray:
    """ISO dates some of which carry a UTC offset -> Unix seconds (one by one: the slow path)."""
    out = np.empty(len(tokens), np.float64)
    for k, t in enumerate(tokens):
        try:
            moment = datetime.datetime.fromisoformat(t)
        except ValueError:
            raise UserError(
                f"{str(path)!r} line {linenos[k]}: time {t!r} is not a calendar date: fix or remove the row"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=datetime.UTC)
        out[k] = float(math.floor(moment.timestamp()))
    return out


def _valid_date(token: str) -> bool:
    try:
        np.datetime64(token.rstrip("Z"), "s")
    except ValueError:
        return False
    return True


def read_edge_stream(
    path: str | Path, text: str | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """Temporal edge list read by position -> (src int64, dst int64, weight float64 or None, time float64),
    file order.

    Rows are ``src dst time`` or ``src dst weight time`` (whitespace or comma separated; plain or gzip;
    ``#`` / ``%`` comments, blank lines and one header line are skipped; rows may be unsorted). A header
    naming its third column a time (``src dst time weight``) swaps the last two (``_edge_columns``).
    Ids may be names and times ISO dates (module doc). ``text``: the file's text when already read.
    """
    return _positional(read_text(path, "edge") if text is None else text, path)[:4]


def _positional(text: str, path) -> tuple:
    """``read_edge_stream``'s columns, and whether the ids were names and the times dates."""
    rows, linenos = split_rows(text, path, (3, 4), "edge")
    kinds = ["time"] if len(rows[0]) == 3 else ["weight", "time"]
    if _edge_columns(text, len(rows[0]), path) == "time weight":
        kinds = ["time", "weight"]
    src, dst, named = _ids(path, [r[0] for r in rows], [r[1] for r in rows], linenos, False)
    got = {}
    for j, kind in enumerate(kinds, 2):
        tokens = [r[j] for r in rows]
        if kind == "time":
            got["time"], dated = _times(path, tokens, linenos)
        else:
            got["weight"] = _convert(path, tokens, linenos, "weight", "num")
    return src, dst, got.get("weight"), got["time"], named, dated


_TIME_NAMES = ROLE_WORDS["time"]
_WEIGHT_NAMES = ROLE_WORDS["weight"] | {"label"}  # a 3-column "src dst label" file has no time


def _edge_columns(text: str, ncol: int, path) -> str:
    """What an edge file's columns after src and dst are, by its header (the first non-comment line
    without a number) when it names them: "time" / "weight time" (the default) / "time weight". A
    3-column header naming a weight and no time is a ``UserError`` (its rows would be read as times)."""
    first = next((fields for _, _, fields in first_lines(text, 1)), [])
    names = [f.strip("\"'").lower() for f in first]
    if len(names) != ncol or any(is_number(f) for f in first):
        return "time" if ncol == 3 else "weight time"
    if ncol == 3 and names[2] in _WEIGHT_NAMES:
        raise UserError(
            f"edge file {str(path)!r}: its header names the third column {first[2]!r}, but 3-column rows are "
            "src dst time: add a time column (src dst weight time) or rename the header"
        )
    if ncol == 4 and names[2] in _TIME_NAMES and names[3] not in _TIME_NAMES:
        return "time weight"
    return "time" if ncol == 3 else "weight time"


def _facts(columns: str, names, dated: bool, bipartite: bool = False) -> dict:
    """What ``read_edge_file`` says of a file: how its columns were read, the flags that hold (node
    names, bipartite, dates), and the names themselves under ``NAMES_KEY`` (not a fact to print)."""
    flags = (("node_names", names is not None), ("bipartite", bipartite), ("dates", dated))
    return {
        "columns": columns,
        **{k: True for k, v in flags if v},
        **({} if names is None else {NAMES_KEY: names}),
    }


def read_edge_file(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray, dict]:
    """An edge file -> (src int64, dst int64, weight float64 or None, time float64, facts), file order;
    ``facts["columns"]`` says how its columns were read (module doc); with node names,
    ``facts[NAMES_KEY]`` holds them (id k is ``names[k]``)."""
    text = read_text(path, "edge")
    head = _header(text)
    start, delim, names = head if head is not None else (0, None, [])
    roles = header_roles(names) if head else None
    if roles is None:
        _check_positional(text, path)
        src, dst, weight, time, named, dated = _positional(text, path)
        return src, dst, weight, time, _facts("by position", named, dated)
    keep = max(roles.values()) + 1
    rows, linenos = _named_rows(text, start, delim, keep)
    if not rows:
        raise UserError(f"edge file {str(path)!r} is empty (no data rows): give a file with rows")
    short = next((k for k, r in enumerate(rows) if len(r) < keep), None)
    if short is not None:
        raise UserError(
            f"{str(path)!r} line {linenos[short]}: {len(rows[short])} fields, but the header puts "
            f"{names[keep - 1].strip()!r} in column {keep}: fix the row"
        )
    empty = next(((k, j) for k, r in enumerate(rows) for j in roles.values() if not r[j]), None)
    if empty is not None:
        raise UserError(
            f"{str(path)!r} line {linenos[empty[0]]}: its {names[empty[1]].strip()!r} field is empty: fix or "
            "remove the row"
        )
    field = {role: [r[j] for r in rows] for role, j in roles.items()}
    bipartite = "user" in words(names[roles["src"]]) and "item" in words(names[roles["dst"]])
    src, dst, named = _ids(path, field["src"], field["dst"], linenos, bipartite)
    time, dated = _times(path, field["time"], linenos)
    weight = None
    if "weight" in roles:
        weight = _convert(path, field["weight"], linenos, "weight", "num")
    read = ", ".join(f"{names[j].strip()} -> {role}" for role, j in sorted(roles.items(), key=lambda x: x[1]))
    return src, dst, weight, time, _facts(f"by header: {read}", named, dated, bipartite)
