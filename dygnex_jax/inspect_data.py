"""``python -m dygnex_jax inspect --config X [key=value ...] [--out DIR]``: what a config's data looks like
before training on it.

Per snapshot: its time, active nodes (endpoints of its edges), edges (unique directed pairs) and new edges
(pairs never seen in an earlier snapshot); the windows per split; the largest training window (what one
device must hold); the empty snapshots; and a suggested ``data.aggr_time`` for edge streams whose
snapshots are mostly empty or too few. Printed as a table (long series: summarised), written as
``inspect.json`` and ``inspect.png`` under ``--out``. Reads the data only: no JAX, no devices.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .config import Config
from .data.datasets import load_dataset
from .data.graph import DynamicGraph
from .data.node_windows import task_windows
from .files import atomic_write_text, json_text, make_dirs, save_figure, staged

# an edge stream reads best with at most this share of empty snapshots and at least this many windows
EMPTY_SHARE = 0.10
MIN_WINDOWS = 20


def snapshot_table(graph: DynamicGraph) -> dict[str, np.ndarray]:
    """Per snapshot [T]: time, active nodes, edges, new edges (pairs not in any earlier snapshot)."""
    nodes, edges, new = [], [], []
    n = max(graph.num_nodes, 1)
    seen_keys = np.zeros(0, np.int64)
    for s in graph.snapshots:
        s = np.asarray(s, np.int64).reshape(-1, 2)
        keys = np.unique(s[:, 0] * n + s[:, 1])
        nodes.append(len(np.unique(s)) if len(s) else 0)
        edges.append(len(keys))
        fresh = keys[~np.isin(keys, seen_keys, assume_unique=True)]
        new.append(len(fresh))
        seen_keys = np.union1d(seen_keys, fresh)
    t = graph.num_snapshots
    times = np.arange(t, dtype=np.float64) if graph.times is None else np.asarray(graph.times, np.float64)
    return {
        "time": times,
        "nodes": np.asarray(nodes, np.int64),
        "edges": np.asarray(edges, np.int64),
        "new_edges": np.asarray(new, np.int64),
    }


def suggest_aggr_time(graph: DynamicGraph, edges: np.ndarray, window: int) -> dict:
    """A snapshot width for an edge stream: the current one (``data.aggr_time``, from the snapshot
    times) when at most ``EMPTY_SHARE`` of the snapshots are empty, else its smallest whole multiple
    that gets there while keeping ``window + MIN_WINDOWS`` snapshots. Sources without bucketed times
    (native snapshots) get no suggestion. An edge stream read without either (one snapshot per distinct
    time, unevenly spaced) is first put on an even grid of the median gap between its times."""
    mode, prefix, width = graph.info.get("bucketing"), "", None
    if mode == "distinct_times" and graph.times is not None and len(graph.times) > 1:
        times = np.asarray(graph.times, np.float64)
        gap = max(float(np.median(np.diff(times))), (times[-1] - times[0]) / 1e5)  # at most 1e5 cells
        cells = np.floor((times - times[0]) / gap).astype(np.int64)
        edges = np.bincount(cells, weights=np.asarray(edges, np.float64), minlength=int(cells[-1]) + 1)
        spacing = (
            "evenly spaced" if np.allclose(np.diff(times), gap, rtol=1e-9, atol=0) else "unevenly spaced"
        )
        prefix = f"one snapshot per distinct time now ({len(times)}, {spacing}); on a grid of {gap:g}: "
        width = gap
    elif mode not in ("aggr_time", "num_snapshots") or graph.times is None:
        return {"aggr_time": None, "why": "native snapshots (no timestamps to re-bucket)"}
    out = _widen(graph, edges, window, width)
    return {**out, "why": prefix + out["why"]}


def _widen(graph: DynamicGraph, edges: np.ndarray, window: int, width: float | None) -> dict:
    """``suggest_aggr_time`` on snapshots of ``width`` (None: the graph's own) with ``edges`` each."""
    width = float(graph.info.get("aggr_time") or 0.0) if width is None else width
    if width <= 0 and len(graph.times) > 1:  # num_snapshots: equal widths
        width = float(np.median(np.diff(np.asarray(graph.times, np.float64))))
    if width <= 0:
        return {"aggr_time": None, "why": "a single snapshot"}
    share = float(np.mean(edges == 0)) if len(edges) else 1.0
    if share <= EMPTY_SHARE:
        return {"aggr_time": width, "why": f"{share:.0%} empty snapshots: keep the current width"}
    for m in range(2, len(edges) + 1):
        k = len(edges) // m
        if k < window + MIN_WINDOWS:
            break
        merged = edges[: k * m].reshape(k, m).sum(axis=1)
        if np.mean(merged == 0) <= EMPTY_SHARE:
            return {
                "aggr_time": width * m,
                "why": f"{share:.0%} of the snapshots are empty; {m}x wider leaves {np.mean(merged == 0):.0%} "
                f"of {k} empty",
            }
    return {
        "aggr_time": None,
        "why": f"{share:.0%} of the snapshots are empty and no wider width keeps {window + MIN_WINDOWS} "
        "snapshots: select a denser time range (data.start / data.end, data.last_snapshots)",
    }


def inspect(config: Config) -> dict:
    """The figures of ``config``'s data (see the module doc), JSON-ready."""
    graph = load_dataset(config.data)
    table = snapshot_table(graph)
    ws = task_windows(graph, config.data)
    splits = {name: int(len(ids)) for name, ids in ws.splits.items()}
    train = ws.splits["train"]
    costs = ws.costs("train", config.data.neg_mult)
    biggest = int(np.argmax(costs[:, 1])) if len(costs) else 0
    largest = {
        "window": int(train[biggest]) if len(train) else None,
        "nodes": int(costs[biggest, 0]) if len(costs) else 0,
        "edges": int(costs[biggest, 1]) if len(costs) else 0,
        "pairs": int(costs[biggest, 2]) if len(costs) else 0,
        "mean_edges": float(costs[:, 1].mean()) if len(costs) else 0.0,
    }
    empty = np.flatnonzero(table["edges"] == 0)
    return {
        "dataset": graph.name,
        "nodes": int(graph.num_nodes),
        "snapshots": int(graph.num_snapshots),
        "window": int(config.data.window),
        "task": config.data.task,
        "windows": splits,
        "largest_training_window": largest,
        "empty_snapshots": [int(i) for i in empty],
        "suggestion": suggest_aggr_time(graph, table["edges"], config.data.window),
        "per_snapshot": {k: v.tolist() for k, v in table.items()},
        "read": {
            k: graph.info[k] for k in ("columns", "node_names", "bipartite", "dates") if k in graph.info
        },
    }


def print_report(result: dict, rows: int = 12, log=print) -> None:
    """The table (the first and last ``rows // 2`` snapshots of a long series) and the summary lines."""
    snap = result["per_snapshot"]
    t = len(snap["edges"])
    log(f"{'snapshot':>8} {'time':>14} {'nodes':>8} {'edges':>9} {'new edges':>10}")
    shown = range(t) if t <= rows else [*range(rows // 2), None, *range(t - rows // 2, t)]
    for i in shown:
        if i is None:
            log(f"{'...':>8}")
            continue
        log(
            f"{i:>8} {snap['time'][i]:>14.6g} {snap['nodes'][i]:>8} {snap['edges'][i]:>9} {snap['new_edges'][i]:>10}"
        )
    edges = np.asarray(snap["edges"])
    log(
        f"{result['dataset']}: {result['nodes']} nodes, {result['snapshots']} snapshots, edges per snapshot "
        f"min {edges.min() if t else 0} / median {np.median(edges) if t else 0:.0f} / max {edges.max() if t else 0}"
    )
    read = result.get("read") or {}
    if "columns" in read:
        said = (("node_names", "node names"), ("bipartite", "users and items apart"), ("dates", "ISO dates"))
        flags = [say for f, say in said if read.get(f)]
        log(f"columns {read['columns']}" + (f" ({', '.join(flags)})" if flags else ""))
    w = result["windows"]
    log(
        f"windows (W={result['window']}, task {result['task']}): train/val/test {w['train']}/{w['val']}/{w['test']}"
    )
    big = result["largest_training_window"]
    ratio = big["edges"] / big["mean_edges"] if big["mean_edges"] else math.nan
    log(
        f"largest training window: #{big['window']} with {big['nodes']} nodes, {big['edges']} edges "
        f"({ratio:.1f}x the mean), {big['pairs']} training pairs"
    )
    empty = result["empty_snapshots"]
    listed = ", ".join(map(str, empty[:10])) + (", ..." if len(empty) > 10 else "")
    log(f"empty snapshots: {len(empty)}" + (f" ({listed})" if empty else ""))
    s = result["suggestion"]
    if s["aggr_time"] is None:
        log(f"suggested data.aggr_time: none ({s['why']})")
    else:
        log(f"suggested data.aggr_time={s['aggr_time']:.6g} ({s['why']})")


def plot(result: dict, path: str | Path) -> None:
    """Nodes, edges and new edges per snapshot (log scale), empty snapshots marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    snap = result["per_snapshot"]
    x = np.arange(len(snap["edges"]))
    fig, ax = plt.subplots(figsize=(9, 3.5))
    for key, label in (("edges", "edges"), ("new_edges", "new edges"), ("nodes", "active nodes")):
        ax.plot(x, np.maximum(np.asarray(snap[key]), 0.5), label=label, lw=1)
    if result["empty_snapshots"]:
        ax.plot(result["empty_snapshots"], [0.5] * len(result["empty_snapshots"]), "rx", label="empty")
    ax.set_yscale("log")
    ax.set_xlabel("snapshot")
    ax.set_title(f"{result['dataset']}: {result['nodes']} nodes, {result['snapshots']} snapshots")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def write(result: dict, out_dir: str | Path) -> list[Path]:
    """``inspect.json`` and ``inspect.png`` under ``out_dir`` (created) -> the paths written."""
    out = Path(out_dir)
    paths = [out / "inspect.json", out / "inspect.png"]
    with staged():  # both or neither
        make_dirs(out)
        atomic_write_text(paths[0], json_text(result, indent=1) + "\n")
        plot(result, paths[1])
    return paths
