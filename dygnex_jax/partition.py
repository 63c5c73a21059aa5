"""Host-side batches of the two communication-bound baselines (numpy only; the steps are in parallel.py).

* Snapshot partition (ESDG-style): the W time offsets are split into P contiguous ranges of
  T = ceil(W / P) offsets, right-aligned so that the last device always ends at offset W - 1; the
  P T - W missing offsets are padding at the start of device 0's range (``valid`` = False there, and
  the model keeps its carry through them). Every device gets the same M micro-batches (the standard
  packed layout of ``graphs.pack_device``) and only its own offsets of them.
* Vertex partition: the step's windows are packed as one graph per offset (the single-device layout)
  and its nodes are split into P contiguous ranges, by count (``contiguous``) or at equal cumulative
  load 1 + in-degree summed over offsets (``degree``). Device p holds its nodes' inputs in every
  snapshot and the edges whose receiver it owns; senders and target pairs are given as *global* ids,
  node i of device p being row ``p n + i`` of the gathered ``[P n, ...]`` arrays. The target pairs are
  split evenly by count over the devices.

Axis letters as in graphs.py: P devices, M micro-batches, W time offsets, T offsets per device,
N nodes (n per device), E edges per offset, Q target pairs.
"""

from __future__ import annotations

import math

import numpy as np

from .graphs import Budget, DeviceWork, bucket, pack_device

TIME_KEYS = ("feat", "senders", "receivers", "edge_mask")


def time_ranges(window: int, n_devices: int) -> tuple[np.ndarray, np.ndarray]:
    """Offsets of every device: (index [P, T] into 0..W-1, valid [P, T]), T = ceil(W / P)."""
    t = math.ceil(window / n_devices)
    idx = np.arange(n_devices * t) - (n_devices * t - window)
    valid = idx >= 0
    return np.maximum(idx, 0).reshape(n_devices, t), valid.reshape(n_devices, t)


def pipeline_batch(micro: dict[str, np.ndarray], window: int, n_devices: int) -> dict[str, np.ndarray]:
    """[M, ...] packed micro-batches (``graphs.stack_devices`` layout) -> snapshot-partition batch.

    Returns a dict with a leading P axis: ``feat`` [P, M, T, N], ``senders``/``receivers``/
    ``edge_mask`` [P, M, T, E], ``valid`` bool [P, M, T], and every other key copied to every device
    ([P, M, ...]).
    """
    idx, valid = time_ranges(window, n_devices)
    out = {k: np.stack([micro[k][:, idx[p]] for p in range(n_devices)]) for k in TIME_KEYS}
    m = micro["feat"].shape[0]
    out["valid"] = np.broadcast_to(valid[:, None, :], (n_devices, m, valid.shape[1])).copy()
    for k, v in micro.items():
        if k not in TIME_KEYS:
            out[k] = np.broadcast_to(v[None], (n_devices, *v.shape)).copy()
    return out


def bubble_fraction(micro_batches: int, n_devices: int, window: int) -> float:
    """Share of device-ticks that do no real work: the pipeline bubble (P-1)/(M+P-1), and the padded
    offsets of the time split on top."""
    t = math.ceil(window / n_devices)
    useful = micro_batches * window
    return 1.0 - useful / ((micro_batches + n_devices - 1) * n_devices * t)


def node_ranges(packed: dict[str, np.ndarray], real_nodes: int, n_devices: int, balance: str) -> np.ndarray:
    """[P + 1] boundaries of the device node ranges over the ``real_nodes`` packed nodes."""
    if balance == "contiguous":
        return np.array([round(p * real_nodes / n_devices) for p in range(n_devices + 1)], np.int64)
    if balance != "degree":
        raise ValueError(f"unknown vertex balance {balance!r}: contiguous or degree")
    recv = packed["receivers"][packed["edge_mask"] > 0]
    load = 1.0 + np.bincount(recv, minlength=real_nodes)[:real_nodes]
    cum = np.concatenate([[0.0], np.cumsum(load)])
    cuts = np.searchsorted(cum, cum[-1] * np.arange(1, n_devices) / n_devices)
    return np.concatenate([[0], np.clip(cuts, 0, real_nodes), [real_nodes]]).astype(np.int64)


def vertex_batch(
    packed: dict[str, np.ndarray],
    real_nodes: int,
    n_devices: int,
    *,
    balance: str = "contiguous",
    ratio: float = 1.25,
    minimum: int = 64,
) -> tuple[dict[str, np.ndarray], Budget, np.ndarray]:
    """One device's packed step (``graphs.pack_device`` output, every window of the step) -> the vertex
    partition of it.

    Returns (batch with a leading P axis, in the keys of ``pack_device``; the per-device budget
    (n, E, Q, K); real work [P, 3] (own nodes, own edges summed over offsets, own pairs)).
    """
    w = packed["feat"].shape[0]
    bounds = node_ranges(packed, real_nodes, n_devices, balance)
    counts = np.diff(bounds)
    owner = np.searchsorted(bounds, np.arange(real_nodes), side="right") - 1
    mask = packed["edge_mask"] > 0
    e_own = np.zeros((n_devices, w), np.int64)
    for tau in range(w):
        e_own[:, tau] = np.bincount(owner[packed["receivers"][tau][mask[tau]]], minlength=n_devices)
    real_pairs = packed["pair_weight"] > 0
    pair_ids = np.flatnonzero(real_pairs)
    pair_parts = np.array_split(pair_ids, n_devices)
    k = len(packed["window_sizes"]) - 1
    budget = Budget(
        nodes=bucket(int(counts.max()) + 1, ratio, minimum),
        edges=bucket(max(int(e_own.max()), 1), ratio, minimum),
        pairs=bucket(max(max(len(q) for q in pair_parts), 1), ratio, minimum),
        windows=k,
    )
    n, e, q = budget.nodes, budget.edges, budget.pairs
    glob = owner * n + (np.arange(real_nodes) - bounds[owner])  # packed id -> global row
    out = {
        "feat": np.zeros((n_devices, w, n), np.int32),
        "senders": np.zeros((n_devices, w, e), np.int32),
        "receivers": np.full((n_devices, w, e), n - 1, np.int32),
        "edge_mask": np.zeros((n_devices, w, e), np.float32),
        "node_window": np.full((n_devices, n), k, np.int32),
        "window_sizes": np.zeros((n_devices, k + 1), np.int32),
        "pair_src": np.zeros((n_devices, q), np.int32),
        "pair_dst": np.zeros((n_devices, q), np.int32),
        "pair_label": np.zeros((n_devices, q), np.int32),
        "pair_weight": np.zeros((n_devices, q), np.float32),
    }
    for p in range(n_devices):
        lo, hi = bounds[p], bounds[p + 1]
        out["senders"][p] = p * n + n - 1  # padding edges: own padding node to itself
        out["feat"][p, :, : hi - lo] = packed["feat"][:, lo:hi]
        out["node_window"][p, : hi - lo] = packed["node_window"][lo:hi]
        out["window_sizes"][p] = np.bincount(out["node_window"][p], minlength=k + 1)
        for tau in range(w):
            keep = mask[tau] & (owner[np.minimum(packed["receivers"][tau], real_nodes - 1)] == p)
            keep &= packed["receivers"][tau] < real_nodes
            m = int(keep.sum())
            out["senders"][p, tau, :m] = glob[packed["senders"][tau][keep]]
            out["receivers"][p, tau, :m] = packed["receivers"][tau][keep] - lo
            out["edge_mask"][p, tau, :m] = 1.0
        ids = pair_parts[p]
        out["pair_src"][p, : len(ids)] = glob[packed["pair_src"][ids]]
        out["pair_dst"][p, : len(ids)] = glob[packed["pair_dst"][ids]]
        out["pair_label"][p, : len(ids)] = packed["pair_label"][ids]
        out["pair_weight"][p, : len(ids)] = packed["pair_weight"][ids]
    real = np.stack([counts, e_own.sum(axis=1), [len(q) for q in pair_parts]], axis=1).astype(np.float64)
    return out, budget, real


def vertex_step(
    work: DeviceWork, n_devices: int, par, window: int, max_windows: int, class_weights=(1.0, 1.0)
) -> tuple[dict[str, np.ndarray], Budget, np.ndarray]:
    """All windows of a step -> ``vertex_batch`` of their single-device packing (``par``: the
    ``parallel`` config section: vertex_balance, bucket_ratio, min_bucket)."""
    edges = int(work.real_edges_per_tau().max(initial=0))
    tight = Budget(work.real_nodes() + 1, max(edges, 1), max(work.real_pairs(), 1), max_windows)
    packed = pack_device(work, tight, window, class_weights)
    return vertex_batch(
        packed,
        work.real_nodes(),
        n_devices,
        balance=par.vertex_balance,
        ratio=par.bucket_ratio,
        minimum=par.min_bucket,
    )
