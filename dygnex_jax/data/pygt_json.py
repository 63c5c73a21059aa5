"""``data.dataset: pygt_json``: PyTorch Geometric Temporal's JSON layouts, read generally (``data.path``).

PyG-Temporal 0.56.2's dataset loaders (``torch_geometric_temporal/dataset/*.py``) read these layouts
(this is our own code; gzip or plain JSON):

* **static graph + signal**: top-level ``edges`` [[src, dst], ...] (one graph for every step), optional
  ``weights`` [E] (default 1), and the target as a [T, N] array (chickenpox ``FX``, pedalme ``X``,
  windmill ``block``, england_covid ``y``); node features, optional, a [T, N, F] (or [T, N]) array.
* **snapshot records**: ``"0" .. "T-1"`` objects (T = ``time_periods`` when given), each with the
  step's target ``y`` [N], node features ``X`` [N, F] (or [N]) and, for a graph per step, ``edges`` /
  ``weights`` (twitter_tennis, the layout of ``DynamicGraphTemporalSignal``); records without
  ``edges`` take the top-level static graph (wikimath).
* a graph per step may also be ``edge_mapping.edge_index`` / ``edge_weight`` keyed "0".."T-1"
  (england_covid).

The target key is ``data.target_key`` (auto: ``y`` in the records, else the only [T, N] array at the top
or [N] array in the records); the features are read only for ``data.features: given``, under
``data.feature_key`` (auto: ``X`` in the records, else the only other such array). Values are taken as in
the file (no standardisation); edges as given (direction, self-loops; duplicates keep the first weight),
sorted per step. Every bad input is a one-line ``UserError``: a missing key (with the keys found), an
ambiguous one, a wrong shape, a non-finite value, a node count that changes between steps, a node id
outside 0..N-1, or ``data.task: link`` on a static graph (nothing to predict). ``assemble`` builds the
``DynamicGraph`` (also for ``baselines/from_pygt.py``).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

from ..config import DataConfig
from ..errors import UserError
from .graph import DynamicGraph
from .signals import _read_json

GRAPH_KEYS = ("edges", "weights", "edge_mapping", "time_periods", "node_ids")
REMEDY = "give a PyG-Temporal JSON file (README: pygt_json)"


def load(cfg: DataConfig) -> DynamicGraph:
    """The graph, target signal and (``data.features: given``) features of the file ``cfg.path``."""
    if not cfg.path:
        raise UserError("data.dataset=pygt_json needs data.path=FILE: set the file to read")
    if cfg.aggr_time > 0 or cfg.num_snapshots > 0:
        raise UserError(
            "data.dataset=pygt_json has native steps: data.aggr_time / data.num_snapshots do not apply "
            "(set them to 0; data.start / data.end choose steps)"
        )
    path = Path(cfg.path)
    if not path.is_file():
        raise UserError(f"pygt_json file {str(path)!r} (data.path) does not exist: check the path")
    data = _read_json(path, "pygt_json", REMEDY)
    where = f"pygt_json {str(path)!r}"
    records = _records(data, where)
    steps = len(records) if records is not None else None
    need = cfg.task == "node_reg"
    target_key = _pick(data, records, cfg.target_key, "target", where, required=need)
    signal = _series(data, records, target_key, (1,), where) if target_key else None
    features, feature_key = None, None
    if cfg.features == "given":
        feature_key = _pick(data, records, cfg.feature_key, "features", where, exclude=target_key)
        features = _series(data, records, feature_key, (2, 1), where)
    pairs, weights, dynamic = _graph(data, records, where)
    if not dynamic and cfg.task == "link":
        raise UserError(
            f"data.task=link needs a graph per snapshot, but {where} has one static graph (top-level "
            "'edges'): every step has the same edges, nothing to predict: use data.task=node_reg"
        )
    info = {
        "file": str(path),
        "target": target_key,
        "features": feature_key,
        "standardised": "as in the file",
    }
    info["layout"] = "a graph per step" if dynamic else "static graph"
    return assemble(where, "pygt_json", pairs, weights, signal, features, info, steps)


def _records(data: dict, where: str) -> list[dict] | None:
    """The snapshot records "0".."T-1" (T = ``time_periods`` when given), or None without records."""
    numbered = sorted(int(k) for k in data if k.isascii() and k.isdigit() and isinstance(data[k], dict))
    if not isinstance(data.get("0"), dict):
        if numbered:
            raise UserError(
                f"{where}: its snapshot records start at {str(numbered[0])!r}, not '0': number them 0..T-1"
            )
        return None
    t = data.get("time_periods")
    if t is not None and (not isinstance(t, int) or isinstance(t, bool) or t < 1):
        raise UserError(f"{where}: 'time_periods' must be a positive integer, got {t!r}: fix the file")
    count = (
        t
        if t is not None
        else next(i for i in range(len(data) + 1) if not isinstance(data.get(str(i)), dict))
    )
    for i in range(count):
        if not isinstance(data.get(str(i)), dict):
            raise UserError(
                f"{where} has no snapshot record {str(i)!r} (an object; time_periods is {count}): "
                "give one record per step"
            )
    if t is None and numbered[-1] >= count:  # a gap: the records after it would be dropped
        raise UserError(
            f"{where} has snapshot records up to {str(numbered[-1])!r} but none {str(count)!r}: give one "
            "record per step 0..T-1 (or time_periods to read only the first T)"
        )
    return [data[str(i)] for i in range(count)]


def _numeric(value) -> np.ndarray | None:
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return a


def _fits(value, dims: tuple[int, ...]) -> bool:
    """An array of numbers with one of ``dims`` dims, or (dims >= 2) a list of lists of unequal lengths
    (a target or features whose node count changes: ``_series`` names the step)."""
    a = _numeric(value)
    if a is not None:
        return bool(a.size) and a.ndim in dims
    return (
        max(dims) >= 2 and isinstance(value, list) and bool(value) and all(isinstance(v, list) for v in value)
    )


def _found(data: dict, records) -> str:
    keys = ", ".join(k for k in data if not (records is not None and k.isdigit()))
    inner = f"; in the records: {', '.join(records[0])}" if records else ""
    return f"keys found: {keys or 'none'}{inner}"


# what -> (config key, default key in the records, dims at the top, dims in a record)
PICK = {"target": ("data.target_key", "y", (2,), (1,)), "features": ("data.feature_key", "X", (3, 2), (2, 1))}


def _pick(data, records, named, what, where, exclude=None, required=True):
    """The key of the target or the features: ``named``, else the default (``y`` / ``X``) in the
    records, else the only array of the right dims at the top or in the records (not ``exclude``). None
    when nothing fits and not ``required``."""
    option, default, top_dims, rec_dims = PICK[what]
    if named:
        if (records is not None and named in records[0]) or named in data:
            return named
        raise UserError(f"{where} has no {named!r} ({option}): {_found(data, records)}")
    if records is not None and default in records[0] and default != exclude:
        return default
    top = [k for k in data if k not in GRAPH_KEYS and not k.isdigit() and k != exclude]
    top = [k for k in top if _fits(data[k], top_dims)]
    rec = [k for k in (records[0] if records else ()) if k not in GRAPH_KEYS and k != exclude]
    rec = [k for k in rec if _fits(records[0][k], rec_dims)]
    found = top + [k for k in rec if k not in top]
    if len(found) == 1:
        return found[0]
    if not required:
        return None
    if not found:
        need = "node features for data.features=given" if what == "features" else "node-regression target"
        raise UserError(f"{where} has no {need}: set {option}=KEY ({_found(data, records)})")
    raise UserError(
        f"{where}: the {what} is ambiguous: {', '.join(found)} could each be it: set {option} to one of them"
    )


def _series(data, records, key, dims, where) -> np.ndarray:
    """``key`` as a [T, N, ...] float64 array: stacked from the records (each ``dims[0]`` or ``dims[1]``
    dims), else the top-level array (one more dim)."""
    if records is None or key not in records[0]:
        value = data.get(key)
        a = _numeric(value)
        if a is None and isinstance(value, list) and all(isinstance(v, list) for v in value):
            _same_nodes(where, key, [len(v) for v in value])
        if a is None or a.ndim - 1 not in dims or a.size == 0:
            _bad_shape(where, repr(key), dims, None if a is None else a.shape, top=True)
        return _finite(a.reshape(*a.shape[:2], -1) if dims[0] == 2 else a, where, repr(key), None)
    rows = []
    for t, rec in enumerate(records):
        if key not in rec:
            raise UserError(
                f"{where}: snapshot record {str(t)!r} has no {key!r}: keys there: {', '.join(rec)}"
            )
        a = _numeric(rec[key])
        if a is None or a.ndim not in dims or a.size == 0:
            _bad_shape(where, f"{key!r} of snapshot record {str(t)!r}", dims, None if a is None else a.shape)
        a = a.reshape(len(a), -1) if dims[0] == 2 else a
        _same_nodes(where, key, [len(rows[0]) if rows else len(a)] * t + [len(a)])
        if t and a.shape != rows[0].shape:
            _bad_shape(where, f"{key!r} of snapshot record {str(t)!r}", dims, a.shape, like=rows[0].shape)
        rows.append(_finite(a, where, repr(key), t))
    return np.stack(rows)


def _same_nodes(where: str, key: str, counts: list[int]) -> None:
    """A ``UserError`` when ``key`` has another node count (``counts``, per step) than at step 0."""
    bad = next((t for t, c in enumerate(counts) if c != counts[0]), None)
    if bad is not None:
        raise UserError(
            f"{where}: {key!r} has {counts[bad]} nodes at step {bad} but {counts[0]} at step 0: every "
            "step needs the same N nodes (give absent nodes rows of zeros)"
        )


def _bad_shape(where, what, dims, shape, top=False, like=None):
    want = {1: "[N]", 2: "[N, F]"}
    names = " or ".join(("[T, " + want[d][1:]) if top else want[d] for d in dims)
    got = "not an array of numbers" if shape is None else f"shape {list(shape)}"
    same = f" (snapshot 0 has {list(like)})" if like is not None else ""
    raise UserError(f"{where}: {what} must be {names} numbers, got {got}{same}: fix the file")


def _finite(a: np.ndarray, where: str, what: str, step: int | None) -> np.ndarray:
    if not np.all(np.isfinite(a)):
        at = step if step is not None else int(np.argwhere(~np.isfinite(a))[0][0])
        raise UserError(
            f"{where}: {what} holds a non-finite value (NaN or infinity) at step {at}: fill or drop it"
        )
    return a


def _graph(data, records, where):
    """(pairs, weights, dynamic): T lists from the records or ``edge_mapping``, else the static graph."""
    if records is not None and "edges" in records[0]:
        return [r.get("edges") for r in records], [r.get("weights") for r in records], True
    if isinstance(data.get("edge_mapping"), dict):
        index, weight = data["edge_mapping"].get("edge_index"), data["edge_mapping"].get("edge_weight")
        if not isinstance(index, dict):
            raise UserError(f"{where}: 'edge_mapping' has no 'edge_index' object keyed by step: fix the file")
        t = data.get("time_periods")
        steps = len(records) if records is not None else t if isinstance(t, int) else len(index)
        for i in range(steps):
            if str(i) not in index:
                raise UserError(
                    f"{where}: 'edge_mapping.edge_index' has no graph for step '{i}': fix the file"
                )
        weights = [weight.get(str(i)) if isinstance(weight, dict) else None for i in range(steps)]
        return [index[str(i)] for i in range(steps)], weights, True
    if "edges" in data:
        return [data["edges"]], [data.get("weights")], False
    raise UserError(
        f"{where} has no graph: give 'edges' [[src, dst], ...] at the top (a static graph) or in every "
        f"snapshot record ({_found(data, records)})"
    )


def _pairs(edges, weights, n: int, where: str, what: str) -> tuple[np.ndarray, np.ndarray]:
    """[E, 2] (or [2, E], E != 2) node-id pairs and their [E] weights (default 1) -> sorted unique int32
    pairs and float32 weights; bad shapes, ids and weights are errors."""
    a = _numeric(edges if edges is not None else [])
    if a is not None and a.size == 0:
        a = a.reshape(0, 2)
    if a is not None and a.ndim == 2 and a.shape[0] == 2 and a.shape[1] != 2:
        a = a.T  # an edge_index [2, E] as PyG holds it
    if a is None or a.ndim != 2 or a.shape[1] != 2 or not np.all(a == np.round(a)):
        got = "not numbers" if a is None else f"shape {list(a.shape)}"
        raise UserError(
            f"{where}: {what} must be [[src, dst], ...] integer node ids, got {got}: fix the file"
        )
    w = np.ones(len(a)) if weights is None else _numeric(weights)
    if w is None or w.shape != (len(a),):
        got = "not numbers" if w is None else f"shape {list(w.shape)}"
        raise UserError(
            f"{where}: the weights of {what} must be one number per edge ({len(a)}), got {got}: fix the file"
        )
    _finite(w, where, f"the weights of {what}", None)
    if len(a) and (a.min() < 0 or a.max() >= n):
        bad = int(a.max()) if a.max() >= n else int(a.min())
        raise UserError(
            f"{where}: {what} names node {bad}, outside 0..{n - 1} (N = {n} from the target / features): "
            "fix the ids or the node count"
        )
    code, first = np.unique(a[:, 0].astype(np.int64) * n + a[:, 1].astype(np.int64), return_index=True)
    return np.stack([code // n, code % n], 1).astype(np.int32), w[first].astype(np.float32)


def assemble(where, name, pairs, weights, signal, features, info, steps=None) -> DynamicGraph:
    """A ``DynamicGraph`` from raw parts: ``pairs`` / ``weights`` one entry (static) or one per step
    (edges as ``_pairs`` reads them; weights None = 1), ``signal`` [T, N] or None, ``features`` [T, N, F]
    or None. T is the signal's (else the features', the records' ``steps`` or the graphs'); N the
    signal's (else the features', else the largest node id + 1). Mismatches are ``UserError``s."""
    lengths = {"the records": steps} if steps is not None else {}
    lengths |= {
        what: len(a) for what, a in (("the target", signal), ("the features", features)) if a is not None
    }
    if len(pairs) > 1:
        lengths["the graphs"] = len(pairs)
    t = next(iter(lengths.values()), 1)
    if any(v != t for v in lengths.values()):
        raise UserError(
            f"{where}: the steps disagree ({', '.join(f'{k} {v}' for k, v in lengths.items())}): fix the file"
        )
    for what, a in (("the target", signal), ("the features", features)):
        if a is not None:
            _finite(a, where, what, None)
    if signal is not None and features is not None and signal.shape[1] != features.shape[1]:
        raise UserError(
            f"{where}: the target has {signal.shape[1]} nodes but the features {features.shape[1]}: every step "
            "needs the same N nodes"
        )
    n = signal.shape[1] if signal is not None else features.shape[1] if features is not None else None
    if n is None:
        ids = [_numeric(p) for p in pairs]
        n = int(max((a.max() for a in ids if a is not None and a.size), default=0)) + 1
    graphs = [
        _pairs(p, w, n, where, "'edges'" if len(pairs) == 1 else f"the edges of step {i}")
        for i, (p, w) in enumerate(zip(pairs, weights))
    ]
    if len(graphs) == 1:
        graphs = graphs * t
    return DynamicGraph(
        name=name,
        num_nodes=n,
        snapshots=[g[0] for g in graphs],
        weights=[g[1] for g in graphs],
        times=np.arange(t, dtype=np.float64),
        info=info,
        signal=None if signal is None else signal.astype(np.float32),
        features=None if features is None else features.astype(np.float32),
    )


def dump(graph: DynamicGraph, path: str | Path) -> Path:
    """Write ``graph`` as a pygt_json file (``dumps``; a ``.gz`` path is gzip-compressed)."""
    path = Path(path)
    path.write_bytes(dumps(graph, gz=path.suffix == ".gz"))
    return path


def dumps(graph: DynamicGraph, gz: bool = False) -> bytes:
    """``graph`` (edges, weights, ``signal`` as ``y``, ``features`` as ``X``) as pygt_json bytes that
    ``load`` reads back unchanged: the static layout when every step has the same edges, else one record
    per step; ``gz``: gzip-compressed (the same bytes for the same graph)."""
    weights = graph.weights or [np.ones(len(s), np.float32) for s in graph.snapshots]
    static = all(
        np.array_equal(s, graph.snapshots[0]) and np.array_equal(w, weights[0])
        for s, w in zip(graph.snapshots, weights)
    )
    if static:
        data = {"edges": graph.snapshots[0].tolist(), "weights": weights[0].tolist()}
        if graph.signal is not None:
            data["y"] = graph.signal.tolist()
        if graph.features is not None:
            data["X"] = graph.features.tolist()
    else:
        data = {"time_periods": graph.num_snapshots}
        for t, (s, w) in enumerate(zip(graph.snapshots, weights)):
            rec = {"edges": s.tolist(), "weights": w.tolist()}
            if graph.signal is not None:
                rec["y"] = graph.signal[t].tolist()
            if graph.features is not None:
                rec["X"] = graph.features[t].tolist()
            data[str(t)] = rec
    text = json.dumps(data).encode()
    return gzip.compress(text, mtime=0) if gz else text
