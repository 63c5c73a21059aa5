"""The ``Trainer``: what one run holds (data, mesh, model and optimiser, strategy, packer, evaluator) and
one epoch of training (``train_epoch``, run by ``epoch_loop.py``); ``train.train_and_evaluate`` drives
it. Per epoch the scheduler assigns the training windows to steps and devices; every step is packed into
one padded host batch per device (``Packer``: the same budget on every device) in the way of the run's
strategy (``strategies/``: whole windows, a time pipeline, or node ranges); the ``shard_map`` step
computes exact mini-batch gradients (psum of sums, one division) and optax updates the replicated
parameters. Evaluation is the task's (``tasks.py``: link MAP / MRR, edge_cls F1, node_reg MSE).
"""

from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np
import optax

from . import compile_cache, epoch_loop, host_memory, memory_plan, parallel, pricing, resources, strategies
from . import plan as planning
from .comm import collective_bytes
from .config import Config, TrainConfig, step_layout
from .data import datasets as _datasets
from .data.node_windows import task_windows
from .epoch_loop import NonFiniteStep  # noqa: F401  (re-exported: train.py, tests)
from .graphs import Budget, DeviceWork
from .models import create_model
from .packer import Packer
from .padding import layout_view
from .padding import padded_work as layout_padded_work
from .schedule import cost_weights, schedule
from .schedule.base import REPEATED, check_sizes, repeated
from .schedule.cost import CostModel, beyond_profile, refit
from .schedule.ilp import require_installed
from .tasks import get_task


def create_optimizer(cfg: TrainConfig) -> optax.GradientTransformation:
    if cfg.weight_decay > 0:
        return optax.adamw(cfg.learning_rate, weight_decay=cfg.weight_decay)
    return optax.adam(cfg.learning_rate)


class Trainer:
    """Holds what one run needs; ``train_and_evaluate`` drives it.

    Parts: ``windows`` (the data), ``mesh``, ``model`` / ``tx`` / ``params`` / ``opt_state``,
    ``strategy`` (how a step runs), ``packer`` (steps -> host batches; the run's budgets),
    ``evaluator`` (the task's evaluation), the cost model and scheduler ``settings``.
    ``scheduler``: the function composing an epoch's steps (default ``schedule.schedule``).
    """

    def __init__(self, config: Config, *, graph=None, mesh=None, scheduler=schedule, cost_model=None):
        self.config = c = config
        host_memory.configure(c.parallel.host_malloc)  # before the run's large buffers exist
        compile_cache.enable(c.parallel.compile_cache)  # before the first compilation
        self.method = c.schedule.method
        self.strategy = strategies.create(self.method)
        if self.strategy.scheduler == "dygnex_l":
            require_installed(c.schedule)
        self.scheduler = scheduler
        # --- data -------------------------------------------------------------------------------
        self.graph = graph if graph is not None else _datasets.load_dataset(c.data)
        self.task = c.data.task
        task = get_task(self.task)
        self.windows = task_windows(self.graph, c.data)
        self.layout = step_layout(c)  # the packed edge layout (padding.py): scan, flat or last
        # the training windows' real work as the layout runs it (``padding.layout_view``)
        profile = self.windows.edge_profile("train")
        self.train_costs = layout_view(self.windows.costs("train", c.data.neg_mult), profile, self.layout)[0]
        self.schedule_costs = planning.scheduler_costs(self.windows, c, self.layout)
        # --- mesh -------------------------------------------------------------------------------
        self.mesh = mesh if mesh is not None else parallel.make_mesh(c.parallel.devices)
        self.n_devices = self.mesh.size
        self.local_rows = parallel.local_rows(self.mesh)  # the devices whose batches this process packs
        check_sizes(len(self.train_costs), self.n_devices, c.train.batch_size)
        self.strategy.check(c, self.n_devices)
        # what evaluation scores (link: eval.candidates resolved), fixed for the run; then the model,
        # training pairs, planning horizon and evaluation checked against the limits before they exist
        self.candidate_mode = task.candidate_mode(self.windows, c)
        # this process's devices that keep their arrays in host memory (CPU devices)
        self.cpu_rows = len(self.local_rows) if jax.default_backend() == "cpu" else 0
        resources.check_run(self.windows, c, self.n_devices, self.candidate_mode, self.cpu_rows)
        # --- cost model: the scheduler's weights (seconds per node / edge / pair when profiled) ---
        self.host_devices, self.host_processes = parallel.host_devices(self.mesh)
        model, self.cost_note = pricing.resolve(self, cost_model)  # schedule.cost_model, or the run's own
        self.set_cost_model(model)
        self._slowdown: float | None = None  # see ``slowdown``
        # Budget -> predicted seconds of a training step, with the compile seconds (live: a refit changes it)
        self.step_seconds = planning.LivePricer(lambda: self.pricer)
        self.packer = Packer(
            self.windows,
            c,
            self.layout,
            task,
            self.n_devices,
            self.local_rows,
            padded_cost=self.padded_cost,
            step_seconds=self.step_seconds,
            weights=lambda: self.weights,
        )
        # --- model & optimiser ------------------------------------------------------------------
        self.model = create_model(c.model, self.windows.num_features, self.task)
        self.tx = create_optimizer(c.train)
        self._init_state()
        # --- steps ------------------------------------------------------------------------------
        step_loss = self.strategy.step_loss(self.model, task.loss, self.n_devices)
        self.train_step = parallel.make_train_step(step_loss, self.tx, self.mesh)
        self.evaluator = task.evaluator(self)
        self.eval_log = None  # a callable taking a line: progress of long evaluations (tasks.eval_outputs)
        self.eval_log_every = 60.0  # seconds between such lines
        # collective bytes per ``Strategy.comm_key``; trainers running the same step program may share it
        self.comm_cache: dict[tuple, dict] = {}
        # --- the run's plan and counters (parallel.budgets=planned: planned before epoch 1) -------
        self.accumulate = 1  # micro-steps per update: the planned steps' memory (memory_plan.py)
        self.memory_fixed = False  # accumulate chosen (or restored from a checkpoint) for this run
        self.step_bytes: dict[Budget, float] = {}  # compiled budget -> bytes per device (XLA)
        self.memory: dict = {}  # the run's memory figures (summary.json "memory"; memory_plan.py)
        self.compose = ""  # schedule.compose=auto: the composition the plan chose
        self.plan_note = ""  # one line on the plan, for the log
        self.range_note = ""  # a line when the planned steps reach beyond the cost model's profile
        self.schedules: dict[int, object] = {}  # epoch -> its planned schedule; REPEATED: see epoch_schedule
        self.plan_needs: dict[int, list] = {}  # epoch -> every planned step's exact need (memory_plan)
        self._executables: dict[Budget, object] = {}
        self.compile_seconds_ahead = 0.0  # ahead-of-time compilation of the planned budgets
        self.plan_seconds = 0.0  # scheduling every planned epoch and planning the budgets
        self.compile_seconds = 0.0  # all training-step compilation: ahead of time, and on demand
        # (padded work, seconds, alone) of the steps that compiled nothing (alone: nothing packed beside)
        self.step_log: list[tuple[np.ndarray, float, bool]] = []
        self.last_steps: list[dict] = []  # per-step figures of the last epoch (steps.jsonl)

    def _init_state(self) -> None:
        """Parameters and optimiser state, initialised on an example batch and replicated; the same on
        every process. Jitted: one compiled program instead of hundreds of eager primitives."""
        example = self.packer.pack([[0]], "train", epoch=0, rows=[0])[0]
        self.packer.forget()  # the init example is not a training step (nothing was compiled)
        local = {k: v[0] for k, v in example.items()}
        params = jax.jit(self.model.init)(jax.random.key(self.config.train.seed), local)
        self.params = parallel.replicate(self.mesh, params)
        self.opt_state = parallel.replicate(self.mesh, self.tx.init(params))

    # --- cost model and pricing -----------------------------------------------------------------

    def set_cost_model(self, model: CostModel) -> None:
        """Use ``model``'s seconds per node, edge and pair as the scheduler's alpha, beta, gamma
        (``plan.run_settings``: the config's weights stay for the analytic model, or one that charges
        nothing per node, edge or pair)."""
        self.cost_model = model
        self._slowdown = None
        self.settings = planning.run_settings(self.config.schedule, model, self.windows.window)

    @property
    def weights(self) -> np.ndarray:
        return cost_weights(self.settings)

    def padded_work(self, budget: Budget) -> np.ndarray:
        """[3] (nodes, edges summed over offsets, pairs) one device runs under ``budget`` in this run's
        layout (``padding.padded_work``)."""
        return layout_padded_work(budget, self.windows.window, self.layout)

    def padded_cost(self, budget: Budget) -> float:
        return float(self.padded_work(budget) @ self.weights)

    @property
    def slowdown(self) -> float:
        """How much slower a device runs than the cost model predicts (``pricing.slowdown``: devices
        sharing CPU cores); the same on every process."""
        if self._slowdown is None:
            self._slowdown = pricing.slowdown(self.cost_model, self.host_devices)
        return self._slowdown

    @property
    def pricer(self) -> planning.StepSeconds:
        """``Budget -> predicted seconds`` (the cost model x ``slowdown``) with its compile seconds."""
        workers = self.config.parallel.compile_workers  # compilations at once, priced in rounds
        return planning.step_seconds_fn(
            self.cost_model, self.windows.window, self.layout, self.slowdown, workers
        )

    def refit_cost_model(self) -> CostModel | None:
        """Fit the cost model on the step times measured so far (``cost.refit``: steps beside the
        packing and alone apart) and schedule later epochs with its weights; None below 5 steps."""
        model = refit(self.step_log, self.windows.window, self.cost_model)
        if model is None:
            return None
        self.set_cost_model(model)
        self.schedules.clear()  # planned with the old weights: later epochs are scheduled anew
        return self.cost_model

    # --- the packer and evaluator, as the rest of the code and the tests know them ---------------

    @property
    def planned(self) -> list[Budget] | None:
        return self.packer.planned

    @planned.setter
    def planned(self, budgets: list[Budget] | None) -> None:
        self.packer.planned = budgets

    @property
    def overflow_steps(self) -> int:
        return self.packer.overflow_steps

    @property
    def eval_per_step(self) -> int:
        return self.packer.eval_per_step()

    def device_work(self, window_ids, split: str, epoch: int) -> DeviceWork:
        return self.packer.device_work(window_ids, split, epoch)

    def pack(
        self, step: list, split: str, epoch: int, rows=None, groups: int = 0, budget: Budget | None = None
    ):
        """``Packer.pack``: (host batch [L, ...], work [groups], budget) of a step."""
        return self.packer.pack(step, split, epoch, rows, groups, budget)

    def pack_train(self, step: list, epoch: int):
        """``Strategy.pack_train``: (host batch [L, ...], budget, real loads [P], padded load)."""
        return self.strategy.pack_train(self, step, epoch)

    def local_batch(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """This process's rows of a batch built for all P devices (every process builds the same)."""
        if len(self.local_rows) == self.n_devices:
            return batch
        return {k: v[self.local_rows] for k, v in batch.items()}

    def evaluate(self, split: str) -> dict:
        """The task's metrics of a split (``config.TASK_METRICS``; see tasks.py)."""
        return self.evaluator.evaluate(self, split)

    def comm_bytes(self, batch: dict) -> dict[str, float]:
        """Bytes the step's collectives move for a batch of this shape (traced once per
        ``Strategy.comm_key``: once per run for the whole-window methods)."""
        key = self.strategy.comm_key(batch)
        if key not in self.comm_cache:
            # the global shapes: a process holds only its devices' rows of the leading P axis
            shapes = {
                k: jax.ShapeDtypeStruct((self.n_devices, *v.shape[1:]), v.dtype) for k, v in batch.items()
            }
            self.comm_cache[key] = collective_bytes(self.train_step.grad_fn, self.params, shapes)
        return self.comm_cache[key]

    # --- budgets planned per run ------------------------------------------------------------------

    @property
    def plans_budgets(self) -> bool:
        return self.config.parallel.budgets == "planned" and self.strategy.whole_windows

    def plan_budgets(self, log=None) -> list[Budget]:
        """Schedule every epoch the run can foresee (all of them; with ``schedule.reschedule_every`` k,
        epochs 1..k, as later ones depend on measured times) and plan the training budgets that hold
        every step (``plan.plan_run``). The schedules are kept for training. Deterministic in the
        config: a resumed run plans the same budgets as the run it continues. Idempotent."""
        if self.planned is not None:
            return self.planned
        if not self.plans_budgets:
            self.planned = []
            return self.planned
        start = time.perf_counter()
        epochs = planning.planned_epochs(self.config)
        setup = (self.windows, self.step_config, self.n_devices, self.layout, self.settings)
        run = planning.plan_run(*setup, epochs, self.train_costs, step_seconds=self.pricer)
        self.compose, self.planned = run.compose, run.budgets
        self.range_note = beyond_profile(
            self.cost_model, np.array([self.padded_work(b) for b in self.planned])
        )
        self.plan_needs = run.needs
        self.schedules.update(run.schedules | ({REPEATED: run.base} if run.base is not None else {}))
        self.plan_seconds = time.perf_counter() - start
        tried = ", ".join(f"{k} {v:.3g}" for k, v in run.tried.items())
        self.plan_note = (
            f"planned {len(self.planned)} training budget(s) for "
            f"{sum(len(n) for n in run.needs.values())} steps of epochs 1..{len(run.schedules)} "
            f"({self.layout} layout, compose {run.compose}{', fitted to ' + run.fitted if run.fitted else ''}"
            + ("" if run.base is None else f", epoch {run.base.info['base_epoch']}'s steps every epoch")
            + (f"; {run.score} by candidate, most mixing first: {tried}" if tried else "")
            + f"; {self.plan_seconds:.1f} s)"
        )
        if log:
            log(self.plan_note)
        return self.planned

    @property
    def step_config(self) -> Config:
        """The config the scheduler, planner and packer see: ``train.batch_size`` is the micro-step's
        (B / accumulate windows; evaluation steps at most as many)."""
        if self.accumulate == 1:
            return self.config
        c, micro = self.config, self.config.train.batch_size // self.accumulate
        return dataclasses.replace(
            c,
            train=dataclasses.replace(c.train, batch_size=micro),
            eval=dataclasses.replace(c.eval, batch_size=min(c.eval.batch_size, micro)),
        )

    def compile_planned(self, log=None) -> float:
        """Compile the train step for every planned budget ahead of the first step (one line per
        compilation to ``log``), then the steps fitted to the memory budget (``memory_plan``: more
        micro-steps per update and their budgets compiled instead where they need more).
        Returns the seconds spent; they are not step time."""
        start = time.perf_counter()
        self.compile_todo(log)
        if self.plans_budgets:
            memory_plan.fit_to_memory(self, log)
        seconds = time.perf_counter() - start
        self.compile_seconds_ahead += seconds
        self.compile_seconds += seconds
        return seconds

    def compile_todo(self, log=None, workers: int = 0) -> tuple[float, float]:
        """Compile the planned budgets not compiled yet (``compile_planned``): traced one at a time (Python),
        then compiled by XLA on up to ``workers`` threads at once (0: ``parallel.compile_workers``).
        Returns the seconds of both."""
        todo, start = [b for b in self.plan_budgets(log) if b not in self._executables], time.perf_counter()
        lowered, t0 = [memory_plan.lower_budget(self, b) for b in todo], time.perf_counter()
        executables = memory_plan.compiled(lowered, workers or self.config.parallel.compile_workers)
        for i, (budget, ex) in enumerate(zip(todo, executables)):
            self._executables[budget] = memory_plan.record_bytes(self, budget, ex)
            self.packer.compiled.add(budget)
            if log:
                log(
                    f"compiled training step {i + 1}/{len(todo)} (budget nodes {budget.nodes}, edges "
                    f"{budget.edges}, pairs {budget.pairs}, windows {budget.windows}), "
                    f"{time.perf_counter() - t0:.1f} s after tracing"
                )
        return t0 - start, time.perf_counter() - t0

    def restore_plan(self, budgets: list[Budget], compose: str, accumulate: int = 1) -> None:
        """Take a checkpoint's planned budgets, composition and micro-steps per update; schedules planned
        for another plan (a resumed run with more epochs) are dropped, so later epochs are scheduled anew."""
        self.memory_fixed = True
        if accumulate != self.accumulate:
            memory_plan.set_accumulate(self, accumulate)
        if budgets != self.planned or compose != self.compose:
            self.planned, self.compose = budgets, compose
            self.schedules.clear()

    # --- training -----------------------------------------------------------------------------

    def epoch_schedule(self, epoch: int):
        """The scheduler's assignment of the training windows to steps and devices for ``epoch`` (the one
        computed when the budgets were planned, if any: kept, so an epoch run again — a restore in the
        same process — gets the same steps, fitted to the budgets as they were planned)."""
        if epoch in self.schedules:
            return self.schedules[epoch]
        if REPEATED in self.schedules:  # the plan's steps, in an order of this epoch's own
            return repeated(self.schedules[REPEATED], self.config.train.seed, epoch)
        c = self.config
        settings = strategies.scheduler_settings(self.settings)
        if self.compose and settings.compose == "auto":  # the composition the plan chose
            settings = dataclasses.replace(settings, compose=self.compose)
        batch = self.step_config.train.batch_size
        sched = self.scheduler(
            self.schedule_costs, self.n_devices, batch, settings, seed=c.train.seed, epoch=epoch
        )
        return dataclasses.replace(sched, method=self.method) if sched.method != self.method else sched

    def train_epoch(self, epoch: int, progress=None, sched=None) -> dict:
        """One training epoch (``epoch_loop.train_epoch``); ``sched``: ``epoch_schedule(epoch)`` when the
        caller already has it."""
        return epoch_loop.train_epoch(self, epoch, progress, sched)

    def account_step(self, traces: int, seconds: float) -> bool:
        """Whether a step compiled (the train step traced since it had ``traces``): its ``seconds`` go
        to compilation (else the caller logs the step: ``step_log``, the cost model's refit data)."""
        compiled = len(self.train_step.traces) > traces
        if compiled:
            self.compile_seconds += seconds
        return compiled
