"""The packed graph as a jraph GraphsTuple (models/graph_view.py): on real packed batches of every layout,
the window slots are the graphs (sum(n_node) == N, sum(n_edge) == E, edges ordered by graph, no real edge
joins two windows) and the padding nodes and edges form the last graph, jraph's padding graph; the
operators on a GraphsTuple equal dense references, also on a graph batched and padded by jraph itself."""

import functools

import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pytest
from helpers import dense_gcn
from test_node_reg import trainer as node_trainer
from test_parallel import trainer

from dygnex_jax.graphs import Budget, exact_need, pack_device, pack_node_device
from dygnex_jax.models.graph_view import (
    edge_list_graph,
    flat_graph,
    offset_graph,
    offset_graphs,
    packed_graphs,
)
from dygnex_jax.models.layers import gcn_aggregate, scaled_laplacian
from dygnex_jax.partition import vertex_batch


def _slack(need: Budget) -> Budget:
    """``need`` with room to spare in every dimension: padding nodes, edges and two unused window slots."""
    return Budget(need.nodes + 5, need.edges + 9, need.pairs + 3, need.windows + 2)


@functools.cache
def _link_work():
    tr = trainer("gcrn_gru", 1)
    return tr, tr.device_work(tr.windows.splits["train"][:3], "train", epoch=1)


@functools.cache
def _node_work():
    tr = node_trainer("gcrn_gru", 1)
    return tr, tr.device_work(tr.windows.splits["train"][[0, 2, 5]], "train", epoch=1)


def link_case(layout: str):
    """(packed numpy batch of three toy windows in ``layout``, their DeviceWork)."""
    tr, work = _link_work()
    budget = _slack(exact_need([work], layout=layout))
    return pack_device(work, budget, tr.windows.window, tr.config.train.class_weights, layout), work


def node_case(layout: str):
    """The same for node regression: real-valued inputs, weighted edges, self-loops."""
    tr, work = _node_work()
    budget = _slack(exact_need([work], layout=layout))
    return pack_node_device(work, budget, tr.windows.window, tr.windows.num_features, layout), work


CASES = {"link": link_case, "node_reg": node_case}


def graph_of_each(n_edge) -> np.ndarray:
    """[E] the graph every edge belongs to by jraph's convention: graph g owns the next n_edge[g] edges."""
    n_edge = np.asarray(n_edge)
    return np.repeat(np.arange(len(n_edge)), n_edge)


def check_padding_graph_last(g: jraph.GraphsTuple, real_nodes: np.ndarray, real_edges: int):
    """jraph's own padding helpers read ``g`` as padded by ``pad_with_graphs``: its last graph holds the
    padding nodes and edges, every real node and edge is in the graphs before it."""
    assert int(jraph.get_number_of_padding_with_graphs_graphs(g)) == 1
    assert np.array_equal(np.asarray(jraph.get_node_padding_mask(g)), real_nodes)
    edge_real = np.asarray(jraph.get_edge_padding_mask(g))
    assert edge_real.sum() == real_edges and edge_real[:real_edges].all()
    assert bool(np.asarray(jraph.get_graph_padding_mask(g))[-1]) is False


@pytest.mark.parametrize("task", sorted(CASES))
@pytest.mark.parametrize("layout", ["scan", "last"])
def test_offset_view_invariants(task, layout):
    batch, work = CASES[task](layout)
    n, k = batch["node_window"].shape[0], batch["window_sizes"].shape[0] - 1
    real_nodes = work.real_nodes()
    assert 0 < real_nodes < n - 1 and len(work.windows) < k  # padding nodes and unused window slots
    per_tau = work.real_edges_per_tau(layout)
    jb = {key: jnp.asarray(v) for key, v in batch.items()}
    stacked = offset_graphs(jb)
    t = batch["senders"].shape[0]
    assert stacked.n_node.shape == stacked.n_edge.shape == (t, k + 1) and stacked.globals is None
    for row in range(t):
        tau = row if layout == "scan" else len(per_tau) - 1  # last: the one row is offset W-1
        g = jax.device_get(offset_graph(jb, row))
        s, r, mask = (np.asarray(a) for a in (g.senders, g.receivers, g.edges))
        e = s.shape[0]
        assert np.array_equal(s, batch["senders"][row]) and np.array_equal(mask, batch["edge_mask"][row])
        # the window slots are the graphs, the padding graph last; the sums are the batch's sizes
        assert np.array_equal(g.n_node, batch["window_sizes"]) and int(g.n_node.sum()) == n
        assert int(g.n_edge.sum()) == e and g.n_node[-1] >= 1
        assert g.nodes.shape[0] == n  # the node rows of that offset
        owner = graph_of_each(g.n_edge)
        # edges are ordered by graph and no edge joins two windows: both ends lie in the edge's graph
        assert np.array_equal(owner, batch["node_window"][s])
        assert np.array_equal(owner, batch["node_window"][r])
        real_e = int(per_tau[tau])
        assert real_e > 0 and np.all(owner[:real_e] < len(work.windows))  # real edges: real windows
        assert np.all(owner[real_e:] == k) and np.all(s[real_e:] == n - 1)  # padding edges: padding graph
        assert np.array_equal(g.n_edge[: len(work.windows)], [len(w.edges[tau]) for w in work.windows])
        check_padding_graph_last(g, np.arange(n) < real_nodes, real_e)


@pytest.mark.parametrize("task", sorted(CASES))
def test_flat_view_invariants(task):
    batch, work = CASES[task]("flat")
    n, k1 = batch["node_window"].shape[0], batch["window_sizes"].shape[0]
    w_len = (batch["x"] if "x" in batch else batch["feat"]).shape[0]
    jb = {key: jnp.asarray(v) for key, v in batch.items()}
    g = jax.device_get(flat_graph(jb))
    assert np.asarray(packed_graphs(jb).n_edge).tolist() == g.n_edge.tolist()
    s, r = batch["senders"], batch["receivers"]
    e = s.shape[0]
    assert g.nodes.shape[0] == w_len * n == int(g.n_node.sum()) and int(g.n_edge.sum()) == e
    assert np.array_equal(g.n_node, np.tile(batch["window_sizes"], w_len))
    owner = graph_of_each(g.n_edge)  # (offset, slot) graphs in node-time row order
    row_graph = lambda ids: (ids // n) * k1 + batch["node_window"][ids % n]  # noqa: E731
    assert np.array_equal(owner, row_graph(s)) and np.array_equal(owner, row_graph(r))
    real_e = int(work.real_edges_per_tau("flat").sum())
    assert np.all(owner[real_e:] == w_len * k1 - 1) and np.all(s[real_e:] == w_len * n - 1)
    assert np.all(owner[:real_e] % k1 < len(work.windows))
    real_rows = np.zeros(w_len * n, bool)  # jraph's node mask marks the last graph's rows alone
    real_rows[: (w_len - 1) * n + work.real_nodes()] = True
    check_padding_graph_last(g, real_rows, real_e)
    # the packer orders the flat edges as the scan layout's offsets one after the other
    scan, _ = CASES[task]("scan")
    counts = work.real_edges_per_tau("scan")
    for key, shift in (("senders", n), ("receivers", n), ("edge_mask", 0)):
        rows = [scan[key][tau, :c] + tau * shift for tau, c in enumerate(counts)]
        assert np.array_equal(np.concatenate(rows), batch[key][:real_e]), key


def test_vertex_partition_view_counts_own_edges():
    """Vertex partition: each device's view holds its own rows and received edges (senders are global
    ids into the gathered rows); n_node and n_edge still add up, the padding graph last."""
    _, work = _link_work()
    w_len = len(work.windows[0].edges)
    tight = pack_device(work, exact_need([work]), w_len, (1.0, 1.0))
    parts, budget, _ = vertex_batch(tight, work.real_nodes(), 3, minimum=8)
    for p in range(3):
        local = {key: jnp.asarray(v[p]) for key, v in parts.items()}
        for tau in range(w_len):
            g = jax.device_get(offset_graph(local, tau))
            assert int(g.n_node.sum()) == budget.nodes and int(g.n_edge.sum()) == budget.edges
            own = int((parts["edge_mask"][p, tau] != 0).sum())
            owner = graph_of_each(g.n_edge)
            assert np.array_equal(owner, parts["node_window"][p][parts["receivers"][p, tau]])
            assert np.all(owner[own:] == budget.windows)  # padding edges: the padding graph
            assert np.all(np.asarray(g.senders)[:own] // budget.nodes <= 2)  # global ids over 3 devices


def test_view_without_window_partition_is_one_graph():
    """The snapshot pipeline hands ``advance`` the time keys alone: one graph of all rows and edges."""
    batch, _ = link_case("scan")
    keys = ("feat", "senders", "receivers", "edge_mask")
    g = offset_graphs({key: jnp.asarray(batch[key]) for key in keys})
    w_len, n = batch["feat"].shape
    assert g.n_node.tolist() == [[n]] * w_len and g.n_edge.tolist() == [[batch["senders"].shape[1]]] * w_len


def dense_laplacian(h, s, r, w) -> np.ndarray:
    """-D^-1/2 A D^-1/2 h (self-loops removed, D the weighted out-degrees over senders)."""
    n = len(h)
    a = np.zeros((n, n))
    for si, ri, wi in zip(s, r, w):
        if si != ri:
            a[ri, si] += wi
    deg = a.sum(0)
    inv = np.divide(1.0, np.sqrt(deg), out=np.zeros(n), where=deg > 0)
    return -(np.diag(inv) @ a @ np.diag(inv)) @ h


def small_graph(seed: int, n: int, e: int):
    """A random weighted directed graph (multi-edges possible) with one self-loop: (h [n, 3], senders,
    receivers, weights)."""
    rng = np.random.default_rng(seed)
    s = rng.integers(0, n, e)
    r = (s + rng.integers(1, n, e)) % n  # no other self-loop
    s[0] = r[0] = 1  # a self-loop of its own weight
    w = rng.uniform(0.5, 2.0, e).astype(np.float32)
    return rng.normal(size=(n, 3)).astype(np.float32), s.astype(np.int32), r.astype(np.int32), w


def test_gcn_aggregate_on_a_graphs_tuple_equals_dense():
    h, s, r, w = small_graph(0, 6, 11)
    g = jraph.GraphsTuple(
        nodes=jnp.asarray(h),
        edges=jnp.asarray(w),
        senders=jnp.asarray(s),
        receivers=jnp.asarray(r),
        n_node=jnp.array([6]),
        n_edge=jnp.array([11]),
        globals=None,
    )
    want = dense_gcn(h, s, r, w)
    np.testing.assert_allclose(np.asarray(gcn_aggregate(g)), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(jax.jit(gcn_aggregate)(g)), want, rtol=1e-5, atol=1e-6)
    # an edge list alone, viewed as one graph, is the same operator
    one = edge_list_graph(jnp.asarray(h), jnp.asarray(s), jnp.asarray(r), jnp.asarray(w))
    np.testing.assert_allclose(np.asarray(gcn_aggregate(one)), want, rtol=1e-5, atol=1e-6)
    lap = dense_laplacian(h, s, r, w)
    np.testing.assert_allclose(np.asarray(scaled_laplacian(g)), lap, rtol=1e-5, atol=1e-6)


def test_operators_on_a_jraph_batched_and_padded_graph():
    """Two graphs batched and padded by jraph (``batch`` + ``pad_with_graphs``: padding edges of weight 0
    into the padding graph): every real graph's rows equal its own dense result."""
    parts = [small_graph(1, 5, 9), small_graph(2, 4, 7)]
    graphs = [
        jraph.GraphsTuple(
            nodes=h,
            edges=w,
            senders=s,
            receivers=r,
            n_node=np.array([len(h)]),
            n_edge=np.array([len(s)]),
            globals=None,
        )
        for h, s, r, w in parts
    ]
    padded = jraph.pad_with_graphs(jraph.batch_np(graphs), n_node=12, n_edge=20, n_graph=4)
    assert padded.n_node.tolist() == [5, 4, 3, 0] and padded.n_edge.tolist() == [9, 7, 4, 0]
    g = jax.tree.map(jnp.asarray, padded)
    got_gcn, got_lap = np.asarray(gcn_aggregate(g)), np.asarray(scaled_laplacian(g))
    lo = 0
    for h, s, r, w in parts:
        rows = slice(lo, lo + len(h))
        np.testing.assert_allclose(got_gcn[rows], dense_gcn(h, s, r, w), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_lap[rows], dense_laplacian(h, s, r, w), rtol=1e-5, atol=1e-6)
        lo += len(h)


def test_gcn_aggregate_on_a_packed_offset_equals_dense_per_window():
    """A real packed offset (graph_view): every window's rows equal the dense GCN of that window alone."""
    batch, work = node_case("scan")  # weighted edges, self-loops
    jb = {key: jnp.asarray(v) for key, v in batch.items()}
    tau = 1
    h = np.random.default_rng(0).normal(size=(batch["node_window"].shape[0], 4)).astype(np.float32)
    g = offset_graph(jb, tau, jnp.asarray(h))
    got = np.asarray(gcn_aggregate(g))
    lo = 0
    for j, win in enumerate(work.windows):
        m = win.num_local
        edges = win.edges[tau]
        w = np.broadcast_to(np.asarray(win.weights[tau], np.float32), len(edges))
        want = dense_gcn(h[lo : lo + m], edges[:, 0], edges[:, 1], w)
        np.testing.assert_allclose(got[lo : lo + m], want, rtol=1e-5, atol=1e-5, err_msg=f"window {j}")
        lo += m
