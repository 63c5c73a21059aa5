"""Steps -> padded host batches, and the run's training budgets (which shapes are compiled).

Every device of an SPMD step runs the same padded shapes, the step's *budget* (graphs.Budget: nodes,
edges per offset, pairs, window slots). ``Packer.pack`` turns a step's window ids per device into the
host batch of this process's devices under one budget, computed alike on every process. In training
the budget is the cheapest of the run's planned budgets that holds the step (``parallel.budgets:
planned``), else its shape bucket or a compiled larger budget (``reuse_budget``, ski rental); in
evaluation the step's bucket.

The packer owns the budget state a resumed run must continue with: the budgets compiled so far, the
rent paid per bucket, the planned budgets. ``state_dict`` / ``load_state_dict`` carry it through a
checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .graphs import Budget, DeviceWork, exact_need
from .padding import bucketed, cheapest_holding
from .plan import compile_steps


class Packer:
    """Packs steps for one run.

    Args:
      windows: the ``WindowSet``; config: the run's config; layout: its edge layout (padding.py);
      task: its ``tasks.Task``; n_devices: P; local_rows: the devices this process packs;
      padded_cost / step_seconds / weights: the trainer's pricing of a budget (cost-weighted padded
      work, predicted seconds) and its cost weights, read at call time (a re-fitted cost model
      changes them).
    """

    def __init__(
        self,
        windows,
        config,
        layout: str,
        task,
        n_devices: int,
        local_rows: list[int],
        *,
        padded_cost: Callable[[Budget], float],
        step_seconds: Callable[[Budget], float],
        weights: Callable[[], np.ndarray],
    ):
        self.windows, self.config, self.layout, self.task = windows, config, layout, task
        self.n_devices, self.local_rows = n_devices, local_rows
        self.padded_cost, self.step_seconds, self.weights = padded_cost, step_seconds, weights
        self.compiled: set[Budget] = set()  # training budgets used so far (compiled)
        self.rent: dict[Budget, float] = {}  # bucket -> extra padded cost run on larger budgets so far
        self.planned: list[Budget] | None = None  # the run's planned training budgets (None: not yet)
        self.overflow_steps = 0  # training steps no planned budget held (bucketed instead)

    # --- checkpoints --------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """The budgets used and the rent paid so far (JSON-able; the checkpoint's ``budgets`` / ``rent``)."""
        return {
            "budgets": sorted(list(b.as_tuple()) for b in self.compiled),
            "rent": sorted([list(b.as_tuple()), v] for b, v in self.rent.items()),
        }

    def load_state_dict(self, state: dict) -> None:
        self.compiled = {Budget(*b) for b in state["budgets"]}
        self.rent = {Budget(*b): float(v) for b, v in state.get("rent", [])}

    def forget(self) -> None:
        """Forget the budgets used and the rent paid (a benchmark re-running steps from a clean state)."""
        self.compiled.clear()
        self.rent.clear()

    # --- packing --------------------------------------------------------------------------------

    def device_work(self, window_ids, split: str, epoch: int) -> DeviceWork:
        """One device's windows (ids into the window set) and the task's targets for them."""
        return self.task.device_work(self.windows, window_ids, split, epoch, self.config)

    def eval_per_step(self) -> int:
        return max(self.config.eval.batch_size, self.n_devices)

    def pack(
        self,
        step: list,
        split: str,
        epoch: int,
        rows: list[int] | None = None,
        groups: int = 0,
        budget: Budget | None = None,
    ):
        """Window positions (in ``split``) per device or group -> (host batch [L, ...], work [groups],
        budget).

        The budget is the maximum over all groups (every process computes it alike), or ``budget`` where
        given (it must hold the step: a ValueError if not). ``groups``: pack that many groups instead of
        P (the micro-batches of snapshot partition; then all are packed). Else only the ``rows`` devices
        (default: this process's, ``local_rows``) are packed.
        """
        groups = groups or self.n_devices
        work, need = self.step_need(step, split, epoch, groups)
        p = self.config.parallel
        if budget is None:
            budget = (
                self.train_budget(need) if split == "train" else bucketed(need, p.bucket_ratio, p.min_bucket)
            )
        elif not budget.holds(need):
            raise ValueError(f"budget {budget.as_tuple()} cannot hold the step's need {need.as_tuple()}")
        if rows is None:
            rows = self.local_rows if groups == self.n_devices else range(groups)
        return self.pack_budget([work[r] for r in rows], budget), work, budget

    def step_need(
        self, step: list, split: str, epoch: int, groups: int = 0
    ) -> tuple[list[DeviceWork], Budget]:
        """Window positions (in ``split``) per device or group -> (work [groups], the step's exact need),
        with ceil(a step's windows / groups) window slots (``groups``: 0 = P)."""
        groups = groups or self.n_devices
        split_ids = self.windows.splits[split]
        work = [self.device_work(split_ids[np.asarray(ids, np.int64)], split, epoch) for ids in step]
        work += [DeviceWork([], [], []) for _ in range(groups - len(work))]
        per_step = self.config.train.batch_size if split == "train" else self.eval_per_step()
        per_step = min(per_step, len(split_ids))  # a batch larger than the split holds all of it
        return work, exact_need(work, -(-per_step // groups), self.layout)

    def pack_budget(self, work: list[DeviceWork], budget: Budget) -> dict:
        """Host batch [len(work), ...] of these devices' work under ``budget`` in the run's layout."""
        return self.task.pack(work, budget, self.windows, self.config, self.layout)

    # --- training budgets -------------------------------------------------------------------------

    def train_budget(self, need: Budget) -> Budget:
        """The budget a training step of exact need ``need`` runs on: the cheapest planned budget that
        holds it; else (``parallel.budgets: buckets``, the partitioned baselines, or a step the plan
        did not foresee) its bucket, or a compiled larger one (``reuse_budget``)."""
        if self.planned:
            chosen = cheapest_holding(need, self.planned, self.windows.window, self.layout, self.weights())
            if chosen is not None:
                self.compiled.add(chosen)
                return chosen
            self.overflow_steps += 1
        p = self.config.parallel
        return self.reuse_budget(bucketed(need, p.bucket_ratio, p.min_bucket))

    def reuse_budget(self, budget: Budget) -> Budget:
        """The budget a training step of bucket ``budget`` runs on: itself if compiled; else the cheapest
        compiled budget that holds it, if its padded work is within ``parallel.reuse_slack`` of the
        step's own, or if renting it stays within the price of a compilation (``parallel.compile_steps``,
        ski rental: the extra padded work every step of this bucket has run on larger budgets is summed,
        and the bucket is compiled once that sum would pass ``compile_steps`` steps of the larger budget
        (-1: ``plan.compile_steps``, the compile seconds over that budget's predicted step seconds),
        so no bucket costs more than twice the cheaper of always compiling and always renting); else
        itself (a new compilation). Deterministic in the steps so far: every process chooses alike."""
        cost = self.padded_cost
        if budget in self.compiled:
            return budget
        fits = [
            b
            for b in self.compiled
            if b.windows == budget.windows
            and b.nodes >= budget.nodes
            and b.edges >= budget.edges
            and b.pairs >= budget.pairs
        ]
        chosen = budget
        if fits:
            best = min(fits, key=lambda b: (cost(b), b.as_tuple()))
            extra = cost(best) - cost(budget)
            paid = self.rent.get(budget, 0.0)
            if cost(best) <= (1.0 + self.config.parallel.reuse_slack) * cost(budget):
                chosen = best
            elif paid + extra <= compile_steps(
                self.config, self.step_seconds(best), self.step_seconds
            ) * cost(best):
                self.rent[budget] = paid + extra
                chosen = best
        self.compiled.add(chosen)
        return chosen
