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
  times the device slowdown (``Setup.device_slowdown``: 1 on devices of their own; with fake CPU
  devices sharing ``host_cores`` (``run``'s argument), P for the analytic model and P / D, D the profiled
  device count for a profiled one). An epoch's last step runs with no next step packed beside it
  (training's prefetch packs step i + 1 while step i runs; every step without prefetch): where the
  profile timed steps alone too, the model's ``coef_alone`` prices it. Then one gradient all-reduce per step: a ring,
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

Modules: this one keeps the window-parallel methods (the real scheduler, charged as the trainer pays)
and the command; ``simulate_instance`` the windows, ``simulate_comm`` the interconnect and collectives,
``simulate_setup`` ``Setup`` and the result figures, ``simulate_analytic`` snapshot and vertex,
``simulate_report`` the table and plot. Their names are re-exported here.

Nothing here imports JAX: it runs anywhere numpy and scipy do, at any P.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time

import numpy as np

from . import cost_cache
from . import plan as planning
from .config import Config, TrainConfig, step_layout
from .errors import UserError
from .padding import Budget, edge_need, layout_view, padded_work
from .schedule import cost_weights
from .schedule.base import check_sizes
from .schedule.cost import CostModel, mean_span
from .schedule.greedy import resolve_compose
from .schedule.metrics import padding_efficiency, step_loads
from .simulate_analytic import (  # noqa: F401  (re-exported)
    ANALYTIC_SIMULATORS,
    MICRO_PER_STAGE,
    _analytic_labels,
    simulate_snapshot,
    simulate_vertex,
)
from .simulate_comm import (  # noqa: F401  (re-exported)
    LINKS,
    Link,
    param_count,
    resolve_link,
    ring_allgather_seconds,
    ring_allreduce_seconds,
    state_bytes,
)
from .simulate_instance import (  # noqa: F401  (re-exported)
    Instance,
    _TrainWindows,
    cached_instance,
    instance_from_config,
    scale_up,
)
from .simulate_report import parse_devices, plot, print_table  # noqa: F401  (re-exported)
from .simulate_setup import (  # noqa: F401  (re-exported)
    ALL_METHODS,
    ANALYTIC_METHODS,
    EXACT_LABEL,
    SHAPES,
    WINDOW_METHODS,
    Setup,
    _figures,
    host_slowdown,
)


def layout_work(costs: np.ndarray, profile: np.ndarray, ids, window: int, layout: str) -> np.ndarray:
    """[3] real work of windows ``ids`` run as one device's batch in ``layout``: ``padding.padded_work``
    of their unpadded total (nodes, the layout's edge need, pairs; no padding node)."""
    ids = np.asarray(ids, np.int64)
    whole = Budget(
        int(costs[ids, 0].sum()), edge_need(profile[ids].sum(axis=0), layout), int(costs[ids, 2].sum()), 1
    )
    return padded_work(whole, window, layout)


# the last run planned (plan.plan_run) and its key: simulating several epochs of one run (the validation's
# rows) plans the run once, not once per epoch — the plan covers the horizon's epochs and the simulated one
_PLANNED: dict[str, object] = {}


def _plan_key(inst: Instance, inputs: list) -> str:
    """What a plan depends on: the instance's windows (their contents) and ``inputs``."""
    digest = hashlib.sha256(np.ascontiguousarray(inst.costs).tobytes())
    digest.update(np.ascontiguousarray(inst.profile).tobytes())
    return json.dumps([digest.hexdigest(), *inputs], sort_keys=True, default=str)


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
    run_config = dataclasses.replace(
        config, parallel=dataclasses.replace(setup.parallel, budgets="planned" if plans else "buckets")
    )
    epochs, slow = sorted({*horizon, setup.epoch}), setup.device_slowdown(p)
    key = _plan_key(inst, [p, layout, epochs, slow, repr(run_config), repr(settings), setup.model.to_dict()])
    if key not in _PLANNED:  # the epochs of one run's horizon share its plan: one plan_run for them all
        _PLANNED.clear()
        _PLANNED[key] = planning.plan_run(
            _TrainWindows(inst),
            run_config,
            p,
            layout,
            settings,
            epochs,
            step_seconds=planning.step_seconds_fn(
                setup.model, w, layout, slow, config.parallel.compile_workers
            ),
        )
    run = _PLANNED[key]
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
    costs, profile = layout_view(inst.costs, inst.profile, setup.layout)  # the layout's work
    inst = dataclasses.replace(inst, costs=costs, profile=profile)
    got = charged_budgets(inst, method, p, setup)
    sched, layout, w = got["schedule"], setup.layout, inst.window
    slow = setup.device_slowdown(p)
    allreduce = ring_allreduce_seconds(setup.param_bytes, p, setup.link)
    padded = np.array([padded_work(x, w, layout) for x in got["paid"]])  # [S, 3] per device
    whole = np.array(
        [layout_work(inst.costs, inst.profile, np.concatenate(st), w, layout) for st in sched.steps]
    )
    # a step beside the next step's packing, or alone (an epoch's last: Setup.alone_steps)
    (fixed, unit), (fixed_a, unit_a) = setup.model.unit_costs(w), setup.model.unit_costs(w, True)
    alone = setup.alone_steps(len(padded))
    compute = slow * np.where(alone, fixed_a + padded @ unit_a, fixed + padded @ unit)
    ideal = slow * np.where(alone, fixed_a + whole @ unit_a / p, fixed + whole @ unit / p)
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


def simulate(inst: Instance, method: str, p: int, setup: Setup) -> dict:
    """One (method, P) point; dygnex_l comes back with ``skipped`` when its solve would be too long."""
    if method in ANALYTIC_SIMULATORS:  # the partitioned baselines: their analytic step models
        return ANALYTIC_SIMULATORS[method](inst, p, setup)
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
    cost_model: CostModel | dict | None = None,
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

    ``cost_model``: a model, or a cost-model cache entry (``cost_cache.read_entry``: its profiles
    refitted around the simulated steps' size, ceil(B / P) windows of the instance's mean pairs, as a
    run on the profiled machine refits them), or None (the config's ``schedule.cost_model``).
    ``shapes``: "trained" (the config's ``parallel.budgets``), "buckets" or "exact" (``SHAPES``);
    ``buckets=True`` is the older spelling of ``shapes="buckets"``. ``plan_epochs``: the planned
    budgets' horizon (default: the trainer's, ``trainer_plan_epochs``; 0: the simulated epoch alone).
    """
    shapes = _checked_run_args(methods, windows, batch_per_device, batch_size, shapes, buckets, plan_epochs)
    largest = max(devices) * (batch_size // max(devices) if batch_size else batch_per_device)
    _check_size(windows, largest, batch_size, devices)
    base = cached_instance(config, instance)
    inst = base
    if windows or len(base.costs) < largest:
        inst = scale_up(base, windows or 8 * max(largest, batch_size), seed=config.train.seed)
    if isinstance(cost_model, dict):  # a cost-model cache entry: refitted around the simulated steps
        p = max(devices)
        scale = cost_cache.step_scale(inst.costs[:, 2], batch_size or batch_per_device * p, p)
        cost_model = cost_cache.entry_model(cost_model, scale)
    model = _run_cost_model(config, cost_model, inst)
    alpha, beta, gamma = (float(x) for x in model.weights(inst.window))
    sched_cfg = config.schedule
    if alpha + beta + gamma > 0:  # the scheduler balances seconds, as the trainer does with a cost model
        sched_cfg = dataclasses.replace(sched_cfg, alpha=alpha, beta=beta, gamma=gamma)
    features = inst.features(config)
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


MAX_SIM_WINDOWS = 2_000_000  # windows scheduled per simulated epoch (131,072 take ~30 min on 2 cores)


def _check_size(windows: int, largest: int, batch_size: int, devices: list[int]) -> None:
    """A UserError, before any data is read, when the simulated epoch would schedule more than
    ``MAX_SIM_WINDOWS`` windows (``--windows``, or 8 steps of the largest device count's batch)."""
    n = windows or 8 * max(largest, batch_size)
    if n > MAX_SIM_WINDOWS:
        what = (
            f"--windows {windows:,}"
            if windows
            else f"P = {max(devices):,} x {largest // max(devices):,} windows a step, 8 steps"
        )
        raise UserError(
            f"{what} simulates {n:,} windows an epoch, more than the {MAX_SIM_WINDOWS:,} it takes (131,072 "
            "take about 30 min on 2 cores): use fewer --devices, --batch-per-device / --batch-size or --windows"
        )


def _checked_run_args(
    methods: list[str],
    windows: int,
    batch_per_device: int,
    batch_size: int,
    shapes: str,
    buckets: bool,
    plan_epochs: int | None,
) -> str:
    """UserErrors for ``run``'s arguments out of range; returns the shapes policy (``buckets=True``
    spells "buckets")."""
    if not methods:
        raise UserError(f"--methods names no method: choose from {', '.join(ALL_METHODS)}")
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
    return shapes


def _run_cost_model(config: Config, cost_model: CostModel | None, inst: Instance) -> CostModel:
    """``cost_model``, else the config's ``schedule.cost_model`` file, else the analytic default (also
    for ``auto``: the simulated devices are not this machine's; pass ``--cost-model`` for a profile),
    at the instance's W and window span (``schedule.cost.mean_span``), as the trainer sets them."""
    from .schedule.cost import default_cost_model

    setting = config.schedule.cost_model
    if cost_model is None:
        cost_model = (
            default_cost_model(inst.window, window_layout(config))
            if setting in ("", "auto", "analytic")
            else CostModel.load(setting)
        )
    return dataclasses.replace(cost_model, window=inst.window, span=mean_span(inst.costs))
