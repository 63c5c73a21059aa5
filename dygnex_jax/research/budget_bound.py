"""How well one budget can pay an epoch at best: an upper bound on packed padding efficiency.

A run on one planned budget pays ``steps x devices x w · budget`` per epoch, where the budget holds the
largest (step, device) slot of every cost column. Which windows share slots is the scheduler's choice;
this module asks what the best choice could reach. ``per_column_bound``: every column at its own floor
(the largest window, or the mean slot), at once. ``one_budget_milp``: the exact problem as a mixed-integer
program (scipy's HiGHS) — binary x[k, s] puts window k in slot s, a step holds at most B windows, the
budget is continuous — solved to a time limit; its dual bound is a proven ceiling on what any placement of
the epoch's windows on one budget reaches, its incumbent a placement reaching the reported figure. The
budget's alignment and padding node only add padding, so the real ceiling is lower still.

numpy / scipy only (no JAX). ``tools/budget_bound.py`` runs it on the datasets.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix, vstack


def per_column_bound(costs: np.ndarray, weights: np.ndarray, slots: int) -> float:
    """Σ w·real / (slots x w·floor), floor = per column max(largest window, total / slots)."""
    costs, weights = np.asarray(costs, np.float64), np.asarray(weights, np.float64)
    floor = np.maximum(costs.max(axis=0), costs.sum(axis=0) / slots)
    return float((costs @ weights).sum() / (slots * (floor @ weights)))


def one_budget_milp(
    costs: np.ndarray, weights: np.ndarray, devices: int, batch: int, time_limit: float = 60.0
) -> dict:
    """The MILP above for K windows [K, D] on ceil(K / B) steps x ``devices`` slots.

    Returns a dict: ``efficiency`` (the best placement found, None if none), ``ceiling`` (real work over
    the dual bound: no placement on one budget does better), ``budget`` (the incumbent's, per column),
    ``assignment`` ([K] slot of every window, step = slot // devices), ``status``, ``seconds``."""
    c = np.asarray(costs, np.float64)
    w = np.asarray(weights, np.float64)
    k, d = c.shape
    steps = -(-k // batch)
    slots = steps * devices
    nx = k * slots  # x[i, s] at column i * slots + s; then the budget's D columns
    rows = []
    # every window in exactly one slot
    rows.append(coo_matrix((np.ones(nx), (np.repeat(np.arange(k), slots), np.arange(nx))), shape=(k, nx + d)))
    # per slot and column: Σ_i c[i, j] x[i, s] - budget_j <= 0
    i, s, j = np.meshgrid(np.arange(k), np.arange(slots), np.arange(d), indexing="ij")
    r = (s * d + j).ravel()
    load = coo_matrix((c[i, j].ravel(), (r, (i * slots + s).ravel())), shape=(slots * d, nx + d))
    budget = coo_matrix((-np.ones(slots * d), (np.arange(slots * d), nx + np.tile(np.arange(d), slots))))
    rows.append(load + coo_matrix(budget, shape=(slots * d, nx + d)))
    # a step holds at most B windows
    i2, s2 = np.meshgrid(np.arange(k), np.arange(slots), indexing="ij")
    rows.append(
        coo_matrix((np.ones(nx), ((s2 // devices).ravel(), (i2 * slots + s2).ravel())), (steps, nx + d))
    )
    a = vstack(rows).tocsr()
    lo = np.r_[np.ones(k), np.full(slots * d, -np.inf), np.zeros(steps)]
    hi = np.r_[np.ones(k), np.zeros(slots * d), np.full(steps, batch)]
    lower = np.zeros(nx + d)
    lower[int(np.argmax(c @ w)) * slots] = 1  # symmetry: the largest window in slot 0
    upper = np.r_[np.ones(nx), np.full(d, np.inf)]
    objective = np.r_[np.zeros(nx), slots * w]
    start = time.perf_counter()
    res = milp(
        objective,
        constraints=LinearConstraint(a, lo, hi),
        integrality=np.r_[np.ones(nx), np.zeros(d)],
        bounds=Bounds(lower, upper),
        options={"time_limit": float(time_limit), "mip_rel_gap": 1e-6},
    )
    real = float((c @ w).sum())
    found = res.x is not None
    dual = getattr(res, "mip_dual_bound", None)
    return {
        "windows": k,
        "steps": steps,
        "slots": slots,
        "efficiency": real / float(res.fun) if found else None,
        "ceiling": real / dual if dual and dual > 0 else 1.0,
        "budget": res.x[nx:].round(6).tolist() if found else None,
        "assignment": np.argmax(res.x[:nx].reshape(k, slots), axis=1).tolist() if found else None,
        "status": res.message,
        "optimal": res.status == 0,
        "seconds": time.perf_counter() - start,
    }
