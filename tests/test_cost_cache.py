"""This machine's cost-model cache (cost_cache.py) and how a run prices steps with it (step_cost.py)."""

import dataclasses
import json

import numpy as np
import pytest

from dygnex_jax import cost_cache, plan
from dygnex_jax.config import load_config
from dygnex_jax.errors import UserError
from dygnex_jax.padding import Budget
from dygnex_jax.schedule.cost import (
    LOCALITY_SLOPE_MAX,
    CostModel,
    _nnls,
    default_cost_model,
    fit,
    held_out_errors,
    window_features,
)

# seconds per node-step, edge, pair, snapshot, step; no locality terms (one span: tests/test_schedule.py)
TRUE = np.array([3e-7, 2e-6, 1e-6, 2e-4, 4e-3, 0.0, 0.0])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(cost_cache.ENV, str(tmp_path / "cost_models"))
    return tmp_path / "cost_models"


def timed(seed: int, n: int, window: int, scale: float, noise: float = 0.02):
    """n steps of a synthetic dataset (sizes ~ scale) timed by TRUE with multiplicative noise."""
    r = np.random.default_rng(seed)
    work = np.column_stack(
        [r.uniform(0.2, 1, n) * scale, r.uniform(0.2, 1, n) * scale * 0.5, r.uniform(0.2, 1, n) * scale * 4]
    ).round()
    secs = window_features(work, window) @ TRUE * np.exp(noise * r.standard_normal(n))
    return work, secs


def sig(config=None, devices=2, layout="last"):
    config = config or load_config(None, [])
    return cost_cache.signature(
        config, num_features=7, layout=layout, devices=devices, processes=1, platform="cpu"
    )


def test_pooled_profiles_fit_one_model_and_report_each_left_out_dataset(cache):
    """Two datasets' profiles under one signature: one model on both (it recovers the true
    coefficients), the error on each dataset when it was left out of the fit, the measured compile
    seconds (median) and the worse load average kept."""
    s = sig()
    a, b = timed(0, 30, 10, 20_000), timed(1, 30, 6, 60_000)
    m1, path, transfer = cost_cache.record(s, "a", *a, 10, [1.0, 2.0], [0.5, 0.7], log=lambda _: None)
    assert transfer == {} and m1.datasets == ["a"] and m1.devices == 2
    m2, path2, transfer = cost_cache.record(s, "b", *b, 6, [3.0], [1.5, 0.4], log=lambda _: None)
    assert path2 == path and m2.datasets == ["a", "b"] and m2.n_samples == 60
    np.testing.assert_allclose(m2.coef[:3], TRUE[:3], rtol=0.1)
    assert set(transfer) == {"a", "b"} and max(transfer.values()) < 0.1
    assert m2.compile_seconds == 2.0 and m2.load_average == [1.5, 0.7]
    got, note = cost_cache.lookup(s)
    np.testing.assert_array_equal(got.coef, m2.coef)
    assert "profiled on this machine (a, b" in note and str(path) in note
    # re-profiling a dataset replaces its steps (no double counting)
    m3, _, _ = cost_cache.record(s, "b", *b, 6, [3.0], [1.5, 0.4], log=lambda _: None)
    assert m3.n_samples == 60


def test_the_signature_tells_models_devices_and_layouts_apart(cache):
    s = sig()
    cost_cache.record(s, "a", *timed(0, 10, 10, 1000), 10, [1.0], [0.1, 0.1], log=lambda _: None)
    assert cost_cache.lookup(s)[0] is not None
    assert cost_cache.lookup(sig(devices=4))[0] is None
    assert cost_cache.lookup(sig(layout="scan"))[0] is None
    wider = load_config(None, ["model.hidden=128"])
    assert cost_cache.lookup(sig(wider))[0] is None


def test_a_new_step_program_does_not_reuse_older_profiles(cache, monkeypatch):
    """Profiles measured before the models' work per unit changed (cost_cache.STEP_PROGRAM) are not
    looked up for the new program, and are found again under the old one."""
    s = sig()
    cost_cache.record(s, "a", *timed(0, 10, 10, 1000), 10, [1.0], [0.1, 0.1], log=lambda _: None)
    monkeypatch.setattr(cost_cache, "STEP_PROGRAM", cost_cache.STEP_PROGRAM + 1)
    newer = sig()
    assert newer["program"] == s["program"] + 1
    assert cost_cache.entry_path(newer) != cost_cache.entry_path(s)
    assert cost_cache.lookup(newer)[0] is None and cost_cache.lookup(s)[0] is not None


def test_resolve_auto_analytic_and_a_file(cache, tmp_path):
    config = load_config(None, ["parallel.devices=2"])
    kw = dict(window=5, num_features=7, layout="last", devices=2, processes=1, platform="cpu")
    model, note = cost_cache.resolve(config, **kw)  # nothing cached: analytic, and how to profile
    assert model.source == "analytic" and model.window == 5
    assert "no profile of egcn_o at 2 device(s)" in note and "dygnex_jax profile" in note
    cost_cache.record(sig(config), "a", *timed(0, 10, 10, 1000), 10, [1.0], [0.1, 0.1], log=lambda _: None)
    model, note = cost_cache.resolve(config, **kw)
    assert model.datasets == ["a"] and model.window == 5 and "profiled on this machine" in note
    off = load_config(None, ["schedule.cost_model=analytic"])
    model, note = cost_cache.resolve(off, **kw)
    assert note == "" and model.source == "analytic"
    np.testing.assert_array_equal(model.coef, default_cost_model(5, "last").coef)
    f = tmp_path / "m.json"
    CostModel(coef=TRUE, window=5, source="mine").save(f)
    from_file = load_config(None, [f"schedule.cost_model={f}"])
    assert cost_cache.resolve(from_file, **kw)[0].source == "mine"


def test_an_unreadable_entry_falls_back_and_is_replaced(cache):
    s = sig()
    path = cost_cache.entry_path(s)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    model, note = cost_cache.lookup(s)
    assert model is None and "unreadable" in note
    config = load_config(None, [])
    kw = dict(window=5, num_features=7, layout="last", devices=2, processes=1, platform="cpu")
    model, note = cost_cache.resolve(config, **kw)
    assert model.source == "analytic" and "unreadable" in note
    lines = []
    cost_cache.record(s, "a", *timed(0, 10, 10, 1000), 10, [1.0], [0.1, 0.1], log=lines.append)
    assert any("starting it anew" in line for line in lines)
    assert json.loads(path.read_text())["datasets"].keys() == {"a"}


def test_an_unwritable_cache_is_one_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv(cost_cache.ENV, str(blocker / "sub"))
    with pytest.raises(UserError, match="cannot write the cost-model cache.*--no-cache"):
        cost_cache.record(sig(), "a", *timed(0, 10, 10, 1000), 10, [1.0], [0.1, 0.1], log=lambda _: None)


def test_a_version_1_model_file_still_reads(tmp_path):
    f = tmp_path / "v1.json"
    d = CostModel(coef=TRUE, window=4, mape=0.1, n_samples=9, source="fit").to_dict()
    for k in ("devices", "compile_seconds", "load_average", "datasets"):
        d.pop(k)
    f.write_text(json.dumps(d | {"version": 1}))
    m = CostModel.load(f)
    assert m.devices == 0 and m.compile_seconds is None and m.datasets == [] and m.mape == 0.1


def test_compile_seconds_auto_takes_the_profiled_measurement():
    auto = load_config(None, [])
    fixed = load_config(None, ["parallel.compile_seconds=2.5"])
    measured = plan.step_seconds_fn(CostModel(coef=TRUE, compile_seconds=4.0), 10, "scan")
    unmeasured = plan.step_seconds_fn(CostModel(coef=TRUE), 10, "scan")
    assert plan.compile_seconds(auto, measured) == 4.0
    assert plan.compile_seconds(auto, unmeasured) == plan.DEFAULT_COMPILE_SECONDS
    assert plan.compile_seconds(fixed, measured) == 2.5
    assert plan.compile_steps(auto, 0.5, measured) == 8.0  # 4 s of compilation = 8 steps of 0.5 s


def test_slowdown_is_relative_to_the_devices_a_model_was_profiled_with():
    profiled = CostModel(coef=TRUE, devices=8, source="profile")
    assert plan.model_slowdown(profiled, 8, 2, "cpu") == 1.0
    assert plan.model_slowdown(profiled, 2, 2, "cpu") == pytest.approx(1 / 4)
    assert plan.model_slowdown(default_cost_model(), 8, 2, "cpu") == 8.0  # one device spans the cores
    assert plan.model_slowdown(CostModel(coef=TRUE, source="refit"), 8, 2, "cpu") == 1.0
    assert plan.model_slowdown(profiled, 2, 2, "gpu") == 1.0
    step = plan.step_seconds_fn(profiled, 10, "scan", slowdown=2.0)
    b = Budget(100, 50, 30, 2)
    assert step(b) == pytest.approx(2.0 * float((window_features(np.array([[100, 500, 30]]), 10) @ TRUE)[0]))


def test_held_out_errors_are_out_of_sample():
    """Every row is predicted once by a fit that did not see it (5 folds): on exact data every error is
    ~0; a row that does not follow the others shows its own error, from a fit on the rest; below 5 rows
    the error is in sample."""
    work, secs = timed(3, 25, 10, 5000, noise=0.0)
    x = window_features(work, 10)
    errs = held_out_errors(x, secs)
    assert len(errs) == 25 and np.max(errs) < 1e-6  # exact data: exact predictions of every held-out row
    for row in (4, 7):
        bad = secs.copy()
        bad[row] *= 3  # this row alone does not follow the others
        got = held_out_errors(x, bad)
        assert got[row] == pytest.approx(2 / 3, rel=1e-3)  # predicted from its fold's fit: the true time
        same_fold = np.arange(25) % 5 == row % 5
        assert np.max(got[same_fold & (np.arange(25) != row)]) < 1e-6  # fitted without the bad row
    y = secs[:4] * [1, 1, 1, 2]
    in_sample = np.abs(x[:4] @ _nnls(x[:4], y) - y) / y
    np.testing.assert_allclose(held_out_errors(x[:4], y), in_sample)  # below 5 rows: in sample


def test_the_schedule_commands_weights_are_the_trainers_under_a_profiled_model():
    config = load_config(None, [])
    model = CostModel(coef=TRUE, window=10, source="profile", devices=2)
    settings = plan.run_settings(config.schedule, model, 10)
    np.testing.assert_allclose([settings.alpha, settings.beta, settings.gamma], model.weights(10))
    assert plan.run_settings(config.schedule, default_cost_model(10), 10) == config.schedule
    free = dataclasses.replace(model, coef=np.array([0, 0, 0, 1e-3, 1e-2]))
    assert plan.run_settings(config.schedule, free, 10) == config.schedule
    edges_free = dataclasses.replace(model, coef=np.array([3e-7, 0, 1e-6, 1e-3, 1e-2]))
    assert plan.run_settings(config.schedule, edges_free, 10) == config.schedule


def test_a_resume_plans_with_the_model_its_run_started_with(tmp_path, monkeypatch):
    """A run with schedule.cost_model: auto keeps the cached model it started with (OUT/cost_model.json);
    after the cache entry changes, its resume still uses that one, and a new run the new one."""
    from helpers import REPO, run_cli

    from dygnex_jax.config import step_layout
    from dygnex_jax.data.datasets import load_dataset
    from dygnex_jax.data.node_windows import task_windows

    monkeypatch.setenv(cost_cache.ENV, str(tmp_path / "cache"))
    SMOKE_CONFIG = str(REPO / "configs" / "smoke.yaml")
    config = load_config(SMOKE_CONFIG, [])
    ws = task_windows(load_dataset(config.data), config.data)
    s = cost_cache.signature(
        config,
        num_features=ws.num_features,
        layout=step_layout(config),
        devices=8,
        processes=1,
        platform="cpu",
    )
    scale = cost_cache.step_scale(ws.costs("train", config.data.neg_mult)[:, 2], config.train.batch_size, 8)
    cost_cache.record(s, "a", *timed(0, 12, 4, 3000), 4, [1.0], [0.1, 0.1], log=lambda _: None)
    first = cost_cache.lookup(s, scale)[0]  # the entry refitted around the run's steps, as the run does
    out = tmp_path / "run"
    r = run_cli("train", "--config", SMOKE_CONFIG, "--out", str(out), "train.epochs=1", fake_devices=8)
    assert r.returncode == 0, r.stderr
    coef = lambda run: json.loads((run / "summary.json").read_text())["cost_model"]["coef"]  # noqa: E731
    assert coef(out) == first.to_dict()["coef"]
    cost_cache.record(s, "a", *timed(5, 12, 4, 9000), 4, [1.0], [0.1, 0.1], log=lambda _: None)
    second = cost_cache.lookup(s, scale)[0]
    assert second.to_dict()["coef"] != first.to_dict()["coef"]
    r = run_cli("train", "--resume", str(out), "train.epochs=2", fake_devices=8)
    assert r.returncode == 0, r.stderr
    assert coef(out) == first.to_dict()["coef"]
    assert "cost_model: auto" in (out / "config.yaml").read_text()  # the config is the run's, unchanged
    fresh = tmp_path / "fresh"
    r = run_cli("train", "--config", SMOKE_CONFIG, "--out", str(fresh), "train.epochs=1", fake_devices=8)
    assert r.returncode == 0, r.stderr
    assert coef(fresh) == second.to_dict()["coef"]


def test_beyond_profile_names_the_columns_past_the_profiled_range():
    from dygnex_jax.schedule.cost import beyond_profile

    model = CostModel(coef=TRUE, profiled_max=[1000.0, 500.0, 8000.0])
    assert beyond_profile(model, np.array([[1500.0, 900.0, 16000.0]])) == ""  # within 2x
    note = beyond_profile(model, np.array([[900.0, 400.0, 7000.0], [1200.0, 300.0, 20000.0]]))
    assert "pairs 20000 (profiled up to 8000)" in note and "nodes" not in note and "profile" in note
    assert beyond_profile(CostModel(coef=TRUE), np.array([[1e9, 1e9, 1e9]])) == ""


def test_the_trainer_prices_a_compilation_at_its_models_measurement(tmp_path):
    from helpers import make_trainer

    f = tmp_path / "m.json"
    CostModel(coef=TRUE, window=4, source="profile", devices=2, compile_seconds=7.5).save(f)
    tr = make_trainer(f"schedule.cost_model={f}", "parallel.devices=2")
    assert tr.step_seconds.compile_seconds == 7.5 and tr.slowdown == 1.0
    assert plan.compile_seconds(tr.config, tr.step_seconds) == 7.5
    assert plan.compile_seconds(tr.config, tr.pricer) == 7.5
    np.testing.assert_allclose(
        [tr.settings.alpha, tr.settings.beta, tr.settings.gamma], tr.cost_model.weights(4)
    )


def test_step_scale_is_a_devices_share_of_the_batch():
    assert cost_cache.step_scale([100, 300], batch_size=32, devices=8) == 4 * 200
    assert cost_cache.step_scale([100, 300], batch_size=30, devices=8) == 4 * 200  # ceil(30 / 8)
    assert cost_cache.step_scale([], batch_size=8, devices=2) == 0.0


def test_a_fit_centred_on_the_runs_steps_predicts_them_better(cache):
    """Small and large steps that follow different linear laws (the per-unit cost falls on larger
    steps, as measured on 2 CPU cores): the plain pooled fit is set by the large steps' seconds and
    misses the small ones; centred on a run's step size (``scale``), it predicts that run's steps —
    both ends — within a few per cent (the plain fit: the large ones only)."""
    s = sig()
    r = np.random.default_rng(3)
    small_coef = np.array([6e-7, 4e-6, 2e-6, 4e-4, 8e-3, 0.0, 0.0])
    big_coef = np.array([2e-7, 1.3e-6, 0.6e-6, 1e-4, 2e-2, 0.0, 0.0])

    def steps(lo, hi, coef, n=24):
        pairs = r.uniform(lo, hi, n)
        work = np.column_stack([pairs / 8, pairs / 10, pairs]).round()
        return work, window_features(work, 10) @ coef * np.exp(0.01 * r.standard_normal(n))

    small, big = steps(5e3, 3e4, small_coef), steps(5e5, 1.5e6, big_coef)
    cost_cache.record(s, "small", *small, 10, [1.0], [0.5, 0.5], log=lambda _: None)
    cost_cache.record(s, "big", *big, 10, [1.0], [0.5, 0.5], log=lambda _: None)

    def error(model, data):
        return float(np.median(np.abs(model.predict_costs(data[0], 10) / data[1] - 1)))

    plain = cost_cache.lookup(s)[0]
    for data in (small, big):
        centred, note = cost_cache.lookup(s, scale=float(np.median(data[0][:, 2])))
        assert "fitted around steps of" in note
        assert error(centred, data) < 0.05 and error(centred, data) <= error(plain, data) + 0.01
    assert error(plain, small) > 0.15  # what the plain fit did to the small steps


def test_simulate_refits_a_cache_entry_around_the_simulated_steps(cache, tmp_path):
    """``simulate --cost-model ENTRY``: a cost-model cache entry is refitted around the simulated
    steps' size (b windows of the instance's mean pairs), as a run there would refit it; a model file
    is used as it is; a file that claims to be an entry and is broken is one UserError."""
    from dygnex_jax import simulate as sim
    from dygnex_jax.__main__ import _simulated_cost_model

    s = sig()
    path = cost_cache.record(s, "a", *timed(0, 20, 4, 3000), 4, [1.0], [0.1, 0.1], log=lambda _: None)[1]
    cost_cache.record(s, "b", *timed(1, 20, 4, 90000), 4, [1.0], [0.1, 0.1], log=lambda _: None)
    entry = _simulated_cost_model(str(path))
    assert isinstance(entry, dict) and entry["format"] == cost_cache.FORMAT
    config = load_config(None, [])
    got = sim.run(config, [4], ["dygnex_g"], link=sim.LINKS["none"], cost_model=entry, batch_per_device=2)
    inst = sim.cached_instance(config, None)
    want = cost_cache.entry_model(entry, cost_cache.step_scale(inst.costs[:, 2], 2, 1))
    np.testing.assert_allclose(got["cost_model"]["coef"], want.coef)
    assert got["cost_model"]["coef"] != cost_cache.entry_model(entry, 0).to_dict()["coef"]
    model_file = tmp_path / "m.json"
    want.save(model_file)
    assert isinstance(_simulated_cost_model(str(model_file)), CostModel)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"format": cost_cache.FORMAT, "datasets": {"a": {"rows": [[1, 2]]}}}))
    with pytest.raises(UserError, match="cache entry .* is malformed"):
        _simulated_cost_model(str(broken))


ALONE = TRUE * np.array(
    [0.8, 0.7, 0.9, 1.0, 0.5, 1.0, 1.0]
)  # the same steps with no next step packed beside them


def test_steps_timed_alone_fit_their_own_coefficients_and_round_trip(cache, tmp_path):
    """Profiles that timed each step alone too (``seconds_alone``): the pooled model carries a second
    fit on those times (``coef_alone``), centred like the first; it survives the entry and the model
    file; with one dataset lacking them there is none (``coef`` stands in), as in an older file."""
    s = sig()
    work_a, secs_a = timed(0, 30, 10, 20_000, noise=0.0)
    work_b, secs_b = timed(1, 30, 6, 60_000, noise=0.0)
    alone_a = window_features(work_a, 10) @ ALONE
    alone_b = window_features(work_b, 6) @ ALONE
    quiet = dict(log=lambda _: None)
    cost_cache.record(s, "a", work_a, secs_a, 10, [1.0], [0.1, 0.1], seconds_alone=alone_a, **quiet)
    model, path, _ = cost_cache.record(
        s, "b", work_b, secs_b, 6, [1.0], [0.1, 0.1], seconds_alone=alone_b, **quiet
    )
    assert model.coef_alone is not None
    np.testing.assert_allclose(model.predict_costs(work_b, 6, alone=True), alone_b, rtol=1e-6)
    np.testing.assert_allclose(model.predict_costs(work_b, 6), secs_b, rtol=1e-6)
    centred = cost_cache.lookup(s, scale=float(np.median(work_a[:, 2])))[0]
    np.testing.assert_allclose(centred.predict_costs(work_a, 10, alone=True), alone_a, rtol=1e-6)
    model.save(tmp_path / "m.json")
    again = CostModel.load(tmp_path / "m.json")
    np.testing.assert_array_equal(again.coef_alone, model.coef_alone)
    # a dataset profiled before steps were timed alone: no alone fit, the beside one prices every step
    model, _, _ = cost_cache.record(s, "b", work_b, secs_b, 6, [1.0], [0.1, 0.1], **quiet)
    assert model.coef_alone is None
    np.testing.assert_array_equal(model.predict_costs(work_b, 6, alone=True), model.predict_costs(work_b, 6))
    bad = json.loads(path.read_text())
    bad["datasets"]["a"]["seconds_alone"] = [1.0, 2.0]
    path.write_text(json.dumps(bad))
    assert "unreadable" in cost_cache.lookup(s)[1]
    broken = CostModel(coef=TRUE).to_dict() | {"coef_alone": [1.0, -1.0, 0, 0, 0]}
    (tmp_path / "b.json").write_text(json.dumps(broken))
    with pytest.raises(UserError, match="coef_alone"):
        CostModel.load(tmp_path / "b.json")


def test_the_epochs_last_step_is_predicted_alone():
    """``cost.alone_steps``: under prefetch the last step of an epoch alone, without it every step; the
    epoch prediction charges those steps ``coef_alone``, the others ``coef``."""
    from dygnex_jax.schedule.cost import alone_steps, predict_step_seconds

    assert alone_steps(3, 1).tolist() == [False, False, True]
    assert alone_steps(3, 0).tolist() == [True, True, True] and alone_steps(0, 1).tolist() == []
    model = CostModel(coef=TRUE, window=10, coef_alone=ALONE)
    padded = np.array([[100.0, 200, 300], [50, 60, 70], [10, 20, 30]])
    loads = padded[:, None, :]
    got = predict_step_seconds(loads, model, alone=alone_steps(3, 1))
    feats = window_features(padded, 10)
    np.testing.assert_allclose(got, [feats[0] @ TRUE, feats[1] @ TRUE, feats[2] @ ALONE])
    np.testing.assert_allclose(predict_step_seconds(loads, model), feats @ TRUE)


@pytest.mark.parametrize("batch, devices, top", [(32, 1, 32), (32, 8, 4), (16, 2, 8), (4, 4, 4)])
def test_profiled_steps_reach_the_runs_own_step(batch, devices, top):
    """``profile.profile_steps``: every step gives each of the P devices m distinct windows, and m
    reaches ceil(B / P) (at least 4) — the run's own step is timed, not extrapolated to."""
    from types import SimpleNamespace

    from dygnex_jax.profile import profile_steps

    costs = np.random.default_rng(0).uniform(1, 100, (400, 3))
    fake = SimpleNamespace(
        train_costs=costs, n_devices=devices, config=SimpleNamespace(train=SimpleNamespace(batch_size=batch))
    )
    steps = profile_steps(fake, 12, seed=0)
    assert len(steps) == 12 and all(len(step) == devices for step in steps)
    sizes = {len(part) for step in steps for part in step}
    for step in steps:
        ids = [w for part in step for w in part]
        assert len(ids) == len(set(ids)) and len({len(part) for part in step}) == 1
    assert max(sizes) == top and min(sizes) == 1


def test_profile_starts_no_jax_backend_before_its_trainer(tmp_path):
    """The Trainer sets the host allocator (``host_memory``) before XLA's threads exist; a backend that
    ``run_profile`` started first (a cross-process load query did) made every profiled step 1.5x slower
    than training's steps on 2 CPU cores, and the cost model with them. Run in a fresh process."""
    import subprocess
    import sys

    code = f"""
from jax._src import xla_bridge
from dygnex_jax import profile
from dygnex_jax.config import load_config
seen = []
class Stop(Exception):
    pass
def fake(config):
    seen.append(xla_bridge.backends_are_initialized())
    raise Stop
profile.Trainer = fake
try:
    profile.run_profile(load_config(None, []), {str(tmp_path / "p")!r}, cache=False, log=lambda *_: None)
except Stop:
    pass
print("backend before the trainer:", seen)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "backend before the trainer: [False]" in proc.stdout, proc.stdout + proc.stderr


# a machine where a pair and an edge cost more the wider the window they index (schedule.cost.locality):
# 20 % more per doubling of the span beyond 256 nodes
LOCAL = np.array([3e-7, 1e-6, 5e-7, 2e-4, 4e-3, 2e-7, 1e-7])


def timed_at(seed: int, n: int, span: float, scale: float, noise: float = 0.01):
    """n steps of a dataset whose windows hold ``span`` nodes on average, timed by LOCAL (``noise``:
    the relative spread of the times)."""
    r = np.random.default_rng(seed)
    work = np.column_stack(
        [r.uniform(0.2, 1, n) * scale, r.uniform(0.2, 1, n) * scale * 2, r.uniform(0.2, 1, n) * scale * 20]
    ).round()
    return work, window_features(work, 10, span) @ LOCAL * np.exp(noise * r.standard_normal(n))


def test_datasets_of_other_window_spans_fit_the_locality_terms_and_transfer(cache):
    """Two profiled datasets whose windows differ in span (500 and 6,000 nodes): the pooled fit recovers
    the per-edge and per-pair costs and their growth per doubling of the span, and prices a third
    dataset (span 2,000, never profiled) within 3 % — which a fit blind to the span (the entries of
    profiles before the span was recorded) misses by more than 10 %. The run's span reaches the model
    through ``resolve``."""
    s = sig()
    small, wide = timed_at(0, 30, 500, 2_000), timed_at(1, 30, 6_000, 20_000)
    cost_cache.record(s, "small", *small, 10, [1.0], [0.1, 0.1], log=lambda _: None, span=500)
    model, _, transfer = cost_cache.record(
        s, "wide", *wide, 10, [1.0], [0.1, 0.1], log=lambda _: None, span=6_000
    )
    np.testing.assert_allclose(model.coef[[1, 2, 5, 6]], LOCAL[[1, 2, 5, 6]], rtol=0.3)  # two spans: loose
    third_work, third_secs = timed_at(2, 20, 2_000, 8_000)
    priced = dataclasses.replace(model, span=2_000).predict_costs(third_work, 10)
    assert np.median(np.abs(priced / third_secs - 1)) < 0.03
    blind, _ = cost_cache.fit_pooled(
        {
            n: d | {"span": 0.0}
            for n, d in cost_cache.read_entry(cost_cache.entry_path(s))["datasets"].items()
        },
        "blind",
        2,
    )
    assert np.all(blind.coef[5:] == 0)
    assert np.median(np.abs(blind.predict_costs(third_work, 10) / third_secs - 1)) > 0.10
    config = load_config(None, ["parallel.devices=2"])
    kw = dict(window=10, num_features=7, layout="last", devices=2, processes=1, platform="cpu")
    run_model, _ = cost_cache.resolve(config, **kw, span=2_000)
    assert run_model.span == 2_000
    np.testing.assert_allclose(run_model.predict_costs(third_work), priced)


def test_the_locality_terms_are_tied_to_edges_and_pairs_by_one_bounded_slope():
    """The fit prices an edge c_e (1 + a φ) and a pair c_p (1 + a φ), one slope 0 <= a <= 0.25 per
    doubling: it recovers a machine's slope (0.2) from two spans; and with three profiled datasets at
    the validation's spans (740, 976, 5,959 nodes) timed with 8 % noise, a fourth at 454 nodes is priced
    within 11 % on each of 12 draws (median within 6 %). Free locality columns (the fit before, a
    coefficient each) priced it 20 % off on the worst draw, 9 % at the median: with three spans in two
    regimes they trade a pair's price for pairs · φ, which prices narrow windows' pairs near 0."""
    small, wide = timed_at(4, 30, 500, 2_000), timed_at(5, 30, 6_000, 20_000)
    x = np.concatenate([window_features(small[0], 10, 500), window_features(wide[0], 10, 6_000)])
    c = fit(x, np.concatenate([small[1], wide[1]])).coef
    slope = c[6] / c[2]
    assert c[5] == pytest.approx(slope * c[1]) and 0 <= slope <= LOCALITY_SLOPE_MAX
    assert slope == pytest.approx(0.2, abs=0.03)
    errors = []
    for seed in range(12):
        spans = ((740, 4_000), (976, 6_000), (5_959, 60_000))
        sets = [
            timed_at(100 * seed + i, 12, span, scale, noise=0.08) for i, (span, scale) in enumerate(spans)
        ]
        x = np.concatenate([window_features(w, 10, span) for (w, _), (span, _) in zip(sets, spans)])
        model = fit(x, np.concatenate([y for _, y in sets]))
        assert model.coef[6] <= LOCALITY_SLOPE_MAX * model.coef[2] * (1 + 1e-9)
        narrow, truth = timed_at(100 * seed + 9, 20, 454, 8_000, noise=0.0)
        errors.append(np.median(dataclasses.replace(model, span=454).predict_costs(narrow, 10) / truth - 1))
    assert np.max(np.abs(errors)) < 0.11 and np.median(np.abs(errors)) < 0.06


def test_one_span_leaves_the_locality_terms_at_zero():
    """A dataset's own steps share one span: the locality columns repeat the edge and pair columns x φ,
    so the fit keeps their coefficients at 0 (and the held-out errors are those of the 5 base features)."""
    work, secs = timed_at(3, 24, 6_000, 20_000)
    x = window_features(work, 10, 6_000)
    model = fit(x, secs)
    assert np.all(model.coef[5:] == 0) and np.all(model.coef[:5] >= 0)
    base = x.copy()
    base[:, 5:] = 0
    np.testing.assert_allclose(held_out_errors(x, secs), held_out_errors(base, secs))


def test_a_version_3_model_reads_without_locality_and_prices_as_before(tmp_path):
    """A model file of 5 features (before the locality terms) loads with 0 for them: same seconds at any
    span, same scheduler weights; a model with them adds φ(span) x their coefficient per edge and pair."""
    old = {
        "format": "dygnex_cost_model",
        "version": 3,
        "features": ["node_steps", "edges", "pairs", "snapshots", "constant"],
        "coef": [3e-7, 2e-6, 1e-6, 2e-4, 4e-3],
        "window": 10,
        "coef_alone": [3e-7, 1e-6, 1e-6, 0.0, 4e-3],
    }
    f = tmp_path / "old.json"
    f.write_text(json.dumps(old))
    model = dataclasses.replace(CostModel.load(f), span=6_000)
    np.testing.assert_array_equal(model.coef, old["coef"] + [0.0, 0.0])
    np.testing.assert_array_equal(model.coef_alone, old["coef_alone"] + [0.0, 0.0])
    work = np.array([[1_000.0, 5_000.0, 40_000.0]])
    expected = 1_000 * 10 * 3e-7 + 5_000 * 2e-6 + 40_000 * 1e-6 + 10 * 2e-4 + 4e-3
    assert model.predict_costs(work)[0] == pytest.approx(expected)
    np.testing.assert_allclose(model.weights(), [3e-6, 2e-6, 1e-6])
    local = CostModel(coef=LOCAL, window=10, span=4 * 256)  # two doublings beyond 256 nodes
    np.testing.assert_allclose(local.weights(), [3e-6, 1e-6 + 2 * 2e-7, 5e-7 + 2 * 1e-7])
    assert CostModel(coef=LOCAL, span=100).weights()[2] == pytest.approx(5e-7)  # below 256 nodes: none
    back = CostModel.from_dict(local.to_dict())
    assert back.span == 1_024 and np.array_equal(back.coef, local.coef)
