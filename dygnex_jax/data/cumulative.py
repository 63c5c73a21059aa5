"""Growing graphs and new links: ``data.cumulative`` and ``data.targets``.

``accumulate(graph)``: snapshot t becomes every edge of snapshots 0..t. Its rows are those of snapshot
t - 1 followed by the pairs first seen at t (those sorted), so every snapshot is a prefix view of one
read-only [U, 2] array of the U distinct pairs: the graph costs O(U) memory, not O(T U) (a growing
graph of 190k undirected edges over 140 snapshots would otherwise hold 27M rows). A pair's weight is its
latest and its votes are summed over 0..t (per-snapshot arrays, only when the source has weights).

``SeenPairs(graph)``: when every ordered pair (src, dst) first has an edge. With ``data.targets: new``
(the default ``auto`` under ``cumulative``) a link-prediction window's positives are the target's
pairs first seen at the target, and the pairs seen earlier are neither positives nor negatives
(training negatives and evaluation candidates skip them; data/windows.py, evaluation.py).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import UserError
from .graph import DynamicGraph


def target_mode(cfg) -> str:
    """``data.targets`` resolved for the ``data`` section ``cfg``: "all" or "new". ``auto`` is "new"
    for link prediction on a cumulative series (whose snapshots repeat every earlier edge), else "all";
    only link prediction has "new" targets."""
    if cfg.task != "link":
        return "all"
    if cfg.targets == "auto":
        return "new" if cfg.cumulative else "all"
    return cfg.targets


def check_targets(cfg) -> None:
    """``data.targets=new`` is for link prediction only (a ``UserError`` otherwise)."""
    if cfg.targets == "new" and cfg.task != "link":
        raise UserError(
            f"data.targets=new applies to data.task=link, not {cfg.task!r}: leave data.targets at auto or all"
        )


def _codes(snapshot: np.ndarray, n: int) -> np.ndarray:
    return snapshot[:, 0].astype(np.int64) * n + snapshot[:, 1]


def _isin_sorted(values: np.ndarray, sorted_ref: np.ndarray) -> np.ndarray:
    if len(sorted_ref) == 0:
        return np.zeros(len(values), bool)
    pos = np.minimum(np.searchsorted(sorted_ref, values), len(sorted_ref) - 1)
    return sorted_ref[pos] == values


def accumulate(graph: DynamicGraph) -> DynamicGraph:
    """The cumulative series of ``graph`` (see module docstring); the same node space and times."""
    n = graph.num_nodes
    seen = np.zeros(0, np.int64)  # sorted codes so far
    blocks, ends = [], []
    for s in graph.snapshots:
        codes = np.sort(_codes(s, n))
        new = codes[~_isin_sorted(codes, seen)]
        blocks.append(new)
        seen = np.sort(np.concatenate([seen, new]), kind="stable")  # two sorted runs: a linear merge
        ends.append(len(seen))
    order = np.concatenate(blocks) if blocks else np.zeros(0, np.int64)
    pairs = np.stack([order // n, order % n], axis=1).astype(np.int32)
    pairs.flags.writeable = False  # every snapshot is a view of it
    snaps = [pairs[:end] for end in ends]
    weights = votes = None
    if graph.weights is not None:
        weights, votes = _running_weights(graph, order, ends)
    info = {**graph.info, "cumulative": True, "distinct_pairs": int(len(order))}
    # a cumulative snapshot's pairs have no row count of their own (data.edge_weight=count refuses it)
    return dataclasses.replace(
        graph, snapshots=snaps, weights=weights, votes=votes, multiplicity=None, info=info
    )


def _running_weights(graph: DynamicGraph, order: np.ndarray, ends: list[int]) -> tuple[list, list]:
    """Per snapshot t, aligned with its rows (``order[:ends[t]]``): each pair's latest weight and its
    votes summed over snapshots 0..t."""
    n = graph.num_nodes
    sorter = np.argsort(order)
    weight = np.zeros(len(order), np.float32)
    vote = np.zeros(len(order), np.int32)
    weights, votes = [], []
    for t, s in enumerate(graph.snapshots):
        at = sorter[np.searchsorted(order, _codes(s, n), sorter=sorter)]
        weight[at] = graph.weights[t]
        if graph.votes is not None:
            vote[at] += graph.votes[t]
        weights.append(weight[: ends[t]].copy())
        votes.append(vote[: ends[t]].copy())
    return weights, (votes if graph.votes is not None else None)


class SeenPairs:
    """When every ordered pair of a graph first has an edge.

    Fields:
      codes: [U] sorted int64 pair codes ``src * N + dst`` of every pair with an edge.
      first: [U] int32 the first snapshot holding it.
    """

    def __init__(self, graph: DynamicGraph):
        n, self.num_nodes = graph.num_nodes, graph.num_nodes
        blocks, when = [], []
        prev = np.zeros(0, np.int64)
        for t, s in enumerate(graph.snapshots):
            codes = _codes(s, n)
            if len(prev) <= len(codes) and np.array_equal(codes[: len(prev)], prev):
                block = codes[len(prev) :]  # a cumulative series: only the rows after t - 1's
            else:
                block = codes
            blocks.append(block)
            when.append(np.full(len(block), t, np.int32))
            prev = codes
        every = np.concatenate(blocks) if blocks else np.zeros(0, np.int64)
        self.codes, index = np.unique(every, return_index=True)  # the first occurrence: the earliest t
        self.first = np.concatenate(when)[index] if len(every) else np.zeros(0, np.int32)

    def first_seen(self, codes: np.ndarray) -> np.ndarray:
        """[C] the first snapshot of each pair code; pairs never seen get a huge value."""
        codes = np.asarray(codes, np.int64)
        out = np.full(len(codes), np.iinfo(np.int32).max, np.int64)
        if len(self.codes):
            pos = np.minimum(np.searchsorted(self.codes, codes), len(self.codes) - 1)
            hit = self.codes[pos] == codes
            out[hit] = self.first[pos[hit]]
        return out

    def new_rows(self, snapshot: np.ndarray, t: int) -> np.ndarray:
        """[E_t] bool: the rows of snapshot t whose pair has no edge before t."""
        return self.first_seen(_codes(snapshot, self.num_nodes)) >= t

    def seen_before(self, codes: np.ndarray, t: int) -> np.ndarray:
        """[C] bool: pair codes with an edge in a snapshot before t."""
        return self.first_seen(codes) < t

    def codes_before(self, t: int) -> np.ndarray:
        """Sorted int64 codes of every pair with an edge before snapshot t."""
        return self.codes[self.first < t]
