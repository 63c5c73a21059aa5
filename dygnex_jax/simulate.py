"""Cluster simulator: per-step and per-epoch time and efficiency of a schedule on P devices (no JAX).

Inputs: windows with cost vectors (``Instance``: nodes, edges per time offset, pairs; from a real
dataset or a synthetic scale-up that resamples a real dataset's windows), a cost model (seconds =
coef · features, ``schedule/cost.py``, profiled on real steps), a device count P, a batch size B and an
interconnect (``Link``: latency alpha, bandwidth). Every figure is a model; its assumptions:

* **Window-parallel methods** (psg, dygnex_g, dygnex_l): the real scheduler builds the epoch's
  schedule from the columns the run's *layout* pays (``plan.scheduler_costs``: ``flat`` [K, 3],
  ``scan`` the edges of every offset apart when ``schedule.time_resolved``). A step's compute is the
  cost model on the padded work every device runs under SPMD, charged exactly as the trainer pays it
  (``padding.py``, ``plan.py``): the step's exact need (``plan.step_needs``: per-device maxima of
  nodes + 1 padding node, of pairs, and of edges — the largest offset in ``scan``, the sum over
  offsets in ``flat``, the last offset's in ``last``) served by the paid budget of the ``shapes``
  policy — ``trained`` (default) the config's ``parallel.budgets``: ``planned`` = the trainer's plan
  (``plan.plan_run``: compose auto resolved by planned cost, budgets from every step of the planned
  epochs, the trainer's 1 .. ``train.epochs``), ``buckets`` = the need rounded up to the shape grid
  (``plan.paid_budget``);
  ``buckets`` that grid whatever the config says; ``exact`` the need itself ("exact (no padding to
  budgets)", a bound no run reaches) — as ``padding.padded_work`` (``scan``: W x the edge budget)
  times ``slowdown`` (1 on real accelerators; the share of a CPU when fake devices share a host, see
  ``host_slowdown``). Then one gradient all-reduce per step: a ring,
  ``2 (P-1) alpha + 2 (P-1)/P · bytes / bandwidth`` with the model's parameter bytes.
  No overlap of communication with compute; host-side packing and data loading are not modelled;
  neither is the ``buckets`` policy's reuse of a larger compiled budget (``parallel.reuse_slack``):
  a bucket is charged as itself, as ``plan.paid_budget`` does.
* **Ideal** step: the step's whole mini-batch as one device would run it in the same layout (its real
  work, ``padding.padded_work`` of the unpadded whole: no padding node, no budget) with its per-unit
  work divided by P, the per-step and per-snapshot constants once, plus the same all-reduce.
  ``efficiency = ideal / simulated`` (≤ 1; load balance and padding, the issue's figure);
  ``parallel_efficiency`` leaves the all-reduce out of the ideal (≤ efficiency; perfect balance gives
  compute / (compute + all-reduce)); ``padding_efficiency`` is the packer's own figure
  (``padding.efficiency``: Σ w · real work / Σ P x w · paid padded work).
* **snapshot** (ESDG-style time partition), analytic: S = min(P, W) pipeline stages own W/S
  consecutive time offsets each; G = P // S replicas split the step's windows by count; a replica's
  windows are packed into up to 4·S micro-batches of consecutive windows. A stage's time for a
  micro-batch is the cost model on its windows' share of offsets (nodes × offsets, the offsets' edges,
  the pairs on the last stage, the per-snapshot constant once), and a boundary passes the recurrent
  state forward and its gradient back (``alpha + state bytes / bandwidth`` each way; EvolveGCN-O's
  state is its evolved weights, GCRN's the windows' hidden node states). GPipe timing: each
  micro-batch costs its slowest stage, fill and drain add (S-1) mean micro-batch times.
* **vertex** (node partition), analytic: all P devices run the whole mini-batch, each owning 1/P of
  every snapshot's nodes with perfectly balanced compute (work / P, no padding), and every layer of
  every time offset all-gathers the sender embeddings (all nodes × hidden × 4 bytes; an upper bound of
  the halo exchange) forward and reduce-scatters their gradients backward, each a ring collective.

Nothing here imports JAX: it runs anywhere numpy and scipy do, at any P.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from pathlib import Path

import numpy as np

from . import plan as planning
from .config import Config, ModelConfig, ParallelConfig, TrainConfig, step_layout
from .errors import UserError
from .padding import LAYOUTS, Budget, edge_need, layout_view, padded_work
from .schedule import cost_weights
from .schedule.base import check_sizes
from .schedule.cost import CostModel
from .schedule.greedy import resolve_compose
from .schedule.metrics import padding_efficiency, step_loads

WINDOW_METHODS = ("psg", "dygnex_g", "dygnex_l")
ANALYTIC_METHODS = ("snapshot", "vertex")
ALL_METHODS = WINDOW_METHODS + ANALYTIC_METHODS
MICRO_PER_STAGE = 4  # snapshot model: a replica's windows form up to 4 x stages micro-batches
# What a window-parallel step is charged: "trained" = the config's parallel.budgets policy (planned
# budgets or buckets), as the trainer pays; "buckets" = the shape grid; "exact" = the exact need.
SHAPES = ("trained", "buckets", "exact")
EXACT_LABEL = "exact (no padding to budgets)"


@dataclasses.dataclass(frozen=True)
class Link:
    """An interconnect for the α–β model: seconds = alpha + bytes / bandwidth per message."""

    name: str
    alpha: float  # seconds per message (latency)
    bandwidth: float  # bytes per second per direction

    def describe(self) -> str:
        return f"{self.name} (alpha {self.alpha * 1e6:.1f} us, {self.bandwidth / 1e9:.2f} GB/s)"


LINKS = {
    # NVLink-class (one node's GPUs; NVLink 4 gives ~450 GB/s per direction, rings reach about a third)
    "nvlink": Link("nvlink", 5e-6, 150e9),
    # Ethernet-class (10 GbE with TCP latency): a cheap cluster
    "ethernet": Link("ethernet", 50e-6, 1.25e9),
    # gloo over loopback TCP between processes of one machine (STACK-NOTES: a 4 MB psum of 2 processes
    # took ~23 ms)
    "loopback": Link("loopback", 200e-6, 0.2e9),
    # fake devices of one process: XLA's in-memory collectives, counted in the profiled constant
    "none": Link("none", 0.0, math.inf),
}


def ring_allreduce_seconds(n_bytes: float, p: int, link: Link) -> float:
    """Ring all-reduce of ``n_bytes`` over p devices: reduce-scatter + all-gather."""
    if p <= 1 or n_bytes <= 0:
        return 0.0
    return 2 * (p - 1) * link.alpha + 2 * (p - 1) / p * n_bytes / link.bandwidth


def ring_allgather_seconds(n_bytes: float, p: int, link: Link) -> float:
    """Ring all-gather (or reduce-scatter) whose result is ``n_bytes`` on every device."""
    if p <= 1 or n_bytes <= 0:
        return 0.0
    return (p - 1) * link.alpha + (p - 1) / p * n_bytes / link.bandwidth


def host_slowdown(devices_on_host: int, cores: int) -> float:
    """Compute slowdown when ``devices_on_host`` fake CPU devices share ``cores`` cores (0: none)."""
    return planning.shared_cores(devices_on_host, cores if cores > 0 else None)


# ---------------------------------------------------------------------------------------------------


def param_count(model: ModelConfig, num_features: int) -> int:
    """Trainable parameters of ``models.create_model(model, num_features)`` (tested against Flax)."""
    h, hh, layers = model.hidden, model.head_hidden, model.layers
    head = 2 * h * hh + hh + hh * 2 + 2
    if model.name == "egcn_o":
        dims = [num_features] + [h] * layers
        if model.egcn_gru == "matrix":  # IBM's matrix GRU: W, U [r, r] and B [r, c] per gate
            enc = sum(r * c + 3 * (2 * r * r + r * c) for r, c in zip(dims[:-1], dims[1:]))
        else:  # PyG-T's rows form: torch.nn.GRU(c, c) over the rows, ih and hh [c, 3c] with biases
            enc = sum(r * c + 6 * c * c + 6 * c for r, c in zip(dims[:-1], dims[1:]))
    elif model.name == "gcrn_gru":
        k = model.cheb_k
        enc = sum(3 * (k * x * h + h) + 3 * (k * h * h + h) for x in [num_features] + [h] * (layers - 1))
    else:
        raise UserError(f"the simulator has no parameter count for model.name {model.name!r}")
    return enc + head


def state_bytes(model: ModelConfig, num_features: int, nodes: np.ndarray) -> np.ndarray:
    """Bytes of recurrent state a time boundary passes on, per window: EvolveGCN-O's evolved weight
    matrices (independent of the graph), GCRN's hidden node states (nodes × hidden × layers)."""
    nodes = np.asarray(nodes, np.float64)
    if model.name == "egcn_o":
        dims = [num_features] + [model.hidden] * model.layers
        return np.full(nodes.shape, 4.0 * sum(r * c for r, c in zip(dims[:-1], dims[1:])))
    return 4.0 * nodes * model.hidden * model.layers


@dataclasses.dataclass
class Instance:
    """Windows to schedule.

    Fields:
      name: where they come from.
      costs: [K, 3] (nodes, edges summed over the window, training pairs).
      profile: [K, W] edges at every time offset.
    """

    name: str
    costs: np.ndarray
    profile: np.ndarray

    @property
    def window(self) -> int:
        return self.profile.shape[1]

    def schedule_costs(self, time_resolved: bool = True) -> np.ndarray:
        """[K, W + 2] (nodes, edges at every offset, pairs), or ``costs`` when not ``time_resolved``."""
        if not time_resolved:
            return self.costs
        return np.column_stack([self.costs[:, :1], self.profile, self.costs[:, 2:]])

    def scheduler_costs(self, config: Config, layout: str) -> np.ndarray:
        """What the trainer's scheduler balances in ``layout`` (``plan.scheduler_costs`` itself)."""
        return planning.scheduler_costs(_TrainWindows(self), config, layout)


class _TrainWindows:
    """The part of a ``WindowSet`` that ``plan.scheduler_costs`` reads, over an ``Instance`` (its windows
    are a training split whose pair column already counts the negatives)."""

    def __init__(self, inst: Instance):
        self._inst = inst

    def costs(self, split: str, neg_mult: int | None = None) -> np.ndarray:
        return self._inst.costs

    def schedule_costs(self, split: str, neg_mult: int | None, time_resolved: bool) -> np.ndarray:
        return self._inst.schedule_costs(time_resolved)

    def edge_profile(self, split: str) -> np.ndarray:
        return self._inst.profile

    @property
    def window(self) -> int:
        return self._inst.window


def instance_from_config(config: Config) -> Instance:
    """The training windows of a config's dataset (loads the data; no JAX)."""
    from .data import datasets
    from .data.node_windows import task_windows

    ws = task_windows(datasets.load_dataset(config.data), config.data)
    costs = ws.costs("train", config.data.neg_mult)
    return Instance(ws.graph.name, costs, ws.edge_profile("train"))


def cached_instance(config: Config, path: str | Path | None) -> Instance:
    """``instance_from_config``, saved to / loaded from ``path`` (.npz) when given: loading a large
    dataset (AS-733's 733 snapshots) takes longer than simulating it."""
    if path and Path(path).is_file():
        try:
            with np.load(path, allow_pickle=False) as z:
                return Instance(str(z["name"]), z["costs"], z["profile"])
        except (OSError, KeyError, ValueError) as e:
            raise UserError(
                f"--instance {str(path)!r} is not a saved instance ({type(e).__name__}): delete it"
            ) from None
    inst = instance_from_config(config)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, name=inst.name, costs=inst.costs, profile=inst.profile)
    return inst


def scale_up(inst: Instance, n_windows: int, seed: int = 0) -> Instance:
    """``n_windows`` windows drawn with replacement from ``inst``'s (cost, edge profile) rows: the same
    size distribution (and the same joint distribution of nodes, edges per offset and pairs) at any K."""
    rng = np.random.default_rng([seed, 6])
    rows = rng.integers(0, len(inst.costs), size=n_windows)
    return Instance(f"{inst.name} x{n_windows}", inst.costs[rows].copy(), inst.profile[rows].copy())


# ---------------------------------------------------------------------------------------------------


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
      slowdown: > 0 replaces ``host_slowdown`` by a measured factor (device speed at this P relative
        to the cost model's profiling run; ``tools/validate_simulator.py`` calibrates it).
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
            )
            + f", aligned to {p.budget_align}, planned from {when}; "
            f"unforeseen steps: buckets {grid})"
        )


def _fixed_and_unit(model: CostModel, window: int) -> tuple[float, np.ndarray]:
    """(seconds per step independent of size, [3] seconds per node / edge / pair of padded work)."""
    c = model.coef
    return float(c[3] * window + c[4]), np.array([c[0] * window, c[1], c[2]])


def layout_work(costs: np.ndarray, profile: np.ndarray, ids, window: int, layout: str) -> np.ndarray:
    """[3] real work of windows ``ids`` run as one device's batch in ``layout``: ``padding.padded_work``
    of their unpadded total (nodes, the layout's edge need, pairs; no padding node)."""
    ids = np.asarray(ids, np.int64)
    whole = Budget(
        int(costs[ids, 0].sum()), edge_need(profile[ids].sum(axis=0), layout), int(costs[ids, 2].sum()), 1
    )
    return padded_work(whole, window, layout)


def charged_budgets(inst: Instance, method: str, p: int, setup: Setup) -> dict:
    """The simulated epoch's schedule and, per step, the exact need and the budget paid under
    ``setup``'s shapes policy, as the trainer computes them (``plan.py``).

    Returns a dict: ``schedule`` (the simulated epoch's), ``needs`` and ``paid`` ([S] Budgets),
    ``budgets`` (the planned budgets, [] unless planned), ``overflow`` (steps no planned budget held:
    paid at their bucket), ``weights`` ([3] padded-cost weights), ``scheduled_epochs``,
    ``scheduler_seconds`` (all schedules computed).
    """
    b = setup.batch(p)
    check_sizes(len(inst.costs), p, b)
    settings = dataclasses.replace(setup.schedule_cfg, method=method)
    # the sections plan.py reads (the batch size and seed of this simulation)
    config = Config(
        schedule=settings, parallel=setup.parallel, train=TrainConfig(batch_size=b, seed=setup.seed)
    )
    layout, w = setup.layout, inst.window
    weights = cost_weights(settings)
    planned = setup.policy == "planned"
    # the trainer's plan (compose auto resolved by planned cost, budgets from the horizon's steps); exact
    # shapes keep the trained schedule and pay each step's need; buckets: the simulated epoch alone
    plans = planned or (setup.policy == "exact" and setup.parallel.budgets == "planned")
    horizon = setup.plan_epochs() if plans else []
    run = planning.plan_run(
        _TrainWindows(inst),
        dataclasses.replace(
            config, parallel=dataclasses.replace(setup.parallel, budgets="planned" if plans else "buckets")
        ),
        p,
        layout,
        settings,
        sorted({*horizon, setup.epoch}),
        step_seconds=planning.step_seconds_fn(
            setup.model, w, layout, setup.slowdown or host_slowdown(p, setup.host_cores)
        ),
    )
    scheds, needs, budgets = run.schedules, run.needs, run.budgets
    mine = needs[setup.epoch]
    if setup.policy == "exact":
        paid = list(mine)
    else:  # planned: the cheapest planned budget holding the need, else its bucket; buckets: the bucket
        paid = [planning.paid_budget(n, budgets if planned else [], config, w, layout, weights) for n in mine]
    return {
        "schedule": scheds[setup.epoch],
        "compose": resolve_compose(run.compose, b, p),
        "needs": mine,
        "paid": paid,
        "budgets": budgets if planned else [],
        "overflow": sum(not any(x.holds(n) for x in budgets) for n in mine) if planned else 0,
        "weights": weights,
        "scheduled_epochs": len(scheds),
        "scheduler_seconds": float(sum(s.seconds for s in scheds.values())),
    }


def simulate_window_method(inst: Instance, method: str, p: int, setup: Setup) -> dict:
    """Schedule with the real scheduler and time every step of the simulated epoch on the budget the
    trainer would pay (module docstring)."""
    b = setup.batch(p)
    inst = Instance(inst.name, *layout_view(inst.costs, inst.profile, setup.layout))  # the layout's work
    got = charged_budgets(inst, method, p, setup)
    sched, layout, w = got["schedule"], setup.layout, inst.window
    fixed, unit = _fixed_and_unit(setup.model, w)
    slow = setup.slowdown or host_slowdown(p, setup.host_cores)
    allreduce = ring_allreduce_seconds(setup.param_bytes, p, setup.link)
    padded = np.array([padded_work(x, w, layout) for x in got["paid"]])  # [S, 3] per device
    compute = slow * (fixed + padded @ unit)
    whole = np.array(
        [layout_work(inst.costs, inst.profile, np.concatenate(st), w, layout) for st in sched.steps]
    )
    ideal = slow * (fixed + whole @ unit / p)
    loads = step_loads(inst.costs, sched)  # [S, P, 3] real work of every device
    row = _figures(method, p, b, compute, ideal, allreduce, got["scheduler_seconds"], sched.fallback)
    row.update(
        {
            "shapes": setup.shapes,
            "budget_policy": setup.policy,
            "shapes_label": setup.describe_shapes(),
            "layout": layout,
            "compose": got["compose"] if method != "psg" else "shuffle",
            # the packer's figure (padding.efficiency) on the paid budgets, and the scheduler's balance
            # alone (against the per-step maxima of the real loads)
            "padding_efficiency": padding_efficiency(loads, got["weights"], padded),
            "balance_efficiency": padding_efficiency(loads, got["weights"]),
            "budgets": [list(x.as_tuple()) for x in (got["budgets"] or sorted(set(got["paid"])))],
            "overflow_steps": got["overflow"],
            "scheduled_epochs": got["scheduled_epochs"],
            "epoch_scheduler_seconds": sched.seconds,
        }
    )
    return row


def simulate_snapshot(inst: Instance, p: int, setup: Setup) -> dict:
    """ESDG-style time partition, pipelined (module docstring); steps of B windows in time order."""
    b = setup.batch(p)
    check_sizes(len(inst.costs), p, b)
    w = inst.window
    stages = min(p, w)
    replicas = p // stages
    bounds = np.linspace(0, w, stages + 1).round().astype(int)
    c = setup.model.coef
    fixed = float(c[4])
    link = setup.link
    state = state_bytes(setup.model_cfg, setup.num_features, inst.costs[:, 0])
    slow = setup.slowdown or host_slowdown(p, setup.host_cores)
    allreduce = ring_allreduce_seconds(setup.param_bytes, p, link)
    # [K, S] size-dependent seconds of every window on every stage; [S] per-snapshot constants
    per_stage = np.zeros((len(inst.costs), stages))
    for s in range(stages):
        lo, hi = bounds[s], bounds[s + 1]
        per_stage[:, s] = (
            c[0] * inst.costs[:, 0] * (hi - lo)
            + c[1] * inst.profile[:, lo:hi].sum(axis=1)
            + (c[2] * inst.costs[:, 2] if s == stages - 1 else 0.0)
        )
    stage_const = c[3] * np.diff(bounds)
    egcn = setup.model_cfg.name == "egcn_o"  # one evolved-weights state per micro-batch, else per window
    fixed_unit = _fixed_and_unit(setup.model, w)
    compute, ideal = [], []
    for lo in range(0, len(inst.costs), b):
        ids = np.arange(lo, min(lo + b, len(inst.costs)))
        times = []
        for part in np.array_split(ids, replicas):
            if not len(part):
                continue
            groups = np.array_split(part, min(len(part), MICRO_PER_STAGE * stages))
            micro = []
            for g in groups:  # a micro-batch: its windows packed, as the trainer packs a device's
                work = slow * (per_stage[g].sum(axis=0) + stage_const).max()
                moved = state[g[0]] if egcn else state[g].sum()
                micro.append(work + (2 * (link.alpha + moved / link.bandwidth) if stages > 1 else 0.0))
            times.append(sum(micro) + (stages - 1) * float(np.mean(micro)))
        compute.append(slow * fixed + max(times))
        whole = np.array(
            [inst.costs[ids, 0].sum(), w * inst.profile[ids].sum(axis=0).max(), inst.costs[ids, 2].sum()]
        )
        ideal.append(slow * (fixed_unit[0] + whole @ fixed_unit[1] / p))
    row = _figures("snapshot", p, b, np.array(compute), np.array(ideal), allreduce, 0.0, None)
    return {**row, **_analytic_labels()}


def simulate_vertex(inst: Instance, p: int, setup: Setup) -> dict:
    """Node partition with per-layer all-gathers of sender embeddings (module docstring)."""
    b = setup.batch(p)
    check_sizes(len(inst.costs), p, b)
    w = inst.window
    fixed, unit = _fixed_and_unit(setup.model, w)
    slow = setup.slowdown or host_slowdown(p, setup.host_cores)
    allreduce = ring_allreduce_seconds(setup.param_bytes, p, setup.link)
    layers, hidden = setup.model_cfg.layers, setup.model_cfg.hidden
    compute, ideal = [], []
    for lo in range(0, len(inst.costs), b):
        ids = np.arange(lo, min(lo + b, len(inst.costs)))
        whole = np.array(
            [inst.costs[ids, 0].sum(), w * inst.profile[ids].sum(axis=0).max(), inst.costs[ids, 2].sum()]
        )
        work = slow * (fixed + whole @ unit / p)
        gather = ring_allgather_seconds(4.0 * whole[0] * hidden, p, setup.link)
        compute.append(work + 2 * w * layers * gather)
        ideal.append(work)
    row = _figures("vertex", p, b, np.array(compute), np.array(ideal), allreduce, 0.0, None)
    return {**row, **_analytic_labels()}


def _analytic_labels() -> dict:
    """snapshot / vertex rows: their own analytic models, in the scan layout, charged no budgets."""
    label = "analytic (unpadded partition model)"
    return {"shapes": "analytic", "budget_policy": "analytic", "shapes_label": label, "layout": "scan"}


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


def simulate(inst: Instance, method: str, p: int, setup: Setup) -> dict:
    """One (method, P) point; dygnex_l comes back with ``skipped`` when its solve would be too long."""
    if method == "snapshot":
        return simulate_snapshot(inst, p, setup)
    if method == "vertex":
        return simulate_vertex(inst, p, setup)
    if method == "dygnex_l":
        steps = math.ceil(len(inst.costs) / setup.batch(p))
        epochs = len({*setup.plan_epochs(), setup.epoch}) if setup.policy == "planned" else 1
        limit = float(setup.schedule_cfg.time_limit)
        if epochs * steps * limit > setup.ilp_budget:
            scheduled = f"{epochs} epochs x {steps} steps" if epochs > 1 else f"{steps} steps"
            return {
                "method": method,
                "devices": p,
                "batch_size": setup.batch(p),
                "shapes": setup.shapes,
                "budget_policy": setup.policy,
                "shapes_label": setup.describe_shapes(),
                "layout": setup.layout,
                "skipped": f"{scheduled} x {limit:g} s time limit > {setup.ilp_budget:g} s",
            }
    return simulate_window_method(inst, method, p, setup)


def sweep(inst: Instance, methods, devices, setup: Setup, log=None) -> list[dict]:
    rows = []
    for p in devices:
        for m in methods:
            start = time.perf_counter()
            row = simulate(inst, m, p, setup)
            row["wall_seconds"] = time.perf_counter() - start
            rows.append(row)
            if log:
                log(row)
    return rows


# ---------------------------------------------------------------------------------------------------


def print_table(rows: list[dict], stream=sys.stdout) -> None:
    """One line per row; ``shapes`` is the budget policy charged (planned / buckets / exact, or the
    analytic models' own), ``pad-eff`` the packer's padding efficiency on the paid budgets."""
    print(
        f"{'method':<10} {'P':>5} {'B':>6} {'layout':>6} {'shapes':>8} {'steps':>5} {'step ms':>9} "
        f"{'epoch s':>9} {'allred ms':>9} {'eff':>6} {'par-eff':>7} {'pad-eff':>7}",
        file=stream,
    )
    for r in rows:
        head = f"{r['method']:<10} {r['devices']:>5} {r['batch_size']:>6} {r.get('layout', '-'):>6} "
        head += f"{r.get('budget_policy', '-'):>8}"
        if "skipped" in r:
            print(f"{head}  skipped: {r['skipped']}", file=stream)
            continue
        pad = r.get("padding_efficiency")
        print(
            f"{head} {r['steps']:>5} {1e3 * r['mean_step_seconds']:>9.2f} {r['epoch_seconds']:>9.3f} "
            f"{1e3 * r['allreduce_seconds_per_step']:>9.3f} {r['efficiency']:>6.3f} {r['parallel_efficiency']:>7.3f} "
            f"{'-' if pad is None else f'{pad:.3f}':>7}",
            file=stream,
        )


def plot(rows: list[dict], path: str | Path, title: str = "") -> None:
    """Efficiency and parallel efficiency vs P, one line per method (log2 x axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    methods = [m for m in ALL_METHODS if any(r["method"] == m and "skipped" not in r for r in rows)]
    for ax, key, label in (
        (axes[0], "efficiency", "efficiency (ideal incl. all-reduce / simulated)"),
        (axes[1], "parallel_efficiency", "parallel efficiency (work / P / simulated)"),
    ):
        for m in methods:
            pts = sorted((r["devices"], r[key]) for r in rows if r["method"] == m and "skipped" not in r)
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=m)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("devices P")
        ax.set_ylabel(label)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[0].legend()
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_devices(text: str) -> list[int]:
    """``"4,8,16"`` or ``"4..1024"`` (powers of two) -> device counts."""
    try:
        if ".." in text:
            lo, hi = (int(x) for x in text.split(".."))
            out, p = [], lo
            while p <= hi:
                out.append(p)
                p *= 2
        else:
            out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(
            f"--devices {text!r} must be a comma list (4,8,16) or a range of powers of two (4..1024)"
        ) from None
    if not out or min(out) < 1:
        raise UserError(f"--devices {text!r} must list positive device counts")
    return out


def resolve_link(name: str, alpha: float | None = None, bandwidth: float | None = None) -> Link:
    if name not in LINKS:
        raise UserError(f"unknown --link {name!r}: choose one of {', '.join(LINKS)}")
    link = LINKS[name]
    if alpha is not None or bandwidth is not None:
        link = Link(
            f"{name}*",
            link.alpha if alpha is None else alpha,
            link.bandwidth if bandwidth is None else bandwidth * 1e9,
        )
    if link.alpha < 0 or not link.bandwidth > 0:
        raise UserError("--alpha must be >= 0 and --bandwidth > 0")
    return link


def window_layout(config: Config) -> str:
    """The packed layout of the window-parallel methods under ``config``'s model (``step_layout``)."""
    method = config.schedule.method if config.schedule.method in WINDOW_METHODS else WINDOW_METHODS[0]
    return step_layout(
        dataclasses.replace(config, schedule=dataclasses.replace(config.schedule, method=method))
    )


def trainer_plan_epochs(config: Config) -> int:
    """The epochs the trainer plans its budgets from: ``train.epochs``, or ``schedule.reschedule_every``
    when smaller (later schedules depend on measured times)."""
    last = config.train.epochs
    if config.schedule.reschedule_every:
        last = min(last, config.schedule.reschedule_every)
    return last


def run(
    config: Config,
    devices: list[int],
    methods: list[str],
    *,
    link: Link,
    cost_model: CostModel | None = None,
    windows: int = 0,
    batch_per_device: int = 4,
    batch_size: int = 0,
    shapes: str = "trained",
    plan_epochs: int | None = None,
    buckets: bool = False,
    param_bytes: float = 0.0,
    host_cores: int = 0,
    ilp_budget: float = 60.0,
    instance: str | None = None,
    log=None,
) -> dict:
    """The ``simulate`` command: load (and scale up) the windows, sweep methods × devices.

    ``shapes``: "trained" (the config's ``parallel.budgets``), "buckets" or "exact" (``SHAPES``);
    ``buckets=True`` is the older spelling of ``shapes="buckets"``. ``plan_epochs``: the planned
    budgets' horizon (default: the trainer's, ``trainer_plan_epochs``; 0: the simulated epoch alone).
    """
    bad = [m for m in methods if m not in ALL_METHODS]
    if bad:
        raise UserError(f"unknown method(s) {', '.join(bad)}: choose from {', '.join(ALL_METHODS)}")
    if batch_per_device < 1 or batch_size < 0 or windows < 0:
        raise UserError("--batch-per-device must be >= 1, --batch-size and --windows >= 0")
    if shapes not in SHAPES:
        raise UserError(f"unknown --shapes {shapes!r}: choose one of {', '.join(SHAPES)}")
    if buckets and shapes not in ("trained", "buckets"):
        raise UserError(f"--buckets is --shapes buckets: it contradicts --shapes {shapes}")
    shapes = "buckets" if buckets else shapes
    if plan_epochs is not None and plan_epochs < 0:
        raise UserError(f"--plan-epochs must be >= 0, got {plan_epochs}")
    from .schedule.cost import default_cost_model

    base = cached_instance(config, instance)
    largest = max(devices) * (batch_size // max(devices) if batch_size else batch_per_device)
    inst = base
    if windows or len(base.costs) < largest:
        inst = scale_up(base, windows or 8 * max(largest, batch_size), seed=config.train.seed)
    if cost_model is None:
        cost_model = (
            CostModel.load(config.schedule.cost_model)
            if config.schedule.cost_model
            else default_cost_model(inst.window)
        )
    model = dataclasses.replace(cost_model, window=inst.window)
    alpha, beta, gamma = (float(x) for x in model.weights(inst.window))
    sched_cfg = config.schedule
    if alpha + beta + gamma > 0:  # the scheduler balances seconds, as the trainer does with a cost model
        sched_cfg = dataclasses.replace(sched_cfg, alpha=alpha, beta=beta, gamma=gamma)
    features = config.data.max_degree if config.data.features == "degree" else 1
    pbytes = param_bytes or 4.0 * param_count(config.model, features)
    setup = Setup(
        model=model,
        link=link,
        param_bytes=pbytes,
        model_cfg=config.model,
        num_features=features,
        schedule_cfg=sched_cfg,
        batch_per_device=batch_per_device,
        batch_size=batch_size,
        shapes=shapes,
        layout=window_layout(config),
        parallel=config.parallel,
        planned_epochs=trainer_plan_epochs(config) if plan_epochs is None else plan_epochs,
        host_cores=host_cores,
        seed=config.train.seed,
        ilp_budget=ilp_budget,
    )
    rows = sweep(inst, methods, devices, setup, log=log)
    return {
        "instance": inst.name,
        "base_windows": int(len(base.costs)),
        "windows": int(len(inst.costs)),
        "window": inst.window,
        "link": dataclasses.asdict(link),
        "param_bytes": pbytes,
        "cost_model": model.to_dict(),
        "batch": f"B = {batch_size}" if batch_size else f"B = {batch_per_device} x P",
        "shapes": setup.describe_shapes(),
        "budget_policy": setup.policy,
        "layout": setup.layout,
        "planned_epochs": setup.planned_epochs,
        "host_cores": host_cores,
        "rows": rows,
    }
