"""Schedulers (psg, dygnex_g, dygnex_l), the cost model and schedule metrics. No JAX here."""

import dataclasses
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dygnex_jax.config import ScheduleConfig
from dygnex_jax.errors import UserError
from dygnex_jax.schedule import available_methods, greedy, ilp, schedule
from dygnex_jax.schedule.cost import (
    FEATURES,
    CostModel,
    default_cost_model,
    fit,
    predict_step_seconds,
    window_features,
)
from dygnex_jax.schedule.metrics import (
    padding_efficiency,
    predicted_epoch_seconds,
    step_loads,
    step_objectives,
)

REPO = Path(__file__).resolve().parents[1]
METHODS = ("psg", "dygnex_g", "dygnex_l")


def cfg(method: str, **kw) -> ScheduleConfig:
    kw.setdefault("time_limit", 0.2)  # keep dygnex_l quick in tests
    return ScheduleConfig(method=method, **kw)


def lognormal(k: int, seed: int, sigma: float = 1.0) -> np.ndarray:
    """Skewed window costs: correlated but not proportional (nodes, edges, pairs)."""
    r = np.random.default_rng(seed)
    nodes = 20 * np.exp(sigma * r.standard_normal(k)) + 1
    edges = nodes * 8 * np.exp(0.3 * r.standard_normal(k))
    pairs = nodes * 4 * np.exp(0.3 * r.standard_normal(k))
    return np.column_stack([nodes, edges, pairs])


def objective(costs: np.ndarray, sched, settings) -> float:
    w = np.array([settings.alpha, settings.beta, settings.gamma])
    return float(step_objectives(step_loads(costs, sched), w).sum())


def brute_force(costs: np.ndarray, n_devices: int, w: np.ndarray) -> float:
    """The optimal single-step objective by enumerating every assignment."""
    best = np.inf
    for assign in itertools.product(range(n_devices), repeat=len(costs)):
        loads = greedy.device_loads(costs, np.array(assign), n_devices)
        best = min(best, float(loads.max(axis=0) @ w))
    return best


# ------------------------------------------------------------------------------------ invariants


def _slot_maxima(costs, steps):
    return np.max([costs[g].sum(axis=0) for st in steps for g in st if len(g)], axis=0)


@pytest.mark.parametrize("compose", ["strata", "sorted"])
def test_balance_epoch_keeps_the_steps_and_lowers_the_largest_slot(compose):
    """greedy.balance_epoch: every window placed once, every step keeps its size, the one-budget
    objective ``w · max over (step, device) slots`` never rises (and drops on skewed costs), and the
    maxima it reports are the slots' own."""
    c = lognormal(300, 5, sigma=0.4)  # no single window above a mean slot: room to balance
    w = np.ones(3)
    for epoch in (1, 2):
        sched = schedule(c, 8, 32, cfg("dygnex_g", compose=compose), seed=0, epoch=epoch)
        steps, maxima, stats = greedy.balance_epoch(c, sched.steps, w)
        fitted = dataclasses.replace(sched, steps=steps)
        fitted.validate(len(c))
        assert [sum(map(len, st)) for st in steps] == [sum(map(len, st)) for st in sched.steps]
        np.testing.assert_allclose(maxima, _slot_maxima(c, steps))
        before = _slot_maxima(c, sched.steps) @ w
        assert maxima @ w <= before * (1 + 1e-12)
        assert maxima @ w < 0.97 * before and stats["swaps"] > 0


def test_balance_epoch_shrink_never_raises_the_objective_nor_passes_the_bounds():
    """shrink (target descent with overflow repair) after the local search: the one-budget objective is
    never higher than the local search's alone and never below the per-column lower bounds (largest
    window, mean slot); steps keep their sizes; the same input gives the same output."""
    w = np.array([1.0, 1.0, 2.0])
    for seed, sigma in itertools.product(range(4), (0.3, 0.8)):
        c = lognormal(90, 20 + seed, sigma=sigma)
        sched = schedule(c, 8, 32, cfg("dygnex_g", compose="strata"), seed=seed, epoch=1)
        _, m0, _ = greedy.balance_epoch(c, sched.steps, w, shrink_work=0)
        steps, m1, stats = greedy.balance_epoch(c, sched.steps, w)
        again, _, _ = greedy.balance_epoch(c, sched.steps, w)
        dataclasses.replace(sched, steps=steps).validate(len(c))
        assert [sum(map(len, st)) for st in steps] == [sum(map(len, st)) for st in sched.steps]
        np.testing.assert_allclose(m1, _slot_maxima(c, steps))
        assert all(np.array_equal(a, b) for sa, sb in zip(steps, again) for a, b in zip(sa, sb))
        bound = np.maximum(c.max(axis=0), c.sum(axis=0) / 24)
        assert np.all(m1 >= bound * (1 - 1e-9)) and m1 @ w <= m0 @ w * (1 + 1e-12)
        assert stats["shrink"]["work"] <= greedy.SHRINK_WORK + 90 * 90


def test_fit_epochs_with_shrink_pays_less_on_bitcoin_otc(data_root):
    """Where the local search leaves the run's one budget well above what the windows need —
    Bitcoin-OTC at P = 8, B = 32 (90 windows in 24 slots per epoch, one window above the mean slot in
    edges and pairs), ten epochs fitted in turn, each floored by the ones before — shrink lowers the
    budget (the maxima over every epoch's slots) by more than 3 %."""
    from dygnex_jax.config import load_config, step_layout
    from dygnex_jax.data import datasets
    from dygnex_jax.data.node_windows import task_windows
    from dygnex_jax.padding import layout_view
    from dygnex_jax.plan import fit_epochs

    config = load_config(REPO / "configs" / "egcn_o_bitcoin_otc.yaml", ["train.batch_size=32"])
    ws = task_windows(datasets.load_dataset(config.data), config.data)
    c = layout_view(ws.costs("train", config.data.neg_mult), ws.edge_profile("train"), step_layout(config))[0]
    w = np.ones(3)
    scheds = {e: schedule(c, 8, 32, cfg("dygnex_g", compose="strata"), seed=0, epoch=e) for e in range(1, 11)}
    budget = {}
    for work in (0, greedy.SHRINK_WORK):
        fitted = fit_epochs(scheds, c, w, shrink_work=work)
        budget[work] = np.max([_slot_maxima(c, f.steps) for f in fitted.values()], axis=0) @ w
    assert budget[greedy.SHRINK_WORK] < 0.97 * budget[0]


def test_balance_epoch_gains_nothing_below_its_floor():
    """A floor above every slot (a budget already paid for) leaves the epoch as it was; a floor in one
    column only lets the others be lowered, never pushed above it."""
    c = lognormal(200, 6)
    sched = schedule(c, 4, 16, cfg("dygnex_g", compose="sorted"), seed=1, epoch=1)
    top = _slot_maxima(c, sched.steps)
    steps, _, stats = greedy.balance_epoch(c, sched.steps, np.ones(3), floor=2 * top)
    assert stats["iterations"] == 0
    assert all(np.array_equal(a, b) for sa, sb in zip(steps, sched.steps) for a, b in zip(sa, sb))
    floor = np.array([0.0, 2 * top[1], 0.0])
    steps, maxima, _ = greedy.balance_epoch(c, sched.steps, np.ones(3), floor=floor)
    assert np.maximum(maxima, floor) @ np.ones(3) <= np.maximum(top, floor) @ np.ones(3) * (1 + 1e-12)


def test_methods_registered():
    """The schedulers are exactly these, and every strategy's scheduler is one of them."""
    from dygnex_jax.strategies import STRATEGIES

    assert set(METHODS) == set(available_methods())
    assert {row[2] for row in STRATEGIES.values()} <= set(available_methods())


def test_every_method_places_each_window_once_with_right_step_sizes():
    r = np.random.default_rng(0)
    for trial in range(40):
        k = int(r.integers(1, 120))
        b = int(r.integers(1, 40))
        p = int(r.integers(1, min(b, k) + 1))
        costs = lognormal(k, trial) if trial % 3 else r.integers(0, 5, size=(k, 3)).astype(float)
        methods = METHODS if k <= 40 else METHODS[:2]  # keep dygnex_l's solves short
        for m in methods:
            s = schedule(costs, p, b, cfg(m, time_limit=0.05), seed=trial)
            s.validate(k)  # also run inside schedule(); explicit here
            assert s.n_devices == p and s.num_steps == -(-k // b)
            assert all(len(step) == p for step in s.steps)
            assert all(w.dtype == np.int64 for step in s.steps for w in step)


def test_last_step_with_fewer_windows_than_devices():
    costs = lognormal(10, 1)
    for m in METHODS:
        s = schedule(costs, 4, 4, cfg(m), seed=0)
        assert [sum(len(w) for w in step) for step in s.steps] == [4, 4, 2]


@pytest.mark.parametrize("method", METHODS)
def test_deterministic_for_a_seed(method):
    costs = lognormal(60, 3)
    settings = cfg(method, time_limit=5.0, node_limit=200)  # node cap: reproducible solves
    a = schedule(costs, 4, 16, settings, seed=7, epoch=2)
    b = schedule(costs, 4, 16, settings, seed=7, epoch=2)
    assert len(a.steps) == len(b.steps)
    for sa, sb in zip(a.steps, b.steps):
        for wa, wb in zip(sa, sb):
            np.testing.assert_array_equal(wa, wb)


def test_greedy_epochs_differ_and_dygnex_l_shares_its_steps():
    costs = lognormal(96, 4)
    g0 = schedule(costs, 4, 16, cfg("dygnex_g"), seed=1, epoch=0)
    g1 = schedule(costs, 4, 16, cfg("dygnex_g"), seed=1, epoch=1)
    l0 = schedule(costs, 4, 16, cfg("dygnex_l", time_limit=0.05), seed=1, epoch=0)
    comp = lambda s: [sorted(np.concatenate(step).tolist()) for step in s.steps]  # noqa: E731
    assert comp(g0) != comp(g1)  # new epoch: new jitter and step order
    assert comp(g0) == comp(l0)  # the MILP only re-places windows within the greedy's steps


def test_psg_without_shuffle_is_in_time_order():
    costs = lognormal(37, 2)
    s = schedule(costs, 3, 8, cfg("psg", shuffle=False), seed=0)
    order = np.concatenate([w for step in s.steps for w in step])
    np.testing.assert_array_equal(order, np.arange(37))


def test_greedy_without_jitter_batches_by_cost_in_random_step_order():
    costs = lognormal(64, 5)
    w = np.ones(3)
    ranks = np.argsort(-(costs @ w), kind="stable")
    chunks = [set(ranks[i : i + 8].tolist()) for i in range(0, 64, 8)]
    orders = []
    for seed in range(4):
        s = schedule(costs, 2, 8, cfg("dygnex_g", jitter=0.0, compose="sorted"), seed=seed)
        steps = [set(np.concatenate(step).tolist()) for step in s.steps]
        assert sorted(map(sorted, steps)) == sorted(map(sorted, chunks))  # heavy with heavy
        orders.append([chunks.index(st) for st in steps])
    assert any(o != sorted(o) for o in orders)  # steps are not presented in cost order
    assert len({tuple(o) for o in orders}) > 1


def test_greedy_rows_steps_are_whole_rows_that_mix_cost_levels():
    """compose=rows: a step is B/P whole rows of P cost-consecutive windows from anywhere in the order."""
    k, n_dev, b = 67, 4, 12
    costs = lognormal(k, 8)
    ranks = np.argsort(-(costs @ np.ones(3)), kind="stable")
    rows = [frozenset(ranks[i : i + n_dev].tolist()) for i in range(0, k, n_dev)]
    row_of = {w: r for r, row in enumerate(rows) for w in row}
    spreads = []
    for seed in range(3):
        s = schedule(costs, n_dev, b, cfg("dygnex_g", jitter=0.0, compose="rows"), seed=seed)
        assert [sum(len(w) for w in step) for step in s.steps] == [12] * 5 + [7]
        for step in s.steps[:-1]:
            ids = np.concatenate(step).tolist()
            assert {row_of[w] for w in ids} <= set(range(len(rows)))
            step_rows = {row_of[w] for w in ids}
            assert all(rows[r] <= set(ids) for r in step_rows) and len(step_rows) == b // n_dev
            spreads.append(max(step_rows) - min(step_rows))
        assert rows[-1] <= set(np.concatenate(s.steps[-1]).tolist())  # the short row runs in the short step
    assert np.mean(spreads) > 2  # steps mix cost levels (sorted composition would give spread 2)


def test_greedy_strata_steps_take_one_window_of_every_cost_stratum():
    """compose=strata: a full step is a stratified sample, one window from each of B cost strata."""
    k, n_dev, b = 67, 4, 12
    costs = lognormal(k, 9)
    ranks = np.argsort(-(costs @ np.ones(3)), kind="stable")
    firsts = set()
    for seed in range(3):
        s = schedule(costs, n_dev, b, cfg("dygnex_g", jitter=0.0, compose="strata"), seed=seed)
        steps = [np.concatenate(step) for step in s.steps]
        assert [len(x) for x in steps] == [12] * 5 + [7]
        short = set(steps[-1].tolist())
        rest = [w for w in ranks.tolist() if w not in short]  # cost order without the short step
        stratum = {w: i // 5 for i, w in enumerate(rest)}
        for x in steps[:-1]:
            assert sorted(stratum[w] for w in x.tolist()) == list(range(12))
        firsts.add(tuple(sorted(steps[0].tolist())))
    assert len(firsts) == 3  # the dealing is random per seed


def test_greedy_chrono_steps_are_consecutive_windows_in_time_order():
    """compose=chrono: psg's time-ordered steps (B consecutive windows, the short step last), the same
    every epoch and seed whatever the costs; dygnex_g only places them, and balances no worse than psg."""
    k, n_dev, b = 67, 4, 12
    costs = lognormal(k, 10)
    w = np.ones(3)
    psg_steps = schedule(costs, n_dev, b, cfg("psg", shuffle=False), seed=0)
    want = [list(range(i, min(i + b, k))) for i in range(0, k, b)]
    assert [sorted(np.concatenate(step).tolist()) for step in psg_steps.steps] == want
    for seed, epoch in [(0, 1), (1, 2), (5, 9)]:
        s = schedule(costs, n_dev, b, cfg("dygnex_g", compose="chrono"), seed=seed, epoch=epoch)
        assert [sorted(np.concatenate(step).tolist()) for step in s.steps] == want
        assert step_objectives(step_loads(costs, s), w).sum() <= step_objectives(
            step_loads(costs, psg_steps), w
        ).sum() * (1 + 1e-12)


def test_greedy_short_last_step_stays_last():
    costs = lognormal(50, 6)
    s = schedule(costs, 4, 16, cfg("dygnex_g"), seed=3)
    assert [sum(len(w) for w in step) for step in s.steps] == [16, 16, 16, 2]


# ------------------------------------------------------------------------------------ optimality


def test_dygnex_l_equals_brute_force_on_tiny_instances():
    r = np.random.default_rng(11)
    for trial in range(12):
        k = int(r.integers(2, 9))
        p = int(r.integers(2, 4))
        if p > k:
            continue
        costs = lognormal(k, 100 + trial)
        settings = cfg("dygnex_l", time_limit=10.0, mip_gap=0.0)
        s = schedule(costs, p, k, settings, seed=trial)  # one step
        opt = brute_force(costs, p, np.ones(3))
        got = objective(costs, s, settings)
        assert got == pytest.approx(opt, rel=1e-6), (k, p, s.info["statuses"])
        assert s.info["lower_bound"] <= got * (1 + 1e-9)
        assert s.fallback is None


def test_greedy_within_lpt_bound_on_one_dimensional_costs():
    r = np.random.default_rng(12)
    for trial in range(25):
        k = int(r.integers(2, 9))
        p = int(r.integers(2, 4))
        if p > k:
            continue
        x = np.exp(r.standard_normal(k))
        costs = np.column_stack([x, x, x])
        settings = cfg("dygnex_g", beta=0.0, gamma=0.0)
        s = schedule(costs, p, k, settings, seed=trial)
        opt = brute_force(costs, p, np.array([1.0, 0.0, 0.0]))
        assert objective(costs, s, settings) <= (4 / 3 - 1 / (3 * p)) * opt * (1 + 1e-9)
        assert objective(costs, s, settings) >= opt * (1 - 1e-9)


def test_dygnex_l_never_worse_than_dygnex_g():
    r = np.random.default_rng(13)
    for trial in range(10):
        k = int(r.integers(8, 48))
        b = int(r.integers(4, 24))
        p = int(r.integers(2, min(b, k, 8) + 1))
        costs = lognormal(k, 200 + trial)
        g = schedule(costs, p, b, cfg("dygnex_g"), seed=trial)
        lsched = schedule(costs, p, b, cfg("dygnex_l", time_limit=0.1), seed=trial)
        wg = step_objectives(step_loads(costs, g), np.ones(3))
        wl = step_objectives(step_loads(costs, lsched), np.ones(3))
        assert np.all(wl <= wg * (1 + 1e-12))  # step by step (same steps, same order)
        assert lsched.info["lower_bound"] <= lsched.info["objective"] * (1 + 1e-9)


def test_greedy_and_ilp_beat_psg_on_skewed_costs():
    eff = {m: [] for m in METHODS}
    for seed in range(6):
        costs = lognormal(64, 300 + seed, sigma=1.2)
        for m in METHODS:
            s = schedule(costs, 4, 16, cfg(m, time_limit=0.1), seed=seed)
            eff[m].append(padding_efficiency(step_loads(costs, s), np.ones(3)))
    mean = {m: float(np.mean(v)) for m, v in eff.items()}
    assert mean["dygnex_g"] > mean["psg"] + 0.1
    assert mean["dygnex_l"] >= mean["dygnex_g"] - 1e-12


def test_lower_bounds_are_valid():
    r = np.random.default_rng(14)
    for _ in range(40):
        k = int(r.integers(2, 8))
        p = int(r.integers(2, 4))
        costs = np.exp(r.standard_normal((k, 3)))
        w = r.random(3)
        assert greedy.step_lower_bound(costs, p, w) <= brute_force(costs, p, w) * (1 + 1e-9)


# --------------------------------------------------------------------------------------- solvers


def test_forced_time_out_keeps_a_valid_schedule_and_says_so():
    costs = lognormal(64, 21)
    settings = cfg("dygnex_l", time_limit=1e-4, mip_gap=0.0)
    s = schedule(costs, 8, 32, settings, seed=0)
    s.validate(64)
    assert s.fallback is not None and "time_limit" in s.fallback
    assert "\n" not in s.fallback
    assert s.info["objective"] <= s.info["greedy_objective"] * (1 + 1e-12)
    assert 0.0 <= s.info["lower_bound"] <= s.info["objective"]
    assert s.info["statuses"].get("time_limit", 0) >= 1


def test_unknown_solver_is_a_user_error_naming_installed_solvers():
    with pytest.raises(UserError) as e:
        schedule(lognormal(16, 0), 2, 8, cfg("dygnex_l", solver="NO_SUCH_SOLVER"), seed=0)
    assert "HIGHS" in str(e.value) and "NO_SUCH_SOLVER" in str(e.value)


def test_bad_solver_limits_are_user_errors():
    for kw in ({"time_limit": 0.0}, {"mip_gap": -0.1}, {"node_limit": -1}):
        with pytest.raises(UserError):
            schedule(lognormal(16, 0), 2, 8, cfg("dygnex_l", **kw), seed=0)


def test_known_but_missing_solver_falls_back_to_greedy():
    installed = ilp.installed_milp_solvers()
    missing = next((s for s in ("GUROBI", "CPLEX", "MOSEK", "XPRESS", "COPT") if s not in installed), None)
    if missing is None:
        pytest.skip("every commercial MILP solver is installed")
    costs = lognormal(40, 22)
    s = schedule(costs, 4, 20, cfg("dygnex_l", solver=missing, mip_gap=0.0), seed=0)
    g = schedule(costs, 4, 20, cfg("dygnex_g"), seed=0)
    assert s.fallback and "not installed" in s.fallback
    assert objective(costs, s, cfg("x")) == pytest.approx(objective(costs, g, cfg("x")))


@pytest.mark.parametrize("kw", [{"ilp_warm_start": False}, {"solver": "SCIPY"}])
def test_cvxpy_backends(kw):
    costs = lognormal(9, 23)
    settings = cfg("dygnex_l", time_limit=5.0, mip_gap=0.0, **kw)
    s = schedule(costs, 3, 9, settings, seed=0)
    assert s.info["backend"] == "cvxpy"
    assert objective(costs, s, settings) == pytest.approx(brute_force(costs, 3, np.ones(3)), rel=1e-6)


def test_highs_banner_is_silenced():
    code = (
        "import numpy as np\n"
        "from dygnex_jax.config import ScheduleConfig\n"
        "from dygnex_jax.schedule import schedule\n"
        "c = np.exp(np.random.default_rng(0).standard_normal((24, 3)))\n"
        "s = schedule(c, 4, 24, ScheduleConfig(method='dygnex_l', mip_gap=0.0, time_limit=2.0), seed=0)\n"
        "assert s.info['statuses'].get('skipped', 0) == 0, s.info['statuses']\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=_repo())
    assert out.returncode == 0, out.stderr
    assert out.stdout == "", out.stdout


def test_schedule_package_never_imports_jax():
    code = (
        "import sys\n"
        "import dygnex_jax.schedule, dygnex_jax.schedule.cost, dygnex_jax.schedule.metrics\n"
        "assert not any(m == 'jax' or m.startswith('jax.') for m in sys.modules), 'jax imported'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=_repo())
    assert out.returncode == 0, out.stderr


def test_bad_weights_are_a_user_error():
    with pytest.raises(UserError):
        schedule(lognormal(8, 0), 2, 4, cfg("dygnex_g", alpha=0.0, beta=0.0, gamma=0.0), seed=0)
    with pytest.raises(UserError):
        schedule(lognormal(8, 0), 2, 4, cfg("dygnex_g", alpha=-1.0), seed=0)
    with pytest.raises(UserError):
        schedule(lognormal(8, 0), 2, 4, cfg("dygnex_g", jitter=-0.5), seed=0)


def test_greedy_is_fast_at_moderate_scale():
    costs = lognormal(20_000, 30)
    t0 = time.perf_counter()
    s = schedule(costs, 256, 2048, cfg("dygnex_g"), seed=0)
    assert time.perf_counter() - t0 < 5.0  # ~0.4 s on the 2-core dev machine
    assert s.info["objective"] <= 1.1 * s.info["lower_bound"]


@pytest.mark.slow
def test_greedy_100k_windows_1024_devices_under_a_second():
    costs = lognormal(100_000, 31)
    for b in (4096, 8192):
        best = min(_timed(costs, 1024, b) for _ in range(3))
        assert best < 1.0, (b, best)  # wall time: run on an otherwise idle machine


def _timed(costs, n_devices, batch_size) -> float:
    t0 = time.perf_counter()
    schedule(costs, n_devices, batch_size, cfg("dygnex_g"), seed=0)
    return time.perf_counter() - t0


def _repo():
    from pathlib import Path

    return str(Path(__file__).resolve().parents[1])


# -------------------------------------------------------------------------------------- metrics


def test_step_loads_match_a_plain_loop():
    costs = lognormal(30, 40)
    s = schedule(costs, 3, 8, cfg("dygnex_g"), seed=0)
    loads = step_loads(costs, s)
    for i, step in enumerate(s.steps):
        for p, w in enumerate(step):
            np.testing.assert_allclose(loads[i, p], costs[w].sum(axis=0))


# ------------------------------------------------------------------------------------ cost model


def test_cost_model_fit_recovers_coefficients_and_round_trips(tmp_path):
    r = np.random.default_rng(50)
    # the last two: per edge / pair and doubling, 0.2 x per edge / pair (one slope, tied: cost._nnls)
    true = np.array([3e-6, 4e-7, 1e-7, 2e-4, 5e-3, 8e-8, 2e-8])
    rows = []
    for _ in range(400):
        w = int(r.integers(2, 16))
        load = np.array([[r.uniform(100, 20_000), r.uniform(1e3, 5e5), r.uniform(1e3, 2e5)]])
        rows.append(window_features(load, w, span=r.uniform(50, 20_000))[0])
    x = np.array(rows)
    seconds = (x @ true) * (1 + 0.01 * r.standard_normal(len(x)))
    model = fit(x, seconds, window=10)
    big = [0, 1, 2, 5, 6]
    np.testing.assert_allclose(model.coef[big], true[big], rtol=0.05)
    np.testing.assert_allclose(model.coef[3:5], true[3:5], rtol=0.25)  # small terms: looser
    assert 0 <= model.mape < 0.03
    assert np.all(model.coef >= 0)
    np.testing.assert_allclose(model.predict(x), x @ model.coef)
    path = tmp_path / "sub" / "cost.json"
    model.save(path)
    back = CostModel.load(path)
    np.testing.assert_array_equal(back.coef, model.coef)
    assert back.mape == model.mape and back.window == 10 and back.n_samples == 400
    assert json.loads(path.read_text())["features"] == list(FEATURES)


def test_cost_model_fit_is_non_negative():
    r = np.random.default_rng(51)
    x = window_features(r.uniform(1, 100, size=(50, 3)), 4)
    seconds = x[:, 1] * 1e-3 - x[:, 2] * 1e-5 + 0.01  # a negative true coefficient
    assert np.all(fit(x, seconds).coef >= 0)


def test_cost_model_load_errors(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        CostModel.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON"):
        CostModel.load(bad)
    d = default_cost_model().to_dict()
    for broken in [
        {**d, "coef": [1.0, 2.0]},
        {**d, "coef": [1.0, -1.0, 0.0, 0.0, 0.0]},
        {**d, "format": "other"},
        [1, 2, 3],
        {**d, "window": 0},
    ]:
        bad.write_text(json.dumps(broken))
        with pytest.raises(UserError, match="malformed"):
            CostModel.load(bad)


def test_predict_step_seconds_uses_the_padded_load():
    model = default_cost_model(window=5)
    loads = np.array([[[10.0, 100.0, 7.0], [20.0, 50.0, 9.0]], [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]])
    got = predict_step_seconds(loads, model)
    want = model.predict(window_features(np.array([[20.0, 100.0, 9.0], [1.0, 1.0, 1.0]]), 5))
    np.testing.assert_allclose(got, want)
    assert predicted_epoch_seconds(loads, model) == pytest.approx(want.sum())
    w = model.weights()
    assert w[0] == pytest.approx(model.coef[0] * 5) and w[1] == model.coef[1]


@pytest.mark.parametrize("window", [1, 4, 10])
def test_analytic_model_prices_a_node_once_per_snapshot_its_layers_run_on(window):
    """``last`` runs the layers on the last snapshot's nodes: a node costs the same at every W, and W
    times less than in ``scan``, where every snapshot's layers run; nothing else differs."""
    load = np.array([[1000.0, 5000.0, 300.0]])
    more = load + [[1.0, 0.0, 0.0]]
    last, scan = default_cost_model(window, "last"), default_cost_model(window, "scan")
    per_node = last.predict_costs(more, window)[0] - last.predict_costs(load, window)[0]
    assert per_node == pytest.approx(2e-6)
    per_node_scan = scan.predict_costs(more, window)[0] - scan.predict_costs(load, window)[0]
    assert per_node_scan == pytest.approx(2e-6 * window)
    np.testing.assert_array_equal(last.coef[1:], scan.coef[1:])
    assert default_cost_model(window, "flat").coef.tolist() == scan.coef.tolist()


def test_schedule_config_dataclass_has_the_settings():
    fields = {f.name for f in dataclasses.fields(ScheduleConfig)}
    assert {"ilp_warm_start", "node_limit", "time_limit", "mip_gap", "solver", "jitter"} <= fields


def test_too_few_windows_names_the_real_limit():
    """More devices than windows per step: the message says which limit binds and the fix that works —
    a larger batch when the batch is the limit, fewer devices or more windows when the split is."""
    from dygnex_jax.errors import UserError
    from dygnex_jax.schedule.base import check_sizes

    with pytest.raises(UserError, match=r"8 devices but only 4 windows per step .*train.batch_size >= 8"):
        check_sizes(100, 8, 4)
    with pytest.raises(UserError, match=r"8 devices but only 6 windows per step .*at most 6 devices") as e:
        check_sizes(6, 8, 32)
    assert "batch_size >=" not in str(e.value) and "data.train_frac" in str(e.value)
    check_sizes(8, 8, 8)  # exactly enough: no error


def test_the_device_advice_is_a_count_that_runs():
    """64 devices, 27 training windows, B = 8: the advised count (8) passes, the old advice (27) did not."""
    from dygnex_jax.schedule.base import check_sizes

    with pytest.raises(
        UserError, match=r"use at most 8 devices \(parallel.devices\), 27 with train.batch_size >= 27"
    ):
        check_sizes(27, 64, 8)
    check_sizes(27, 8, 8)
    check_sizes(27, 27, 27)
