"""The in-memory dynamic graph every loader returns."""

from __future__ import annotations

import dataclasses
import functools
import hashlib

import numpy as np


@dataclasses.dataclass
class DynamicGraph:
    """A discrete-time dynamic graph: T snapshots over one node id space ``0..num_nodes-1``.

    Fields:
      name: dataset name, for logs.
      num_nodes: N, size of the (remapped, contiguous) node id space shared by all snapshots.
      snapshots: T int32 arrays of shape [E_t, 2] (src, dst), unique pairs per snapshot, sorted
        lexicographically. Undirected graphs are stored with both directions.
      weights: None, or T float32 arrays [E_t] aligned with ``snapshots`` (e.g. a rating; for a pair
        seen several times in one snapshot, the last value in time order).
      node_ids: [N] original ids of the remapped nodes (``node_ids[i]`` is node i's id in the file).
      times: [T] float64 start of each snapshot's time bucket (seconds, or snapshot index when the
        source has none).
      info: free-form facts about the source (file, number of raw rows, bucket size, ...).
      signal: None, or [T, N] float32 node values per snapshot (node regression; data/signals.py).
      features: None, or [T, N, F] float32 node features given per snapshot (``data.features: given``;
        data/pygt_json.py).
      votes: None, or T int32 arrays [E_t] aligned with ``snapshots``: the pair's rows in the snapshot
        with a positive value minus those with a value <= 0 (under ``symmetric``, rows in either
        direction count for both). EvolveGCN's edge-classification label of a pair is ``votes > 0``
        (a majority of positive ratings; a tie is negative). Set when the source has a weight column.
      multiplicity: None, or T int32 arrays [E_t] aligned with ``snapshots``: the source rows behind
        each pair in the snapshot (under ``symmetric``, the rows of both directions): EvolveGCN's edge
        weight (messages, ratings between the pair), read with ``data.edge_weight: count``. None: 1 each.
    """

    name: str
    num_nodes: int
    snapshots: list[np.ndarray]
    weights: list[np.ndarray] | None = None
    node_ids: np.ndarray | None = None
    times: np.ndarray | None = None
    info: dict = dataclasses.field(default_factory=dict)
    signal: np.ndarray | None = None
    features: np.ndarray | None = None
    votes: list[np.ndarray] | None = None
    multiplicity: list[np.ndarray] | None = None

    @property
    def num_snapshots(self) -> int:
        return len(self.snapshots)

    def edge_counts(self) -> np.ndarray:
        """[T] number of (unique, directed) edges per snapshot."""
        return np.array([len(s) for s in self.snapshots], dtype=np.int64)

    def select(self, start: int, stop: int) -> DynamicGraph:
        """Snapshots ``start..stop-1`` (same node space)."""
        return dataclasses.replace(
            self,
            snapshots=self.snapshots[start:stop],
            weights=None if self.weights is None else self.weights[start:stop],
            votes=None if self.votes is None else self.votes[start:stop],
            multiplicity=None if self.multiplicity is None else self.multiplicity[start:stop],
            times=None if self.times is None else self.times[start:stop],
            signal=None if self.signal is None else self.signal[start:stop],
            features=None if self.features is None else self.features[start:stop],
            info={**self.info, "selected": [start, stop]},
        )

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 of the graph's contents (node count, every snapshot's pairs and the arrays aligned with
        them, ids, times, signal, features; not its name or info), computed once: the data a run trained
        on, recorded in its checkpoints (resume.py: data that moved)."""
        h = hashlib.sha256(f"nodes {self.num_nodes}".encode())
        for name in (
            "snapshots",
            "weights",
            "votes",
            "multiplicity",
            "node_ids",
            "times",
            "signal",
            "features",
        ):
            value = getattr(self, name)
            for i, a in enumerate(value if isinstance(value, (list, tuple)) else [value]):  # None: [None]
                a = None if a is None else np.ascontiguousarray(a)
                h.update(f"|{name} {i} {None if a is None else (a.dtype.str, a.shape)}|".encode())
                if a is not None:
                    h.update(a.tobytes())
        return h.hexdigest()
