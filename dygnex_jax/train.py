"""Training and evaluation, top-down: data -> mesh -> model & optimiser -> steps -> loop.

``train_and_evaluate(config, out_dir)`` is the whole recipe; the CLI only calls it. Per epoch:
the scheduler assigns the training windows to steps and devices, every step packs each device's
windows into one padded batch (same budget on every device, rounded to a shape bucket), the
``shard_map`` step computes exact mini-batch gradients (psum of sums, one division), and optax updates
the replicated parameters. Evaluation (``Trainer.evaluate``, by ``data.task``): link prediction embeds
the val/test windows on all devices and scores their candidate pairs as EvolveGCN does (MAP, MRR);
edge classification runs the logits of the target edges on all devices and pools F1 on the host.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import math
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import checkpoint, compile_cache, distributed, parallel, partition
from . import plan as planning
from .comm import collective_bytes
from .config import (
    TASK_METRICS,
    WINDOW_METHODS,
    Config,
    TrainConfig,
    dump_config,
    selection_metric,
    step_layout,
    to_dict,
)
from .data import datasets as _datasets
from .data.node_windows import task_windows
from .errors import UserError
from .evaluation import confusion, edge_cls_metrics, evaluate_link_windows, mse_from_sums
from .graphs import (
    Budget,
    DeviceWork,
    bucket,
    exact_need,
    node_offsets,
    pack_device,
    pack_node_device,
    real_work,
    stack_devices,
)
from .models import LinkPredictor, create_model, dense_pair_scores
from .padding import bucketed, cheapest_holding, layout_view
from .padding import padded_work as layout_padded_work
from .schedule import available_methods, cost_weights, schedule
from .schedule.base import check_sizes
from .schedule.cost import CostModel, default_cost_model, fit, window_features
from .schedule.ilp import require_installed
from .schedule.metrics import summarize


def create_optimizer(cfg: TrainConfig) -> optax.GradientTransformation:
    if cfg.weight_decay > 0:
        return optax.adamw(cfg.learning_rate, weight_decay=cfg.weight_decay)
    return optax.adam(cfg.learning_rate)


def pair_loss(logits: jax.Array, batch: dict) -> tuple[jax.Array, jax.Array]:
    """[Q, 2] logits -> (sum of class-weighted CE over real pairs, sum of their weights)."""
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, batch["pair_label"])
    w = batch["pair_weight"]
    return jnp.sum(w * ce), jnp.sum(w)


def node_loss(pred: jax.Array, batch: dict) -> tuple[jax.Array, jax.Array]:
    """[N] predicted node values -> (sum of squared errors over real target nodes, their count)."""
    err = pred[batch["target_node"]] - batch["target_value"]
    w = batch["target_weight"]
    return jnp.sum(w * err * err), jnp.sum(w)


# --- tasks (data.task): what differs between them is looked up here and branched on in Trainer's
# __init__ (windows, model, evaluation step), device_work, pack and evaluate. TASK_LOSS: (model output,
# batch) -> (loss sum, weight sum). The metrics of each task: config.TASK_METRICS.
TASK_LOSS = {"link": pair_loss, "edge_cls": pair_loss, "node_reg": node_loss}


class NonFiniteStep(UserError):
    """A train step whose loss, gradient or update is not finite (``train.on_nonfinite: stop``)."""


def make_loss_fn(model, loss=pair_loss):
    """``(params, batch) -> (loss sum, weight sum)`` of the task's ``loss`` (default: link prediction,
    the sum of class-weighted CE over real pairs and the sum of their weights)."""

    def loss_fn(params, batch):
        return loss(model.apply(params, batch), batch)

    return loss_fn


def make_step_loss(method: str, model, n_devices: int, loss=pair_loss):
    """The per-device loss of a method's step: whole windows per device (psg, dygnex_*), a time
    pipeline (snapshot) or node ranges (vertex); see parallel.py."""
    if method == "snapshot":
        return parallel.pipeline_loss(model, loss, n_devices)
    if method == "vertex":
        return parallel.vertex_loss(model, loss)
    return make_loss_fn(model, loss)


class Trainer:
    """Holds what one run needs; ``train_and_evaluate`` drives it."""

    def __init__(self, config: Config, *, graph=None, mesh=None):
        self.config = config
        c = config
        compile_cache.enable(c.parallel.compile_cache)  # before the first compilation
        if c.schedule.method not in available_methods():
            raise UserError(
                f"unknown schedule.method {c.schedule.method!r}: choose one of {', '.join(available_methods())}"
            )
        if c.schedule.method == "dygnex_l":
            require_installed(c.schedule)
        # --- data -------------------------------------------------------------------------------
        self.graph = graph if graph is not None else _datasets.load_dataset(c.data)
        self.task = c.data.task
        self.windows = task_windows(self.graph, c.data)
        self.layout = step_layout(c)  # the packed edge layout (padding.py): scan, flat or last
        # the training windows' real work as the layout runs it (``padding.layout_view``)
        self.train_costs = layout_view(
            self.windows.costs("train", c.data.neg_mult), self.windows.edge_profile("train"), self.layout
        )[0]
        self.schedule_costs = planning.scheduler_costs(self.windows, c, self.layout)
        # --- mesh -------------------------------------------------------------------------------
        self.mesh = mesh if mesh is not None else parallel.make_mesh(c.parallel.devices)
        self.n_devices = self.mesh.size
        self.local_rows = parallel.local_rows(self.mesh)  # the devices whose batches this process packs
        check_sizes(len(self.train_costs), self.n_devices, c.train.batch_size)
        # --- model & optimiser ------------------------------------------------------------------
        self.model = create_model(c.model, self.windows.num_features, self.task)
        self.tx = create_optimizer(c.train)
        # --- cost model: the scheduler's weights (seconds per node / edge / pair when profiled) ---
        if c.schedule.cost_model:
            self.set_cost_model(CostModel.load(c.schedule.cost_model))
        else:
            self.cost_model = default_cost_model(self.windows.window)
            self.settings = c.schedule
        self._budgets: set[Budget] = set()  # train budgets used so far (compiled)
        self._rent: dict[Budget, float] = {}  # bucket -> extra padded cost run on larger budgets so far
        # parallel.budgets=planned: the run's training budgets, planned from every epoch's schedule
        # before epoch 1 (``plan_budgets``), their compiled steps and the schedules computed for it
        self.planned: list[Budget] | None = None
        self.compose = ""  # schedule.compose=auto: the composition the plan chose
        self.plan_note = ""  # one line on the plan, for the log
        self._schedules: dict[int, object] = {}
        self._executables: dict[Budget, object] = {}
        self.compile_seconds_ahead = 0.0  # ahead-of-time compilation of the planned budgets
        self.plan_seconds = 0.0  # scheduling every planned epoch and planning the budgets
        self.compile_seconds = 0.0  # all training-step compilation: ahead of time, and on demand
        self.overflow_steps = 0  # training steps no planned budget held (bucketed instead)
        self._slowdown: float | None = None  # see ``slowdown``
        self.step_log: list[tuple[np.ndarray, float]] = []  # (padded work, seconds) of compiled steps
        example = self.pack([[0]], "train", epoch=0, rows=[0])[0]
        self._budgets.clear()  # the init example is not a training step (nothing was compiled to rent)
        local = {k: v[0] for k, v in example.items()}
        # the same on every process; jitted: one compiled program instead of hundreds of eager
        # primitives (3-4 s per Trainer for a scanned model on a 2-core machine)
        params = jax.jit(self.model.init)(jax.random.key(c.train.seed), local)
        self.params = parallel.replicate(self.mesh, params)
        self.opt_state = parallel.replicate(self.mesh, self.tx.init(params))
        # --- steps ------------------------------------------------------------------------------
        self.method = c.schedule.method
        self.micro_batches = c.parallel.micro_batches or self.n_devices
        if self.method == "snapshot" and self.micro_batches > c.train.batch_size:
            raise UserError(
                f"parallel.micro_batches={self.micro_batches} exceeds train.batch_size={c.train.batch_size}: "
                "use fewer micro-batches"
            )
        step_loss = make_step_loss(self.method, self.model, self.n_devices, TASK_LOSS[self.task])
        self.train_step = parallel.make_train_step(step_loss, self.tx, self.mesh)
        self._comm_bytes: dict[tuple, dict] = {}
        self.embed_step = parallel.make_embed_step(
            lambda p, b: self.model.apply(p, b, method=LinkPredictor.embed), self.mesh
        )
        self.score_fn = jax.jit(dense_pair_scores)
        # edge_cls: [P, Q, 2] logits of every device's packed target pairs (the same per-device map)
        self.logits_step = parallel.make_embed_step(lambda p, b: self.model.apply(p, b), self.mesh)
        self.candidate_mode = self._candidate_mode()
        self._eval_candidates: dict[int, tuple] = {}
        if self.task == "node_reg":  # evaluation: the loss summed over the mesh (MSE), see evaluate
            self.sum_step = parallel.make_sum_step(make_loss_fn(self.model, node_loss), self.mesh)
            self.candidate_mode = "none"

    def set_cost_model(self, model: CostModel) -> None:
        """Use ``model``'s seconds per node, edge and pair as the scheduler's alpha, beta, gamma (the
        config's weights stay when the model charges nothing per node, edge or pair)."""
        alpha, beta, gamma = (float(x) for x in model.weights(self.windows.window))
        self.cost_model = model
        if alpha + beta + gamma <= 0:
            # The fit put all time into the per-step constant: sizes do not matter at this scale, so
            # any balance is as good as another; keep the config's alpha/beta/gamma.
            self.settings = self.config.schedule
            return
        self.settings = dataclasses.replace(self.config.schedule, alpha=alpha, beta=beta, gamma=gamma)

    @property
    def weights(self) -> np.ndarray:
        return cost_weights(self.settings)

    def padded_work(self, budget: Budget) -> np.ndarray:
        """[3] (nodes, edges summed over offsets, pairs) one device runs under ``budget`` in this run's
        layout (``padding.padded_work``)."""
        return layout_padded_work(budget, self.windows.window, self.layout)

    def padded_cost(self, budget: Budget) -> float:
        return float(self.padded_work(budget) @ self.weights)

    # --- budgets planned per run ------------------------------------------------------------------

    @property
    def slowdown(self) -> float:
        """How much slower a device runs than the cost model predicts because this process's devices
        share its CPU cores (``plan.shared_cores``; 1 for a profiled cost model, measured as the devices
        ran); averaged over the processes, so all agree."""
        if self._slowdown is None:
            if self.cost_model.source != "analytic":  # measured on the machine: contention included
                self._slowdown = 1.0
                return self._slowdown
            local = planning.shared_cores(
                len(self.local_rows), planning.available_cores(), jax.default_backend()
            )
            self._slowdown = parallel.sum_over_processes(local) / jax.process_count()
        return self._slowdown

    def step_seconds(self, budget: Budget) -> float:
        """Predicted seconds of a training step on ``budget`` (the cost model x ``slowdown``)."""
        return planning.step_seconds_fn(self.cost_model, self.windows.window, self.layout, self.slowdown)(
            budget
        )

    @property
    def plans_budgets(self) -> bool:
        return self.config.parallel.budgets == "planned" and self.method in WINDOW_METHODS

    def plan_budgets(self, log=None) -> list[Budget]:
        """Schedule every epoch the run can foresee (all of them; with ``schedule.reschedule_every`` k,
        epochs 1..k, as later ones depend on measured times) and plan the training budgets that hold
        every step (``plan.planned_budgets``). The schedules are kept for training. Deterministic in the
        config: a resumed run plans the same budgets as the run it continues. Idempotent."""
        if self.planned is not None:
            return self.planned
        if not self.plans_budgets:
            self.planned = []
            return self.planned
        start = time.perf_counter()
        run = planning.plan_run(
            self.windows,
            self.config,
            self.n_devices,
            self.layout,
            self.settings,
            planning.planned_epochs(self.config),
            self.train_costs,
            step_seconds=self.step_seconds,
        )
        self.compose = run.compose
        self._schedules.update(run.schedules)
        self.planned = run.budgets
        tried = ", ".join(f"{k} {v:.3g}" for k, v in run.tried.items())
        self.plan_seconds = time.perf_counter() - start
        self.plan_note = (
            f"planned {len(self.planned)} training budget(s) for "
            f"{sum(len(n) for n in run.needs.values())} steps of epochs 1..{len(run.schedules)} "
            f"({self.layout} layout, compose {run.compose}{', fitted to ' + run.fitted if run.fitted else ''}"
            + (f"; planned cost by composition: {tried}" if tried else "")
            + f"; {self.plan_seconds:.1f} s)"
        )
        if log:
            log(self.plan_note)
        return self.planned

    def compile_planned(self, log=None) -> float:
        """Compile the train step for every planned budget ahead of the first step (one line per
        compilation to ``log``). Returns the seconds spent; they are not step time."""
        todo = [b for b in self.plan_budgets(log) if b not in self._executables]
        start = time.perf_counter()
        for i, budget in enumerate(todo):
            t0 = time.perf_counter()
            empty = [DeviceWork([], [], []) for _ in self.local_rows]
            host = self.pack_budget(empty, budget, "train", 0)
            self._executables[budget] = parallel.compile_step(
                self.train_step, self.params, self.opt_state, self.mesh, host
            )
            self._budgets.add(budget)
            if log:
                log(
                    f"compiled training step {i + 1}/{len(todo)} (budget nodes {budget.nodes}, edges "
                    f"{budget.edges}, pairs {budget.pairs}, windows {budget.windows}) in "
                    f"{time.perf_counter() - t0:.1f} s"
                )
        seconds = time.perf_counter() - start
        self.compile_seconds_ahead += seconds
        self.compile_seconds += seconds
        return seconds

    def refit_cost_model(self) -> CostModel | None:
        """Fit the cost model on the step times measured so far (compiling steps excluded)."""
        if len(self.step_log) < 5:
            return None
        work = np.array([w for w, _ in self.step_log])
        seconds = np.array([s for _, s in self.step_log])
        model = fit(
            window_features(work, self.windows.window), seconds, window=self.windows.window, source="refit"
        )
        self.set_cost_model(model)
        self._schedules.clear()  # planned with the old weights: later epochs are scheduled anew
        return model

    # --- packing ------------------------------------------------------------------------------

    def device_work(self, window_ids, split: str, epoch: int) -> DeviceWork:
        wins = [self.windows.get(int(k)) for k in window_ids]
        if self.task == "node_reg":  # every node is a target, in training and evaluation alike
            return DeviceWork(
                wins, [np.arange(w.num_local, dtype=np.int32) for w in wins], [w.y for w in wins]
            )
        if split == "train" or self.task == "edge_cls":  # edge_cls: target edges everywhere
            c = self.config
            samples = [
                self.windows.training_pairs(w.index, c.data.neg_mult, c.train.seed, epoch) for w in wins
            ]
            return DeviceWork(wins, [s[0] for s in samples], [s[1] for s in samples])
        empty = [np.zeros((0, 2), np.int32) for _ in wins]
        return DeviceWork(wins, empty, [np.zeros(0, np.int32) for _ in wins])

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
        if budget in self._budgets:
            return budget
        fits = [
            b
            for b in self._budgets
            if b.windows == budget.windows
            and b.nodes >= budget.nodes
            and b.edges >= budget.edges
            and b.pairs >= budget.pairs
        ]
        chosen = budget
        if fits:
            best = min(fits, key=lambda b: (cost(b), b.as_tuple()))
            extra = cost(best) - cost(budget)
            paid = self._rent.get(budget, 0.0)
            if cost(best) <= (1.0 + self.config.parallel.reuse_slack) * cost(budget):
                chosen = best
            elif paid + extra <= planning.compile_steps(self.config, self.step_seconds(best)) * cost(best):
                self._rent[budget] = paid + extra
                chosen = best
        self._budgets.add(chosen)
        return chosen

    def pack(self, step: list, split: str, epoch: int, rows: list[int] | None = None, groups: int = 0):
        """Window ids per device (or per group) -> (host batch [L, ...], work [groups], budget).

        The budget is the maximum over all groups (every process computes it alike). ``groups``: pack
        that many groups instead of P (the micro-batches of snapshot partition; then all are packed).
        Else only the ``rows`` devices (default: this process's, ``local_rows``; all of them in one
        process) are packed.
        """
        groups = groups or self.n_devices
        split_ids = self.windows.splits[split]
        work = [self.device_work(split_ids[np.asarray(ids, np.int64)], split, epoch) for ids in step]
        work += [DeviceWork([], [], []) for _ in range(groups - len(work))]
        per_step = self.config.train.batch_size if split == "train" else self._eval_per_step()
        need = exact_need(work, -(-per_step // groups), self.layout)
        p = self.config.parallel
        budget = self.train_budget(need) if split == "train" else bucketed(need, p.bucket_ratio, p.min_bucket)
        if rows is None:
            rows = self.local_rows if groups == self.n_devices else range(groups)
        return self.pack_budget([work[r] for r in rows], budget, split, epoch), work, budget

    def train_budget(self, need: Budget) -> Budget:
        """The budget a training step of exact need ``need`` runs on: the cheapest planned budget that
        holds it; else (``parallel.budgets: buckets``, the partitioned baselines, or a step the plan
        did not foresee) its bucket, or a compiled larger one (``reuse_budget``)."""
        if self.planned:
            chosen = cheapest_holding(need, self.planned, self.windows.window, self.layout, self.weights)
            if chosen is not None:
                self._budgets.add(chosen)
                return chosen
            self.overflow_steps += 1
        p = self.config.parallel
        return self.reuse_budget(bucketed(need, p.bucket_ratio, p.min_bucket))

    def pack_budget(self, work: list[DeviceWork], budget: Budget, split: str, epoch: int) -> dict:
        """Host batch [len(work), ...] of these devices' work under ``budget`` in the run's layout."""
        w, layout = self.windows.window, self.layout
        if self.task == "node_reg":
            nf = self.windows.num_features
            return stack_devices([pack_node_device(d, budget, w, nf, layout) for d in work])
        cw = self.config.train.class_weights
        return stack_devices([pack_device(d, budget, w, cw, layout) for d in work])

    def pack_train(self, step: list, epoch: int):
        """A training step of the run's method -> (host batch [P, ...], budget, real loads [P] of the
        devices, padded load of the whole step), loads weighted by the cost weights.

        psg / dygnex: each device its own windows. snapshot: the step's windows in M micro-batches,
        every device its time range of each (every process builds all P devices' rows and keeps its
        own); its padded load counts the M + P - 1 ticks of T offsets
        every device runs (bubble and padded offsets included), the real load is the micro-batches'
        real work. vertex: the step packed as one graph, every device its node range.
        """
        c, w = self.config, self.windows.window
        if self.method == "snapshot":
            m = self.micro_batches
            groups = [list(g) for g in np.array_split(np.concatenate(step), m)]
            micro, work, budget = self.pack(groups, "train", epoch, rows=list(range(m)), groups=m)
            batch = partition.pipeline_batch(micro, w, self.n_devices)
            t = batch["feat"].shape[2]
            ticks = m + self.n_devices - 1
            padded = self.n_devices * ticks * self.padded_cost(budget) * t / w
            real = [float(real_work(d, self.layout) @ self.weights) for d in work]
            loads = [sum(real) / self.n_devices] * self.n_devices  # every device works on every window
            return self._local(batch), budget, loads, padded
        if self.method == "vertex":
            ids = self.windows.splits["train"][np.concatenate(step).astype(np.int64)]
            work = self.device_work(ids, "train", epoch)
            batch, budget, real = partition.vertex_step(
                work, self.n_devices, c.parallel, w, c.train.batch_size, c.train.class_weights
            )
            loads = [float(r @ self.weights) for r in real]
            return (
                self._local(batch),
                budget,
                loads,
                self.n_devices * self.padded_cost(budget),
            )
        batch, work, budget = self.pack(step, "train", epoch)
        loads = [float(real_work(d, self.layout) @ self.weights) for d in work]
        return batch, budget, loads, self.n_devices * self.padded_cost(budget)

    def _local(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """This process's rows of a batch built for all P devices (every process builds the same)."""
        if len(self.local_rows) == self.n_devices:
            return batch
        return {k: v[self.local_rows] for k, v in batch.items()}

    def comm_bytes(self, batch: dict) -> dict[str, float]:
        """Bytes the step's collectives move for a batch of this shape (traced once per shape; once per
        run for the whole-window methods, whose only collectives are the parameter-sized all-reduces)."""
        if self.method in WINDOW_METHODS:
            key = ("whole windows",)
        else:
            key = tuple((k, v.shape) for k, v in sorted(batch.items()))
        if key not in self._comm_bytes:
            # the global shapes: a process holds only its devices' rows of the leading P axis
            shapes = {
                k: jax.ShapeDtypeStruct((self.n_devices, *v.shape[1:]), v.dtype) for k, v in batch.items()
            }
            self._comm_bytes[key] = collective_bytes(self.train_step.grad_fn, self.params, shapes)
        return self._comm_bytes[key]

    # --- training -----------------------------------------------------------------------------

    def epoch_schedule(self, epoch: int):
        """The scheduler's assignment of the training windows to steps and devices for ``epoch`` (the one
        computed when the budgets were planned, if any: kept, so an epoch run again — a restore in the
        same process — gets the same steps, fitted to the budgets as they were planned)."""
        if epoch in self._schedules:
            return self._schedules[epoch]
        c = self.config
        settings = self.settings
        if self.compose and settings.compose == "auto":  # the composition the plan chose
            settings = dataclasses.replace(settings, compose=self.compose)
        return schedule(
            self.schedule_costs,
            self.n_devices,
            c.train.batch_size,
            settings,
            seed=c.train.seed,
            epoch=epoch,
        )

    def prepared_steps(self, sched, epoch: int):
        """Every step of ``sched`` in order as (host batch, batch on the mesh, budget, loads, padded
        load). With ``parallel.prefetch`` = k > 0 a background thread packs and places the next k steps
        while the current one runs (the main thread waits on the devices with the GIL released), so host
        packing overlaps device work; steps are packed one after another either way, so the batches,
        and the budgets ``reuse_budget`` picks, are the same."""

        def prepare(step):
            batch, budget, loads, padded = self.pack_train(step, epoch)
            return batch, parallel.shard_batch(self.mesh, batch), budget, loads, padded

        ahead = self.config.parallel.prefetch
        if ahead <= 0:
            yield from map(prepare, sched.steps)
            return
        steps = iter(sched.steps)
        with ThreadPoolExecutor(1, thread_name_prefix="dygnex-pack") as pool:
            pending = collections.deque(pool.submit(prepare, s) for s in itertools.islice(steps, ahead))
            while pending:
                ready = pending.popleft().result()
                nxt = next(steps, None)
                if nxt is not None:
                    pending.append(pool.submit(prepare, nxt))
                yield ready

    def train_epoch(self, epoch: int, progress=None, sched=None) -> dict:
        """One training epoch; ``sched``: ``epoch_schedule(epoch)`` when the caller already has it."""
        c = self.config
        self.plan_budgets()
        sched = sched if sched is not None else self.epoch_schedule(epoch)
        start, start_cpu = time.perf_counter(), time.process_time()
        loss_sum = weight_sum = 0.0
        real = padded = predicted = 0.0
        skipped = 0
        budgets = set()
        comm = {k: 0.0 for k in ("gradients", "states", "features", "total")}
        self.last_steps: list[dict] = []  # per-step figures of this epoch (steps.jsonl)
        for i, (step, (batch, placed, budget, loads, step_padded)) in enumerate(
            zip(sched.steps, self.prepared_steps(sched, epoch))
        ):
            budgets.add(budget.as_tuple())
            step_comm = self.comm_bytes(batch)
            for k in comm:
                comm[k] += step_comm[k]
            compiled = len(self.train_step.traces)
            step_fn = self._executables.get(budget, self.train_step)  # compiled ahead, or jit on demand
            step_start, step_cpu = time.perf_counter(), time.process_time()
            self.params, self.opt_state, stats = step_fn(self.params, self.opt_state, placed)
            loss, weight = float(stats["loss"]), float(stats["weight"])
            step_seconds = time.perf_counter() - step_start
            step_cpu = time.process_time() - step_cpu  # all of this process's threads
            pw = self.padded_work(budget)
            if len(self.train_step.traces) == compiled:  # compile time is no step time
                self.step_log.append((pw, step_seconds))
            else:
                self.compile_seconds += step_seconds  # compiled on demand: counted as compilation
            step_predicted = float(self.cost_model.predict_costs(pw[None], self.windows.window)[0])
            predicted += step_predicted
            finite = bool(stats["finite"])  # if not, the step left params and optimiser state alone
            if not finite and c.train.on_nonfinite == "stop":
                split_ids = self.windows.splits["train"]
                wins = sorted(int(split_ids[k]) for ids in step for k in ids)
                raise NonFiniteStep(
                    f"non-finite loss or gradient (loss {loss}, gradient norm {float(stats['grad_norm'])}) "
                    f"at epoch {epoch} step {i} (windows {', '.join(map(str, wins))})"
                )
            if finite:
                loss_sum += loss * weight
                weight_sum += weight
            else:
                skipped += 1
            real += sum(loads)
            padded += step_padded
            self.last_steps.append(
                {
                    "epoch": epoch,
                    "step": i,
                    "seconds": step_seconds,
                    "cpu_seconds": step_cpu,
                    "compiled": len(self.train_step.traces) > compiled,
                    "predicted_seconds": step_predicted,
                    "budget": list(budget.as_tuple()),
                    "device_loads": loads,
                    "padding_efficiency": sum(loads) / step_padded,
                    "imbalance": max(loads) / max(np.mean(loads), 1e-12) - 1.0,
                    "comm_bytes": step_comm["total"],
                    "loss": loss,
                    "finite": finite,
                }
            )
            if progress:
                progress(i + 1, sched.num_steps)
        seconds = time.perf_counter() - start
        # CPU seconds of this epoch's training in all processes (every thread of each)
        cpu_seconds = parallel.sum_over_processes(time.process_time() - start_cpu)
        sched_stats = summarize(self.train_costs, sched, self.weights)
        return {
            "loss": loss_sum / weight_sum if weight_sum else float("nan"),
            "skipped_steps": skipped,
            "epoch_seconds": seconds,
            "epoch_cpu_seconds": cpu_seconds,
            "predicted_epoch_seconds": predicted,
            "padding_efficiency": real / padded if padded else 1.0,
            "schedule_padding_efficiency": sched_stats["padding_efficiency"],
            "imbalance": sched_stats["imbalance"],
            "scheduler_seconds": sched.seconds,
            "schedule_fallback": sched.fallback,
            "steps": sched.num_steps,
            "budgets": len(budgets),
            **{f"comm_bytes_{k}" if k != "total" else "comm_bytes": v for k, v in comm.items()},
            **(
                {
                    "bubble_fraction": partition.bubble_fraction(
                        self.micro_batches, self.n_devices, self.windows.window
                    )
                }
                if self.method == "snapshot"
                else {}
            ),
        }

    # --- evaluation ---------------------------------------------------------------------------

    def _candidate_mode(self) -> str:
        e = self.config.eval
        if self.config.data.task == "edge_cls":
            return "target_edges"  # every edge of the target snapshot is classified
        if e.candidates != "auto":
            return e.candidates
        largest = int(self.windows.costs("val")[:, 0].max(initial=0))
        largest = max(largest, int(self.windows.costs("test")[:, 0].max(initial=0)))
        return "all" if largest <= e.all_max_nodes else "sampled"

    def _eval_per_step(self) -> int:
        return max(self.config.eval.batch_size, self.n_devices)

    def embeddings(self, split: str) -> dict[int, np.ndarray]:
        """Window id -> [num_local, H] embeddings at the last history snapshot, for a split."""
        ids = np.arange(len(self.windows.splits[split]))
        out = {}
        per_step = self._eval_per_step()
        for lo in range(0, len(ids), per_step):
            chunk = ids[lo : lo + per_step]
            step = [list(part) for part in np.array_split(chunk, self.n_devices)]
            batch, work, _ = self.pack(step, split, epoch=0)
            emb = parallel.to_host(self.embed_step(self.params, parallel.shard_batch(self.mesh, batch)))
            for p, dev in enumerate(work):
                for win, off in zip(dev.windows, node_offsets(dev)):
                    out[win.index] = emb[p, off : off + win.num_local]
        return out

    def local_scores(self, emb: np.ndarray, head=None) -> np.ndarray:
        n = len(emb)
        size = bucket(n, self.config.parallel.bucket_ratio, self.config.parallel.min_bucket)
        padded = np.zeros((size, emb.shape[1]), np.float32)
        padded[:n] = emb
        head = parallel.to_host(self.params["params"]["head"]) if head is None else head
        s = self.score_fn(head, jnp.asarray(padded), jnp.asarray(padded))
        return np.asarray(s)[:n, :n]

    def evaluate(self, split: str) -> dict:
        """The task's metrics of a split (``TASK_METRICS``; EvolveGCN's definitions, see evaluation.py):
        link MAP and MRR, edge_cls F1, node_reg MSE."""
        if self.task == "node_reg":
            return self.evaluate_sums(split)
        if self.task == "edge_cls":
            return self.evaluate_edge_cls(split)
        head = parallel.to_host(self.params["params"]["head"])  # a host copy: scoring runs per process
        return evaluate_link_windows(
            self.windows,
            self.embeddings(split),
            lambda emb: self.local_scores(emb, head),
            self.candidate_mode,
            self.config.eval,
            self._eval_candidates,
        )

    def evaluate_sums(self, split: str) -> dict:
        """MSE of a split (node_reg): every step's loss sum and target count psum-ed on the mesh, then
        summed over steps and divided once."""
        ids = np.arange(len(self.windows.splits[split]))
        per_step, sums = self._eval_per_step(), []
        for lo in range(0, len(ids), per_step):
            step = [list(part) for part in np.array_split(ids[lo : lo + per_step], self.n_devices)]
            batch, _, _ = self.pack(step, split, epoch=0)
            sums.append(parallel.to_host(self.sum_step(self.params, parallel.shard_batch(self.mesh, batch))))
        return mse_from_sums(sums)

    def evaluate_edge_cls(self, split: str) -> dict:
        """F1 of a split's target edges: the windows packed with their pairs, ``eval.batch_size`` per
        step over all devices; the logits of a device's real pairs (the first ``real_pairs``, padding
        after them) are compared with their labels on the host."""
        ids = np.arange(len(self.windows.splits[split]))
        counts = np.zeros((2, 2), np.int64)
        per_step = self._eval_per_step()
        for lo in range(0, len(ids), per_step):
            step = [list(part) for part in np.array_split(ids[lo : lo + per_step], self.n_devices)]
            batch, work, _ = self.pack(step, split, epoch=0)
            logits = parallel.to_host(self.logits_step(self.params, parallel.shard_batch(self.mesh, batch)))
            for p, dev in enumerate(work):
                q = dev.real_pairs()
                if q:
                    counts += confusion(np.concatenate(dev.labels), logits[p, :q].argmax(-1))
        return edge_cls_metrics(counts)


# -------------------------------------------------------------------------------------------------


class Progress:
    """A one-line progress bar on a terminal; otherwise (a log file, a pipe) a line every ``every``
    seconds within a long epoch, so that a log shows a long run is alive. Per-epoch lines always.
    Silent when ``quiet`` (the processes other than 0 of a multi-process run)."""

    def __init__(self, stream=None, every: float = 60.0, quiet: bool = False):
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.live = self.stream.isatty() and not quiet
        self.every = every

    def bar(self, epoch: int, epochs: int):
        if not self.live:
            start = last = time.monotonic()

            def lines(done, total):
                nonlocal last
                now = time.monotonic()
                if done < total and now - last >= self.every:
                    last = now
                    self.line(f"epoch {epoch}/{epochs}: step {done}/{total} after {now - start:.0f} s")

            return lines

        def update(done, total):
            width = 30
            fill = int(width * done / total)
            self.stream.write(f"\repoch {epoch}/{epochs} [{'#' * fill}{'.' * (width - fill)}] {done}/{total}")
            self.stream.flush()
            if done == total:
                self.stream.write("\r" + " " * 60 + "\r")

        return update

    def line(self, text: str):
        if not self.quiet:
            print(text, file=self.stream, flush=True)


def default_out_dir(config: Config) -> Path:
    return Path("runs") / f"{config.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def prepare_out_dir(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {str(out_dir)!r} is a file: choose a directory")
    if (out_dir / "metrics.jsonl").exists():
        raise UserError(f"--out {str(out_dir)!r} already holds a run: choose another directory")
    out_dir.mkdir(parents=True, exist_ok=True)


def train_and_evaluate(
    config: Config, out_dir: str | Path | None = None, *, stream=None, resume: bool = False
) -> dict:
    """Train ``config`` and write ``config.yaml``, ``metrics.jsonl`` and ``summary.json`` to ``out_dir``,
    with checkpoints under ``out_dir/checkpoints`` (see checkpoint.py).

    Everything that can fail on bad input (data, config, devices) is checked before ``out_dir`` is
    created. With ``resume``, ``out_dir`` is an earlier run (``checkpoint.resume_config`` checked it):
    training continues after its latest complete checkpoint. In a multi-process run every process
    trains; only process 0 prints and writes files. Returns the summary dict.
    """
    main = distributed.is_main_process()
    progress = Progress(stream, quiet=not main)
    trainer = Trainer(config)
    trainer.plan_budgets()  # before a resume restores re-fitted weights: the same plan
    out = Path(out_dir) if out_dir is not None else default_out_dir(config)
    history, first = [], 1
    if resume:
        ckpt = checkpoint.latest(out)
        history, first = checkpoint.restore(trainer, ckpt), ckpt.epoch + 1
        if main:
            checkpoint.rewind_logs(out, history, config)
        progress.line(f"resuming {out} from {ckpt.path.name}: epochs {first}..{config.train.epochs} to run")
    elif main:
        prepare_out_dir(out)
        dump_config(config, out / "config.yaml")
    w = trainer.windows
    progress.line(
        f"{trainer.graph.name}: {trainer.graph.num_nodes} nodes, {trainer.graph.num_snapshots} snapshots, "
        f"windows train/val/test {len(w.splits['train'])}/{len(w.splits['val'])}/{len(w.splits['test'])}, "
        f"{trainer.n_devices} devices, model {config.model.name}, schedule {config.schedule.method}, "
        f"task {config.data.task}, eval candidates {trainer.candidate_mode}"
    )
    for done in range(1, first):  # schedules planned for epochs a resumed run has already trained
        trainer._schedules.pop(done, None)
    if trainer.plan_note:
        progress.line(trainer.plan_note)
    trainer.compile_planned(progress.line)
    metrics_file = (out / "metrics.jsonl").open("a") if main else open(os.devnull, "w")
    steps_file = (out / "steps.jsonl").open("a") if main else open(os.devnull, "w")
    epochs = config.train.epochs
    for epoch in range(first, epochs + 1):
        try:
            row = {"epoch": epoch, **trainer.train_epoch(epoch, progress.bar(epoch, epochs))}
        except NonFiniteStep as e:
            last = checkpoint.latest(out)
            where = (
                f"last good checkpoint {last.path} (epoch {last.epoch}): fix the config and continue "
                f"with `train --resume {out}` (e.g. train.learning_rate=...)"
                if last
                else "no checkpoint yet: fix the config (e.g. lower train.learning_rate) and start again"
            )
            raise UserError(f"{e}; {where}; or set train.on_nonfinite=skip") from None
        every = config.schedule.reschedule_every
        if every and epoch % every == 0 and epoch < epochs:
            model = trainer.refit_cost_model()
            if model is not None:
                row["refit_mape"] = model.mape
                progress.line(
                    f"re-fitted the cost model on {model.n_samples} measured steps (held-out error "
                    f"{100 * model.mape:.1f}%); re-scheduling with its weights"
                )
        if epoch % config.train.eval_every == 0 or epoch == epochs:
            start = time.perf_counter()
            for split in ("val", "test"):
                if len(w.splits[split]):
                    m = trainer.evaluate(split)
                    row.update({f"{split}_{k}": m[k] for k in TASK_METRICS[trainer.task][0]})
            row["eval_seconds"] = time.perf_counter() - start
        history.append(row)
        metrics_file.write(json.dumps(row) + "\n")
        metrics_file.flush()
        steps_file.write("".join(json.dumps(r) + "\n" for r in trainer.last_steps))
        steps_file.flush()
        names = TASK_METRICS[trainer.task][0]
        evals = "".join(
            f"  {s}" + "".join(f" {k.upper()} {row[f'{s}_{k}']:.4f}" for k in names)
            for s in ("val", "test")
            if f"{s}_{names[0]}" in row
        )
        skipped = f"  skipped {row['skipped_steps']} non-finite step(s)" if row["skipped_steps"] else ""
        progress.line(
            f"epoch {epoch}/{epochs}  loss {row['loss']:.4f}{evals}  {row['epoch_seconds']:.2f}s  "
            f"pad-eff {row['padding_efficiency']:.3f}{skipped}"
        )
        if main and checkpoint.is_due(epoch, config.train):  # replicated state: process 0 writes it
            path = checkpoint.save(trainer, out, epoch, history, config.train.keep_checkpoints)
            progress.line(f"checkpoint {path}")
    metrics_file.close()
    steps_file.close()
    summary = summarize_run(config, trainer, history)
    if main:
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
    progress.line(f"wrote {out}/summary.json")
    return summary


def summarize_run(config: Config, trainer: Trainer, history: list[dict]) -> dict:
    names = TASK_METRICS[config.data.task][0]
    name, better = selection_metric(config.data.task)
    key = f"val_{name}"
    evaluated = [r for r in history if key in r and not math.isnan(r[key])]
    best = better(evaluated, key=lambda r: r[key]) if evaluated else history[-1]
    timed = [r["epoch_seconds"] for r in history[1:]] or [history[0]["epoch_seconds"]]
    pick = ("loss", *(f"{s}_{k}" for s in ("val", "test") for k in names))
    return {
        "name": config.name,
        "task": config.data.task,
        "dataset": trainer.graph.name,
        "model": config.model.name,
        "schedule": config.schedule.method,
        "devices": trainer.n_devices,
        "windows": {s: int(len(v)) for s, v in trainer.windows.splits.items()},
        "eval_candidates": trainer.candidate_mode,
        "epochs": len(history),
        "final": {k: history[-1].get(k) for k in pick},
        "best": {"epoch": best["epoch"], **{k: best.get(k) for k in pick}},
        "median_epoch_seconds": statistics.median(timed),
        "first_epoch_seconds": history[0]["epoch_seconds"],
        "mean_padding_efficiency": float(np.mean([r["padding_efficiency"] for r in history])),
        # bytes sent by collectives per training epoch (gradients, states, features), see comm.py
        "comm_bytes_per_epoch": {
            k: float(np.mean([r[f"comm_bytes_{k}"] for r in history]))
            for k in ("gradients", "states", "features")
        }
        | {"total": float(np.mean([r["comm_bytes"] for r in history]))},
        "compilations": len(trainer.train_step.traces),
        # training budgets: the layout, the policy, the planned budgets (compiled before epoch 1), the
        # steps no planned budget held, and the seconds spent compiling training steps (not step time)
        "layout": trainer.layout,
        "budget_policy": config.parallel.budgets if trainer.plans_budgets else "buckets",
        "planned_budgets": [list(b.as_tuple()) for b in trainer.planned or []],
        "overflow_steps": trainer.overflow_steps,
        "compile_seconds": trainer.compile_seconds,
        "compile_seconds_ahead": trainer.compile_seconds_ahead,
        "plan_seconds": trainer.plan_seconds,  # the schedules of the planned epochs and their budgets
        # the persistent compilation cache: folder, hits and misses of this process, bytes it holds
        "compile_cache": compile_cache.stats()
        | {"bytes": compile_cache.size_bytes(compile_cache.stats()["dir"])},
        "config": to_dict(config),
    }
