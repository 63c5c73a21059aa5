"""padding.py: the one padded-cost function (hand-computed steps), and the per-run budget planner."""

import itertools

import numpy as np
import pytest

from dygnex_jax.padding import (
    Budget,
    aligned,
    bucketed,
    cheapest_holding,
    compile_rounds,
    device_need,
    efficiency,
    padded_cost,
    padded_work,
    plan_budgets,
    step_need,
)


def test_a_hand_computed_step_in_both_layouts():
    """Two devices, W = 3. Device 0: 10 nodes, edges per offset (4, 9, 2), 30 pairs, 2 windows;
    device 1: 6 nodes, (7, 1, 1), 50 pairs, 1 window. Weights (1, 2, 0.5)."""
    w = np.array([1.0, 2.0, 0.5])
    d0 = device_need(10, np.array([4, 9, 2]), 30, 2, "scan")
    d1 = device_need(6, np.array([7, 1, 1]), 50, 1, "scan")
    assert d0 == Budget(11, 9, 30, 2) and d1 == Budget(7, 7, 50, 1)  # +1 padding node, max offset
    scan = step_need([d0, d1])
    assert scan == Budget(11, 9, 50, 2)
    # scan: every device runs 11 nodes, 3 x 9 edges, 50 pairs
    assert list(padded_work(scan, 3, "scan")) == [11, 27, 50]
    assert padded_cost(scan, 3, "scan", w) == 11 + 2 * 27 + 0.5 * 50
    f0 = device_need(10, np.array([4, 9, 2]), 30, 2, "flat")
    f1 = device_need(6, np.array([7, 1, 1]), 50, 1, "flat")
    flat = step_need([f0, f1])
    assert flat == Budget(11, 15, 50, 2)  # the largest per-device sum over offsets: 4 + 9 + 2
    assert list(padded_work(flat, 3, "flat")) == [11, 15, 50]
    # efficiency: real work summed over devices over padded work of every device, same weights
    real = np.array([[10, 15, 30], [6, 9, 50]], float)
    want_scan = (10 + 30 + 15 + 6 + 18 + 25) / (2 * (11 + 54 + 25))
    want_flat = (10 + 30 + 15 + 6 + 18 + 25) / (2 * (11 + 30 + 25))
    assert efficiency(real, np.stack([padded_work(scan, 3, "scan")] * 2), w) == pytest.approx(want_scan)
    assert efficiency(real, np.stack([padded_work(flat, 3, "flat")] * 2), w) == pytest.approx(want_flat)
    assert efficiency(real, real, w) == 1.0  # no padding at all
    assert step_need([d0, d1], window_slots=4).windows == 4


def test_alignment_buckets_and_the_cheapest_holding_budget():
    need = Budget(13, 100, 1, 3)
    assert aligned(need, 8) == Budget(16, 104, 8, 3)
    assert aligned(need, 1) == need
    assert bucketed(need, 2.0, 8) == Budget(16, 128, 8, 3)
    w = np.ones(3)
    small, big, other = Budget(16, 128, 8, 3), Budget(64, 256, 64, 3), Budget(16, 512, 8, 3)
    assert cheapest_holding(need, [big, other, small], 4, "flat", w) == small
    assert cheapest_holding(Budget(20, 100, 1, 3), [big, other, small], 4, "flat", w) == big
    assert cheapest_holding(Budget(20, 100, 1, 4), [big, other, small], 4, "flat", w) is None
    # scan pays W x edges: the wide-edge budget is dearer there
    assert padded_cost(other, 4, "scan", w) > padded_cost(big, 4, "scan", w)


def _total(needs, budgets, window, layout, w):
    return sum(padded_cost(cheapest_holding(n, budgets, window, layout, w), window, layout, w) for n in needs)


def test_plan_holds_every_need_and_is_optimal_among_ordered_partitions():
    """Every step fits a planned budget; with a free compilation and enough budgets every distinct need
    gets its own (exact); the chosen plan is no worse than any split of the cost order into at most
    max_budgets runs (brute force), counting the compile price."""
    rng = np.random.default_rng(0)
    w = np.array([1.0, 1.0, 1.0])
    needs = [
        Budget(int(a), int(b), int(c), 2)
        for a, b, c in rng.integers(1, 400, size=(9, 3)) * np.array([1, 3, 2])
    ]
    for layout in ("flat", "scan"):
        free = plan_budgets(needs, 5, layout, w, compile_price=0.0, max_budgets=64, align=1)
        assert sorted(b.as_tuple() for b in free) == sorted({n.as_tuple() for n in needs})
        for price, g_max, workers, traced in [
            (0.0, 3, 1, 0.0),
            (500.0, 4, 1, 0.0),
            (1e9, 4, 1, 0.0),
            (500.0, 4, 2, 0.2),
            (2000.0, 4, 3, 0.5),
        ]:
            par = {"workers": workers, "traced": traced}
            plan = plan_budgets(needs, 5, layout, w, compile_price=price, max_budgets=g_max, align=1, **par)
            assert 1 <= len(plan) <= g_max
            assert all(any(b.holds(n) for b in plan) for n in needs)
            got = _total(needs, plan, 5, layout, w) + price * compile_rounds(len(plan), **par)
            order = sorted(needs, key=lambda b: (padded_cost(b, 5, layout, w), b.as_tuple()))
            best = np.inf
            for g in range(1, g_max + 1):
                for cuts in itertools.combinations(range(1, len(order)), g - 1):
                    bounds = [0, *cuts, len(order)]
                    budgets = [
                        Budget(*np.max([n.as_tuple() for n in order[a:b]], axis=0))
                        for a, b in zip(bounds, bounds[1:])
                    ]
                    best = min(best, _total(needs, budgets, 5, layout, w) + price * compile_rounds(g, **par))
            assert got <= best + 1e-6
        one = plan_budgets(needs, 5, layout, w, compile_price=1e12, max_budgets=4, align=1)
        assert one == [Budget(*np.max([n.as_tuple() for n in needs], axis=0))]


def test_compile_rounds_count_tracing_one_at_a_time_and_xla_in_rounds_of_workers():
    """One worker (or all of it traced): k compilations; none traced: ceil(k / workers) rounds; between,
    the traced share adds up and the rest goes in rounds (the hand-computed 0.2 * 5 + 0.8 * 3)."""
    k = np.arange(1, 10)
    assert np.array_equal(compile_rounds(k, 1, 0.0), k)
    assert np.allclose(compile_rounds(k, 1, 0.3), k, rtol=1e-12)
    assert np.allclose(compile_rounds(k, 4, 1.0), k, rtol=1e-12)
    assert np.array_equal(compile_rounds(k, 2, 0.0), np.ceil(k / 2))
    assert compile_rounds(5, 2, 0.2) == pytest.approx(0.2 * 5 + 0.8 * 3)
    assert np.all(np.diff(compile_rounds(k, 3, 0.2)) >= 0)  # a budget more never costs less


def test_plan_is_aligned_deterministic_and_empty_for_no_steps():
    needs = [Budget(10, 33, 5, 1), Budget(300, 900, 77, 2), Budget(12, 30, 6, 1)]
    a = plan_budgets(needs, 10, "scan", np.ones(3), compile_price=1.0, max_budgets=4, align=8)
    assert a == plan_budgets(
        list(reversed(needs)), 10, "scan", np.ones(3), compile_price=1.0, max_budgets=4, align=8
    )
    assert all(x % 8 == 0 for b in a for x in b.as_tuple()[:3])
    assert all(b.windows == 2 for b in a)  # one window-slot count for the run: the largest
    assert plan_budgets([], 10, "scan", np.ones(3), compile_price=1.0, max_budgets=4) == []


def test_many_needs_are_binned_conservatively():
    rng = np.random.default_rng(1)
    needs = [Budget(int(a), int(b), int(c), 1) for a, b, c in rng.integers(1, 10_000, size=(4000, 3))]
    plan = plan_budgets(needs, 4, "flat", np.ones(3), compile_price=0.0, max_budgets=6, align=8)
    assert len(plan) == 6
    assert all(any(b.holds(n) for b in plan) for n in needs)


@pytest.mark.parametrize("layout", ["scan", "flat", "last"])
def test_step_needs_are_the_devices_needs(layout):
    """``plan.step_needs`` (one pass per step) is ``step_need`` of every device's ``device_need``: on
    random steps with empty devices, an empty step and window-slot minima, the same integers."""
    from types import SimpleNamespace

    from dygnex_jax import plan
    from dygnex_jax.padding import device_need, step_need

    rng = np.random.default_rng(3)
    for _ in range(50):
        k, w, p = int(rng.integers(1, 40)), int(rng.integers(1, 6)), int(rng.integers(1, 9))
        costs = rng.integers(0, 1000, size=(k, 3)).astype(float)
        profile = rng.integers(0, 300, size=(k, w)).astype(float)
        dev, step_of = rng.integers(0, p, size=k), rng.integers(0, 3, size=k)
        ids = rng.permutation(k)
        steps = [[ids[(dev[ids] == d) & (step_of[ids] == s)] for d in range(p)] for s in range(3)]
        steps.append([np.zeros(0, np.int64)] * p)  # a step with no window
        slots = int(rng.integers(0, 5))
        want = [
            step_need(
                [
                    device_need(costs[g, 0].sum(), profile[g].sum(axis=0), costs[g, 2].sum(), len(g), layout)
                    for g in st
                ],
                slots,
            )
            for st in steps
        ]
        assert plan.step_needs(costs, profile, SimpleNamespace(steps=steps), layout, slots) == want
