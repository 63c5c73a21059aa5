"""What a simulation runs under: the method names, the shapes policies, ``Setup`` (everything but the
method and P), the compute slowdown of shared hosts, and the figures every result row carries.
Re-exported from ``simulate``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from . import plan as planning
from .config import ModelConfig, ParallelConfig
from .errors import UserError
from .padding import LAYOUTS
from .schedule.cost import CostModel, alone_steps
from .simulate_comm import Link
from .strategies import METHODS, WINDOW_METHODS

# the strategies' table (data, no JAX): whole-window methods are simulated step by step, the others
# (the partitioned baselines) by their analytic models (simulate_analytic.py)
ANALYTIC_METHODS = tuple(m for m in METHODS if m not in WINDOW_METHODS)
ALL_METHODS = WINDOW_METHODS + ANALYTIC_METHODS
# What a window-parallel step is charged: "trained" = the config's parallel.budgets policy (planned
# budgets or buckets), as the trainer pays; "buckets" = the shape grid; "exact" = the exact need.
SHAPES = ("trained", "buckets", "exact")
EXACT_LABEL = "exact (no padding to budgets)"


def host_slowdown(devices_on_host: int, cores: int) -> float:
    """Compute slowdown when ``devices_on_host`` fake CPU devices share ``cores`` cores (0: none)."""
    return planning.shared_cores(devices_on_host, cores if cores > 0 else None)


@dataclasses.dataclass
class Setup:
    """Everything but the method and P.

    Fields:
      model: the cost model (its ``window`` is replaced by the instance's W).
      link: interconnect for the all-reduce (and the analytic methods' transfers).
      param_bytes: bytes all-reduced per step (float32 gradients).
      model_cfg, num_features: for the analytic methods' state and embedding sizes.
      schedule_cfg: the ``schedule`` config section (jitter, weights, compose, time limit, ...); its
        alpha/beta/gamma are also the padded-cost weights the budgets are planned and chosen with.
      batch_per_device: b; the batch size is B = b × P (weak scaling) unless ``batch_size`` is set.
      shapes: what a window-parallel step is charged (``SHAPES``): "trained" (the config's
        ``parallel.budgets``, as the trainer pays), "buckets" or "exact". Default: "trained", or
        "buckets" when the legacy ``bucket_ratio`` is > 0.
      layout: the packed layout of the window-parallel methods (``config.step_layout``: "scan", "flat"
        or "last"; the instance's costs are viewed in it, ``padding.layout_view``); snapshot / vertex
        keep their own analytic models.
      parallel: the ``parallel`` config section: budgets, max_budgets, compile_steps, budget_align,
        bucket_ratio, min_bucket.
      planned_epochs: planned budgets are planned from the steps of epochs 1 .. this (the trainer's
        horizon: ``train.epochs``, or ``schedule.reschedule_every`` when that is smaller); 0: from the
        simulated epoch alone. A simulated epoch outside the horizon pays as the trainer does: the
        cheapest planned budget holding a step, else its bucket.
      bucket_ratio, min_bucket: legacy (before ``shapes``): a ratio > 0 sets the shape grid
        (``parallel.bucket_ratio`` / ``min_bucket``) and makes "buckets" the default ``shapes``.
      host_cores: > 0 when all devices are fake devices sharing this many CPU cores.
      slowdown: > 0 replaces ``device_slowdown``'s factor (device speed at this P relative to the
        cost model's prediction).
      seed, epoch: the schedule's randomness; ``epoch`` is the simulated epoch.
      ilp_budget: dygnex_l runs when its scheduled steps × time limit ≤ this many seconds, else it is
        skipped.
    """

    model: CostModel
    link: Link
    param_bytes: float
    model_cfg: ModelConfig
    num_features: int
    schedule_cfg: object
    batch_per_device: int = 4
    batch_size: int = 0
    shapes: str | None = None
    layout: str = "scan"
    parallel: ParallelConfig = dataclasses.field(default_factory=ParallelConfig)
    planned_epochs: int = 0
    bucket_ratio: float = 0.0
    min_bucket: int = 1
    host_cores: int = 0
    slowdown: float = 0.0
    seed: int = 0
    epoch: int = 1
    ilp_budget: float = 60.0

    def __post_init__(self) -> None:
        if self.bucket_ratio > 0:
            self.parallel = dataclasses.replace(
                self.parallel, bucket_ratio=self.bucket_ratio, min_bucket=self.min_bucket
            )
        if self.shapes is None:
            self.shapes = "buckets" if self.bucket_ratio > 0 else "trained"
        if self.shapes not in SHAPES:
            raise UserError(f"shapes must be one of {', '.join(SHAPES)}, got {self.shapes!r}")
        if self.layout not in LAYOUTS:
            raise UserError(f"layout must be one of {', '.join(LAYOUTS)}, got {self.layout!r}")
        if self.parallel.budgets not in ("planned", "buckets"):
            raise UserError(f"parallel.budgets must be planned or buckets, got {self.parallel.budgets!r}")
        if self.planned_epochs < 0 or self.epoch < 1:
            raise UserError("planned epochs must be >= 0 and the simulated epoch >= 1")

    def device_slowdown(self, p: int) -> float:
        """How many times slower than the cost model a device runs at P: ``slowdown`` when set; with
        ``host_cores`` (fake CPU devices sharing them) ``plan.model_slowdown`` — P for the
        analytic model, the ratio to the device count a profiled model was measured at (1 at that
        count); else 1 (a device of its own: a profiled model's seconds are taken as one device's)."""
        if self.slowdown > 0:
            return self.slowdown
        if self.host_cores <= 0:
            return 1.0
        return planning.model_slowdown(self.model, p, self.host_cores, "cpu")

    def alone_steps(self, steps: int) -> np.ndarray:
        """[steps] the steps of an epoch with no next step packed beside them (``cost.alone_steps``)."""
        return alone_steps(steps, self.parallel.prefetch)

    def batch(self, p: int) -> int:
        return self.batch_size or self.batch_per_device * p

    @property
    def policy(self) -> str:
        """The budget policy charged: "planned", "buckets" or "exact"."""
        return self.parallel.budgets if self.shapes == "trained" else self.shapes

    def plan_epochs(self) -> list[int]:
        """The epochs whose steps the planned budgets are planned from."""
        return list(range(1, self.planned_epochs + 1)) if self.planned_epochs else [self.epoch]

    def describe_shapes(self) -> str:
        """The shapes policy in words (every result row and the command's header state it)."""
        if self.policy == "exact":
            return EXACT_LABEL
        p = self.parallel
        prefix = "trained: " if self.shapes == "trained" else ""
        grid = f"ratio {p.bucket_ratio:g}, min {p.min_bucket}"
        if self.policy == "buckets":
            return f"{prefix}buckets ({grid})"
        e = self.plan_epochs()
        when = f"epochs 1..{e[-1]}" if self.planned_epochs else f"epoch {e[0]} alone"
        return (
            f"{prefix}planned budgets (at most {p.max_budgets}, a compilation priced at "
            + (
                f"{p.compile_steps:g} steps"
                if p.compile_steps >= 0
                else f"{p.compile_seconds:g} s of predicted steps"
                if p.compile_seconds > 0
                else "the cost model's measured compile seconds"
            )
            + f", aligned to {p.budget_align}, planned from {when}; "
            f"unforeseen steps: buckets {grid})"
        )


def _figures(method, p, b, compute, ideal, allreduce, sched_seconds, fallback) -> dict:
    steps = len(compute)
    simulated = compute + allreduce
    epoch = float(simulated.sum())
    ideal_epoch = float(ideal.sum() + steps * allreduce)
    return {
        "method": method,
        "devices": p,
        "batch_size": b,
        "steps": steps,
        "step_seconds": simulated.tolist(),
        "mean_step_seconds": epoch / steps,
        "epoch_seconds": epoch,
        "compute_seconds": float(compute.sum()),
        "allreduce_seconds_per_step": allreduce,
        "ideal_epoch_seconds": ideal_epoch,
        "efficiency": ideal_epoch / epoch if epoch > 0 else 1.0,
        "parallel_efficiency": float(ideal.sum()) / epoch if epoch > 0 else 1.0,
        "scheduler_seconds": sched_seconds,
        "fallback": fallback,
    }
