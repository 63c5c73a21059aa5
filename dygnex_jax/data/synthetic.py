"""Seeded dynamic stochastic block model with skewed snapshot sizes (the embedded default dataset).

Snapshot t has about ``m_t = syn_edges * s_t`` directed edges, where ``s_t`` (mean 1) is a log-normal
draw with sigma ``syn_skew`` times a slow upward trend (``syn_skew = 0``: every snapshot equal). The
activity level ``a_t = sqrt(s_t / max s)`` sets how many communities, and how many nodes inside each,
are active, so heavy snapshots differ from light ones in nodes as well as edges. A fraction
``syn_persist`` of each snapshot's edges is re-drawn from the previous snapshot's edges between active
nodes (so the next snapshot is predictable); of the fresh edges a fraction ``syn_p_in`` joins two nodes
of one community. No self-loops.
"""

from __future__ import annotations

import numpy as np

from ..config import DataConfig
from ..errors import UserError
from .graph import DynamicGraph
from .loaders import build_snapshots


def size_profile(num: int, skew: float, rng: np.random.Generator) -> np.ndarray:
    """[num] positive snapshot size factors with mean 1 (all ones when ``skew == 0``)."""
    if skew <= 0:
        return np.ones(num)
    trend = np.exp(0.5 * skew * np.linspace(-1.0, 1.0, num))  # late snapshots heavier
    s = rng.lognormal(0.0, skew, num) * trend
    return s / s.mean()


def _check(cfg: DataConfig) -> None:
    checks = [
        (cfg.syn_snapshots >= 2, f"data.syn_snapshots must be >= 2, got {cfg.syn_snapshots}"),
        (cfg.syn_communities >= 1, f"data.syn_communities must be >= 1, got {cfg.syn_communities}"),
        (
            cfg.syn_nodes >= 2 * cfg.syn_communities,
            f"data.syn_nodes ({cfg.syn_nodes}) must be >= 2 * data.syn_communities ({cfg.syn_communities})",
        ),
        (cfg.syn_edges >= 1, f"data.syn_edges must be >= 1, got {cfg.syn_edges}"),
        (cfg.syn_skew >= 0, f"data.syn_skew must be >= 0, got {cfg.syn_skew}"),
        (0 <= cfg.syn_p_in <= 1, f"data.syn_p_in must be in [0, 1], got {cfg.syn_p_in}"),
        (0 <= cfg.syn_persist <= 1, f"data.syn_persist must be in [0, 1], got {cfg.syn_persist}"),
    ]
    for ok, message in checks:
        if not ok:
            raise UserError(message)


def _fresh_edges(
    rng: np.random.Generator, count: int, active: np.ndarray, comm_of: np.ndarray, p_in: float
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` random directed pairs of distinct active nodes; a ``p_in`` share within one community.

    ``active`` must be sorted by community (nodes of one community contiguous).
    """
    comm = comm_of[active]
    starts = np.searchsorted(comm, comm, side="left")  # block of each active node's community
    sizes = np.searchsorted(comm, comm, side="right") - starts
    pos = rng.integers(0, len(active), count)
    block_start, block_size = starts[pos], sizes[pos]
    inside = rng.random(count) < p_in
    inside |= block_size == len(active)  # a single active community: every edge is inside
    # inside: another member of the same block (skip the source's own slot)
    r_in = (rng.random(count) * (block_size - 1)).astype(np.int64)
    r_in += r_in >= pos - block_start
    # across: any active node outside the block (skip the block)
    out_size = np.maximum(len(active) - block_size, 1)
    r_out = (rng.random(count) * out_size).astype(np.int64)
    r_out += np.where(r_out >= block_start, block_size, 0)
    dst = np.where(inside, block_start + r_in, r_out)
    return active[pos], active[dst]


def generate(cfg: DataConfig) -> DynamicGraph:
    """The synthetic dynamic SBM of ``cfg`` (deterministic in ``cfg.syn_seed``)."""
    _check(cfg)
    rng = np.random.default_rng(cfg.syn_seed)
    n, num, c = cfg.syn_nodes, cfg.syn_snapshots, cfg.syn_communities
    comm_of = rng.permutation(n) % c  # balanced random communities
    comm_rank = rng.permutation(c)  # communities switch on in this order as activity grows
    node_rank = np.empty(n, dtype=np.int64)  # nodes switch on in this order inside their community
    for k in range(c):
        members = np.flatnonzero(comm_of == k)
        node_rank[members] = rng.permutation(len(members))
    comm_size = np.bincount(comm_of, minlength=c)
    by_comm = np.lexsort((np.arange(n), comm_of))  # node ids sorted by community

    sizes = size_profile(num, cfg.syn_skew, rng)
    m = np.maximum(1, np.rint(cfg.syn_edges * sizes)).astype(np.int64)
    level = np.sqrt(sizes / sizes.max())
    src_all, dst_all, t_all = [], [], []
    prev = np.zeros((0, 2), dtype=np.int64)
    for t in range(num):
        k_active = max(1, int(np.ceil(c * level[t])))
        comm_on = np.zeros(c, dtype=bool)
        comm_on[comm_rank[:k_active]] = True
        quota = np.maximum(2, np.ceil(comm_size * (0.4 + 0.6 * level[t]))).astype(np.int64)
        on = comm_on[comm_of] & (node_rank < quota[comm_of])
        active = by_comm[on[by_comm]]
        # persistent edges: a share of the previous snapshot's edges whose endpoints are still active
        alive = prev[on[prev[:, 0]] & on[prev[:, 1]]] if len(prev) else prev
        n_keep = min(len(alive), int(round(cfg.syn_persist * m[t])))
        kept = alive[rng.choice(len(alive), n_keep, replace=False)] if n_keep else alive[:0]
        need = int(m[t]) - n_keep
        s, d = _fresh_edges(rng, 2 * need + 16, active, comm_of, cfg.syn_p_in)
        cand = np.concatenate([kept, np.stack([s, d], axis=1)])
        codes = cand[:, 0] * n + cand[:, 1]
        _, first = np.unique(codes, return_index=True)  # first occurrence keeps the random order
        cur = cand[np.sort(first)[: int(m[t])]]
        src_all.append(cur[:, 0])
        dst_all.append(cur[:, 1])
        t_all.append(np.full(len(cur), t, dtype=np.int64))
        prev = cur
    u, v, bucket = np.concatenate(src_all), np.concatenate(dst_all), np.concatenate(t_all)
    snaps, _, _, _ = build_snapshots(u, v, bucket, num, symmetric=cfg.symmetric, self_loops=False)
    info = {
        "generator": "dynamic_sbm",
        "raw_rows": int(len(u)),
        "target_edges": m.tolist(),
        **{k: getattr(cfg, k) for k in DataConfig.__dataclass_fields__ if k.startswith("syn_")},
        "symmetric": cfg.symmetric,
    }
    return DynamicGraph(
        "synthetic", n, snaps, None, np.arange(n, dtype=np.int64), np.arange(num, dtype=np.float64), info
    )
