"""dygnex_l on the packed (flat, 3-column) objective: invariants, exact neighbourhoods, known optima.

Synthetic cost arrays only (no datasets), so every test here is fast.
"""

import itertools
import math

import numpy as np
import pytest

from dygnex_jax.config import ScheduleConfig
from dygnex_jax.schedule import greedy, ilp, schedule
from dygnex_jax.schedule.metrics import step_loads, step_objectives

W = np.ones(3)


def packed_costs(k: int, seed: int) -> np.ndarray:
    """[K, 3] integer costs (nodes, edges summed over time, pairs) shaped like the real ones: heavy
    tailed, edges ~ 5x nodes, pairs loosely coupled to both (so the three columns disagree)."""
    r = np.random.default_rng(seed)
    nodes = np.round(300 * np.exp(0.6 * r.standard_normal(k))) + 20
    edges = np.round(nodes * 5 * np.exp(0.2 * r.standard_normal(k)))
    pairs = np.round(nodes * 6 * np.exp(0.7 * r.standard_normal(k)))
    return np.column_stack([nodes, edges, pairs])


def settings(method: str, **kw) -> ScheduleConfig:
    kw.setdefault("time_limit", 0.3)
    return ScheduleConfig(method=method, time_resolved=False, **kw)


def brute_force(c: np.ndarray, n_devices: int, w: np.ndarray = W) -> float:
    best = np.inf
    for assign in itertools.product(range(n_devices), repeat=len(c)):
        loads = greedy.device_loads(c, np.array(assign), n_devices)
        best = min(best, float(loads.max(axis=0) @ w))
    return best


def objective(c: np.ndarray, device: np.ndarray, n_devices: int, w: np.ndarray = W) -> float:
    return greedy.step_objective(c, device, n_devices, w)


# ------------------------------------------------------------------------------- the method


@pytest.mark.parametrize("compose", ["strata", "rows", "sorted"])
def test_never_worse_than_greedy_step_by_step_and_bounds_hold(compose):
    costs = packed_costs(80, 1)  # P = 8, B = 32: two full steps and a short one of 16
    g = schedule(costs, 8, 32, settings("dygnex_g", compose=compose), seed=3, epoch=1)
    lsched = schedule(costs, 8, 32, settings("dygnex_l", compose=compose), seed=3, epoch=1)
    wg = step_objectives(step_loads(costs, g), W)
    wl = step_objectives(step_loads(costs, lsched), W)
    assert np.all(wl <= wg * (1 + 1e-12))  # same steps in the same order, never worse
    info = lsched.info
    assert info["objective"] == pytest.approx(wl.sum())
    assert info["objective"] <= info["greedy_objective"] * (1 + 1e-12)
    assert info["search_objective"] <= info["greedy_objective"] * (1 + 1e-12)
    assert 0.0 <= info["lower_bound"] <= info["objective"] * (1 + 1e-12)
    assert 0.0 <= info["gap"] < 1.0
    for r, f in zip(info["steps"], wl):
        assert r["objective"] == pytest.approx(f)
        assert r["lower_bound"] <= r["objective"] * (1 + 1e-12)
        assert r["lower_bound"] >= r["objective"] * 0.8  # per-dimension bounds are not vacuous here
        assert r["seconds"] <= 0.3 + 0.5  # the step's time_limit, with slack for a loaded machine


def test_strictly_better_than_greedy_somewhere():
    costs = packed_costs(96, 2)
    g = schedule(costs, 8, 32, settings("dygnex_g", compose="sorted"), seed=0, epoch=1)
    lsched = schedule(costs, 8, 32, settings("dygnex_l", compose="sorted"), seed=0, epoch=1)
    assert lsched.info["objective"] < g.info["objective"] * (1 - 1e-6)
    assert lsched.info["improved_steps"] >= 1


def test_reproducible_with_a_node_limit():
    costs = packed_costs(48, 3)
    s = settings("dygnex_l", compose="rows", time_limit=30.0, node_limit=20)  # the caps bind, not time
    a = schedule(costs, 4, 24, s, seed=5, epoch=2)
    b = schedule(costs, 4, 24, s, seed=5, epoch=2)
    assert a.info["objective"] < a.info["greedy_objective"]
    for sa, sb in zip(a.steps, b.steps):
        for wa, wb in zip(sa, sb):
            np.testing.assert_array_equal(wa, wb)


def test_tiny_time_limit_falls_back_and_says_so():
    costs = packed_costs(64, 4)
    s = schedule(costs, 8, 32, settings("dygnex_l", time_limit=1e-4, mip_gap=0.0), seed=0)
    s.validate(64)
    assert s.fallback is not None and "time_limit" in s.fallback and "\n" not in s.fallback
    assert s.info["objective"] <= s.info["greedy_objective"] * (1 + 1e-12)
    assert 0.0 <= s.info["lower_bound"] <= s.info["objective"]


# --------------------------------------------------------------------------- known optima


def test_finds_the_optimum_on_small_steps():
    r = np.random.default_rng(7)
    for trial in range(8):
        k = int(r.integers(5, 9))
        p = int(r.integers(2, 4))
        c = packed_costs(k, 100 + trial)
        s = schedule(c, p, k, settings("dygnex_l", time_limit=10.0, mip_gap=0.0), seed=trial)
        opt = brute_force(c, p)
        assert s.info["objective"] == pytest.approx(opt, rel=1e-9), (k, p)
        assert s.info["lower_bound"] <= opt * (1 + 1e-9)


def test_lpt_trap_is_solved():
    # LPT on 2 devices with sizes 3,3,2,2,2 gives 7 (3+2+2 | 3+2); the optimum is 6 (3+3 | 2+2+2).
    sizes = np.array([3.0, 3.0, 2.0, 2.0, 2.0])
    c = np.column_stack([sizes, 10 * sizes, 100 * sizes])
    assert objective(c, greedy.lpt(c[None], 2, W)[0], 2) == pytest.approx(7 * 111)
    lsched = schedule(c, 2, 5, settings("dygnex_l", jitter=0.0, mip_gap=0.0), seed=0)
    assert lsched.info["objective"] == pytest.approx(6 * 111)
    assert lsched.fallback is None


def perfect_instance(n_devices: int, per_device: int, seed: int) -> np.ndarray:
    """Windows that split into n_devices groups of equal sums in every column: the optimum is the
    mean load per device in every column, which is also the lower bound."""
    r = np.random.default_rng(seed)
    target = np.array([1200.0, 6000.0, 7000.0])
    rows = []
    for _ in range(n_devices):
        while True:
            part = np.round(r.uniform(0.12, 0.4, (per_device - 1, 3)) * target)
            last = target - part.sum(axis=0)
            if np.all(last >= 0.1 * target):
                break
        rows.append(np.vstack([part, last]))
    return np.vstack(rows)[r.permutation(n_devices * per_device)]


@pytest.mark.parametrize("seed", [0, 1])
def test_finds_a_perfect_split_the_greedy_misses(seed):
    c = perfect_instance(4, 4, seed)  # 16 windows, 4 devices, every column balanced exactly
    opt = float(c.sum(axis=0) @ W) / 4
    g = schedule(c, 4, 16, settings("dygnex_g"), seed=0)
    lsched = schedule(c, 4, 16, settings("dygnex_l", time_limit=5.0, mip_gap=0.0), seed=0)
    assert g.info["objective"] > opt * (1 + 1e-9)  # the instance is not trivial for the greedy
    assert lsched.info["objective"] == pytest.approx(opt, rel=1e-12)
    assert lsched.info["lower_bound"] == pytest.approx(opt, rel=1e-9)
    assert lsched.info["gap"] == pytest.approx(0.0, abs=1e-9)
    assert lsched.fallback is None


# -------------------------------------------------------------------- exact neighbourhoods


@pytest.mark.parametrize(("m", "k"), [(1, 2), (5, 2), (9, 2), (1, 3), (4, 3), (8, 3)])
def test_assignments_are_every_partition_once(m, k):
    codes, onehot = ilp._assignments(m, k)
    # restricted growth strings: the number of partitions of m items into at most k blocks
    stirling = sum(
        sum((-1) ** (j - i) * math.comb(j, i) * i**m for i in range(j + 1)) // math.factorial(j)
        for j in range(1, k + 1)
    )
    assert len(codes) == stirling
    canon = {tuple(np.unique(row, return_inverse=True)[1]) for row in codes}  # relabelled in order
    assert len(canon) == len(codes)  # no partition twice
    assert onehot.shape == (k - 1, m, len(codes))
    for j in range(k - 1):
        np.testing.assert_array_equal(onehot[j].T, codes == j)


@pytest.mark.parametrize("seed", range(4))
def test_search_is_exact_on_two_and_three_devices(seed):
    # With P <= 3 the first re-partition covers every assignment: the search returns an optimum.
    r = np.random.default_rng(seed)
    for p, n in ((2, 9), (3, 8)):
        c = packed_costs(n, 10 * seed + p)
        start = r.integers(0, p, n)
        device, stats = ilp.neighbourhood_search(c, start, p, W)
        assert objective(c, device, p) == pytest.approx(brute_force(c, p), rel=1e-12)
        assert stats["stopped"] == ""


def test_search_result_admits_no_improving_move_or_swap():
    c = packed_costs(32, 11)
    start = greedy.lpt(c[None], 8, W)[0]
    device, _ = ilp.neighbourhood_search(c, start, 8, W)
    f = objective(c, device, 8)
    assert f <= objective(c, start, 8) * (1 + 1e-12)
    for i in range(len(c)):
        for q in range(8):  # every single move
            x = device.copy()
            x[i] = q
            assert objective(c, x, 8) >= f * (1 - 1e-9)
        for j in range(i + 1, len(c)):  # every swap
            x = device.copy()
            x[i], x[j] = x[j], x[i]
            assert objective(c, x, 8) >= f * (1 - 1e-9)


def test_search_respects_its_work_cap_and_weights():
    c = packed_costs(32, 12)
    start = greedy.lpt(c[None], 8, W)[0]
    device, stats = ilp.neighbourhood_search(c, start, 8, W, max_work=1)
    assert stats["stopped"] == "work" and stats["work"] > 0
    # a zero weight leaves that column out of the objective (and the search)
    w = np.array([0.0, 1.0, 0.0])
    device, _ = ilp.neighbourhood_search(c, start, 8, w)
    assert objective(c, device, 8, w) <= objective(c, start, 8, w) * (1 + 1e-12)


def test_iterated_search_never_worse_and_seeded():
    c = packed_costs(32, 13)
    start = greedy.lpt(c[None], 8, W)[0]
    descent, _ = ilp.neighbourhood_search(c, start, 8, W, triples=False)
    a, sa = ilp.iterated_search(c, start, 8, W, np.random.default_rng(0), rounds=16)
    b, _ = ilp.iterated_search(c, start, 8, W, np.random.default_rng(0), rounds=16)
    np.testing.assert_array_equal(a, b)
    assert sa["rounds"] == 16
    assert objective(c, a, 8) <= objective(c, descent, 8) * (1 + 1e-12)
    # a target already met: no rounds
    _, st = ilp.iterated_search(c, start, 8, W, np.random.default_rng(0), rounds=16, target=np.inf)
    assert st["rounds"] == 0


# ------------------------------------------------------------------------------------ bounds


def test_grouped_bound_is_valid_and_at_least_the_per_column_bound():
    r = np.random.default_rng(21)
    for _ in range(60):
        k = int(r.integers(2, 8))
        p = int(r.integers(2, 4))
        c = np.exp(r.standard_normal((k, 3)))
        w = r.random(3) * (r.random(3) > 0.2)
        if not np.any(w > 0):
            continue
        bound, groups = ilp.grouped_lower_bound(c, p, w)
        assert bound <= brute_force(c, p, w) * (1 + 1e-9)
        assert bound >= greedy.step_lower_bound(c, p, w) * (1 - 1e-12)
        assert all(len(g) >= 2 for g in groups)


def test_grouped_bound_sees_coupling():
    # 5 windows on 2 devices: per column the bounds are the means (5 and 6), but some device holds
    # 3 windows and any 3 weigh at least 12 over both columns together: the optimum, 12.
    c = np.array([[2.0, 2.0, 0.0], [3.0, 2.0, 0.0], [2.0, 2.0, 0.0], [2.0, 3.0, 0.0], [1.0, 3.0, 0.0]])
    w = np.array([1.0, 1.0, 0.0])
    bound, groups = ilp.grouped_lower_bound(c, 2, w)
    assert greedy.step_lower_bound(c, 2, w) == pytest.approx(11.0)
    assert bound == pytest.approx(12.0) and groups == {(0, 1): pytest.approx(12.0)}
    assert brute_force(c, 2, w) == pytest.approx(12.0)
    s = schedule(c, 2, 5, settings("dygnex_l", mip_gap=0.0), seed=0)
    assert s.info["objective"] == pytest.approx(12.0) and s.info["gap"] == pytest.approx(0.0)


@pytest.mark.parametrize("method", ["psg", "dygnex_g"])
def test_improve_schedule_keeps_every_step_and_never_pays_more(method):
    """``improve_schedule`` (DyGNeX-L on a repeated plan's steps): every step keeps its windows, only
    their devices change, and no step's objective rises; on skewed costs some step improves."""
    c = packed_costs(96, 3)
    base = schedule(c, 4, 16, settings(method, compose="strata"), seed=0, epoch=1)
    got = ilp.improve_schedule(base, c, settings("dygnex_l"), seed=[0, 1])
    got.validate(len(c))
    assert [sorted(np.concatenate(s).tolist()) for s in got.steps] == [
        sorted(np.concatenate(s).tolist()) for s in base.steps
    ]
    before = step_objectives(step_loads(c, base), W)
    after = step_objectives(step_loads(c, got), W)
    assert np.all(after <= before + 1e-9) and after.sum() < before.sum()
    assert got.method == "dygnex_l" and got.info["greedy"]["placed"] == method
