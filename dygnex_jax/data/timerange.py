"""``data.start`` / ``data.end``: keep the edge rows (or native snapshots) of a time range, and what
the header says about empty snapshots.

A bound is a number in the data's own time unit (Unix seconds for the SNAP streams; the snapshot index
for a folder of snapshot files without a time column) or an ISO date / date-time (``2004-01-01``,
``2004-01-01T12:00:00``; UTC unless it names an offset), which stands for its Unix seconds. An empty
bound is open. An edge stream keeps its rows with ``start <= time < end`` and is bucketed from
``start`` (``data.aggr_time`` seconds, or ``data.num_snapshots`` spans of the range), so snapshots
inside the range without rows are kept, empty, and counted in the header line. A dataset with native
snapshots (edge intervals, snapshot files, PyG-T signals) keeps the snapshots whose time is in range.
"""

from __future__ import annotations

import datetime
import math
import typing

import numpy as np

from ..errors import UserError
from .edge_file import NAMES_KEY, read_edge_file
from .graph import DynamicGraph
from .loaders import edge_stream_to_graph

# The type of data.start / data.end in the config: a number or an ISO date, kept as the text written
# (YAML reads 2004-01-01 as a date and 1000 as a number: both are taken; ``bound_text``).
TimePoint = typing.NewType("TimePoint", str)
# Times in this span read as Unix seconds (1973 .. 2100): messages then also show them as dates.
_UNIX_SECONDS = (1e8, 4.1e9)
# A series with more than this share of empty snapshots gets a warning line after the header.
MOSTLY_EMPTY = 0.5


def bound_text(value):
    """A ``TimePoint`` as YAML read it (a date, a number or text) -> its text; anything else as it is."""
    if isinstance(value, (datetime.date, int, float)) and not isinstance(value, bool):
        return value.isoformat() if isinstance(value, datetime.date) else str(value)
    return value


def parse_bound(text: str, name: str) -> float | None:
    """``data.start`` / ``data.end`` text -> a time (a number, or an ISO date's Unix seconds); None if
    empty. Anything else is a ``UserError`` naming ``name``."""
    text = str(text).strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(value):
            raise UserError(f"{name}={text!r} is not a finite time: leave it empty for an open range")
        return value
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise UserError(
            f"{name}={text!r} is neither a number (in the data's time unit) nor an ISO date such as "
            "2004-01-01 or 2004-01-01T12:00:00: fix it"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def time_range(start: str, end: str) -> tuple[float | None, float | None]:
    """The parsed (start, end) of ``data.start`` / ``data.end``; ``end <= start`` is a ``UserError``."""
    lo, hi = parse_bound(start, "data.start"), parse_bound(end, "data.end")
    if lo is not None and hi is not None and hi <= lo:
        raise UserError(
            f"data.end={end} is not after data.start={start}: the range keeps start <= time < end; "
            "give an end after the start"
        )
    return lo, hi


def as_date(t: float) -> str:
    """A time as ``2004-04-15 06:40`` (UTC) when it reads as Unix seconds, else ``''``."""
    if not _UNIX_SECONDS[0] <= t <= _UNIX_SECONDS[1]:
        return ""
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%d %H:%M")


def _span_text(t_min: float, t_max: float) -> str:
    dates = f" ({as_date(t_min)} .. {as_date(t_max)} UTC)" if as_date(t_min) and as_date(t_max) else ""
    return f"{t_min:.10g} .. {t_max:.10g}{dates}"


def _kept(times: np.ndarray, lo: float | None, hi: float | None) -> np.ndarray:
    keep = np.ones(len(times), dtype=bool)
    if lo is not None:
        keep &= times >= lo
    if hi is not None:
        keep &= times < hi
    return keep


def _nothing_kept(start: str, end: str, what: str, times: np.ndarray) -> UserError:
    t_min, t_max = float(np.min(times)), float(np.max(times))
    hint = ""
    if not as_date(t_max) and any(s and "-" in s[1:] for s in (start, end)):
        hint = " (an ISO date stands for Unix seconds; these times are not)"
    return UserError(
        f"data.start={start or '(open)'} / data.end={end or '(open)'} keep no {what}: its times run "
        f"{_span_text(t_min, t_max)}{hint}: choose a range inside them"
    )


def read_stream(path, cfg, *, aggr_time: float, name: str = "edges") -> DynamicGraph:
    """An edge stream file read, cut to ``cfg.start`` / ``cfg.end`` and bucketed from the range's start
    (``cfg``: the ``data`` section; ``aggr_time``: seconds per snapshot in effect, 0 = none)."""
    src, dst, weight, time, read = read_edge_file(path)
    names = read.pop(NAMES_KEY, None)
    lo, hi = time_range(cfg.start, cfg.end)
    span = None
    if lo is not None or hi is not None:
        keep = _kept(time, lo, hi)
        if not keep.any():
            raise _nothing_kept(cfg.start, cfg.end, f"rows of {str(path)!r}", time)
        src, dst, time = src[keep], dst[keep], time[keep]
        weight = None if weight is None else weight[keep]
        span = (float(time.min()) if lo is None else lo, float(time.max()) if hi is None else hi)
    graph = edge_stream_to_graph(
        src,
        dst,
        weight,
        time,
        aggr_time=aggr_time,
        num_snapshots=cfg.num_snapshots,
        symmetric=cfg.symmetric,
        self_loops=cfg.self_loops,
        name=name,
        info={"file": str(path), "range": [lo, hi], **read},
        span=span,
    )
    if names is not None:  # the file's own names for the ids (node_ids[i] is node i's id in the file)
        graph.node_ids = names[graph.node_ids]
    return graph


def select_snapshots(graph: DynamicGraph, start: str, end: str) -> DynamicGraph:
    """The snapshots of ``graph`` whose time (``graph.times``, else the index) is in the range; a
    stream already cut by ``read_stream`` is kept whole."""
    lo, hi = time_range(start, end)
    if lo is None and hi is None:
        return graph
    times = graph.times if graph.times is not None else np.arange(graph.num_snapshots, dtype=np.float64)
    kept = np.flatnonzero(_kept(np.asarray(times, np.float64), lo, hi))
    if not len(kept):
        raise _nothing_kept(start, end, f"snapshots of {graph.name!r}", np.asarray(times))
    if kept[0] == 0 and kept[-1] == graph.num_snapshots - 1:
        return graph
    return graph.select(int(kept[0]), int(kept[-1]) + 1)


def empty_snapshots(graph: DynamicGraph) -> int:
    """How many snapshots of ``graph`` have no edge."""
    return int(np.count_nonzero(graph.edge_counts() == 0))


def sparsity_warning(graph: DynamicGraph) -> str:
    """A one-line warning when most snapshots are empty, with the fix; ``''`` otherwise."""
    counts = graph.edge_counts()
    empty = int(np.count_nonzero(counts == 0))
    if empty <= MOSTLY_EMPTY * len(counts):
        return ""
    aggr = float(graph.info.get("aggr_time") or 0.0)
    fix = f"raise data.aggr_time (now {aggr:g} s) or " if aggr > 0 else ""
    full = np.flatnonzero(counts)
    where = ""
    if len(full) and graph.times is not None:
        where = f" (the edges lie in {_span_text(float(graph.times[full[0]]), float(graph.times[full[-1]]))})"
    return (
        f"warning: {empty} of {len(counts)} snapshots of {graph.name} are empty: {fix}narrow "
        f"data.start / data.end to where the edges are{where}"
    )
