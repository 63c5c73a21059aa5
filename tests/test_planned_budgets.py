"""Training budgets planned per run (parallel.budgets: planned): compiled before epoch 1 and never more,
paid as the ``schedule`` command says, the same training as bucketed budgets, and the persistent
compilation cache changes no bit."""

import dataclasses
import functools

import jax
import numpy as np
import pytest
from helpers import SMALL, make_trainer, smoke_run

from dygnex_jax import plan, plan_search
from dygnex_jax.data.datasets import load_dataset
from dygnex_jax.data.node_windows import task_windows
from dygnex_jax.schedule.base import REPEATED, repeated

# the toy graph, 4 devices, 3 epochs planned
make = functools.partial(make_trainer, base=[*SMALL, "data.neg_mult=2", "train.epochs=3"], devices=4)


@pytest.mark.parametrize("model,layout", [("egcn_o", "last"), ("tgcn", "flat"), ("gcrn_gru", "scan")])
def test_compilations_are_fixed_before_epoch_1(model, layout):
    """The plan is made and compiled before the first step; training then compiles nothing more, every
    step runs on a planned budget, and the count is what the summary reports as compilations."""
    tr = make(
        f"model.name={model}", "train.batch_size=6", "parallel.compile_steps=0", "parallel.max_budgets=3"
    )
    assert tr.layout == layout
    budgets = tr.plan_budgets()
    assert 1 <= len(budgets) <= 3
    tr.compile_planned()
    assert len(tr.train_step.traces) == len(budgets)
    for epoch in (1, 2, 3):
        tr.train_epoch(epoch)
        assert {tuple(s["budget"]) for s in tr.last_steps} <= {b.as_tuple() for b in budgets}
        assert not any(s["compiled"] for s in tr.last_steps)
    assert len(tr.train_step.traces) == len(budgets) and tr.overflow_steps == 0


def test_the_schedule_command_reports_what_training_pays():
    """``plan.plan`` (the ``schedule`` command, and the research tools that call it without a slowdown)
    plans the budgets the trainer plans — the same devices' slowdown on this machine's cores prices
    the steps and so each compilation's worth — and the trainer's epoch 1 evaluates one padded-cost
    function on the same schedule and budgets: the packed efficiencies are equal."""
    for extra in (
        ["model.name=egcn_o"],
        ["model.name=gcrn_gru"],
        ["model.name=egcn_o", "schedule.method=psg"],
    ):
        tr = make(*extra, "train.batch_size=6")
        want = plan.plan(tr.config, tr.n_devices, ws=tr.windows)
        got = tr.train_epoch(1)
        assert sorted(want["budgets"]) == sorted(list(b.as_tuple()) for b in tr.planned)
        assert got["predicted_epoch_seconds"] == pytest.approx(want["predicted_epoch_seconds"], rel=1e-9)
        assert got["padding_efficiency"] == pytest.approx(want["packed_padding_efficiency"], rel=1e-9)
        assert got["budgets"] <= len(want["budgets"])


def test_planned_and_bucketed_budgets_train_alike():
    """Padding invariance at the level of a run: the planned budgets and the bucket grid give the same
    losses and parameters (to float32 reduction order)."""
    runs = [
        make("train.batch_size=6", "schedule.compose=strata", f"parallel.budgets={p}")
        for p in ("planned", "buckets")
    ]
    losses = [[r.train_epoch(e)["loss"] for e in (1, 2)] for r in runs]
    np.testing.assert_allclose(losses[0], losses[1], rtol=2e-5)
    for x, y in zip(jax.tree.leaves(runs[0].params), jax.tree.leaves(runs[1].params)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-4, atol=1e-6)


def test_compose_auto_keeps_the_cheapest_planned_composition():
    """compose=auto under planned budgets: the plan's composition has the least planned cost of the
    candidates (up to the margin that favours the earlier, better-mixing ones)."""
    tr = make("train.batch_size=6")
    run = plan.plan_run(tr.windows, tr.config, tr.n_devices, tr.layout, tr.settings, [1, 2, 3])
    # every composition as scheduled and fitted to one budget per epoch (schedule.fit_epochs)
    one = {*plan.COMPOSE_CANDIDATES, *(f"{c} fitted" for c in plan.COMPOSE_CANDIDATES)}
    per_budget = {f"{c} fitted per budget" for c in plan.COMPOSE_CANDIDATES}
    repeats = {f"{c}{f} repeated" for c in plan.COMPOSE_CANDIDATES for f in ("", " fitted")}
    assert one <= set(run.tried) <= one | per_budget | repeats and len(set(run.tried) & per_budget) == 1
    # repeated: the best so far and every plain composition's cheapest epoch (names apart)
    assert {f"{c} repeated" for c in plan.COMPOSE_CANDIDATES} <= set(run.tried)
    assert run.compose in plan.COMPOSE_CANDIDATES and run.fitted in ("", "one budget", "per budget")
    name = run.compose + {"": "", "one budget": " fitted", "per budget": " fitted per budget"}[run.fitted]
    if run.base is not None:
        name = run.compose + (" fitted" if run.fitted else "") + " repeated"
    chosen = run.tried[name]
    assert chosen == pytest.approx(run.cost)
    assert chosen <= min(run.tried.values()) / (1 - plan.COMPOSE_MARGIN) + 1e-9
    assert all(any(b.holds(n) for b in run.budgets) for ns in run.needs.values() for n in ns)
    off = plan.plan_run(
        tr.windows,
        tr.config,
        tr.n_devices,
        tr.layout,
        dataclasses.replace(tr.settings, fit_epochs=False),
        [1, 2],
    )
    assert set(off.tried) - set(plan.COMPOSE_CANDIDATES) <= repeats and not off.fitted
    never = dataclasses.replace(tr.settings, repeat_steps=False)
    off = plan.plan_run(tr.windows, tr.config, tr.n_devices, tr.layout, never, [1, 2])
    assert off.base is None and not set(off.tried) & repeats


def _steps(sched) -> list:
    """The steps of a schedule as sorted tuples of (device, window ids): order-free, device-exact."""
    return sorted(tuple((p, tuple(ids.tolist())) for p, ids in enumerate(step)) for step in sched.steps)


def test_repeated_runs_the_same_steps_in_an_order_of_each_epoch():
    """``repeated``: every window on the same device with the same step partners, only the order of the
    steps changes (a short last step stays last); deterministic in (seed, epoch), varied across epochs."""
    tr = make("train.batch_size=3", devices=2)
    base = tr.epoch_schedule(1)
    k = len(tr.train_costs)
    assert k % 3 and base.num_steps >= 3  # a short last step
    orders = set()
    for epoch in range(1, 9):
        r = repeated(base, 3, epoch)
        r.validate(k)  # every window once, the steps' sizes in order
        assert _steps(r) == _steps(base) and r.steps[-1] is base.steps[-1]
        assert all(s is t for s, t in zip(r.steps, repeated(base, 3, epoch).steps))
        orders.add(tuple(base.steps.index(s) for s in r.steps))
    assert len(orders) > 1


def test_a_repeated_plan_pays_its_steps_exactly_and_repeats_past_the_planned_epochs(monkeypatch):
    """When the plan repeats one epoch's steps (forced here: a margin that keeps every later candidate),
    every planned epoch has the same needs, the budgets hold them, an epoch past the planned ones runs the
    same steps in its own order, and training pays only planned budgets: nothing compiled on demand."""
    monkeypatch.setattr(plan_search, "COMPOSE_MARGIN", -1.0)
    tr = make("train.batch_size=6", "train.epochs=4", "parallel.plan_epochs=2", "parallel.compile_steps=0")
    budgets = tr.plan_budgets()
    base = tr.schedules[REPEATED]
    needs = [sorted(n.as_tuple() for n in tr.plan_needs[e]) for e in (1, 2)]
    assert needs[0] == needs[1] and len(budgets) == len(set(needs[0]))  # free compilations: one a step
    tr.compile_planned()
    for epoch in (1, 2, 3, 4):
        sched = tr.epoch_schedule(epoch)
        assert _steps(sched) == _steps(base)
        tr.train_epoch(epoch)
        assert not any(s["compiled"] for s in tr.last_steps)
    assert tr.overflow_steps == 0
    assert tr.epoch_schedule(3).steps == repeated(base, tr.config.train.seed, 3).steps


def test_compose_chrono_is_planned_as_composed_never_fitted_across_steps():
    """compose=chrono keeps time order under planned budgets: no candidate compositions, no fitting
    across steps (schedule.fit_epochs is on), every epoch's steps the psg time-ordered ones."""
    tr = make("train.batch_size=6", "schedule.compose=chrono")
    run = plan.plan_run(tr.windows, tr.config, tr.n_devices, tr.layout, tr.settings, [1, 2, 3])
    assert tr.settings.fit_epochs and run.compose == "chrono" and not run.fitted and not run.tried
    k = len(tr.windows.costs("train", tr.config.data.neg_mult))
    want = [list(range(i, min(i + 6, k))) for i in range(0, k, 6)]
    for sched in run.schedules.values():
        assert [sorted(np.concatenate(step).tolist()) for step in sched.steps] == want
    assert all(any(b.holds(n) for b in run.budgets) for ns in run.needs.values() for n in ns)


# slow (17 s: three CLI runs): test_checkpoint.py::test_same_config_and_seed_same_metrics runs the smoke
# config again on the warm cache of the session and gets the same metrics, steps and parameters bit for
# bit; test_compile_cache.py checks cold == warm outputs, hits, and that "off" writes nothing.
@pytest.mark.slow
def test_results_are_bit_identical_with_the_cache_off_cold_and_warm(tmp_path):
    """The persistent compilation cache changes no bit: the same run with it off, cold and warm writes
    the same losses and metrics; the warm run hits the cache."""
    rows, summaries = [], []
    for i, cache in enumerate(["off", str(tmp_path / "xla"), str(tmp_path / "xla")]):
        metrics, summary = smoke_run(tmp_path / f"run{i}", f"parallel.compile_cache={cache}")
        rows.append(metrics)
        summaries.append(summary)
    assert rows[0] == rows[1] == rows[2]
    off, cold, warm = (s["compile_cache"] for s in summaries)
    assert off["dir"] is None and off["hits"] == 0
    assert cold["misses"] > 0 and cold["bytes"] > 0
    assert warm["hits"] > 0 and warm["dir"] == cold["dir"]
    assert (
        summaries[2]["compilations"] == summaries[0]["compilations"] == len(summaries[0]["planned_budgets"])
    )


def test_uci_at_8_devices_repeats_its_cheapest_epoch(data_root):
    """UC Irvine at P = 8, B = 32 (the issue's setting; every epoch's mix of windows needed other
    budgets): the plan repeats one epoch, every planned epoch then pays alike, and the plan costs less
    than the best plan that schedules every epoch anew (schedule.repeat_steps=false)."""
    from dygnex_jax.config import load_config

    keys = ["data.dataset=uci_collegemsg", "train.batch_size=32", "schedule.cost_model=analytic"]
    config = load_config("configs/egcn_o_bitcoin_otc.yaml", keys)
    ws = task_windows(load_dataset(config.data), config.data)
    got = plan.plan(config, 8, ws=ws)
    off = plan.plan(
        load_config("configs/egcn_o_bitcoin_otc.yaml", [*keys, "schedule.repeat_steps=false"]), 8, ws=ws
    )
    assert got["repeated"] is not None and off["repeated"] is None
    assert got["packed_padding_efficiency"] == pytest.approx(got["mean_packed_padding_efficiency"], rel=1e-12)
    assert got["mean_packed_padding_efficiency"] > off["mean_packed_padding_efficiency"]
    assert len(got["budgets"]) <= got["steps"]  # no more budgets than one epoch has steps
    # DyGNeX-L re-places the repeated steps (never worse step by step): never below greedy's plan
    lp = plan.plan(
        load_config("configs/egcn_o_bitcoin_otc.yaml", [*keys, "schedule.method=dygnex_l"]), 8, ws=ws
    )
    assert lp["repeated"] is not None
    assert lp["mean_packed_padding_efficiency"] >= got["mean_packed_padding_efficiency"] - 1e-12
