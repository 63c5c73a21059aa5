"""The padded objective of one step and its lower bounds: per-device loads, ``w · max_p load_p``.

Shared by the greedy (``greedy.py``, ``local_search.py``) and DyGNeX-L (``ilp*.py``); re-exported
from ``greedy``, where they were first defined.
"""

from __future__ import annotations

import numpy as np


def dimension_lower_bounds(c: np.ndarray, n_devices: int) -> np.ndarray:
    """[D] lower bounds on ``max_p load_p[d]`` of one step whose windows have costs c [n, D].

    Per dimension the largest of: the mean load per device; the largest window; and, for every
    r >= 1 with r·P < n, the sum of the r + 1 smallest of the r·P + 1 largest windows (some device
    holds r + 1 of them).
    """
    if len(c) == 0:
        return np.zeros(c.shape[1])
    bound = np.maximum(c.sum(axis=0) / n_devices, c.max(axis=0))
    n = len(c)
    if n > n_devices:
        top = -np.sort(-c, axis=0)  # [n, D] decreasing
        csum = np.vstack([np.zeros((1, c.shape[1])), np.cumsum(top, axis=0)])
        for r in range(1, (n - 1) // n_devices + 1):
            hi = r * n_devices + 1  # the r·P + 1 largest: top[:hi]; the r + 1 smallest of them
            bound = np.maximum(bound, csum[hi] - csum[hi - r - 1])
    return bound


def step_lower_bound(c: np.ndarray, n_devices: int, weights: np.ndarray) -> float:
    """A lower bound on ``w · max_p load_p`` of one step (see ``dimension_lower_bounds``)."""
    return float(dimension_lower_bounds(c, n_devices) @ weights)


def step_objective(c: np.ndarray, device: np.ndarray, n_devices: int, weights: np.ndarray) -> float:
    """``w · max_p load_p`` of one step: c [n, 3] window costs, device [n] their devices."""
    return float(device_loads(c, device, n_devices).max(axis=0) @ weights)


def device_loads(c: np.ndarray, device: np.ndarray, n_devices: int) -> np.ndarray:
    """[P, 3] column sums of c over each device's windows."""
    loads = np.zeros((n_devices, c.shape[1]))
    for d in range(c.shape[1]):
        loads[:, d] = np.bincount(device, weights=c[:, d], minlength=n_devices)
    return loads
