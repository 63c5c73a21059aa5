"""Packed per-device batches: padding budgets and masks (host-side numpy).

A device's windows are packed as one graph per time offset tau: the snapshot-tau graphs of all its
windows form a disjoint union, nodes contiguous per window (window slot j owns nodes
``offset_j .. offset_j + n_j - 1``). The edges are laid out per offset ([W, E], ``scan`` layout) or
as one list over the [W x N] node-time grid ([E], ``flat`` layout, for models whose graph operators
do not read the recurrent state); see padding.py for what each costs. All devices are padded to one
budget: in training one of the run's planned budgets (padding.plan_budgets), elsewhere the step's
need rounded up to a shape bucket; either way the compiled step is the same on every device. Padding
edges connect the last node, which is always a padding node, to itself with mask 0; padding pairs have
weight 0; padding windows own no node. Padding never changes an output (tests/test_models.py and
tests/test_flat_layout.py prove it). The models see a time offset's graph as a ``jraph.GraphsTuple``
(models/graph_view.py): the window slots are its graphs (``n_node`` = ``window_sizes``), the padding
rows and padding edges its last graph, jraph's padding graph (tests/test_graphs_tuple.py).

Axis letters: P devices, W time offsets, N nodes, E edges per time offset, Q target pairs, K windows.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .data.windows import LocalWindow
from .padding import Budget, bucket, bucketed, check_layout, device_need, step_need
from .padding import padded_work as _padded_work

__all__ = [
    "Budget",
    "DeviceWork",
    "bucket",
    "pack_device",
    "pack_node_device",
    "step_budget",
    "stack_devices",
]


@dataclasses.dataclass
class DeviceWork:
    """What one device runs in a step, before padding."""

    windows: list[LocalWindow]  # node_reg: NodeWindow (data/node_windows.py)
    pairs: list[np.ndarray]  # per window [Q_j, 2] local pairs (may be empty); node_reg: [Q_j] target nodes
    labels: list[np.ndarray]  # per window [Q_j] int labels; node_reg: [Q_j] float target values

    def real_nodes(self) -> int:
        return sum(w.num_local for w in self.windows)

    def real_edges_per_tau(self, layout: str = "scan") -> np.ndarray:
        """[W] edges of every time offset summed over the windows (``last`` layout: the last offset's
        alone, the others are not packed)."""
        if not self.windows:
            return np.zeros(0, np.int64)
        e = np.sum([[len(e) for e in w.edges] for w in self.windows], axis=0)
        if layout == "last":
            e[:-1] = 0
        return e

    def real_pairs(self) -> int:
        return sum(len(p) for p in self.pairs)


def work_need(work: DeviceWork, layout: str = "scan") -> Budget:
    """The exact budget one device's work needs (``padding.device_need``)."""
    return device_need(
        work.real_nodes(), work.real_edges_per_tau(layout), work.real_pairs(), len(work.windows), layout
    )


def exact_need(work: list[DeviceWork], window_slots: int = 0, layout: str = "scan") -> Budget:
    """The exact budget a step needs: the element-wise maximum of its devices' needs."""
    return step_need([work_need(d, layout) for d in work], window_slots)


def step_budget(
    work: list[DeviceWork], ratio: float, minimum: int, window_slots: int = 0, layout: str = "scan"
) -> Budget:
    """Smallest bucketed budget that holds every device's work (+1 node kept for padding).

    ``window_slots``: a fixed window-slot budget for a whole run (e.g. ceil(B / P)), so that this
    dimension never causes a recompilation; 0 = the step's maximum.
    """
    return bucketed(exact_need(work, window_slots, layout), ratio, minimum)


def _pack_graph(work: DeviceWork, budget: Budget, window_len: int, arrays: dict, place, layout: str) -> dict:
    """The packing both tasks share: window j's nodes take the next contiguous range of packed ids and
    its edges follow the previous windows' edges; the rest is padding. ``arrays``: the task's own
    per-node and per-target arrays (already filled with their padding values); ``place(out, j, lo, m,
    q0)`` writes window j's entries of them (its nodes at ``lo : lo + m``, its targets from ``q0``). An
    edge's mask is 1, or its weight where the window has ``weights``.

    ``layout`` (see padding.py): ``scan`` gives edges per time offset [W, E] in packed node ids;
    ``flat`` gives all offsets' edges in one list [E] of node-time ids ``tau * N + node``, ordered by
    offset, then window, like the node-time rows (padding edges last, joining the last offset's padding
    node, ``W * N - 1``, to itself); ``last`` gives the last offset's
    edges alone, [1, E] in packed node ids (the scan layout's last row: a model tells it by its one
    row against W offsets of node inputs)."""
    check_layout(layout)
    n, e, q, k, w = budget.nodes, budget.edges, budget.pairs, budget.windows, window_len
    flat = layout == "flat"  # one list over the node-time grid
    pad = w * n - 1 if flat else n - 1
    shape = (e,) if flat else (1, e) if layout == "last" else (w, e)
    out = {
        "senders": np.full(shape, pad, np.int32),
        "receivers": np.full(shape, pad, np.int32),
        "edge_mask": np.zeros(shape, np.float32),
        "node_window": np.full(n, k, np.int32),
        "window_sizes": np.zeros(k + 1, np.int32),
        "node_count": np.zeros(n, np.int32),
        **arrays,
    }
    if len(work.windows) > k:
        raise ValueError(f"{len(work.windows)} windows exceed the budget of {k}")
    node_off, pair_off, edge_off = 0, 0, np.zeros(w, np.int64)
    if flat:  # window j's edges of offset tau start after every edge of earlier offsets and windows
        counts = np.array([[len(x) for x in win.edges] for win in work.windows], np.int64).reshape(-1, w).T
        flat_start = (np.cumsum(counts) - counts.ravel()).reshape(counts.shape)  # [W, K_real]
    for j, (win, targets) in enumerate(zip(work.windows, work.pairs)):
        m, nq = win.num_local, len(targets)
        if node_off + m >= n or pair_off + nq > q:
            raise ValueError("the work does not fit the budget")
        out["node_window"][node_off : node_off + m] = j
        out["window_sizes"][j] = m
        weights = getattr(win, "weights", None)
        for tau, edges in enumerate(win.edges):
            if layout == "last" and tau < w - 1:
                continue  # the model's output reads the last offset's graph alone
            mask = 1.0 if weights is None else weights[tau]
            if flat:
                lo, hi = flat_start[tau, j], flat_start[tau, j] + len(edges)
                if hi > e:
                    raise ValueError("the work does not fit the budget")
                base = tau * n + node_off
                out["senders"][lo:hi] = edges[:, 0] + base
                out["receivers"][lo:hi] = edges[:, 1] + base
                out["edge_mask"][lo:hi] = mask
                continue
            row = 0 if layout == "last" else tau  # last: the one row holds offset W-1
            lo, hi = edge_off[tau], edge_off[tau] + len(edges)
            if hi > e:
                raise ValueError("the work does not fit the budget")
            out["senders"][row, lo:hi] = edges[:, 0] + node_off
            out["receivers"][row, lo:hi] = edges[:, 1] + node_off
            out["edge_mask"][row, lo:hi] = mask
            edge_off[tau] = hi
        place(out, j, node_off, m, pair_off)
        node_off += m
        pair_off += nq
    out["window_sizes"][k] = n - node_off
    return out


def pack_device(
    work: DeviceWork, budget: Budget, window_len: int, class_weights=(1.0, 1.0), layout: str = "scan"
) -> dict:
    """One device's padded arrays (``layout``: see ``_pack_graph``; flat edges are [E] node-time ids).

    Returns a dict of numpy arrays:
      feat: int32 [W, N] node input category per time offset (0 for padding nodes).
      senders, receivers: int32 [W, E] packed local node ids; padding edges are (N-1, N-1).
      edge_mask: float32 [W, E] 1 for real edges.
      node_window: int32 [N] window slot of every node, K for padding nodes.
      window_sizes: int32 [K+1] nodes per window slot, the last entry = padding nodes (for ragged ops).
      node_count: int32 [N] graph nodes a packed node stands for: 1 for an active node, the number of
        inactive nodes for a window's background node, 0 for padding nodes.
      pair_src, pair_dst: int32 [Q] packed local ids of target pairs; padding pairs are (N-1, N-1).
      pair_label: int32 [Q] 1 edge / 0 non-edge.
      pair_weight: float32 [Q] class weight of the label for real pairs, 0 for padding.
    """
    n, q, pad = budget.nodes, budget.pairs, budget.nodes - 1
    cw = np.asarray(class_weights, np.float32)
    arrays = {
        "feat": np.zeros((window_len, n), np.int32),
        "pair_src": np.full(q, pad, np.int32),
        "pair_dst": np.full(q, pad, np.int32),
        "pair_label": np.zeros(q, np.int32),
        "pair_weight": np.zeros(q, np.float32),
    }

    def place(out, j, lo, m, q0):
        win, pairs, labels = work.windows[j], work.pairs[j], work.labels[j]
        out["feat"][:, lo : lo + m] = win.feat
        out["node_count"][lo : lo + m - 1] = 1
        out["node_count"][lo + m - 1] = win.inactive
        q1 = q0 + len(pairs)
        out["pair_src"][q0:q1] = pairs[:, 0] + lo
        out["pair_dst"][q0:q1] = pairs[:, 1] + lo
        out["pair_label"][q0:q1] = labels
        out["pair_weight"][q0:q1] = cw[labels]

    return _pack_graph(work, budget, window_len, arrays, place, layout)


def stack_devices(arrays: list[dict]) -> dict:
    """Per-device dicts -> one dict with a leading P axis."""
    return {key: np.stack([a[key] for a in arrays]) for key in arrays[0]}


def node_offsets(work: DeviceWork) -> np.ndarray:
    """[K_real] first packed node id of every window on a device."""
    sizes = [w.num_local for w in work.windows]
    return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if sizes else np.zeros(0, np.int64)


def padded_work(budget: Budget, window_len: int, layout: str = "scan") -> np.ndarray:
    """[3] (nodes, edges summed over time, pairs) one device runs under this budget (padding.py)."""
    return _padded_work(budget, window_len, layout)


def real_work(work: DeviceWork, layout: str = "scan") -> np.ndarray:
    """[3] (nodes, edges summed over time, pairs) of real work on one device in ``layout``."""
    edges = work.real_edges_per_tau(layout).sum()
    return np.array([work.real_nodes(), edges, work.real_pairs()], np.float64)


def pack_node_device(
    work: DeviceWork, budget: Budget, window_len: int, num_features: int, layout: str = "scan"
) -> dict:
    """One device's padded arrays for node regression (``data.task: node_reg``); the budget's pairs are
    target nodes.

    Returns a dict of numpy arrays:
      x: float32 [W, N, F] node inputs (lagged signal values; 0 for padding nodes).
      senders, receivers: int32 [W, E] packed node ids; padding edges are (N-1, N-1).
      edge_mask: float32 [W, E] the edge weight of real edges, 0 for padding edges.
      node_window: int32 [N] window slot of every node, K for padding nodes.
      window_sizes: int32 [K+1] nodes per window slot, the last entry = padding nodes.
      node_count: int32 [N] 1 for real nodes, 0 for padding nodes.
      target_node: int32 [Q] packed ids of target nodes; padding targets are N-1.
      target_value: float32 [Q] the signal to predict (0 for padding).
      target_weight: float32 [Q] 1 for real targets, 0 for padding.
    """
    n, q, pad = budget.nodes, budget.pairs, budget.nodes - 1
    arrays = {
        "x": np.zeros((window_len, n, num_features), np.float32),
        "target_node": np.full(q, pad, np.int32),
        "target_value": np.zeros(q, np.float32),
        "target_weight": np.zeros(q, np.float32),
    }

    def place(out, j, lo, m, q0):
        nodes, values = work.pairs[j], work.labels[j]
        out["x"][:, lo : lo + m] = work.windows[j].x
        out["node_count"][lo : lo + m] = 1
        q1 = q0 + len(nodes)
        out["target_node"][q0:q1] = nodes + lo
        out["target_value"][q0:q1] = values
        out["target_weight"][q0:q1] = 1.0

    return _pack_graph(work, budget, window_len, arrays, place, layout)
