"""The profile's designed budgets (``profile --design designed|mixed``): nodes, edges and pairs varied
apart over the run's range, each budget holding the real step packed on it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dygnex_jax.errors import UserError
from dygnex_jax.graphs import Budget
from dygnex_jax.padding import edge_need
from dygnex_jax.profile import _design_points, _fill, design, designed_steps


def test_design_points_are_a_latin_hypercube_in_log_space():
    """Every point inside [lo, hi]; in the log of each column the n points fall one in each of n equal
    strata; of the draws tried, the least correlated: never more than the first draw's."""
    from scipy.stats import qmc

    lo, hi, n = np.array([10.0, 1.0, 5.0]), np.array([1e4, 1e3, 1e5]), 12
    pts = _design_points(lo, hi, n, seed=3)
    assert pts.shape == (n, 3) and np.all(pts >= lo * (1 - 1e-12)) and np.all(pts <= hi * (1 + 1e-12))
    strata = np.floor(n * (np.log(pts) - np.log(lo)) / (np.log(hi) - np.log(lo))).astype(int)
    for col in strata.T:
        assert sorted(np.minimum(col, n - 1)) == list(range(n))
    first = np.exp(np.log(lo) + qmc.LatinHypercube(d=3, seed=3).random(n) * (np.log(hi) - np.log(lo)))

    def worst(p):
        return np.abs(np.corrcoef(p.T)[np.triu_indices(3, 1)]).max()

    assert worst(pts) <= worst(first) + 1e-12


@pytest.mark.parametrize("layout", ["scan", "flat", "last"])
def test_fill_keeps_a_device_within_its_target(layout):
    """The windows chosen need (nodes + 1, edges as the layout counts them, pairs) no more than the
    target and are at most ``slots``; with room for all, the first ``slots`` of the order; with room for
    none, the order's first window alone."""
    rng = np.random.default_rng(0)
    profile = rng.integers(0, 50, (60, 4)).astype(float)
    if layout == "last":
        profile[:, :-1] = 0.0
    costs = np.column_stack([rng.integers(5, 40, 60), profile.sum(axis=1), rng.integers(10, 200, 60)])
    order = rng.permutation(60)
    for target in ([120.0, 150.0, 600.0], [300.0, 90.0, 2000.0], [60.0, 400.0, 250.0]):
        got = _fill(np.array(target), costs, profile, order, 6, layout)
        assert 1 <= len(got) <= 6 and len(set(got)) == len(got)
        need = [1 + costs[got, 0].sum(), edge_need(profile[got].sum(axis=0), layout), costs[got, 2].sum()]
        assert np.all(np.array(need) <= target) or got == [int(order[0])]
        if np.all(np.array(need) <= target) and len(got) < 6:  # greedy: no skipped window would fit
            for i in set(order.tolist()) - set(got):
                more = got + [i]
                m = [
                    1 + costs[more, 0].sum(),
                    edge_need(profile[more].sum(axis=0), layout),
                    costs[more, 2].sum(),
                ]
                assert np.any(np.array(m) > target)
    assert _fill(np.array([1e9, 1e9, 1e9]), costs, profile, order, 6, layout) == order[:6].tolist()
    assert _fill(np.array([1.0, 0.0, 0.0]), costs, profile, order, 6, layout) == [int(order[0])]


def _trainer(devices: int, batch: int):
    from dygnex_jax.config import load_config
    from dygnex_jax.train import Trainer

    over = [f"parallel.devices={devices}", f"train.batch_size={batch}", "parallel.budgets=buckets"]
    return Trainer(load_config(None, over))


def test_designed_budgets_hold_their_real_steps_and_vary_apart():
    """Each designed step packs on its own budget (the packer picks it as the only planned one), aligned
    to 8 with ceil(B / P) window slots; every device carries at least one real window; and the budgets
    spread over the run's range in every column (the design's decorrelation: the Latin hypercube test)."""
    trainer = _trainer(devices=2, batch=8)
    steps = designed_steps(trainer, 8, seed=0)
    assert len(steps) == 8
    for step, budget in steps:
        assert len(step) == 2 and all(1 <= len(part) <= 4 for part in step)
        assert budget.windows == 4 and all(x % 8 == 0 for x in budget.as_tuple()[:3])
        trainer.planned = [budget]
        assert trainer.pack(step, "train", epoch=0)[2] == budget
    rows = np.array([trainer.padded_work(b) for _, b in steps])
    assert np.all(rows.max(axis=0) >= 2 * rows.min(axis=0))


def test_mixed_design_alternates_bands_and_designed_budgets():
    trainer = _trainer(devices=2, batch=8)
    got = design(trainer, "mixed", 7, seed=1)
    assert len(got) == 7
    assert [b is None for _, b in got] == [True, False] * 3 + [True]
    assert all(isinstance(b, Budget) for _, b in got[1::2])
    with pytest.raises(UserError, match="--design 'grid'"):
        design(trainer, "grid", 7, seed=1)


def test_pack_on_a_given_budget_and_the_full_step_packed_beside():
    """``pack(..., budget=b)`` packs on ``b`` when it holds the step and refuses one that does not; the
    step the profile packs beside each timed run is a full training step (B windows over the P devices)
    that its budget holds."""
    from dygnex_jax.profile import beside_step

    trainer = _trainer(devices=2, batch=8)
    step, budget = beside_step(trainer, seed=0)
    assert sum(len(part) for part in step) == 8 and len(step) == 2 and budget.windows == 4
    got = trainer.pack(step, "train", epoch=0, budget=budget)[2]
    assert got == budget
    bigger = Budget(budget.nodes + 8, budget.edges + 8, budget.pairs + 8, budget.windows)
    batch, _, got = trainer.pack(step, "train", epoch=0, budget=bigger)
    assert got == bigger
    assert batch["node_window"].shape == (2, bigger.nodes) and batch["pair_src"].shape == (2, bigger.pairs)
    assert batch["senders"].shape[-1] == bigger.edges
    too_small = Budget(2, 1, 1, 4)
    with pytest.raises(ValueError, match="cannot hold"):
        trainer.pack(step, "train", epoch=0, budget=too_small)


def test_random_step_draws_distinct_windows_over_the_devices():
    """A random step holds ``batch_size`` distinct training windows (all of them when fewer exist), in
    one contiguous part per device whose sizes differ by at most one; the same seed draws the same step."""
    from dygnex_jax.profile import random_step

    trainer = _trainer(devices=2, batch=8)
    n = len(trainer.train_costs)
    for size in (1, 5, 8, n + 3):
        step = random_step(trainer, np.random.default_rng(3), size)
        ids = [i for part in step for i in part]
        assert len(step) == 2 and len(ids) == len(set(ids)) == min(size, n)
        assert all(0 <= i < n for i in ids) and abs(len(step[0]) - len(step[1])) <= 1
        assert step == random_step(trainer, np.random.default_rng(3), size)


def test_the_command_line_offers_exactly_the_profile_designs():
    """``profile --design`` accepts every design ``profile.design`` builds and nothing else (the parser
    keeps its own copy of the names so that ``--help`` does not import JAX)."""
    from dygnex_jax.__main__ import _parser
    from dygnex_jax.profile import DESIGNS

    for kind in DESIGNS:
        assert _parser().parse_args(["profile", "--design", kind]).design == kind
    with pytest.raises(SystemExit):
        _parser().parse_args(["profile", "--design", "grid"])


def test_random_design_draws_training_like_steps_on_their_exact_needs():
    """``random``: every step holds distinct random windows, m a device with m cycling through the
    window counts (the run's ceil(B / P) among them), on its exact need aligned to 8 — a budget the
    packer accepts for that step and no column of which is more than 7 above the need."""
    from dygnex_jax.padding import aligned
    from dygnex_jax.profile import _window_counts, design

    trainer = _trainer(devices=2, batch=8)
    counts = _window_counts(trainer)
    assert 4 in counts  # ceil(8 / 2)
    steps = design(trainer, "random", 8, seed=1)
    assert len(steps) == 8
    for i, (step, budget) in enumerate(steps):
        ids = [w for part in step for w in part]
        assert len(ids) == len(set(ids)) == min(int(counts[i % len(counts)]) * 2, len(trainer.train_costs))
        need = trainer.packer.step_need(step, "train", 0)[1]
        assert budget == aligned(need, 8) and budget.holds(need)
        assert all(b - n < 8 for b, n in zip(budget.as_tuple()[:3], need.as_tuple()[:3]))
        assert trainer.pack(step, "train", epoch=0, budget=budget)[2] == budget
    assert design(trainer, "random", 8, seed=1) == steps


@pytest.mark.parametrize("prefetch", [1, 0])
def test_profile_times_its_steps_in_rounds(monkeypatch, prefetch):
    """``time_steps`` compiles every distinct budget first (a step on a budget already seen is not
    timed), then runs ``repeats`` rounds, each timing every step once beside the next step's packing and
    once alone (without prefetch: once, alone) — never one step's runs back to back — and reports each
    step's medians of its own runs, its compilation as its first run less that median."""
    from dygnex_jax import profile

    trainer = _trainer(devices=2, batch=8)
    trainer.config = dataclasses.replace(
        trainer.config, parallel=dataclasses.replace(trainer.config.parallel, prefetch=prefetch)
    )
    steps = design(trainer, "bands", 4, seed=0)
    steps = steps + [steps[0]]  # a second step on a budget already timed
    calls, clock = [], iter(range(1, 10_000))
    real_run = profile.TimedStep.run

    def run(self, tr, pool, pack_next):
        real_run(self, tr, pool, pack_next)  # the real step, so the budgets compile and run
        calls.append((id(self), pool is not None))
        return float(next(clock))  # every run its own time: medians are checkable

    monkeypatch.setattr(profile.TimedStep, "run", run)
    got = profile.time_steps(trainer, steps, repeats=3, log=lambda *_: None)
    n = len(got["rows"])
    assert n == len({tuple(r) for r in got["rows"]}) and 2 <= n <= 4
    ids = [c[0] for c in calls]
    first, rest = ids[:n], ids[n:]
    assert len(set(first)) == n  # each budget compiled once, before any timed run
    per_round = 2 * n if prefetch else n
    assert len(rest) == 3 * per_round
    for r in range(3):  # a round runs every step, in the same order, beside then alone
        chunk = calls[n + r * per_round : n + (r + 1) * per_round]
        assert [c[0] for c in chunk][:: 2 if prefetch else 1] == first
        if prefetch:
            assert [c[1] for c in chunk] == [True, False] * n
        else:
            assert not any(c[1] for c in chunk)
    for j in range(n):  # the times handed out: step j's runs are j-th in every round
        mine = [n + r * per_round + (2 * j if prefetch else j) for r in range(3)]
        beside = [float(k + 1) for k in mine]
        assert got["seconds"][j] == beside[1]
        alone = [float(k + 2) for k in mine] if prefetch else beside
        assert got["seconds_alone"][j] == alone[1]
        assert got["compiles"][j] == 0.0  # its first run (time j + 1) is shorter than its median
