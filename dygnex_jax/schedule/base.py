"""The scheduler interface: windows with cost vectors in, a per-step per-device assignment out.

This package imports numpy/scipy/cvxpy only, never JAX (DESIGN §5).

Cost vectors: ``costs`` is a float array [K, 3] with one row per window k and the columns
``(nodes, edges, pairs)``: the nodes of the window's packed graph, the edges summed over its W
snapshots, and its target pairs. Time-resolved costs [K, W + 2] split the edge column into the W
time offsets (the packed step pads edges per offset, so balancing every offset is what counts);
every method works on any number of columns, with ``cost_weights(settings, D)``. A device's load in a step is the column sum over its windows;
under SPMD the step costs the per-column maximum over devices (DESIGN §2), so the objective of a
step is ``weights · max_p load_p`` with ``weights = (alpha, beta, gamma)``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Protocol

import numpy as np

from ..errors import UserError

COST_COLUMNS = ("nodes", "edges", "pairs")


class ScheduleSettings(Protocol):
    """What a method reads from the ``schedule`` config section (see ``config.ScheduleConfig``)."""

    method: str
    shuffle: bool
    jitter: float
    compose: str
    alpha: float
    beta: float
    gamma: float
    time_resolved: bool
    time_limit: float
    mip_gap: float
    solver: str
    ilp_warm_start: bool
    node_limit: int
    fit_epochs: bool
    repeat_steps: bool


@dataclasses.dataclass
class Schedule:
    """One epoch's assignment of windows to steps and devices.

    Fields:
      method: name of the method that produced it.
      steps: ``steps[s][p]`` is an int64 array of the window ids device p runs in step s.
      n_devices: P.
      batch_size: B, windows per step (the last step may have fewer).
      seconds: scheduler wall time.
      fallback: None, or a one-line reason why a fallback answer was used (e.g. solver time-out).
      info: method-specific facts (solver status, objective, bound, ...).
    """

    method: str
    steps: list[list[np.ndarray]]
    n_devices: int
    batch_size: int
    seconds: float = 0.0
    fallback: str | None = None
    info: dict = dataclasses.field(default_factory=dict)

    @property
    def num_steps(self) -> int:
        return len(self.steps)

    def max_windows_per_device(self) -> int:
        return max((len(w) for step in self.steps for w in step), default=0)

    def validate(self, n_windows: int) -> None:
        """Raise AssertionError unless every window is placed exactly once and step sizes are right."""
        seen = np.concatenate([w for step in self.steps for w in step] or [np.zeros(0, np.int64)])
        assert len(seen) == n_windows, f"{len(seen)} placements for {n_windows} windows"
        assert np.array_equal(np.sort(seen), np.arange(n_windows)), "a window is missing or repeated"
        sizes = [sum(len(w) for w in step) for step in self.steps]
        assert all(len(step) == self.n_devices for step in self.steps), "wrong device count"
        expected = [self.batch_size] * (n_windows // self.batch_size)
        if n_windows % self.batch_size:
            expected.append(n_windows % self.batch_size)
        assert sizes == expected, f"step sizes {sizes} != {expected}"


Method = Callable[[np.ndarray, int, int, ScheduleSettings, np.random.Generator], Schedule]
_METHODS: dict[str, Method] = {}


def register(name: str) -> Callable[[Method], Method]:
    """Decorator: make ``fn(costs, n_devices, batch_size, settings, rng) -> Schedule`` a method."""

    def wrap(fn: Method) -> Method:
        _METHODS[name] = fn
        return fn

    return wrap


def available_methods() -> list[str]:
    return sorted(_METHODS)


def cost_weights(settings: ScheduleSettings, n_columns: int = 3) -> np.ndarray:
    """[D] weights of the padded objective: (alpha, beta, gamma) for (nodes, edges, pairs), or, for
    time-resolved costs (nodes, edges at offset 0..W-1, pairs) with D = W + 2, beta on every edge column."""
    if n_columns < 3:
        raise ValueError(f"costs need at least 3 columns (nodes, edges..., pairs), got {n_columns}")
    beta = [settings.beta] * (n_columns - 2)
    return np.array([settings.alpha, *beta, settings.gamma], dtype=np.float64)


def check_sizes(n_windows: int, n_devices: int, batch_size: int) -> None:
    """One-line UserErrors for a batch size, device count or window count that cannot be scheduled."""
    if batch_size < 1:
        raise UserError(f"train.batch_size must be positive, got {batch_size}")
    if n_devices < 1:
        raise UserError(f"the device count must be positive, got {n_devices}")
    if n_windows == 0:
        raise UserError("there are no windows to schedule: the split has no target snapshots")
    if n_devices > min(batch_size, n_windows):
        if n_windows < n_devices:  # the split itself is the limit: a larger batch cannot help
            most = f"{n_windows} devices (parallel.devices)"
            if batch_size < n_windows:  # the batch binds first
                most = f"{batch_size} devices (parallel.devices), {n_windows} with train.batch_size >= {n_windows}"
            fix = (
                f"use at most {most}, or more training windows (a larger data.train_frac, a smaller "
                "data.window, or more snapshots: data.aggr_time / data.num_snapshots)"
            )
        else:
            fix = f"use at most {batch_size} devices (parallel.devices) or train.batch_size >= {n_devices}"
        raise UserError(
            f"{n_devices} devices but only {min(batch_size, n_windows)} windows per step "
            f"({n_windows} training windows, batch_size {batch_size}): {fix}"
        )


def schedule(
    costs: np.ndarray,
    n_devices: int,
    batch_size: int,
    settings: ScheduleSettings,
    *,
    seed: int,
    epoch: int = 0,
) -> Schedule:
    """Assign K windows to ``ceil(K / batch_size)`` steps × ``n_devices`` devices.

    Args:
      costs: [K, 3] float cost vectors (nodes, edges, pairs), window k in time order.
      n_devices: P ≥ 1.
      batch_size: B ≥ 1 windows per step (global, over all devices).
      settings: the ``schedule`` config section.
      seed, epoch: the method's randomness comes from ``default_rng([seed, epoch])`` only, so the
        same (seed, epoch) gives the same schedule.
    Returns:
      A validated ``Schedule`` with ``seconds`` set to the wall time of the method.
    """
    costs = np.asarray(costs, dtype=np.float64)
    if costs.ndim != 2 or costs.shape[1] < len(COST_COLUMNS):
        raise ValueError(f"costs must be [K, 3] or time-resolved [K, W + 2], got {costs.shape}")
    k = len(costs)
    check_sizes(k, n_devices, batch_size)
    if settings.method not in _METHODS:
        raise UserError(
            f"unknown schedule.method {settings.method!r}: choose one of {', '.join(available_methods())}"
        )
    rng = np.random.default_rng([seed, epoch])
    start = time.perf_counter()
    result = _METHODS[settings.method](costs, n_devices, batch_size, settings, rng)
    result.seconds = time.perf_counter() - start
    result.validate(k)
    return result


# the stream of repeated()'s step orders: apart from the methods' default_rng([seed, epoch])
REPEAT_STREAM = 7
# the key of the schedule every epoch repeats among a trainer's epoch -> schedule (no epoch is 0)
REPEATED = 0


def repeated(base: Schedule, seed: int, epoch: int) -> Schedule:
    """``base``'s steps (the same windows on the same devices) in an order of ``epoch``'s own: the full
    steps permuted by ``default_rng([seed, epoch, REPEAT_STREAM])``, a short last step kept last."""
    steps = list(base.steps)
    full = len(steps) - (sum(len(w) for w in steps[-1]) < base.batch_size if steps else 0)
    order = np.random.default_rng([seed, epoch, REPEAT_STREAM]).permutation(full)
    return dataclasses.replace(
        base,
        steps=[steps[i] for i in order] + steps[full:],
        seconds=0.0,
        info={**base.info, "repeated": True},
    )


def step_batches(order: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Cut a permutation of window ids into consecutive steps of ``batch_size`` (last may be short)."""
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
