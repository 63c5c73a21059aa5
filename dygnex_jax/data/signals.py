"""PyTorch Geometric Temporal's signal datasets (JSON): a graph per step plus a node signal [T, N].

Each loader returns a ``DynamicGraph`` with per-step edges, per-step edge ``weights`` and ``signal``
[T, N] float32, the value the node-regression task predicts (data/node_windows.py turns it into lagged
inputs and targets). What each file holds and what PyG-Temporal 0.56.2's loader does with it (read in
its ``dataset/*.py``; this is our own code):

* ``chickenpox_hungary``: ``edges`` (one static graph, self-loops included), ``FX`` [T, N], already
  standardised; every edge has weight 1.
* ``pedalme_london``: ``edges`` and ``weights`` (static, self-loops included), ``X`` [T, N], not
  standardised (PyG-T uses it as is).
* ``england_covid``: ``edge_mapping.edge_index`` / ``edge_weight`` keyed by day "0".."T-1" (a graph per
  day, self-loops with large weights), ``y`` [T, N] daily cases, standardised per node over all days
  (mean / (std + 1e-10), as PyG-T does).
* ``montevideo_bus``: networkx node-link JSON; ``nodes[i].y`` (the target) and ``nodes[i].X.y`` (the
  feature, the same series) per bus stop, ``links`` with ``weight`` (road distance); both standardised
  per node (mean / std) as PyG-T does. We read ``y``: the feature PyG-T builds from ``X.y`` is its
  lagged copy.

The edges of a step are stored sorted and unique (``DynamicGraph``'s contract), weights aligned; static
graphs are the same arrays at every step. Self-loops are kept: the graph operators treat them as PyG's
do (models/layers.py).
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import numpy as np

from ..errors import UserError
from .graph import DynamicGraph


def _read_json(path: Path, name: str, remedy: str = "fetch it again") -> dict:
    """The JSON object in ``path`` (gzip or plain); a damaged or non-JSON file is a one-line ``UserError``
    ending in ``remedy``."""
    if not path.is_file():
        raise UserError(f"dataset {name!r}: file {str(path)!r} does not exist: copy the dataset folder there")
    raw = path.read_bytes()
    try:
        text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        data = json.loads(text)
    except (OSError, EOFError, zlib.error):
        raise UserError(f"dataset {name!r}: {str(path)!r} is a damaged gzip file: {remedy}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(
            f"dataset {name!r}: {str(path)!r} is not valid JSON ({e.msg} at line {e.lineno}): {remedy}"
        ) from None
    if not isinstance(data, dict):
        raise UserError(f"dataset {name!r}: {str(path)!r} is not a JSON object: {remedy}")
    return data


def _field(data: dict, key: str, name: str, path: Path):
    node = data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise UserError(f"dataset {name!r}: {str(path)!r} has no {key!r} field: fetch it again")
        node = node[part]
    return node


def _array(value, dtype, shape_ndim: int, what: str, name: str, path: Path) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError):
        a = None
    if a is None or a.ndim != shape_ndim or (dtype is np.float64 and not np.all(np.isfinite(a))):
        raise UserError(
            f"dataset {name!r}: {what} in {str(path)!r} is not a {shape_ndim}-d array of finite numbers: "
            "fetch it again"
        )
    return a


def _edges(pairs: np.ndarray, weights: np.ndarray, n: int, what: str, name: str, path: Path):
    """[E, 2] pairs + [E] weights -> sorted unique pairs (int32) and their weights (float32)."""
    if pairs.size == 0:
        pairs = pairs.reshape(0, 2)
    if pairs.shape[1:] != (2,) or len(weights) != len(pairs):
        raise UserError(
            f"dataset {name!r}: {what} in {str(path)!r} must be [src, dst] pairs with one weight each: "
            "fetch it again"
        )
    if len(pairs) and (pairs.min() < 0 or pairs.max() >= n):
        raise UserError(f"dataset {name!r}: {what} in {str(path)!r} names a node outside 0..{n - 1}")
    code = pairs[:, 0].astype(np.int64) * n + pairs[:, 1]
    code, first = np.unique(code, return_index=True)
    return np.stack([code // n, code % n], 1).astype(np.int32), weights[first].astype(np.float32)


def standardize(values: np.ndarray, eps: float = 0.0) -> np.ndarray:
    """Per node (column) over time: (x - mean) / (std + eps), population std, as PyG-T's loaders."""
    return (values - values.mean(0)) / (values.std(0) + eps)


def _graph(name, signal, pairs, weights, path, info) -> DynamicGraph:
    t, n = signal.shape
    return DynamicGraph(
        name=name,
        num_nodes=n,
        snapshots=pairs,
        weights=weights,
        times=np.arange(t, dtype=np.float64),
        signal=signal.astype(np.float32),
        info={"file": str(path), **info},
    )


def load_chickenpox(path: Path, name: str = "chickenpox_hungary") -> DynamicGraph:
    data = _read_json(path, name)
    fx = _array(_field(data, "FX", name, path), np.float64, 2, "'FX'", name, path)
    pairs = _array(_field(data, "edges", name, path), np.int64, 2, "'edges'", name, path)
    e, w = _edges(pairs, np.ones(len(pairs)), fx.shape[1], "'edges'", name, path)
    return _graph(name, fx, [e] * len(fx), [w] * len(fx), path, {"standardised": "in the file"})


def load_pedalme(path: Path, name: str = "pedalme_london") -> DynamicGraph:
    data = _read_json(path, name)
    x = _array(_field(data, "X", name, path), np.float64, 2, "'X'", name, path)
    pairs = _array(_field(data, "edges", name, path), np.int64, 2, "'edges'", name, path)
    weights = _array(_field(data, "weights", name, path), np.float64, 1, "'weights'", name, path)
    e, w = _edges(pairs, weights, x.shape[1], "'edges'", name, path)
    return _graph(name, x, [e] * len(x), [w] * len(x), path, {"standardised": "no (as PyG-T)"})


def load_england_covid(path: Path, name: str = "england_covid") -> DynamicGraph:
    data = _read_json(path, name)
    y = _array(_field(data, "y", name, path), np.float64, 2, "'y'", name, path)
    index = _field(data, "edge_mapping.edge_index", name, path)
    weight = _field(data, "edge_mapping.edge_weight", name, path)
    pairs, weights = [], []
    for day in range(len(y)):
        key = str(day)
        if key not in index or key not in weight:
            raise UserError(f"dataset {name!r}: {str(path)!r} has no graph for day {key}: fetch it again")
        p = _array(index[key], np.int64, 2, f"edge_index[{key}]", name, path)
        w = _array(weight[key], np.float64, 1, f"edge_weight[{key}]", name, path)
        e, ew = _edges(p, w, y.shape[1], f"edge_index[{key}]", name, path)
        pairs.append(e)
        weights.append(ew)
    return _graph(name, standardize(y, 1e-10), pairs, weights, path, {"standardised": "per node (PyG-T)"})


def load_montevideo(path: Path, name: str = "montevideo_bus") -> DynamicGraph:
    data = _read_json(path, name)
    nodes = _field(data, "nodes", name, path)
    links = _field(data, "links", name, path)
    try:
        stops = [node["bus_stop"] for node in nodes]
        series = [node["y"] for node in nodes]
        ids = {stop: i for i, stop in enumerate(stops)}
        pairs = [(ids[link["source"]], ids[link["target"]]) for link in links]
        weights = [link["weight"] for link in links]
    except (KeyError, TypeError):
        raise UserError(
            f"dataset {name!r}: {str(path)!r} is not node-link JSON with bus_stop / y per node and "
            "source / target / weight per link: fetch it again"
        ) from None
    y = _array(series, np.float64, 2, "nodes' 'y'", name, path).T  # [T, N]
    p = _array(pairs, np.int64, 2, "'links'", name, path)
    e, w = _edges(
        p, _array(weights, np.float64, 1, "link weights", name, path), len(nodes), "'links'", name, path
    )
    info = {"standardised": "per node (PyG-T)", "node_ids": "bus_stop"}
    graph = _graph(name, standardize(y), [e] * len(y), [w] * len(y), path, info)
    graph.node_ids = np.asarray(stops)
    return graph


LOADERS = {
    "chickenpox_hungary": load_chickenpox,
    "pedalme_london": load_pedalme,
    "england_covid": load_england_covid,
    "montevideo_bus": load_montevideo,
}
