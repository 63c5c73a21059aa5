"""Windows: chronological split, local ids, training negatives, packing round trip."""

import numpy as np
import pytest
from conftest import make_toy_graph

from dygnex_jax.config import DataConfig
from dygnex_jax.data.windows import WindowSet
from dygnex_jax.errors import UserError
from dygnex_jax.graphs import DeviceWork, pack_device, step_budget


def windows(**kw):
    return WindowSet(make_toy_graph(), DataConfig(window=4, **kw))


def test_split_is_chronological_and_complete():
    ws = windows()
    ids = np.concatenate([ws.splits[s] for s in ("train", "val", "test")])
    np.testing.assert_array_equal(ids, np.arange(len(ws)))
    assert ws.targets[ws.splits["train"]].max() < ws.targets[ws.splits["test"]].min()
    np.testing.assert_array_equal(ws.targets, np.arange(4, 16))


def test_local_window_maps_back_to_the_snapshots():
    ws = windows()
    g = ws.graph
    for k in range(len(ws)):
        win = ws.get(k)
        for tau, e in enumerate(win.edges):
            np.testing.assert_array_equal(win.nodes[e], g.snapshots[win.target - 4 + tau])
        inactive = np.setdiff1d(np.arange(g.num_nodes), win.nodes)
        assert (win.to_local(inactive) == len(win.nodes)).all()
        np.testing.assert_array_equal(win.to_local(win.nodes), np.arange(len(win.nodes)))
        deg = np.bincount(g.snapshots[win.target - 1][:, 1], minlength=g.num_nodes)[win.nodes]
        np.testing.assert_array_equal(win.feat[-1, :-1], np.minimum(deg, ws.num_features - 1))


@pytest.mark.parametrize("sampling", ["active", "uniform"])
def test_training_negatives_are_non_edges(sampling):
    ws = windows(neg_sampling=sampling)
    k = int(ws.splits["train"][-1])
    win = ws.get(k)
    pairs, labels = ws.training_pairs(k, neg_mult=5, seed=0, epoch=3)
    assert labels.sum() == len(win.positives) and (labels == 0).sum() == 5 * len(win.positives)
    neg = pairs[labels == 0]
    bg = len(win.nodes)
    if sampling == "active":
        assert (neg[:, 0] != neg[:, 1]).all() and neg.max() < bg
        codes = win.nodes[neg[:, 0]] * ws.graph.num_nodes + win.nodes[neg[:, 1]]
        assert not np.isin(codes, win.positive_codes).any()
    else:  # the background node appears about as often as inactive nodes are common
        both_active = (neg < bg).all(axis=1)
        codes = win.nodes[neg[both_active, 0]] * ws.graph.num_nodes + win.nodes[neg[both_active, 1]]
        assert not np.isin(codes, win.positive_codes).any()
        assert (neg[both_active, 0] != neg[both_active, 1]).all()
        share = (neg == bg).mean()
        assert abs(share - (1 - bg / ws.graph.num_nodes)) < 0.1
    again, _ = ws.training_pairs(k, neg_mult=5, seed=0, epoch=3)
    other, _ = ws.training_pairs(k, neg_mult=5, seed=0, epoch=4)
    np.testing.assert_array_equal(pairs, again)
    assert not np.array_equal(pairs, other)


def test_costs_match_the_windows():
    ws = windows(neg_mult=3)
    c = ws.costs("train", 3)
    for row, k in zip(c, ws.splits["train"]):
        win = ws.get(int(k))
        assert row[0] == win.num_local and row[1] == sum(len(e) for e in win.edges)
        assert row[2] == 4 * len(win.positives)


def test_pack_round_trip():
    ws = windows()
    ids = [0, 3, 5]
    wins = [ws.get(k) for k in ids]
    samples = [ws.training_pairs(k, 2, 0, 1) for k in ids]
    work = DeviceWork(wins, [s[0] for s in samples], [s[1] for s in samples])
    budget = step_budget([work], 1.25, 16, window_slots=4)
    b = pack_device(work, budget, 4, class_weights=(0.25, 0.75))
    off = 0
    q = 0
    for j, (win, (pairs, labels)) in enumerate(zip(wins, samples)):
        m = win.num_local
        assert (b["node_window"][off : off + m] == j).all() and b["window_sizes"][j] == m
        np.testing.assert_array_equal(b["feat"][:, off : off + m], win.feat)
        for tau, e in enumerate(win.edges):
            mask = (b["edge_mask"][tau] > 0) & (b["senders"][tau] >= off) & (b["senders"][tau] < off + m)
            got = np.stack([b["senders"][tau][mask], b["receivers"][tau][mask]], 1) - off
            np.testing.assert_array_equal(got, e)
        np.testing.assert_array_equal(b["pair_src"][q : q + len(pairs)] - off, pairs[:, 0])
        np.testing.assert_array_equal(b["pair_label"][q : q + len(pairs)], labels)
        np.testing.assert_allclose(b["pair_weight"][q : q + len(pairs)], np.where(labels == 1, 0.75, 0.25))
        off += m
        q += len(pairs)
    pad = budget.nodes - 1
    assert (b["node_window"][off:] == budget.windows).all() and b["window_sizes"][-1] == budget.nodes - off
    assert (b["senders"][b["edge_mask"] == 0] == pad).all() and (b["pair_weight"][q:] == 0).all()


def test_window_longer_than_series():
    with pytest.raises(UserError, match="data.window=40"):
        WindowSet(make_toy_graph(), DataConfig(window=40))


@pytest.mark.parametrize("seed,n", [(0, 40), (1, 200), (2, 800), (3, 500), (4, 3000), (5, 20_000)])
def test_fast_lookups_equal_binary_search(seed, n):
    """Millions of sampled pairs per step are mapped to local ids by a table and checked against the
    target's edges by a bitmap: the same answers as binary search (the small-input path) and np.isin,
    for ids inside and outside the window, codes below, inside and above the reference's range."""
    from dygnex_jax.data.windows import LocalWindow, _isin_sorted

    rng = np.random.default_rng(seed)
    nodes = np.unique(rng.integers(0, n, int(rng.integers(1, n))))
    win = LocalWindow(0, 0, nodes, [], np.zeros((1, len(nodes) + 1), np.int32), np.zeros((0, 2)), np.zeros(0))
    ids = rng.integers(0, n + 10, int(rng.integers(1024, 20_000)))  # a table unless n > 4 ids a query
    small = np.concatenate([win.to_local(ids[i : i + 500]) for i in range(0, len(ids), 500)])  # searched
    fast = win.to_local(ids)
    assert fast.dtype == small.dtype == np.int32
    np.testing.assert_array_equal(fast, small)
    inside = np.isin(ids, nodes)
    np.testing.assert_array_equal(nodes[fast[inside]], ids[inside])
    assert (fast[~inside] == len(nodes)).all()

    ref = np.unique(rng.integers(n, n * n, int(rng.integers(1, 3000))))
    values = np.concatenate([rng.integers(0, n * n + n, 30_000), ref[:: max(1, len(ref) // 50)], [0, n * n]])
    want = np.isin(values, ref)
    assert (ref[-1] - ref[0] <= 32 * len(values)) == (n <= 800)  # the bitmap, or a range too wide for it
    np.testing.assert_array_equal(_isin_sorted(values, ref), want)
    np.testing.assert_array_equal(
        np.concatenate([_isin_sorted(v, ref) for v in np.array_split(values, 64)]), want
    )
    assert not _isin_sorted(values, ref[:0]).any()


@pytest.mark.parametrize("sampling", ["active", "uniform", "evolvegcn"])
def test_negatives_of_a_graph_whose_pair_codes_pass_int32(sampling):
    """Pair codes src * N + dst of 60,000 nodes pass 2^31: computed in int32 (node ids are int32) they
    wrap, the target's edges are not recognised, and edges come back as negatives. Twelve nodes of high id
    linked almost completely, so that most candidates among them are edges."""
    from dygnex_jax.data.graph import DynamicGraph

    ids = np.arange(50_000, 50_012, dtype=np.int32)
    pairs = np.array([(a, b) for a in ids for b in ids if a != b and (a - b) % 12 != 5], np.int32)
    graph = DynamicGraph("wide", 60_000, [pairs] * 16)
    ws = WindowSet(graph, DataConfig(window=3, neg_sampling=sampling))
    k = int(ws.splits["train"][-1])
    win = ws.get(k)
    neg = ws._negatives(k, 4, seed=0, epoch=1)
    assert len(neg) == 4 * len(win.positives) and neg.dtype == np.int64
    assert (neg[:, 0] != neg[:, 1]).all()
    codes = neg[:, 0].astype(np.int64) * graph.num_nodes + neg[:, 1]
    assert not np.isin(codes, win.positive_codes).any()
    if sampling != "uniform":  # every candidate among the twelve: only their 12 non-edges qualify
        assert set(map(tuple, neg.tolist())) <= {
            (a, b) for a in ids for b in ids if a != b and (a - b) % 12 == 5
        }
