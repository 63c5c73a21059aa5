"""Windows (training samples) of a dynamic graph: splits, local node sets, features, targets, negatives.

A window k predicts target snapshot ``t_k`` from its W history snapshots ``t_k-W .. t_k-1`` (EvolveGCN
protocol). Each window restarts the model's recurrent state, so it is an independent sample.

``data.task``: ``link`` predicts the edges of t_k (positives + sampled non-edges). ``edge_cls``
classifies the edges of t_k by their rating sign (EvolveGCN's edge_cls_tasker): the structure of t_k
is known, so the history is ``t_k-W+1 .. t_k`` (the target snapshot is the last one read), the pairs
are the target's edges (no negatives, the same in training and evaluation), and a pair's label is 1
when most of its ratings in t_k are positive (``DynamicGraph.votes > 0``; a tie is 0), else 0.
EvolveGCN's ``num_hist_steps`` h reads h + 1 snapshots: our ``data.window`` W = h + 1.

Local node set: a node that has no edge in any of the W history snapshots is *inactive*: every such node
gets exactly the same embedding (same degree-0 features, only its self-loop, same recurrent updates).
So a window keeps its active nodes (sorted global ids, local ids ``0..A-1``) plus one *background* node
(local id ``A``) that stands for all inactive nodes. This is exact, not an approximation: the score of a
pair of global nodes is the score of their local images. It keeps packed windows small and makes
their sizes differ as the real snapshots do, which is what the scheduler balances.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..config import DataConfig
from ..errors import UserError
from ..resources import degree_table
from .cumulative import SeenPairs, target_mode
from .graph import DynamicGraph

SPLITS = ("train", "val", "test")


@dataclasses.dataclass
class LocalWindow:
    """One window in local node ids (see module docstring).

    Fields:
      index: window id (position in ``WindowSet.targets``).
      target: t, the snapshot whose edges are predicted.
      nodes: [A] sorted global ids of the active nodes; local id A is the background node.
      edges: W int32 arrays [E_tau, 2] of local (src, dst) pairs of snapshot t-W+tau.
      feat: [W, A+1] int32 node input category per time offset (degree bucket, or 0 for constant).
      positives: [Q+, 2] int32 local pairs of the target snapshot's edges (its rows' order; with
        ``data.targets: new`` only the pairs without an edge before it, data/cumulative.py).
      positive_codes: [Q+] int64 sorted global pair codes ``src * N + dst`` of the target edges.
      inactive: how many graph nodes the background node stands for (N - A); models whose output
        depends on node counts (top-k pooling, normalisation statistics) weight it by this.
      weights: None (every edge weighs 1), or W float32 arrays [E_tau] aligned with ``edges``: the
        pairs' row counts (``data.edge_weight: count``), which the packed ``edge_mask`` carries.
    """

    index: int
    target: int
    nodes: np.ndarray
    edges: list[np.ndarray]
    feat: np.ndarray
    positives: np.ndarray
    positive_codes: np.ndarray
    inactive: int = 0
    weights: list[np.ndarray] | None = None

    @property
    def num_local(self) -> int:
        return len(self.nodes) + 1

    def to_local(self, global_ids: np.ndarray) -> np.ndarray:
        """Global node ids -> local ids (inactive nodes -> the background node). Many ids at once (a
        step's millions of sampled pairs) are looked up in a table over their id range, when that table
        is no larger than 4 ids per query; otherwise by binary search. The same ids either way."""
        global_ids = np.asarray(global_ids)
        table = _lookup_table(self.nodes, global_ids)
        if table is not None:
            return table[global_ids]
        pos = np.searchsorted(self.nodes, global_ids)
        pos_c = np.minimum(pos, max(len(self.nodes) - 1, 0))
        hit = (pos < len(self.nodes)) & (self.nodes[pos_c] == global_ids) if len(self.nodes) else False
        return np.where(hit, pos, len(self.nodes)).astype(np.int32)


class WindowSet:
    """All windows of a graph with their chronological split and cost vectors.

    Args:
      graph: the dynamic graph.
      cfg: the ``data`` config section (window, fractions, features, neg_mult).
    """

    def __init__(self, graph: DynamicGraph, cfg: DataConfig):
        self.graph = graph
        self.cfg = cfg
        self.window = cfg.window
        self.task = cfg.task
        # history of target t: snapshots t - lag - W + 1 .. t - lag (link: lag 1; edge_cls: lag 0)
        self.lag = 0 if cfg.task == "edge_cls" else 1
        if cfg.task == "edge_cls" and graph.votes is None:
            raise UserError(
                f"data.task=edge_cls needs edge ratings but {graph.name} has none: use bitcoin_otc, "
                "bitcoin_alpha or an edges file with src dst rating time rows"
            )
        t = graph.num_snapshots
        if cfg.window + self.lag > t:
            raise UserError(
                f"data.window={cfg.window} needs at least {cfg.window + self.lag} snapshots but "
                f"{graph.name} has {t}: use a smaller window"
            )
        # window k targets snapshot W - 1 + lag + k
        self.targets = np.arange(cfg.window - 1 + self.lag, t, dtype=np.int64)
        self.splits = chronological_splits(
            len(self.targets),
            cfg,
            f"snapshots {t}, window {cfg.window}",
            ("use a smaller window or more snapshots" if cfg.window > 1 else "use more snapshots")
            + " (data.aggr_time / data.num_snapshots for an edge stream)",
        )
        # data.targets: "new" keeps the positives first seen at the target; earlier pairs are skipped
        self.targets_mode = target_mode(cfg)
        self.seen = SeenPairs(graph) if self.targets_mode == "new" else None
        # Per-snapshot node degrees and activity, computed once (if the table fits in memory).
        n = graph.num_nodes
        degree_table(t, n, graph.name)
        self._degree = [
            np.bincount(s[:, 1], minlength=n) if len(s) else np.zeros(n, np.int64) for s in graph.snapshots
        ]
        # one-hot degree width: data.max_degree, or 0 = uncapped (the largest in-degree of any snapshot + 1)
        widest = max((int(d.max()) for d in self._degree if len(d)), default=0) + 1
        self.num_features = (cfg.max_degree or widest) if cfg.features == "degree" else 1
        self._cache: dict[int, LocalWindow] = {}
        self._cache_edges = 0
        self._costs = np.stack([self._cost(i) for i in range(len(self.targets))])

    # -------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.targets)

    def history(self, t: int) -> slice:
        """Snapshot indices of the history of target t (see module docstring)."""
        return slice(t + 1 - self.lag - self.window, t + 1 - self.lag)

    def _active_nodes(self, k: int) -> np.ndarray:
        t = int(self.targets[k])
        hist = [s for s in self.graph.snapshots[self.history(t)] if len(s)]
        if not hist:
            return np.zeros(0, np.int64)
        return np.unique(np.concatenate(hist).ravel())

    def _cost(self, k: int) -> np.ndarray:
        t = int(self.targets[k])
        nodes = len(self._active_nodes(k)) + 1
        edges = sum(len(s) for s in self.graph.snapshots[self.history(t)])
        pairs = len(self.target_edges(t))
        return np.array([nodes, edges, pairs], dtype=np.float64)

    def target_edges(self, t: int) -> np.ndarray:
        """[Q+, 2] the positives of target snapshot t: its edges (``data.targets: new``: those whose pair
        has no edge in an earlier snapshot), in its rows' order."""
        s = self.graph.snapshots[t]
        return s if self.seen is None else s[self.seen.new_rows(s, t)]

    def excluded_codes(self, k: int) -> np.ndarray | None:
        """Sorted int64 codes of the pairs window k neither trains nor evaluates on (``data.targets:
        new``: every pair with an edge before the target), or None."""
        return None if self.seen is None else self.seen.codes_before(int(self.targets[k]))

    def costs(self, split: str, neg_mult: int | None = None) -> np.ndarray:
        """[K_split, 3] cost vectors (nodes, edges, pairs) of a split's windows, in time order.

        Training pairs are positives × (1 + neg_mult); evaluation runs only the encoder on device, so
        its pair column is 0. ``edge_cls`` classifies the target's edges in every split.
        """
        c = self._costs[self.splits[split]].copy()
        if self.task == "edge_cls":
            return c
        c[:, 2] = c[:, 2] * (1 + neg_mult) if neg_mult is not None else 0.0
        return c

    def edge_profile(self, split: str) -> np.ndarray:
        """[K_split, W] edges of every window of a split at every time offset."""
        counts = self.graph.edge_counts()
        return np.stack([counts[self.history(t)] for t in self.targets[self.splits[split]]]).astype(
            np.float64
        )

    def schedule_costs(self, split: str, neg_mult: int | None, time_resolved: bool) -> np.ndarray:
        """Costs handed to the scheduler: ``costs`` [K, 3], or time-resolved [K, W + 2] (nodes, edges at
        every offset, pairs)."""
        c = self.costs(split, neg_mult)
        if not time_resolved:
            return c
        return np.column_stack([c[:, :1], self.edge_profile(split), c[:, 2:]])

    def cache_growth(self) -> float:
        """Bytes the window cache of ``get`` may still grow by (every window not cached yet, in id
        order, until the cache holds its 50M edges): local edges (8 B each), node ids and inputs
        (8 + 4 W B each) and positives (16 B each)."""
        total, edges = 0.0, self._cache_edges
        for k, (nodes, e, pos) in enumerate(self._costs):
            if k in self._cache:
                continue
            if edges + e >= 50_000_000:
                break
            edges += e
            total += 8.0 * e + (8.0 + 4.0 * self.window) * nodes + 16.0 * pos
        return total

    def get(self, k: int) -> LocalWindow:
        """The local arrays of window k (cached while the cache holds < 50M edges)."""
        if k in self._cache:
            return self._cache[k]
        win = self._build(k)
        size = sum(len(e) for e in win.edges)
        if self._cache_edges + size < 50_000_000:
            self._cache[k] = win
            self._cache_edges += size
        return win

    def _build(self, k: int) -> LocalWindow:
        g, t = self.graph, int(self.targets[k])
        nodes = self._active_nodes(k)
        lookup = np.full(g.num_nodes, len(nodes), dtype=np.int32)
        lookup[nodes] = np.arange(len(nodes), dtype=np.int32)
        hist = self.history(t)
        edges = [lookup[s].astype(np.int32).reshape(-1, 2) for s in g.snapshots[hist]]
        feat = np.zeros((self.window, len(nodes) + 1), dtype=np.int32)
        if self.cfg.features == "degree":
            for tau in range(self.window):
                deg = self._degree[hist.start + tau][nodes]
                feat[tau, : len(nodes)] = np.minimum(deg, self.num_features - 1)
        target = self.target_edges(t)
        weights = None
        if self.cfg.edge_weight == "count":
            rows = g.multiplicity[hist] if g.multiplicity is not None else [np.ones(len(s)) for s in edges]
            weights = [np.asarray(r, np.float32) for r in rows]
        return LocalWindow(
            index=k,
            target=t,
            nodes=nodes,
            edges=edges,
            feat=feat,
            positives=lookup[target].astype(np.int32).reshape(-1, 2),
            positive_codes=np.sort(target[:, 0].astype(np.int64) * g.num_nodes + target[:, 1]),
            inactive=g.num_nodes - len(nodes),
            weights=weights,
        )

    # -------------------------------------------------------------------------------------------

    def training_pairs(self, k: int, neg_mult: int, seed: int, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """Positives + ``neg_mult``× as many sampled non-edges of the target snapshot, in local ids.

        ``data.neg_sampling``: ``uniform`` draws both ends from all N nodes (an inactive node becomes the
        background node, so training sees background pairs as often as evaluation ranks them);
        ``active`` draws them among the window's active nodes only; ``evolvegcn`` (IBM's smart sampling)
        draws the source from the target edges' sources (each as often as it is one, so new nodes too)
        and the destination from the history snapshots' nodes (each as often as it has an edge in one).
        Never a self-pair or an edge of the target snapshot (``data.targets: new``: nor a pair with an
        edge before it). The stream depends only on (seed, epoch, window), so any scheduler sees the
        same samples.

        Returns:
          pairs: [Q, 2] int32 local pairs (positives first), labels: [Q] int32 (1 edge, 0 non-edge).
          ``edge_cls``: the target's edges and their labels (``edge_labels``), whatever ``neg_mult``.
        """
        if self.task == "edge_cls":
            return self.get(k).positives, self.edge_labels(k)
        win = self.get(k)
        neg = win.to_local(self._negatives(k, neg_mult, seed, epoch).ravel()).reshape(-1, 2)
        return _pairs_with_labels(win.positives, neg)

    def global_training_pairs(
        self, k: int, neg_mult: int, seed: int, epoch: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """``training_pairs`` in global node ids (the same pairs, in the same order): for a model that
        runs a window on the whole node set (the PyTorch baseline's ``full`` layout)."""
        target = self.target_edges(int(self.targets[k]))
        return _pairs_with_labels(target, self._negatives(k, neg_mult, seed, epoch))

    def global_features(self, k: int) -> np.ndarray:
        """[W, N] int32 node input categories of window k over the whole node set (``LocalWindow.feat``
        of the active nodes; an inactive node has degree 0 in every history snapshot, as the background
        node)."""
        feat = np.zeros((self.window, self.graph.num_nodes), dtype=np.int32)
        if self.cfg.features == "degree":
            for tau, snap in enumerate(range(len(self.graph.snapshots))[self.history(int(self.targets[k]))]):
                feat[tau] = np.minimum(self._degree[snap], self.num_features - 1)
        return feat

    def edge_labels(self, k: int) -> np.ndarray:
        """``edge_cls``: [Q+] int32 label of every target edge of window k, aligned with its
        ``positives``: 1 when most of the pair's ratings in the snapshot are positive, else 0."""
        return (self.graph.votes[int(self.targets[k])] > 0).astype(np.int32)

    def _negatives(self, k: int, neg_mult: int, seed: int, epoch: int) -> np.ndarray:
        """[Q-, 2] int64 global non-edges of window k's target snapshot (see ``training_pairs``)."""
        win = self.get(k)
        want = len(win.positives) * neg_mult
        n = self.graph.num_nodes
        mode = self.cfg.neg_sampling
        pool = win.nodes if mode != "uniform" else np.arange(n)
        sources = pool
        if mode == "evolvegcn":  # IBM's lists: every target edge's source; every history snapshot's nodes
            sources = self.target_edges(win.target)[:, 0]
            snaps = self.graph.snapshots[self.history(win.target)]
            pool = np.concatenate([np.unique(s) for s in snaps if len(s)] or [win.nodes])
        if not want or len(pool) < 2 or not len(sources):
            return np.zeros((0, 2), np.int64)
        rng = np.random.default_rng([seed, epoch, k, 7])
        srcs, dsts, have = [], [], 0
        for _ in range(20):
            size = int(want * 1.3) + 16
            if mode == "evolvegcn":
                src = sources[rng.integers(0, len(sources), size)]
                dst = pool[rng.integers(0, len(pool), size)]
            else:  # both ends from the pool, in one draw
                both = pool[rng.integers(0, len(pool), size=(size, 2))]
                src, dst = both[:, 0], both[:, 1]
            codes = src.astype(np.int64) * n + dst  # in int64: node ids may be int32, N^2 is not
            ok = src != dst
            ok &= ~_isin_sorted(codes, win.positive_codes)
            if self.seen is not None:  # data.targets: new: a pair seen before is no negative
                ok &= ~self.seen.seen_before(codes, win.target)
            srcs.append(src[ok])
            dsts.append(dst[ok])
            have += len(srcs[-1])
            if have >= want:
                break
        out = np.empty((min(have, want), 2), np.int64)
        out[:, 0] = np.concatenate(srcs)[: len(out)]
        out[:, 1] = np.concatenate(dsts)[: len(out)]
        return out


def chronological_splits(k: int, cfg: DataConfig, described: str, remedy: str) -> dict[str, np.ndarray]:
    """Window ids 0..k-1 in time order -> train / val / test by ``cfg.train_frac`` / ``cfg.val_frac``
    (test: the rest). Too few windows for a non-empty train and test part (and val part when
    ``val_frac > 0``) is a ``UserError`` naming the windows (``described``) and the ``remedy``."""
    n_train = int(round(cfg.train_frac * k))
    n_val = int(round(cfg.val_frac * k))
    if n_train < 1 or k - n_train - n_val < 1 or (cfg.val_frac > 0 and n_val < 1):
        raise UserError(
            f"{k} windows ({described}) are too few for the split train {cfg.train_frac} / "
            f"val {cfg.val_frac}: {remedy}"
        )
    ids = np.arange(k)
    return {"train": ids[:n_train], "val": ids[n_train : n_train + n_val], "test": ids[n_train + n_val :]}


def _pairs_with_labels(pos: np.ndarray, neg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pairs = np.concatenate([pos, neg]).astype(np.int32)
    labels = np.concatenate([np.ones(len(pos), np.int32), np.zeros(len(neg), np.int32)])
    return pairs, labels


def _lookup_table(nodes: np.ndarray, ids: np.ndarray) -> np.ndarray | None:
    """[max id + 1] int32: the local id of every global id (``len(nodes)``, the background node, for
    the others), or None when the ids are few against their range, or not non-negative integers."""
    if ids.dtype.kind not in "iu" or len(ids) < 1024 or not len(nodes):
        return None
    low, top = int(ids.min()), int(max(ids.max(), nodes[-1])) + 1
    if low < 0 or top > 4 * len(ids):
        return None
    table = np.full(top, len(nodes), np.int32)
    table[nodes] = np.arange(len(nodes), dtype=np.int32)
    return table


def _isin_sorted(values: np.ndarray, sorted_ref: np.ndarray) -> np.ndarray:
    """``np.isin(values, sorted_ref)`` for a sorted ``sorted_ref`` of integers: a bitmap over its range
    when that costs at most 4 bytes per value (a step's millions of candidate negatives), else binary
    search."""
    if len(sorted_ref) == 0:
        return np.zeros(len(values), bool)
    low = int(sorted_ref[0])
    span = int(sorted_ref[-1]) - low + 1
    if len(values) >= 1024 and span <= 32 * len(values) and np.asarray(values).dtype.kind in "iu":
        bits = np.zeros((span + 7) // 8, np.uint8)
        at = np.asarray(sorted_ref, np.int64) - low
        np.bitwise_or.at(bits, at >> 3, np.left_shift(1, at & 7).astype(np.uint8))
        rel = np.asarray(values, np.int64) - low
        inside = (rel >= 0) & (rel < span)
        rel = np.where(inside, rel, 0)
        return inside & ((bits[rel >> 3] >> (rel & 7).astype(np.uint8)) & 1).astype(bool)
    pos = np.minimum(np.searchsorted(sorted_ref, values), len(sorted_ref) - 1)
    return sorted_ref[pos] == values
