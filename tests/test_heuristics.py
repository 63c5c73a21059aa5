"""History heuristics (research/heuristics.py): scored by the trainer's evaluator, equal to a global brute force."""

import numpy as np
import pytest
from conftest import make_toy_graph

from dygnex_jax.config import DataConfig
from dygnex_jax.data.graph import DynamicGraph
from dygnex_jax.data.windows import WindowSet
from dygnex_jax.evaluation import snapshot_metrics_all, weighted_mean
from dygnex_jax.research.heuristics import KINDS, evaluate


def global_scores(graph, history, kind, weights=None):
    """[N, N] scores of every global pair, computed from the snapshots directly (no local ids)."""
    n = graph.num_nodes
    seen, degree = np.zeros((n, n)), np.zeros(n)
    for t in history:
        s = graph.snapshots[t]
        w = np.ones(len(s)) if weights is None else weights[t]
        for (u, v), x in zip(s, w):
            seen[u, v] += x
            degree[u] += 1
            degree[v] += 1
    pa = np.outer(degree, degree)
    return {"repeat": seen, "degree": pa, "repeat+degree": seen * (pa.max() + 1) + pa}[kind]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("weighted", [False, True])
def test_heuristics_equal_a_global_brute_force(kind, weighted):
    g = make_toy_graph(num_nodes=40, num_snapshots=12, seed=3)
    mult = None
    if weighted:
        rng = np.random.default_rng(0)
        mult = [rng.integers(1, 4, size=len(s)).astype(np.int32) for s in g.snapshots]
        g.multiplicity = mult
    ws = WindowSet(g, DataConfig(window=3, edge_weight="count" if weighted else "none"))
    for split in ("val", "test"):
        (row,) = evaluate(ws, split, [kind], mode="all")
        maps, mrrs, counts = [], [], []
        for k in ws.splits[split]:
            t = int(ws.targets[k])
            hist = range(*ws.history(t).indices(g.num_snapshots))
            ap, mrr, count = snapshot_metrics_all(
                global_scores(g, hist, kind, mult), ws.get(int(k)).positive_codes
            )
            maps.append(ap), mrrs.append(mrr), counts.append(count)
        assert row["snapshots"] == len(counts)
        assert row["map"] == pytest.approx(weighted_mean(maps, counts), rel=1e-12)
        assert row["mrr"] == pytest.approx(weighted_mean(mrrs, counts), rel=1e-12)


def test_repeat_is_perfect_on_a_graph_that_does_not_change():
    rng = np.random.default_rng(1)
    e = np.unique(rng.integers(0, 30, size=(60, 2)), axis=0)
    e = e[e[:, 0] != e[:, 1]].astype(np.int32)
    g = DynamicGraph("still", 30, [e.copy() for _ in range(10)])
    ws = WindowSet(g, DataConfig(window=2))
    (row,) = evaluate(ws, "test", ["repeat"], mode="all")
    assert row["map"] == pytest.approx(1.0)
    # a source's k edges tie at the top: each at the mean rank (k + 1) / 2 (the evaluator's ties)
    k = np.bincount(e[:, 0])
    assert row["mrr"] == pytest.approx(np.mean(2.0 / (k[k > 0] + 1)))
    (deg,) = evaluate(ws, "test", ["degree"], mode="all")
    assert deg["map"] < 1.0  # degree alone cannot tell the edges from non-edges between busy nodes


def test_unknown_heuristic_is_refused():
    ws = WindowSet(make_toy_graph(), DataConfig(window=4))
    with pytest.raises(ValueError, match="kind must be one of"):
        evaluate(ws, "test", ["pagerank"], mode="all")


def test_tool_refuses_an_unknown_cell_in_one_line(tmp_path):
    from helpers import assert_one_line_error, run_tool

    r = run_tool("link_heuristics.py", "--cells", "no_such_cell", "--json", str(tmp_path / "h.json"))
    assert_one_line_error(r, "no config", "configs/repro")
    assert not (tmp_path / "h.json").exists()
