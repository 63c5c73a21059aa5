"""DyGNeX-L's MILP of one step in solver-neutral form (``StepModel``) and the grouped lower bound
that gives its valid cuts (``grouped_lower_bound``); the formulation is in ``ilp``'s docstring, which
re-exports these names.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .ilp_search import _assignments
from .objective import dimension_lower_bounds

# Dimension groupings tried by ``grouped_lower_bound``: every set partition of the weighted columns
# up to this many (Bell(4) = 15), else only "each column alone" and "all columns together".
GROUPED_BOUND_MAX_DIMS = 4


def _dimension_partitions(n_dims: int) -> list[list[tuple[int, ...]]]:
    """Set partitions of range(n_dims) (all of them up to ``GROUPED_BOUND_MAX_DIMS``)."""
    if n_dims > GROUPED_BOUND_MAX_DIMS:
        return [[(d,) for d in range(n_dims)], [tuple(range(n_dims))]]
    codes, _ = _assignments(n_dims, n_dims)
    return [[tuple(np.flatnonzero(code == b).tolist()) for b in range(code.max() + 1)] for code in codes]


def grouped_lower_bound(
    c: np.ndarray, n_devices: int, weights: np.ndarray
) -> tuple[float, dict[tuple[int, ...], float]]:
    """A lower bound on ``w · max_p load_p`` of one step that sees some coupling between columns.

    For a group g of weighted columns, ``sum_{d in g} w_d max_p load_pd >= max_p sum_{d in g} w_d
    load_pd``, which is at least the one-column bound (``greedy.dimension_lower_bounds``) of the
    windows' g-scalar costs ``sum_{d in g} w_d c_kd``; summing over the groups of any partition of
    the columns bounds the objective. All columns alone is ``greedy.step_lower_bound``; all together
    is the scalar bound; on the real costs the best partition is up to 2 % above the first.
    Returns (the best partition's bound, {group (indices into the weighted columns): its bound}
    for every group of two or more columns).
    """
    active = np.flatnonzero(weights > 0)
    cw = c[:, active] * weights[active]
    cache: dict[tuple[int, ...], float] = {}

    def group_bound(g: tuple[int, ...]) -> float:
        if g not in cache:
            cache[g] = float(dimension_lower_bounds(cw[:, list(g)].sum(axis=1, keepdims=True), n_devices)[0])
        return cache[g]

    best = max(sum(group_bound(g) for g in part) for part in _dimension_partitions(len(active)))
    return best, {g: v for g, v in cache.items() if len(g) > 1}


class StepModel:
    """The MILP of one step in solver-neutral form (columns: allowed x[i, p], then M_d).

    Windows are renumbered by decreasing scalar cost (``perm``); column ``j < n_x`` is
    x[xi[j], xp[j]]; dimension costs are scaled per dimension to O(1) (``scale``) and the objective
    coefficients carry the scale back, so objective values are in the caller's units.
    """

    def __init__(
        self,
        c: np.ndarray,
        n_devices: int,
        weights: np.ndarray,
        group_bounds: dict[tuple[int, ...], float] | None = None,
    ):
        self.active = np.flatnonzero(weights > 0)
        n, n_dims = len(c), len(self.active)
        self.n, self.n_devices, self.n_dims = n, n_devices, n_dims
        scalar = c @ weights
        self.perm = np.argsort(-scalar, kind="stable")
        cs = c[self.perm][:, self.active]
        self.scale = np.maximum(cs.sum(axis=0) / n_devices, 1e-300)
        cs = cs / self.scale
        # symmetry breaking: window i only on devices 0..min(i, P-1)
        xi, xp = np.nonzero(np.arange(n_devices)[None, :] <= np.arange(n)[:, None])
        self.xi, self.xp = xi, xp
        self.n_x = len(xi)
        self.n_col = self.n_x + n_dims
        # rows: n assignment rows, then P * D capacity rows (p major)
        self.n_row = n + n_devices * n_dims
        rows_assign = xi
        vals_assign = np.ones(self.n_x)
        rows_cap = n + xp[:, None] * n_dims + np.arange(n_dims)[None, :]  # [n_x, D]
        vals_cap = cs[xi]  # [n_x, D]
        keep = vals_cap != 0
        m_rows = n + np.arange(n_devices)[:, None] * n_dims + np.arange(n_dims)[None, :]  # [P, D]
        rows = np.concatenate([rows_assign, rows_cap[keep], m_rows.ravel()])
        cols_x = np.concatenate([np.arange(self.n_x), np.nonzero(keep)[0]])
        cols_m = self.n_x + np.broadcast_to(np.arange(n_dims), (n_devices, n_dims)).ravel()
        cols = np.concatenate([cols_x, cols_m])
        vals = np.concatenate([vals_assign, vals_cap[keep], -np.ones(n_devices * n_dims)])
        row_lower = [np.ones(n), np.full(n_devices * n_dims, -np.inf)]
        row_upper = [np.ones(n), np.zeros(n_devices * n_dims)]
        # valid cuts sum_{d in g} w_d M_d >= bound_g (``grouped_lower_bound``), scaled to O(1)
        wm = weights[self.active] * self.scale  # objective coefficients of M
        for g, bound in (group_bounds or {}).items():
            if bound > 0:
                g = list(g)
                rows = np.concatenate([rows, np.full(len(g), self.n_row)])
                cols = np.concatenate([cols, self.n_x + np.asarray(g)])
                vals = np.concatenate([vals, wm[g] / bound])
                row_lower.append(np.ones(1))
                row_upper.append(np.full(1, np.inf))
                self.n_row += 1
        self.a = sp.csc_matrix((vals, (rows, cols)), shape=(self.n_row, self.n_col))
        self.a.sort_indices()
        self.row_lower = np.concatenate(row_lower)
        self.row_upper = np.concatenate(row_upper)
        lb = dimension_lower_bounds(cs, n_devices)  # valid lower bounds on M (scaled)
        self.col_lower = np.concatenate([np.zeros(self.n_x), lb])
        self.col_upper = np.concatenate([np.ones(self.n_x), np.full(n_dims, np.inf)])
        self.cost = np.concatenate([np.zeros(self.n_x), weights[self.active] * self.scale])
        self.cs = cs

    def start(self, device: np.ndarray) -> np.ndarray:
        """Column values of a placement (device [n] in the caller's window order), relabelled so
        devices are numbered by their first window (the symmetry-breaking rule holds)."""
        dev = device[self.perm]
        first = {}
        for p in dev:
            first.setdefault(int(p), len(first))
        label = np.array([first.get(p, 0) for p in range(self.n_devices)])
        dev = label[dev]
        x = np.zeros((self.n, self.n_devices))
        x[np.arange(self.n), dev] = 1.0
        loads = np.zeros((self.n_devices, self.n_dims))
        np.add.at(loads, dev, self.cs)
        m = np.maximum(loads.max(axis=0), self.col_lower[self.n_x :])
        return np.concatenate([x[self.xi, self.xp], m])

    def decode(self, values: np.ndarray) -> np.ndarray | None:
        """device [n] in the caller's window order from column values; None unless every window
        is on exactly one device."""
        if values is None or len(values) < self.n_x or not np.all(np.isfinite(values[: self.n_x])):
            return None
        x = np.zeros((self.n, self.n_devices))
        x[self.xi, self.xp] = values[: self.n_x]
        chosen = x > 0.5
        if not np.all(chosen.sum(axis=1) == 1):
            return None
        device = np.empty(self.n, dtype=np.int64)
        device[self.perm] = np.argmax(chosen, axis=1)
        return device
