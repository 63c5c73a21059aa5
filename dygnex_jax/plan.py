"""Schedules without training (the ``schedule`` command), and the budget planning the trainer shares.

Two padding-efficiency figures are reported, both Σ real / Σ padded work with the same cost weights
(``padding.efficiency``):
  * ``schedule`` level — real loads against the per-step maximum over devices of each cost column
    (nodes, edges summed over offsets — the last offset's alone in the ``last`` layout — pairs): the
    balance the scheduler reached;
  * ``packed`` level — against the budget the SPMD step really runs with, exactly as the trainer
    packs it (``padding.py``): the step's need in the run's layout (+1 padding node; edges: W x the
    largest offset in the ``scan`` layout, the sum over offsets in ``flat``), served by the cheapest
    of the run's planned budgets that holds it (``parallel.budgets: planned``, planned from every
    epoch's schedule as in training) or rounded up to the shape buckets (``buckets``).
No JAX here: this runs in a second on a laptop for any method (DyGNeX-L: its solver time). The run's
plan itself — every planned epoch scheduled and the candidate search over compositions, fitting and
repetition — is ``plan_search.plan_run`` (re-exported here).
"""

from __future__ import annotations

import numpy as np

from .config import Config, step_layout
from .cost_cache import available_cores, step_scale  # noqa: F401  (available_cores re-exported)
from .data import datasets
from .data.node_windows import task_windows
from .data.windows import WindowSet
from .padding import (
    Budget,
    bucketed,
    cheapest_holding,
    layout_view,
    padded_work,
    plan_budgets,
)
from .plan_report import plot_loads, print_table, write_json  # noqa: F401  (the command's output)
from .plan_search import (  # noqa: F401  (re-exported: the trainer, simulator, tools and tests plan here)
    COMPOSE_CANDIDATES,
    RunPlan,
    fit_epochs,
    plan_run,
    scheduler_costs,
    step_needs,
    window_slots,
)
from .schedule import cost_weights
from .schedule.cost import CostModel, alone_steps, mean_span
from .schedule.ilp import require_installed
from .schedule.metrics import (
    padding_efficiency,
    predicted_epoch_seconds,
    scalar_loads,
    step_loads,
    summarize,
)
from .step_cost import (  # noqa: F401  (re-exported: the trainer, simulator and tools price steps here)
    AUTO_FALLBACK_STEPS,
    DEFAULT_COMPILE_SECONDS,
    LivePricer,
    StepSeconds,
    compile_parallelism,
    compile_price,
    compile_seconds,
    compile_steps,
    load_cost_model,
    model_slowdown,
    run_settings,
    shared_cores,
    step_seconds_fn,
)
from .strategies import scheduler_settings


def planned_budgets(
    needs: list[Budget], config: Config, window: int, layout: str, weights, step_seconds=None
) -> list[Budget]:
    """The run's training budgets (``parallel.budgets: planned``): ``padding.plan_budgets`` of every
    planned step's need, at most ``parallel.max_budgets``, a compilation priced by ``compile_price``."""
    if not needs:
        return []
    workers, traced = compile_parallelism(step_seconds)
    return plan_budgets(
        needs,
        window,
        layout,
        weights,
        compile_price=compile_price(needs, config, window, layout, weights, step_seconds),
        max_budgets=config.parallel.max_budgets,
        align=config.parallel.budget_align,
        workers=workers,
        traced=traced,
    )


def paid_budget(
    need: Budget, budgets: list[Budget], config: Config, window: int, layout: str, weights
) -> Budget:
    """The budget a step of need ``need`` runs on: the cheapest planned budget holding it, else (no
    plan, or a step the plan did not foresee) its need rounded up to the shape buckets."""
    chosen = cheapest_holding(need, budgets, window, layout, weights) if budgets else None
    if chosen is not None:
        return chosen
    return bucketed(need, config.parallel.bucket_ratio, config.parallel.min_bucket)


def plan(
    config: Config,
    devices: int,
    ws: WindowSet | None = None,
    model: CostModel | None = None,
    slowdown: float | None = None,
) -> dict:
    """Schedule the training windows as the trainer would and measure epoch 1 (no training): with
    ``parallel.budgets: planned`` every epoch of the run is scheduled and its budgets planned
    (``plan_run``, as the trainer does before epoch 1), and epoch 1 is packed on them. ``slowdown``:
    how many times slower than ``model`` the devices run (None: the trainer's, ``model_slowdown`` of
    ``devices`` fake CPU devices on this machine's cores — 1 would price steps, and so every
    compilation's worth in steps, as if each device had cores of its own)."""
    if config.schedule.method == "dygnex_l":
        require_installed(config.schedule)
    ws = ws if ws is not None else task_windows(datasets.load_dataset(config.data), config.data)
    layout = step_layout(config)
    costs = layout_view(ws.costs("train", config.data.neg_mult), ws.edge_profile("train"), layout)[0]
    planned = config.parallel.budgets == "planned"
    if model is None:  # the trainer's choice for these devices in one process on the CPU platform
        model = load_cost_model(
            config,
            ws.window,
            num_features=ws.num_features,
            layout=layout,
            devices=devices,
            scale=step_scale(costs[:, 2], config.train.batch_size, devices),
            span=mean_span(costs),
        )
    if slowdown is None:
        slowdown = model_slowdown(model, devices, available_cores(), "cpu")
    settings = run_settings(config.schedule, model, ws.window)  # the trainer's weights under the model
    weights = cost_weights(settings)
    run = plan_run(
        ws,
        config,
        devices,
        layout,
        scheduler_settings(settings),  # snapshot / vertex: the psg steps they split
        planned_epochs(config) if planned else [1],
        step_seconds=step_seconds_fn(model, ws.window, layout, slowdown, config.parallel.compile_workers),
    )
    loads = step_loads(costs, sched := run.schedules[1])
    paid = [paid_budget(n, run.budgets, config, ws.window, layout, weights) for n in run.needs[1]]
    padded = np.array([padded_work(p, ws.window, layout) for p in paid])  # [S, 3]
    exact = np.array([padded_work(n, ws.window, layout) for n in run.needs[1]])
    stats = summarize(costs, sched, weights)
    return {
        "method": config.schedule.method,
        "dataset": ws.graph.name,
        "devices": devices,
        "batch_size": config.train.batch_size,
        "windows": int(len(costs)),
        "steps": sched.num_steps,
        "layout": layout,
        "compose": run.compose,
        "fitted": run.fitted,
        "repeated": None if run.base is None else run.base.info["base_epoch"],  # the epoch every epoch runs
        "compose_tried": run.tried,
        "compose_score": run.score,  # what compose_tried holds: predicted seconds or padded cost
        "planned_seconds": run.seconds,  # predicted seconds of the planned epochs, compilations included
        "padding_efficiency": stats["padding_efficiency"],
        "packed_padding_efficiency": padding_efficiency(loads, weights, padded),
        "exact_padding_efficiency": padding_efficiency(loads, weights, exact),
        "mean_packed_padding_efficiency": _mean_packed_efficiency(
            run, costs, config, ws.window, layout, weights
        ),
        "budget_policy": config.parallel.budgets,
        "budgets": [list(p.as_tuple()) for p in (run.budgets or sorted(set(paid)))],
        "planned_epochs": len(run.schedules),
        "imbalance": stats["imbalance"],
        "predicted_epoch_seconds": slowdown  # the trainer's per-step prediction, summed
        * predicted_epoch_seconds(
            loads, model, ws.window, padded=padded, alone=alone_steps(len(padded), config.parallel.prefetch)
        ),
        "cost_model": model.source,
        "scheduler_seconds": run.base.seconds if run.base is not None else sched.seconds,  # once, repeated
        "fallback": sched.fallback,
        "step_loads": scalar_loads(loads, weights).tolist(),
    }


def _mean_packed_efficiency(run, costs, config: Config, window: int, layout: str, weights) -> float:
    """Every planned epoch packed on the plan: the mean over epochs is what a training run's summary
    reports as mean_padding_efficiency (the trainer trains these very schedules)."""
    per_epoch = []
    for e, sch in run.schedules.items():
        paid = [paid_budget(n, run.budgets, config, window, layout, weights) for n in run.needs[e]]
        pw = np.array([padded_work(p, window, layout) for p in paid])
        per_epoch.append(padding_efficiency(step_loads(costs, sch), weights, pw))
    return float(np.mean(per_epoch))


def planned_epochs(config: Config) -> list[int]:
    """The epochs whose schedules a run plans before epoch 1: all of them, or with
    ``schedule.reschedule_every`` k epochs 1..k (later ones depend on measured step times), or with
    ``parallel.plan_epochs`` n at most epochs 1..n (a long run that may stop early)."""
    return list(range(1, planned_epoch_count(config) + 1))


def planned_epoch_count(config: Config) -> int:
    """How many epochs ``planned_epochs`` holds, without listing them (``train.epochs`` may be huge)."""
    last = config.train.epochs
    if config.schedule.reschedule_every:
        last = min(last, config.schedule.reschedule_every)
    if config.parallel.plan_epochs:
        last = min(last, config.parallel.plan_epochs)
    return last
