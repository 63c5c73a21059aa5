"""Load-balance figures of a schedule (DESIGN §2): imbalance and padding efficiency."""

from __future__ import annotations

import numpy as np

from ..padding import efficiency
from .base import Schedule
from .cost import CostModel, predict_step_seconds


def step_loads(costs: np.ndarray, schedule: Schedule) -> np.ndarray:
    """[S, P, 3] real per-device load (column sums of the window cost vectors) in every step."""
    costs = np.asarray(costs, dtype=np.float64)
    n_steps, n_devices = schedule.num_steps, schedule.n_devices
    ids, slot = [], []
    for s, step in enumerate(schedule.steps):
        for p, windows in enumerate(step):
            ids.append(np.asarray(windows, dtype=np.int64))
            slot.append(np.full(len(windows), s * n_devices + p, dtype=np.int64))
    loads = np.zeros((n_steps * n_devices, costs.shape[1]))
    if ids:
        ids_all, slot_all = np.concatenate(ids), np.concatenate(slot)
        for d in range(costs.shape[1]):
            loads[:, d] = np.bincount(slot_all, weights=costs[ids_all, d], minlength=len(loads))
    return loads.reshape(n_steps, n_devices, costs.shape[1])


def step_objectives(loads: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """[S] the scheduler's objective per step: weights · (max over devices of each column)."""
    return loads.max(axis=1) @ np.asarray(weights, dtype=np.float64)


def scalar_loads(loads: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """[S, P] weighted per-device loads (weights · load), e.g. for per-step load plots."""
    return np.einsum("spd,d->sp", loads, np.asarray(weights, dtype=np.float64))


def predicted_epoch_seconds(
    loads: np.ndarray,
    model: CostModel,
    window: int | None = None,
    padded: np.ndarray | None = None,
    alone: np.ndarray | None = None,
) -> float:
    """Predicted SPMD epoch seconds: the cost model on every step's padded load, summed (``alone``: the
    steps with nothing packed beside them, ``cost.alone_steps``)."""
    return float(np.sum(predict_step_seconds(loads, model, window=window, padded=padded, alone=alone)))


def padding_efficiency(loads: np.ndarray, weights: np.ndarray, padded: np.ndarray | None = None) -> float:
    """Σ real work / Σ padded work, work = weights · load, 1.0 = perfect balance (``padding.efficiency``,
    the one definition).

    Args:
      loads: [S, P, D] real per-device loads.
      weights: [D] cost weights.
      padded: [S, D] the per-step padded budget each device really ran with (e.g. after shape-bucket
        rounding); default: the per-step maximum over devices (the unavoidable padding).
    """
    if padded is None:
        padded = loads.max(axis=1)
    every_device = np.broadcast_to(np.asarray(padded)[:, None, :], loads.shape)
    return efficiency(loads, every_device, np.asarray(weights, dtype=np.float64))


def imbalance(loads: np.ndarray, weights: np.ndarray) -> float:
    """Mean over steps of max/mean − 1 of the scalar per-device loads (0.0 = perfect)."""
    scalar = scalar_loads(loads, weights)
    mean = scalar.mean(axis=1)
    ok = mean > 0
    if not ok.any():
        return 0.0
    return float(np.mean(scalar.max(axis=1)[ok] / mean[ok] - 1.0))


def summarize(
    costs: np.ndarray,
    schedule: Schedule,
    weights: np.ndarray,
    model: CostModel | None = None,
    window: int | None = None,
) -> dict:
    """The schedule's figures for logs: padding efficiency, imbalance, steps, scheduler seconds,
    the summed step objective and (with a cost model) the predicted epoch seconds."""
    loads = step_loads(costs, schedule)
    out = {
        "method": schedule.method,
        "steps": schedule.num_steps,
        "padding_efficiency": padding_efficiency(loads, weights),
        "imbalance": imbalance(loads, weights),
        "objective": float(step_objectives(loads, weights).sum()),
        "scheduler_seconds": schedule.seconds,
        "fallback": schedule.fallback,
    }
    if model is not None:
        out["predicted_epoch_seconds"] = predicted_epoch_seconds(loads, model, window)
    return out
