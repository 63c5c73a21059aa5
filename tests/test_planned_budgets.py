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
from dygnex_jax.padding import compile_rounds
from dygnex_jax.schedule.base import REPEATED, repeated
from dygnex_jax.step_cost import TRACE_SHARE

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


def test_budgets_compiled_on_threads_train_bit_for_bit_alike():
    """parallel.compile_workers=3 compiles the planned budgets on threads; at a free compilation (the
    same plan either way) the run keeps every budget compiled before epoch 1, nothing on demand, and
    trains the same losses and parameters bit for bit as one compilation at a time."""
    fixed = ("train.batch_size=6", "schedule.compose=strata", "parallel.compile_steps=0")
    runs = [make(*fixed, f"parallel.compile_workers={w}") for w in (1, 3)]
    for r in runs:
        r.compile_planned()
    assert runs[0].planned == runs[1].planned and len(runs[1].planned) > 1
    assert set(runs[1]._executables) == set(runs[1].planned)
    losses = [[r.train_epoch(e)["loss"] for e in (1, 2)] for r in runs]
    assert losses[0] == losses[1]
    assert runs[1].compile_seconds == runs[1].compile_seconds_ahead  # nothing compiled during training
    for x, y in zip(jax.tree.leaves(runs[0].params), jax.tree.leaves(runs[1].params)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def _kept_name(run) -> str:
    """The name ``run.tried`` lists the kept candidate under."""
    if run.base is not None:
        return run.compose + (" fitted" if run.fitted else "") + " repeated"
    return run.compose + {"": "", "one budget": " fitted", "per budget": " fitted per budget"}[run.fitted]


class _FlatSeconds:
    """A step-time model for the planner: every step 1 s whatever its budget, a compilation 5 s."""

    compile_seconds = 5.0

    def __call__(self, budget, alone=False):
        return 1.0


def test_compose_auto_keeps_the_most_mixing_plan_unless_a_later_one_is_faster_by_the_margin():
    """compose=auto under planned budgets: the candidates are tried in order of mixing (strata, rows,
    sorted, each fresh then fitted; the kept one fitted per budget; repeated steps last) and a later one
    is kept only when its score is lower by more than schedule.mix_margin: no later candidate beats the
    kept one by more, and the kept one beats the first (most mixing) by more unless it is the first."""
    tr = make("train.batch_size=6")
    run = plan.plan_run(tr.windows, tr.config, tr.n_devices, tr.layout, tr.settings, [1, 2, 3])
    names = list(run.tried)
    fresh = [n for c in plan.COMPOSE_CANDIDATES for n in (c, f"{c} fitted")]
    assert names[:6] == fresh and names[6].endswith(" fitted per budget")
    assert all(n.endswith(" repeated") for n in names[7:]) and len(names) > 7
    assert {f"{c} repeated" for c in plan.COMPOSE_CANDIDATES} <= set(names)
    assert run.compose in plan.COMPOSE_CANDIDATES and run.fitted in ("", "one budget", "per budget")
    for margin in (0.0, tr.settings.mix_margin, 0.3):
        settings = dataclasses.replace(tr.settings, mix_margin=margin)
        run = plan.plan_run(tr.windows, tr.config, tr.n_devices, tr.layout, settings, [1, 2, 3])
        assert run.score == "padded cost" and run.seconds is None  # no step-time model given
        kept = names.index(_kept_name(run))
        score = run.tried[names[kept]]
        assert score == pytest.approx(run.cost)
        assert all(run.tried[n] >= score * (1 - margin) - 1e-9 for n in names[kept + 1 :])
        assert kept == 0 or score < run.tried[names[0]] * (1 - margin)
        if margin == 0.0:
            assert score == min(run.tried.values())
        assert all(any(b.holds(n) for b in run.budgets) for ns in run.needs.values() for n in ns)
    # a margin no candidate can beat keeps the most mixing: strata, fresh steps, not fitted
    settings = dataclasses.replace(tr.settings, mix_margin=0.99)
    run = plan.plan_run(tr.windows, tr.config, tr.n_devices, tr.layout, settings, [1, 2, 3])
    assert (run.compose, run.fitted, run.base) == ("strata", "", None)
    off = plan.plan_run(
        tr.windows,
        tr.config,
        tr.n_devices,
        tr.layout,
        dataclasses.replace(tr.settings, fit_epochs=False),
        [1, 2],
    )
    repeats = {f"{c}{f} repeated" for c in plan.COMPOSE_CANDIDATES for f in ("", " fitted")}
    assert set(off.tried) - set(plan.COMPOSE_CANDIDATES) <= repeats and not off.fitted
    never = dataclasses.replace(tr.settings, repeat_steps=False)
    off = plan.plan_run(tr.windows, tr.config, tr.n_devices, tr.layout, never, [1, 2])
    assert off.base is None and not set(off.tried) & repeats


def test_candidates_are_compared_by_predicted_seconds_of_steps_and_compilations():
    """With a step-time model the planner scores a candidate by its predicted seconds: every planned
    step on the budget it pays plus a compilation per budget (compile_steps auto: the model's measured
    compile seconds); with 1 s a step and 5 s a compilation that is steps + 5 x budgets exactly, so the
    plan with the fewest budgets wins whatever it pads."""
    tr = make(
        "train.batch_size=6",
        "parallel.compile_steps=-1",
        "parallel.compile_seconds=0",
        "schedule.mix_margin=0",
    )
    run = plan.plan_run(
        tr.windows, tr.config, tr.n_devices, tr.layout, tr.settings, [1, 2, 3], step_seconds=_FlatSeconds()
    )
    steps = sum(len(n) for n in run.needs.values())
    assert run.score == "predicted seconds"
    assert run.seconds == pytest.approx(steps + 5.0 * len(run.budgets), rel=1e-12)
    assert run.tried[_kept_name(run)] == pytest.approx(run.seconds, rel=1e-12)
    assert run.seconds == min(run.tried.values())  # margin 0: the fastest


class _ParallelSeconds(_FlatSeconds):
    """The same, with compilations on 2 threads: the planner prices k budgets as compile_rounds(k)."""

    compile_workers = 2


def test_compilations_on_threads_are_priced_in_rounds():
    """With 2 compile workers the predicted seconds are the steps plus 5 s x compile_rounds (tracing
    one at a time, XLA's part in rounds of 2), and never more than the same plan one at a time."""
    tr = make(
        "train.batch_size=6",
        "parallel.compile_steps=-1",
        "parallel.compile_seconds=0",
        "schedule.mix_margin=0",
    )
    args = (tr.windows, tr.config, tr.n_devices, tr.layout, tr.settings, [1, 2, 3])
    run = plan.plan_run(*args, step_seconds=_ParallelSeconds())
    steps = sum(len(n) for n in run.needs.values())
    rounds = compile_rounds(len(run.budgets), 2, TRACE_SHARE)
    assert run.seconds == pytest.approx(steps + 5.0 * rounds, rel=1e-12)
    assert run.seconds <= plan.plan_run(*args, step_seconds=_FlatSeconds()).seconds + 1e-9


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
    monkeypatch.setattr(plan_search, "_better", lambda *_: True)
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


def test_uci_at_8_devices_keeps_fresh_steps_unless_repeating_is_faster_by_the_margin(data_root):
    """UC Irvine at P = 8, B = 32 (the issue's setting). The fastest predicted plan (mix_margin 0)
    repeats one epoch: every planned epoch then pays alike, with no more budgets than an epoch has
    steps. The default keeps a plan of fresh steps, whose predicted seconds are within the margin of
    the fastest (repeating one epoch's steps every epoch cost converged test MAP)."""
    from dygnex_jax.config import load_config

    keys = ["data.dataset=uci_collegemsg", "train.batch_size=32", "schedule.cost_model=analytic"]
    config = load_config("configs/egcn_o_bitcoin_otc.yaml", keys)
    ws = task_windows(load_dataset(config.data), config.data)
    fast_keys = [*keys, "schedule.mix_margin=0"]
    fast = plan.plan(load_config("configs/egcn_o_bitcoin_otc.yaml", fast_keys), 8, ws=ws)
    got = plan.plan(config, 8, ws=ws)
    assert fast["compose_score"] == got["compose_score"] == "predicted seconds"
    assert fast["repeated"] is not None and got["repeated"] is None
    assert fast["planned_seconds"] == pytest.approx(min(fast["compose_tried"].values()), rel=1e-12)
    margin = config.schedule.mix_margin
    assert fast["planned_seconds"] >= got["planned_seconds"] * (1 - margin)
    assert fast["packed_padding_efficiency"] == pytest.approx(
        fast["mean_packed_padding_efficiency"], rel=1e-12
    )
    assert len(fast["budgets"]) <= fast["steps"]  # no more budgets than one epoch has steps
    # DyGNeX-L re-places the repeated steps (never worse step by step): never below greedy's plan
    lp = plan.plan(
        load_config("configs/egcn_o_bitcoin_otc.yaml", [*fast_keys, "schedule.method=dygnex_l"]), 8, ws=ws
    )
    assert lp["repeated"] is not None
    assert lp["mean_packed_padding_efficiency"] >= fast["mean_packed_padding_efficiency"] - 1e-12
