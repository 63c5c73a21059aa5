"""Node-regression windows (``data.task: node_reg``) over a graph with a node signal (data/signals.py).

Window k predicts the signal of every node at target step ``t_k`` from W history snapshots
(``data.window``). Snapshot tau = 0..W-1 of the window stands for step ``s = t - W + tau`` and carries:

* node input ``x_tau`` [N, L]: the last L = ``data.lags`` signal values ending at s, oldest first,
  ``signal[s - L + 1 .. s]``;
* the graph (edges and edge weights) of step ``s - L + 1``, the first step of its lags.

So the last snapshot (tau = W - 1) is exactly PyTorch Geometric Temporal's sample ``i = t - L``: its
features are ``signal[i : i + L]``, its target ``signal[i + L]`` and its graph the one of step i (what
PyG-T's ``DynamicGraphTemporalSignal`` pairs for england_covid; static graphs are the same at every step).
``window: 1, lags: 4`` is PyG-T's examples (each sample restarts the recurrent state); ``window: W,
lags: 1`` is the recurrent form. Targets run from ``W + L - 1`` to ``T - 1`` (PyG-T with W = 1: the
``T - L`` samples). Every node is real: no background node, ``num_local = N``.

With ``data.features: given`` (a graph with ``features`` [T, N, F], data/pygt_json.py) the window's last
snapshot is the target step itself, as in a PyG-T snapshot (graph, ``x``, ``y``) of one step:
snapshot tau stands for step ``u = t - W + 1 + tau`` and carries ``x_tau = [features[u], signal[u - L
.. u - 1]]`` [N, F + L] (the given features, then the L target values before u; L = 0: the features
alone) and the graph of step u. The lags of a snapshot are the same L values in both rules (the ones
just before ``u``); only the graph and the given features come from u. Targets run from ``W + L - 1``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..config import DataConfig
from ..errors import UserError
from .graph import DynamicGraph
from .windows import WindowSet, chronological_splits


@dataclasses.dataclass
class NodeWindow:
    """One node-regression window (see module docstring).

    Fields:
      index: window id (position in ``NodeWindowSet.targets``).
      target: t, the step whose signal is predicted.
      edges: W int32 arrays [E_tau, 2] (src, dst) of node ids.
      weights: W float32 arrays [E_tau] edge weights aligned with ``edges``.
      x: [W, N, L] float32 node inputs (L lagged signal values per snapshot).
      y: [N] float32 target signal at t.
    """

    index: int
    target: int
    edges: list[np.ndarray]
    weights: list[np.ndarray]
    x: np.ndarray
    y: np.ndarray

    @property
    def num_local(self) -> int:
        return self.x.shape[1]


class NodeWindowSet:
    """All node-regression windows of a graph, their chronological split and cost vectors; the same
    interface as ``WindowSet`` (splits, costs, schedule_costs, get) for the scheduler and the trainer.

    Args:
      graph: a dynamic graph with ``signal`` [T, N]; cfg: the ``data`` config section.
    """

    def __init__(self, graph: DynamicGraph, cfg: DataConfig):
        self.graph, self.cfg = graph, cfg
        self.window, self.lags = cfg.window, cfg.lags
        self.given = cfg.features == "given"
        _check_inputs(graph, cfg, self.given)
        t = graph.num_snapshots
        first = cfg.window + cfg.lags - 1
        if first >= t:
            raise UserError(
                f"data.window={cfg.window} with data.lags={cfg.lags} needs at least {first + 1} snapshots but "
                f"{graph.name} has {t}: use a smaller window or fewer lags"
            )
        self.targets = np.arange(first, t, dtype=np.int64)
        self.splits = chronological_splits(
            len(self.targets),
            cfg,
            f"snapshots {t}, window {cfg.window}, lags {cfg.lags}",
            "use a smaller window or fewer lags",
        )
        self.num_features = cfg.lags + (graph.features.shape[2] if self.given else 0)
        self._cache: dict[int, NodeWindow] = {}

    def __len__(self) -> int:
        return len(self.targets)

    def graph_steps(self, k: int) -> np.ndarray:
        """[W] the step whose graph each snapshot of window k uses (see module docstring)."""
        u = self.targets[k] - self.window + 1 + np.arange(self.window)
        return u if self.given else u - self.lags

    def edge_profile(self, split: str) -> np.ndarray:
        """[K_split, W] edges of every window of a split at every time offset."""
        counts = self.graph.edge_counts()
        rows = [counts[self.graph_steps(k)] for k in self.splits[split]]
        return np.stack(rows).astype(np.float64) if rows else np.zeros((0, self.window))

    def costs(self, split: str, neg_mult: int | None = None) -> np.ndarray:
        """[K_split, 3] (nodes, edges summed over the W snapshots, target nodes); ``neg_mult`` is ignored
        (no negatives: every node is a target, in training and evaluation)."""
        n = self.graph.num_nodes
        edges = self.edge_profile(split).sum(1)
        return np.column_stack([np.full(len(edges), n), edges, np.full(len(edges), n)]).astype(np.float64)

    def schedule_costs(self, split: str, neg_mult: int | None, time_resolved: bool) -> np.ndarray:
        """``costs`` [K, 3], or time-resolved [K, W + 2] (nodes, edges at every offset, target nodes)."""
        c = self.costs(split)
        return np.column_stack([c[:, :1], self.edge_profile(split), c[:, 2:]]) if time_resolved else c

    def get(self, k: int) -> NodeWindow:
        if k not in self._cache:
            g, t, w, lags = self.graph, int(self.targets[k]), self.window, self.lags
            steps = t - w + 1 + np.arange(w)  # u: each snapshot's lags are the L values before it
            x = np.stack([g.signal[u - lags : u].T for u in steps]).astype(np.float32)
            if self.given:
                x = np.concatenate([g.features[steps].astype(np.float32), x], axis=2)
            gs = self.graph_steps(k)
            weights = [
                g.weights[s] if g.weights is not None else np.ones(len(g.snapshots[s]), np.float32)
                for s in gs
            ]
            self._cache[k] = NodeWindow(
                k, t, [g.snapshots[s] for s in gs], weights, x, g.signal[t].astype(np.float32)
            )
        return self._cache[k]


def _check_inputs(graph: DynamicGraph, cfg: DataConfig, given: bool) -> None:
    if given and graph.features is None:
        raise UserError(
            f"data.features=given needs node features, which {graph.name!r} has not: use data.dataset="
            "pygt_json with features in the file (data.feature_key), or data.features=degree (the lags alone)"
        )
    if cfg.lags == 0 and not given:
        raise UserError(
            "data.lags=0 leaves a node-regression window no input: use data.lags >= 1, or data.features=given "
            "(the features of a pygt_json file)"
        )


def task_windows(graph: DynamicGraph, cfg: DataConfig):
    """The window set of ``cfg.task``: ``NodeWindowSet`` for node_reg, else the link ``WindowSet``."""
    return (NodeWindowSet if cfg.task == "node_reg" else WindowSet)(graph, cfg)
