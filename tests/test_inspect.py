"""``python -m dygnex_jax inspect``: per-snapshot figures, the largest window, the aggr_time suggestion."""

import json

import numpy as np

from dygnex_jax.__main__ import main
from dygnex_jax.config import load_config
from dygnex_jax.data.graph import DynamicGraph
from dygnex_jax.inspect_data import EMPTY_SHARE, inspect, snapshot_table, suggest_aggr_time


def graph_of(snaps, times=None, bucketing="aggr_time", aggr_time=10.0) -> DynamicGraph:
    arrays = [np.asarray(s, np.int32).reshape(-1, 2) for s in snaps]
    n = 1 + max((int(a.max()) for a in arrays if len(a)), default=0)
    info = {"bucketing": bucketing, "aggr_time": aggr_time}
    t = None if times is None else np.asarray(times, np.float64)
    return DynamicGraph("g", n, arrays, times=t, info=info)


def test_snapshot_table_counts_nodes_edges_and_first_seen_pairs():
    g = graph_of([[(0, 1), (1, 2)], [], [(0, 1), (2, 3)], [(1, 2), (0, 1), (3, 0)]], times=[0, 10, 20, 30])
    table = snapshot_table(g)
    assert table["edges"].tolist() == [2, 0, 2, 3]
    assert table["nodes"].tolist() == [3, 0, 4, 4]
    # (0,1) and (1,2) are new at 0; (2,3) new at 2; (3,0) new at 3
    assert table["new_edges"].tolist() == [2, 0, 1, 1]
    assert table["time"].tolist() == [0, 10, 20, 30]


def test_suggestion_keeps_a_dense_series_and_widens_a_sparse_one():
    window = 2
    dense = np.full(40, 5)
    g = graph_of([[(0, 1)]] * 40, times=np.arange(40) * 10.0)
    assert suggest_aggr_time(g, dense, window)["aggr_time"] == 10.0
    sparse = np.tile([3, 0, 0], 40)  # two in three empty: 3x wider has none empty
    g = graph_of([[(0, 1)]] * 120, times=np.arange(120) * 10.0)
    got = suggest_aggr_time(g, sparse, window)
    assert got["aggr_time"] == 30.0
    merged = sparse[:120].reshape(40, 3).sum(1)
    assert np.mean(merged == 0) <= EMPTY_SHARE
    # no whole multiple both fills the empties and keeps window + MIN_WINDOWS snapshots
    hopeless = np.array([1] + [0] * 59)
    g = graph_of([[(0, 1)]] * 60, times=np.arange(60) * 10.0)
    assert suggest_aggr_time(g, hopeless, window)["aggr_time"] is None
    native = graph_of([[(0, 1)]] * 60, bucketing="snapshot_column")
    assert suggest_aggr_time(native, hopeless, window)["aggr_time"] is None


def test_a_stream_read_by_distinct_times_gets_a_width_from_its_times():
    """No data.aggr_time: one snapshot per distinct time (uneven gaps: 10, 20, 10, 20, ...). On the grid
    of the median gap (10) one cell in three is empty; the smallest whole multiple whose cells all hold
    a time is 2 (20-wide cells), which the suggestion picks."""
    times = np.array(
        [t for t in range(0, 1200, 10) if (t // 10) % 3 != 2], np.float64
    )  # cells 2, 5, ... empty
    g = graph_of([[(0, 1)]] * len(times), times=times, bucketing="distinct_times", aggr_time=0.0)
    got = suggest_aggr_time(g, np.full(len(times), 4), window=2)
    assert not np.any(np.bincount((times // 20).astype(int)) == 0)  # 20-wide cells: none empty
    assert np.any(np.bincount((times // 10).astype(int)) == 0)  # 10-wide: some empty
    assert got["aggr_time"] == 20.0 and got["why"].startswith(
        "one snapshot per distinct time now (80, uneven"
    )
    even = np.arange(0, 600, 10, dtype=np.float64)
    g = graph_of([[(0, 1)]] * len(even), times=even, bucketing="distinct_times", aggr_time=0.0)
    got = suggest_aggr_time(g, np.full(len(even), 4), window=2)
    assert got["aggr_time"] == 10.0 and got["why"].startswith(
        "one snapshot per distinct time now (60, evenly"
    )


def test_inspect_cli_writes_figures_that_match_the_data(tmp_path, capsys):
    rows = [f"{i % 5} {(i * 2 + 1) % 5} {t}" for t in range(0, 300, 10) for i in range(3)]
    rows += [f"{i} {i + 5} {305 + i}" for i in range(4)]  # a denser last snapshot
    edges = tmp_path / "e.txt"
    edges.write_text("\n".join(rows) + "\n")
    argv = ["data.dataset=edges", f"data.path={edges}", "data.aggr_time=20", "data.window=3"]
    assert main(["inspect", "--out", str(tmp_path / "out"), *argv]) == 0
    printed = capsys.readouterr().out
    result = json.loads((tmp_path / "out" / "inspect.json").read_text())
    assert (tmp_path / "out" / "inspect.png").stat().st_size > 0
    want = inspect(load_config(None, argv))
    assert result == json.loads(json.dumps(want))
    snap = result["per_snapshot"]
    assert len(snap["edges"]) == result["snapshots"] == 16  # 0..309 in 20 s buckets
    # every (directed, symmetric) pair is new exactly once over the series
    pairs = set()
    for r in rows:
        u, v, _ = r.split()
        pairs |= {(int(u), int(v)), (int(v), int(u))} if u != v else set()
    assert sum(snap["new_edges"]) == len(pairs)
    assert f"{result['snapshots']} snapshots" in printed and "suggested data.aggr_time" in printed
    w = result["windows"]
    assert w["train"] + w["val"] + w["test"] == result["snapshots"] - 3  # W = 3, link lag 1
    big = result["largest_training_window"]
    assert big["edges"] >= big["mean_edges"] > 0


def test_inspect_imports_no_jax():
    """``inspect`` reads data only: importing it (and what it imports) loads no JAX."""
    import subprocess
    import sys

    code = (
        "import sys, dygnex_jax.inspect_data; print(sorted(m for m in ('jax', 'flax') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
