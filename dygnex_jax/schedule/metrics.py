"""Load-balance figures of a schedule (DESIGN §2): imbalance and padding efficiency."""

from __future__ import annotations

import numpy as np

from .base import Schedule


def step_loads(costs: np.ndarray, schedule: Schedule) -> np.ndarray:
    """[S, P, 3] real per-device load (column sums of the window cost vectors) in every step."""
    costs = np.asarray(costs, dtype=np.float64)
    loads = np.zeros((schedule.num_steps, schedule.n_devices, costs.shape[1]))
    for s, step in enumerate(schedule.steps):
        for p, windows in enumerate(step):
            loads[s, p] = costs[windows].sum(axis=0)
    return loads


def padding_efficiency(loads: np.ndarray, weights: np.ndarray, padded: np.ndarray | None = None) -> float:
    """Σ real work / Σ padded work, work = weights · load, 1.0 = perfect balance.

    Args:
      loads: [S, P, D] real per-device loads.
      weights: [D] cost weights.
      padded: [S, D] the per-step padded budget each device really ran with (e.g. after shape-bucket
        rounding); default: the per-step maximum over devices (the unavoidable padding).
    """
    if padded is None:
        padded = loads.max(axis=1)
    real = float(np.einsum("spd,d->", loads, weights))
    total = float(loads.shape[1] * np.einsum("sd,d->", padded, weights))
    return real / total if total > 0 else 1.0


def imbalance(loads: np.ndarray, weights: np.ndarray) -> float:
    """Mean over steps of max/mean − 1 of the scalar per-device loads (0.0 = perfect)."""
    scalar = np.einsum("spd,d->sp", loads, weights)
    mean = scalar.mean(axis=1)
    ok = mean > 0
    if not ok.any():
        return 0.0
    return float(np.mean(scalar.max(axis=1)[ok] / mean[ok] - 1.0))


def summarize(costs: np.ndarray, schedule: Schedule, weights: np.ndarray) -> dict:
    """The schedule's figures for logs: padding efficiency, imbalance, steps, scheduler seconds."""
    loads = step_loads(costs, schedule)
    return {
        "method": schedule.method,
        "steps": schedule.num_steps,
        "padding_efficiency": padding_efficiency(loads, weights),
        "imbalance": imbalance(loads, weights),
        "scheduler_seconds": schedule.seconds,
        "fallback": schedule.fallback,
    }
