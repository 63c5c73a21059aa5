"""Readers of temporal edge lists (SNAP / KONECT streams, edge-interval CSVs) into a ``DynamicGraph``.

All work is vectorised numpy: the text is split once, columns are converted with ``np.array``, and only
when a conversion fails is the column searched (by bisection) for the offending line, so that every bad
input becomes a one-line ``UserError`` naming the file and the 1-based line number.
"""

from __future__ import annotations

import gzip
import itertools
import zlib
from pathlib import Path

import numpy as np

from ..errors import UserError
from ..resources import check_snapshots, interval_rows, stream_snapshots
from .graph import DynamicGraph
from .headers import SEPARATORS, first_odd_token, is_header

_GZIP_MAGIC = b"\x1f\x8b"
_MAX_NODES = 2**31 - 1


# --------------------------------------------------------------------------------------- text parsing


_CONTROL_BYTES = bytes(b for b in range(32) if b not in b"\t\n\r\x0b\x0c")  # C0 controls a text may not hold


def read_text(path: str | Path, what: str) -> str:
    """Whole file as text; gzip is detected by its magic bytes, not by the extension."""
    p = Path(path)
    if not str(path) or not p.exists():
        raise UserError(f"{what} file {str(p)!r} does not exist: check the path")
    if not p.is_file():
        kind = "a directory" if p.is_dir() else "not a regular file"
        raise UserError(f"{what} file {str(p)!r} is {kind}: give the path of the file itself")
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise UserError(
            f"{what} file {str(p)!r} cannot be read ({e.strerror}): check its permissions"
        ) from None
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error):
            raise UserError(f"{what} file {str(p)!r} is a damaged gzip file: fetch it again") from None
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16 with its byte-order mark (Windows "Unicode" text)
        raw = raw.decode("utf-16", errors="replace").encode()
    head = raw[:65536]  # binary: a NUL byte, or C0 controls (not tab, line ends, form feeds, a final DOS EOF)
    body = head.rstrip(b"\x1a")
    controls = len(body) - len(body.translate(None, _CONTROL_BYTES))  # in over 1 %: no text edge list
    if b"\x00" in head or controls > 0.01 * len(body):
        raise UserError(
            f"{what} file {str(p)!r} is binary data, not a text {what} list: give whitespace- or "
            "comma-separated rows (README: Data)"
        )
    text = raw.decode("utf-8-sig", errors="replace")  # a byte-order mark is no part of the first row
    if text.lstrip()[:1] in ("{", "["):
        raise UserError(
            f"{what} file {str(p)!r} is JSON, not a text {what} list: give whitespace- or "
            "comma-separated rows (README: Data)"
        )
    return text


def _split_rows(path: str | Path, allowed: tuple[int, ...], what: str) -> tuple[list[list[str]], list[int]]:
    """``split_rows`` of a file's text."""
    return split_rows(read_text(path, what), path, allowed, what)


def split_rows(
    text: str, path: str | Path, allowed: tuple[int, ...], what: str
) -> tuple[list[list[str]], list[int]]:
    """Data rows (lists of fields) and their 1-based line numbers; comments, blanks and a header dropped.

    Fields are separated by whitespace, commas, semicolons (a European spreadsheet's CSV) or ``|``,
    double quotes dropped (a spreadsheet's ``"8","3","1032"``; ids and times are numbers, so no field
    needs its quotes). The first non-comment line is dropped when it is a header (``is_header``). Every
    row must have the same number of fields, one of ``allowed``. ``path`` names the source in errors.
    """
    lines = text.translate(SEPARATORS).splitlines()
    kept = [
        (i + 1, fields)
        for i, line in enumerate(lines)
        if (fields := line.split()) and fields[0][0] not in "#%"
    ]
    if kept and is_header(kept[0][1], kept[1][1] if len(kept) > 1 else None):
        kept = kept[1:]
    if not kept:
        raise UserError(f"{what} file {str(path)!r} is empty (no data rows): give a file with rows")
    linenos = [n for n, _ in kept]
    rows = [f for _, f in kept]
    lens = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    # the column count most rows have is the file's (a short first row is the odd one, not the rest)
    values, counts = np.unique(lens, return_counts=True)
    ncol = int(values[np.argmax(counts)]) if counts.max() > counts.min() else len(rows[0])
    ref = int(np.argmax(lens == ncol))  # the first row with that count
    expected = " or ".join(str(a) for a in allowed)
    if ncol not in allowed:
        raise UserError(
            f"{str(path)!r} line {linenos[ref]}: {ncol} columns, expected {expected}: fix the row format"
        )
    bad = np.flatnonzero(lens != ncol)
    if len(bad):
        k = int(bad[0])
        raise UserError(
            f"{str(path)!r} line {linenos[k]}: wrong column count {lens[k]} "
            f"(line {linenos[ref]} has {ncol}): every row needs the same columns"
        )
    return rows, linenos


def _first_failure(tokens: list[str], dtype: type) -> int:
    """Index of the first token ``np.array(..., dtype)`` rejects (bisection; the whole list fails)."""
    lo, hi = 0, len(tokens)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            np.array(tokens[lo:mid], dtype=dtype)
        except (ValueError, OverflowError):
            hi = mid
        else:
            lo = mid
    return lo


def columns(path: str | Path, rows: list[list[str]], linenos: list[int], spec: list[tuple[str, str]]) -> list:
    """Convert the columns of ``split_rows``; ``spec`` gives (name, kind) per column, kind "id" (integer) or "num" (finite)."""
    flat = list(itertools.chain.from_iterable(rows))
    ncol = len(spec)
    out = []
    for j, (name, kind) in enumerate(spec):
        tokens = flat[j::ncol]
        dtype = np.int64 if kind == "id" else np.float64
        k = first_odd_token(tokens)  # a token numpy would read, but no file means as a number
        if k is None:
            try:
                col = np.array(tokens, dtype=dtype)
            except (ValueError, OverflowError):
                k = _first_failure(tokens, dtype)
        if k is not None:
            digits = tokens[k].lstrip("+-")
            if kind == "id" and digits.isascii() and digits.isdigit():  # an integer, past int64
                raise UserError(
                    f"{str(path)!r} line {linenos[k]}: {name} {tokens[k]} is outside the 64-bit range "
                    f"(-2**63 .. 2**63 - 1): renumber the nodes (any distinct integers will do)"
                )
            need, date = "an integer" if kind == "id" else "a number", tokens[k][4:5] == "-" == tokens[k][7:8]
            fix = "write every time one way: numbers (Unix seconds) or ISO dates" if date else ""
            raise UserError(
                f"{str(path)!r} line {linenos[k]}: {name} {tokens[k]!r} is not {need}: {fix or 'fix or remove the row'}"
            )
        if kind == "num":
            bad = np.flatnonzero(~np.isfinite(col))
            if len(bad):
                k = int(bad[0])
                raise UserError(
                    f"{str(path)!r} line {linenos[k]}: {name} {tokens[k]!r} is not a finite number: "
                    "fix or remove the row"
                )
        out.append(col)
    return out


# --------------------------------------------------------------------------------------- snapshots


def _bucket_order(bucket: np.ndarray, num_buckets: int) -> np.ndarray:
    """Stable argsort of small non-negative bucket ids (radix sort through uint16 when they fit)."""
    if num_buckets <= np.iinfo(np.uint16).max:
        return np.argsort(bucket.astype(np.uint16), kind="stable")
    return np.argsort(bucket, kind="stable")


def _sorted_order(
    bucket: np.ndarray, u: np.ndarray, v: np.ndarray, num_buckets: int, rank=None
) -> np.ndarray:
    """Permutation sorting rows by (bucket, u, v[, rank])."""
    keys = (v, u) if rank is None else (rank, v, u)
    first = np.lexsort(keys)
    return first[_bucket_order(bucket[first], num_buckets)]


def _split(counts: np.ndarray, *arrays: np.ndarray) -> list[list[np.ndarray]]:
    """Split arrays (sorted by bucket) into consecutive pieces of ``counts[t]`` rows."""
    cuts = np.cumsum(counts)[:-1]
    return [np.split(a, cuts) for a in arrays]


def build_snapshots(
    u: np.ndarray,
    v: np.ndarray,
    bucket: np.ndarray,
    num_buckets: int,
    *,
    weight: np.ndarray | None = None,
    rank: np.ndarray | None = None,
    symmetric: bool = True,
    self_loops: bool = False,
) -> tuple[list[np.ndarray], list[np.ndarray] | None, list[np.ndarray] | None, list[np.ndarray]]:
    """Remapped rows -> per-bucket unique sorted int32 [E_t, 2] pairs, float32 weights, int32 votes and
    int32 multiplicities (the rows behind each pair: under ``symmetric`` the rows of both directions, as
    EvolveGCN's weighted adjacency counts them after adding every row reversed).

    Self-loops are dropped unless ``self_loops``; ``symmetric`` stores each pair in both directions.
    A pair's weight is that of its last row by ``rank`` (default: row order); under ``symmetric`` both
    directions of an undirected pair share the weight of its last row in either direction. A pair's
    vote is its rows with weight > 0 minus its rows with weight <= 0 (EvolveGCN's majority vote on the
    rating sign; under ``symmetric`` the rows of both directions vote for the undirected pair).
    Weights and votes are None without ``weight``.
    """
    u, v, bucket = np.asarray(u, np.int64), np.asarray(v, np.int64), np.asarray(bucket, np.int64)
    rank = np.arange(len(u)) if rank is None else np.asarray(rank)
    keep = np.ones(len(u), dtype=bool) if self_loops else u != v
    u, v, bucket, rank = u[keep], v[keep], bucket[keep], rank[keep]
    w = None if weight is None else np.asarray(weight)[keep]
    if symmetric:
        u, v = np.minimum(u, v), np.maximum(u, v)
    order = _sorted_order(bucket, u, v, num_buckets, rank)
    u, v, bucket = u[order], v[order], bucket[order]
    last = np.ones(len(u), dtype=bool)  # last row of each (bucket, u, v) group
    last[:-1] = (bucket[1:] != bucket[:-1]) | (u[1:] != u[:-1]) | (v[1:] != v[:-1])
    u, v, bucket = u[last], v[last], bucket[last]
    group = np.cumsum(np.r_[True, last[:-1]]) - 1  # group id of every sorted row
    rows = np.bincount(group, minlength=len(u)).astype(np.int32)
    if w is not None:
        w = w[order]
        votes = np.bincount(group, weights=np.where(w > 0, 1, -1), minlength=len(u)).astype(np.int32)
        w = w[last]
    if symmetric:
        off = u != v
        u, v = np.concatenate([u, v[off]]), np.concatenate([v, u[off]])
        bucket = np.concatenate([bucket, bucket[off]])
        order = _sorted_order(bucket, u, v, num_buckets)
        u, v, bucket = u[order], v[order], bucket[order]
        rows = np.concatenate([rows, rows[off]])[order]
        if w is not None:
            w = np.concatenate([w, w[off]])[order]
            votes = np.concatenate([votes, votes[off]])[order]
    pairs = np.stack([u, v], axis=1).astype(np.int32)
    counts = np.bincount(bucket, minlength=num_buckets)
    if w is None:
        snaps, mult = _split(counts, pairs, rows)
        return snaps, None, None, mult
    snaps, weights, vote_list, mult = _split(counts, pairs, w.astype(np.float32), votes, rows)
    return snaps, weights, vote_list, mult


def _facts(
    path, src: np.ndarray, dst: np.ndarray, num: int, symmetric: bool, self_loops: bool, **extra
) -> dict:
    """The ``info`` facts every loader records."""
    return {
        "file": None if path is None else str(path),
        "raw_rows": int(len(src)),
        "self_loop_rows": int(np.count_nonzero(src == dst)),
        "num_snapshots": num,
        "symmetric": symmetric,
        "self_loops": self_loops,
        **extra,
    }


def _remap(*id_arrays: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Original ids -> 0..N-1 in sorted order of the distinct ids of all arrays."""
    node_ids = np.unique(np.concatenate(id_arrays))
    if len(node_ids) > _MAX_NODES:
        raise UserError(f"{len(node_ids)} distinct nodes exceed the int32 id space: use a smaller graph")
    return node_ids, [np.searchsorted(node_ids, a) for a in id_arrays]


# A time within this relative distance of a bucket boundary is on it: 0.411 / 0.137 is 2.99999...
# in floating point, though the file means the boundary 3 x 0.137.
BOUNDARY_RTOL = 1e-9


def _bucket_floor(x: np.ndarray, exact: bool) -> np.ndarray:
    """floor(x) as int64, where x = (time - t0) / width; unless ``exact`` (integer times, start and
    width: the division is exact at a boundary), an x that rounding left just below an integer counts
    as that integer."""
    x = np.asarray(x, np.float64)
    if exact:
        return np.floor(x).astype(np.int64)
    r = np.rint(x)
    on = np.abs(x - r) <= BOUNDARY_RTOL * np.maximum(1.0, np.abs(r))
    return np.where(on, r, np.floor(x)).astype(np.int64)


def edge_stream_to_graph(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray | None,
    time: np.ndarray,
    *,
    aggr_time: float = 0.0,
    num_snapshots: int = 0,
    symmetric: bool = True,
    self_loops: bool = False,
    name: str = "edges",
    info: dict | None = None,
    span: tuple[float, float] | None = None,
) -> DynamicGraph:
    """Bucket an edge stream into snapshots: ``aggr_time`` seconds each, else ``num_snapshots`` equal-width
    buckets over [t_min, t_max], else one snapshot per distinct time value. Empty buckets are kept.
    ``span`` (t0, t1) replaces [t_min, t_max] (data.start / data.end): buckets start at t0 and run to
    t1, the empty ones at either end included."""
    src, dst, time = np.asarray(src), np.asarray(dst), np.asarray(time, np.float64)
    if len(src) == 0:
        raise UserError(f"dataset {name!r} has no edges: give a non-empty edge stream")
    if aggr_time < 0 or num_snapshots < 0:
        raise UserError(f"aggr_time ({aggr_time}) and num_snapshots ({num_snapshots}) must be >= 0")
    node_ids, (u, v) = _remap(src, dst)
    t_min, t_max = float(time.min()), float(time.max())
    if span is None and t_min == t_max and len(time) > 1:  # no bucketing makes two snapshots of it
        raise UserError(
            f"dataset {name!r}: every row has the same time ({t_min:g}), so it is one snapshot: a dynamic "
            "graph needs rows at two or more times (check which column holds the time)"
        )
    t0, t1 = (t_min, t_max) if span is None else span
    stream_snapshots(name, aggr_time, num_snapshots, t0, max(t1, t_max))  # before any bucket exists
    exact = bool(np.all(time == np.round(time))) and float(t0) == round(float(t0))
    if aggr_time > 0:
        mode = "aggr_time"
        exact = exact and float(aggr_time) == round(float(aggr_time))
        bucket = _bucket_floor((time - t0) / aggr_time, exact)
        num = max(
            int(bucket.max()) + 1, 0 if span is None else -int(_bucket_floor(-(t1 - t0) / aggr_time, exact))
        )
        times = t0 + np.arange(num) * float(aggr_time)
    elif num_snapshots > 0:
        mode = "num_snapshots"
        width = (t1 - t0) / num_snapshots
        if width > 0:
            span_int = exact and float(t1) == round(float(t1)) and (t1 - t0) * num_snapshots < 2.0**62
            if span_int:  # integer times: the exact floor((t - t0) * n / (t1 - t0))
                scaled = (time - t0).astype(np.int64) * num_snapshots // int(round(t1 - t0))
                bucket = np.minimum(scaled, num_snapshots - 1)
            else:
                bucket = np.minimum(_bucket_floor((time - t0) / width, False), num_snapshots - 1)
        else:
            bucket = np.zeros(len(time), dtype=np.int64)
        num = int(bucket.max()) + 1 if span is None else num_snapshots
        times = t0 + np.arange(num) * width
    else:
        mode = "distinct_times"
        if max(abs(t_min), abs(t_max)) > 2.0**53:  # float64 holds integers exactly only to 2**53
            raise UserError(
                f"dataset {name!r}: times reach {max(abs(t_min), abs(t_max)):.4g}, past 2**53, where "
                "float64 rounds distinct times together, so a snapshot per distinct time is not exact: "
                "set data.aggr_time (in the file's time unit, e.g. 86400e9 for days of nanoseconds) or "
                "data.num_snapshots"
            )
        times, bucket = np.unique(time, return_inverse=True)
        num = len(times)
        check_snapshots(num, f"dataset {name!r}: a snapshot per distinct time", "set data.aggr_time=SECONDS")
    rank = np.empty(len(time), dtype=np.int64)
    rank[np.argsort(time, kind="stable")] = np.arange(len(time))
    snaps, weights, votes, mult = build_snapshots(
        u, v, bucket, num, weight=weight, rank=rank, symmetric=symmetric, self_loops=self_loops
    )
    facts = _facts(None, src, dst, num, symmetric, self_loops, bucketing=mode, aggr_time=float(aggr_time))
    facts.update(t_min=t_min, t_max=t_max, weighted=weight is not None, **(info or {}))
    times = np.asarray(times, np.float64)
    return DynamicGraph(
        name, len(node_ids), snaps, weights, node_ids, times, facts, votes=votes, multiplicity=mult
    )


# --------------------------------------------------------------------------------------- intervals


def _read_dates(path: str | Path, num: int) -> tuple[np.ndarray, int]:
    """``snapshot,date`` (YYYYMMDD) rows -> ([T] epoch seconds at UTC midnight, T)."""
    rows, linenos = _split_rows(path, (2,), "dates")
    snap, date = columns(path, rows, linenos, [("snapshot", "id"), ("date", "id")])
    total = max(num, int(snap.max()) + 1)
    check_snapshots(total, f"dates file {str(path)!r}: snapshot {total - 1}", "fix the snapshot column")
    year, month, day = date // 10000, date // 100 % 100, date % 100
    ok = (month >= 1) & (month <= 12) & (day >= 1) & (day <= 31) & (year >= 1) & (year <= 9999)
    ym = (np.where(ok, year, 1970) - 1970).astype("datetime64[Y]")
    ym = ym + np.where(ok, month - 1, 0).astype("timedelta64[M]")
    dt = ym.astype("datetime64[D]") + np.where(ok, day - 1, 0).astype("timedelta64[D]")
    ok &= dt.astype("datetime64[M]") == ym  # e.g. 19980230 spills into March
    bad = np.flatnonzero(~ok | (snap < 0))
    if len(bad):
        k = int(bad[0])
        raise UserError(
            f"{str(path)!r} line {linenos[k]}: bad snapshot,date row (date as YYYYMMDD): fix the row"
        )
    counts = np.bincount(snap, minlength=total)
    if np.any(counts != 1):
        s = int(np.flatnonzero(counts != 1)[0])
        raise UserError(
            f"dates file {str(path)!r} has {counts[s]} dates for snapshot {s}: give exactly one each"
        )
    times = np.empty(total, dtype=np.float64)
    times[snap] = dt.astype("datetime64[s]").astype(np.int64).astype(np.float64)
    return times, total


def load_edge_intervals(
    path: str | Path,
    *,
    symmetric: bool = True,
    self_loops: bool = False,
    dates_path: str | Path | None = None,
    name: str = "intervals",
) -> DynamicGraph:
    """``src,dst,first_snapshot,last_snapshot`` rows (inclusive bounds) -> snapshots 0..max(last).

    Snapshot i holds every row with first <= i <= last. ``times`` are the dates of ``dates_path``
    (``snapshot,date`` YYYYMMDD, as epoch seconds) when given, else the snapshot index.
    """
    rows, linenos = _split_rows(path, (4,), "interval")
    spec = [(col, "id") for col in ("source node id", "target node id", "first_snapshot", "last_snapshot")]
    src, dst, first, last = columns(path, rows, linenos, spec)
    bad = np.flatnonzero((first < 0) | (first > last))
    if len(bad):
        k = int(bad[0])
        raise UserError(
            f"{str(path)!r} line {linenos[k]}: first_snapshot {first[k]} > last_snapshot {last[k]} or negative: "
            "fix the row"
        )
    num = int(last.max()) + 1
    check_snapshots(num, f"{str(path)!r}: last_snapshot {num - 1}", "fix the last_snapshot column")
    times = np.arange(num, dtype=np.float64)
    if dates_path is not None:
        times, num = _read_dates(dates_path, num)
    node_ids, (u, v) = _remap(src, dst)
    keep = np.ones(len(u), dtype=bool) if self_loops else u != v
    u, v, f, la = u[keep], v[keep], first[keep], last[keep]
    if symmetric:
        off = u != v
        u, v = np.concatenate([u, v[off]]), np.concatenate([v, u[off]])
        f, la = np.concatenate([f, f[off]]), np.concatenate([la, la[off]])
    order = np.lexsort((v, u))  # rows by pair; the stable bucket sort below keeps this order per snapshot
    row_pairs = np.stack([u[order], v[order]], axis=1).astype(np.int32)
    f, la = f[order], la[order]
    lengths = la - f + 1
    total = int(lengths.sum())
    interval_rows(total, name)
    idx = np.int32 if total < _MAX_NODES else np.int64
    row = np.repeat(np.arange(len(lengths), dtype=idx), lengths)
    snap = np.repeat((f - (np.cumsum(lengths) - lengths)).astype(idx), lengths)
    snap += np.arange(total, dtype=idx)  # snapshot of each (row, snapshot) pair
    order = _bucket_order(snap, num)
    row = row[order]
    counts = np.zeros(num + 1, dtype=np.int64)  # pairs per snapshot by a difference array over rows
    np.add.at(counts, f, 1)
    np.add.at(counts, la + 1, -1)
    counts = np.cumsum(counts[:num])
    if len(row_pairs) > 1 and np.any((row_pairs[1:] == row_pairs[:-1]).all(axis=1)):
        # overlapping intervals of one pair: drop its repeats within a snapshot
        change = np.any(row_pairs[1:] != row_pairs[:-1], axis=1)
        pair_id = np.concatenate([[0], np.cumsum(change)])[row]
        snap = snap[order]
        keep = np.ones(len(row), dtype=bool)
        keep[1:] = (snap[1:] != snap[:-1]) | (pair_id[1:] != pair_id[:-1])
        row, counts = row[keep], np.bincount(snap[keep], minlength=num)
    pairs = row_pairs.view(np.int64)[row].view(np.int32).reshape(-1, 2)  # one 8-byte gather per pair
    (snaps,) = _split(counts, pairs)
    info = _facts(path, src, dst, num, symmetric, self_loops, bucketing="intervals")
    info.update(dates_file=None if dates_path is None else str(dates_path), snapshot_edge_rows=total)
    return DynamicGraph(name, len(node_ids), snaps, None, node_ids, times, info)


def load_snapshot_edges(
    path: str | Path, *, symmetric: bool = True, self_loops: bool = False, name: str = "snapshots"
) -> DynamicGraph:
    """``snapshot,src,dst[,time]`` rows (the snapshot column is the bucket, e.g. DySAT's split).

    ``times[t]`` is the earliest time of snapshot t (an empty one repeats the previous start), or t
    when there is no time column.
    """
    rows, linenos = _split_rows(path, (3, 4), "snapshot edge")
    spec = [("snapshot", "id"), ("source node id", "id"), ("target node id", "id"), ("time", "num")]
    cols = columns(path, rows, linenos, spec[: len(rows[0])])
    snap, src, dst = cols[:3]
    bad = np.flatnonzero(snap < 0)
    if len(bad):
        raise UserError(f"{str(path)!r} line {linenos[int(bad[0])]}: negative snapshot index: fix the row")
    num = int(snap.max()) + 1
    check_snapshots(num, f"{str(path)!r}: snapshot {num - 1}", "fix the snapshot column")
    node_ids, (u, v) = _remap(src, dst)
    snaps, _, _, mult = build_snapshots(u, v, snap, num, symmetric=symmetric, self_loops=self_loops)
    times = np.arange(num, dtype=np.float64)
    if len(cols) == 4:
        start = np.full(num, np.inf)
        np.minimum.at(start, snap, cols[3])
        for t in range(num):  # forward-fill empty snapshots (a loop over snapshots, not rows)
            if not np.isfinite(start[t]):
                start[t] = start[t - 1] if t else float(cols[3].min())
        times = start
    info = _facts(path, src, dst, num, symmetric, self_loops, bucketing="snapshot_column")
    return DynamicGraph(name, len(node_ids), snaps, None, node_ids, times, info, multiplicity=mult)
