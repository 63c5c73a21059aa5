"""tools/validate_simulator.py's comparison (research/simulator_validation.py) on a hand-made worker
payload: the simulator is run for real on the embedded synthetic windows, no training here."""

import dataclasses

import numpy as np
import pytest
from helpers import run_tool

from dygnex_jax.config import load_config, step_layout
from dygnex_jax.research import simulator_validation as validation
from dygnex_jax.schedule.cost import CostModel

MODEL = CostModel(
    np.array([2e-6, 3e-7, 4e-7, 1e-3, 2e-2]), window=10, n_samples=20, source="profile:test", devices=2
)

BOUNDS = (
    "error: --epochs >= 1, --profile-steps >= 5, --repeats >= 1, --trials >= 1, --min-seconds >= 0 "
    "and --control >= 0"
)


def config(p):
    return load_config(validation.REPO / validation.CONFIG, validation.overrides("synthetic", p, 8, []))


def payload(p, scale):
    """A run whose every step took ``scale`` x the simulator's own step time, with its budgets."""
    cfg = config(p)
    rows = validation.simulated_epochs(cfg, MODEL, p, [1, 2], "none", cores=2)
    steps = [
        {"epoch": e, "seconds": scale * s, "compiled": False, "predicted_seconds": s, "budget": [1, 1, 1, 1]}
        for e, r in zip((1, 2), rows)
        for s in r["step_seconds"]
    ]
    return {
        "steps": steps,
        "epoch_wall_seconds": [1.5 * scale * r["epoch_seconds"] for r in rows],
        "planned_budgets": rows[0]["budgets"],
        "cost_model": MODEL.to_dict(),
        "devices": p,
        "layout": step_layout(cfg),
        "load": [0.5, 0.7],
    }


@pytest.mark.parametrize("p", [1, 2])
def test_compare_on_a_run_the_simulator_predicts(p):
    """Measured = 1.25 x simulated on every step: epoch and step errors are -20 %, the wall error
    accounts for the wall / steps ratio, and the trainer's budgets are recognised as the simulator's."""
    data = payload(p, 1.25)
    r = validation.compare("synthetic", False, f"{p} dev", 1, data, config(p), cores=2)
    assert r["error_vs_steps"] == pytest.approx(-0.2)
    assert r["step_error_median"] == pytest.approx(0.2)
    assert r["error_vs_wall"] == pytest.approx(1 / 1.5 / 1.25 - 1)
    assert r["same_budgets"] and r["inputs"]["slowdown"] == pytest.approx(p / 2)  # P / D, profiled at D = 2
    assert r["trainer_step_error_median"] == pytest.approx(0.2)  # predicted s vs measured 1.25 s
    # the host's cores unknown (0): devices of their own, no slowdown
    assert (
        validation.compare("synthetic", False, "x", 1, data, config(p), cores=0)["inputs"]["slowdown"] == 1.0
    )
    text = validation.markdown([r])
    assert f"| {p} dev | synthetic | **no** |" in text and "| 2 dev; " in text and "**-20.0%**" in text
    # beside an earlier run that measured 1.6 x (error -37.5 %): moved -37.5 %, each run's error shown
    earlier = validation.compare("synthetic", False, f"{p} dev", 1, payload(p, 2.0), config(p), cores=2)
    both = validation.two_runs([r], [earlier, {**earlier, "run": "other"}])
    assert both.count(f"| {p} dev | synthetic |") == 1 and "(-37.5%)" in both
    assert "-20.0% / -50.0%" in both and "moved between the runs by 37.5% (median over 1 rows" in both


def test_a_row_of_several_trials_is_its_median_trial():
    """Three trials measured at 1.6x, 1.0x and 1.25x the simulator's steps: the row is the 1.25x trial
    (error -20 %), every trial's measurement and error beside it; the table counts the rows within 15 %
    on their median trial and trial by trial, and the spread is max / min - 1 of the measured epochs."""
    trials = [
        validation.compare("synthetic", False, "2 dev", 1, payload(2, scale), config(2), cores=2)
        for scale in (1.6, 1.0, 1.25)
    ]
    for t, minutes in zip(trials, (3, 9, 15)):
        t["profile_age_minutes"] = minutes
    r = validation.median_trial(trials)
    assert r["trial"] == 3 and r["error_vs_steps"] == pytest.approx(-0.2)
    assert r["measured_step_seconds"] == trials[2]["measured_step_seconds"]
    assert r["trials"]["error_vs_steps"] == pytest.approx([1 / 1.6 - 1, 0.0, -0.2])
    assert validation.median_trial(trials[:1]) is trials[0]  # one trial: its row unchanged
    assert validation.median_trial(trials[:2])["trial"] == 2  # even count: the lower middle (1.0x)
    other = validation.median_trial([trials[1], trials[1]])  # a row within 15 % on both trials
    text = validation.trials_table([r, {**other, "dataset": "other"}])
    assert "| 2 dev | synthetic |" in text and "**-20.0%** |" in text and "| 60.0% |" in text
    assert (
        "| -20.0% | 0.5 / 0.5 / 0.5 | 3 / 9 / 15 |" in text
    )  # load before each trial, minutes since profile
    assert "| 0.5 / 0.5 | 9 / 9 |" in text
    assert "1 of 2 rows within 15% on their median trial" in text and "trial by trial: 1, 2, 0 of 2" in text
    assert "median 30.0%, max 60.0%" in text


def test_a_run_whose_every_epoch_compiled_is_one_error():
    data = payload(1, 1.0)
    for s in data["steps"]:
        s["compiled"] = True
    with pytest.raises(Exception, match="every epoch compiled"):
        validation.compare("synthetic", True, "1 dev", 1, data, config(1), cores=2)


def test_other_budgets_are_flagged():
    data = payload(2, 1.0)
    data["planned_budgets"] = [[1, 2, 3, 4]]
    assert not validation.compare("synthetic", True, "2 dev", 1, data, config(2), cores=2)["same_budgets"]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--fit", "nope"], "error: unknown dataset(s) nope"),
        (["--epochs", "0"], BOUNDS),
        (["--trials", "0"], BOUNDS),
        (["--min-seconds", "-1"], BOUNDS),
        (["--min-seconds", "nan"], BOUNDS),
        (["--control", "-1"], BOUNDS),
        (["--processes", "1"], "error: --devices must be >= 1 and --processes 0 (none) or >= 2"),
        (["--fit", ""], "error: --fit needs at least one dataset"),
        (["--previous", "missing.json"], "error: --previous 'missing.json' is not a validate_simulator.json"),
    ],
)
def test_bad_arguments_are_one_line(tmp_path, args, needle):
    r = run_tool("validate_simulator.py", *args, "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [r.stderr.strip()], r.stderr
    assert r.stderr.startswith(needle), r.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("order", ["count", "all"])
def test_the_order_of_profiles_and_trials(tmp_path, monkeypatch, order):
    """--order count: a device count's profiles, then its rows' trials (trial 1 of each, then 2), then
    the next count's; all: every profile first. Each trial's row counts its minutes from its group's
    profile."""
    from tools import validate_simulator as tool

    calls, clock = [], iter(range(0, 6000, 60))
    monkeypatch.setattr(
        tool, "profile_group", lambda w, procs, per, a, log: calls.append(("profile", w.name)) or next(clock)
    )
    monkeypatch.setattr(
        tool,
        "train",
        lambda d, procs, per, extra, a, w, log, trial: (
            calls.append((d, w.name, trial)) or {"cost_model": {}, "n": next(clock)}
        ),
    )
    monkeypatch.setattr(tool, "row", lambda d, procs, data, a, at: {"d": d, "age": (data["n"] - at) / 60})
    monkeypatch.setattr(tool.validation, "median_trial", lambda rows: rows)
    args = tool.parse(
        [
            "--out",
            str(tmp_path),
            "--devices",
            "1,2",
            "--fit",
            "synthetic",
            "--check",
            "bitcoin_alpha",
            "--trials",
            "2",
            "--order",
            order,
        ]
    )
    for w in ("p1", "p2", "proc2"):
        (tmp_path / w).mkdir()
    rows = tool.measured_rows(args, print)
    trains = [
        (d, w, t) for w in ("p1", "p2", "proc2") for t in (1, 2) for d in ("synthetic", "bitcoin_alpha")
    ]
    if order == "count":
        expected = []
        for w in ("p1", "p2", "proc2"):
            expected += [("profile", w)] + [c for c in trains if c[1] == w]
    else:
        expected = [("profile", w) for w in ("p1", "p2", "proc2")] + sorted(trains, key=lambda c: c[2])
    assert calls == expected
    assert [r["d"] for trial_rows in rows for r in trial_rows] == [
        d for w in range(3) for d in ("synthetic",) * 2 + ("bitcoin_alpha",) * 2
    ]
    # minutes since the profile: count order trains right after its group's profile, all after every profile
    first = rows[0][0]["age"]
    assert first == (1 if order == "count" else 3)


def test_a_rows_trials_are_simulated_once(monkeypatch):
    """Trials of one row (same config, model and clean epochs) share one simulation; another model, or
    other epochs, simulate anew; a row compared from the cache equals one compared afresh."""
    trials = [payload(2, s) for s in (1.6, 1.0)]
    fresh = validation.compare("synthetic", False, "2 dev", 1, trials[1], config(2), cores=2)
    validation._SIMULATED.clear()
    real, calls = validation.simulated_epochs, []

    def counted(*a, **k):
        calls.append(a[1].source)
        return real(*a, **k)

    monkeypatch.setattr(validation, "simulated_epochs", counted)
    first = validation.compare("synthetic", False, "2 dev", 1, trials[0], config(2), cores=2)
    assert len(calls) == 2  # the run's model and the analytic one (MODEL times no step alone)
    second = validation.compare("synthetic", False, "2 dev", 1, trials[1], config(2), cores=2)
    assert len(calls) == 2 and second == fresh
    assert first["simulated_seconds"] == second["simulated_seconds"]
    assert first["error_vs_steps"] == pytest.approx(1 / 1.6 - 1) and second[
        "error_vs_steps"
    ] == pytest.approx(0.0)
    other = {**trials[1], "cost_model": {**MODEL.to_dict(), "coef": [4e-6, 3e-7, 4e-7, 1e-3, 2e-2]}}
    validation.compare("synthetic", False, "2 dev", 1, other, config(2), cores=2)
    assert len(calls) == 4
    one_epoch = {**trials[1], "steps": [s for s in trials[1]["steps"] if s["epoch"] == 2]}
    validation.compare("synthetic", False, "2 dev", 1, one_epoch, config(2), cores=2)
    assert len(calls) == 6


def test_a_run_repriced_offline_is_priced_as_its_trainer_priced_it():
    """``repriced_error``: every step at its budget, an epoch's last step at the alone coefficients,
    epochs that compiled left out, the median over epochs; ``run_model`` rebuilds the run's model from
    the cache entry around the scale its note names, with the run's W and span."""
    model = CostModel(
        coef=np.array([0, 0, 1e-6, 0, 0.01, 0, 0]), coef_alone=np.array([0, 0, 1e-6, 0, 0.0, 0, 0]), window=10
    )
    budget = [100, 200, 10_000, 4]  # 0.02 s a step beside the packing, 0.01 s alone
    steps = [
        {"epoch": e, "seconds": s, "compiled": c, "budget": budget}
        for e, s, c in [(1, 5.0, True), (1, 0.02, False), (2, 0.02, False), (2, 0.02, False),
                        (3, 0.025, False), (3, 0.015, False)]
    ]  # fmt: skip
    # epoch 2: 0.03 predicted / 0.04 measured; epoch 3: 0.03 / 0.04 too; epoch 1 compiled
    assert validation.repriced_error(model, {"steps": steps}) == pytest.approx(0.03 / 0.04 - 1)
    steps[-1]["seconds"] = 0.035  # epoch 3: 0.03 / 0.06 -> the median of -0.25 and -0.5
    assert validation.repriced_error(model, {"steps": steps}) == pytest.approx(-0.375)
    rows = np.array([[100.0 * i, 200.0 * i, 5_000.0 * i] for i in range(1, 9)])
    secs = list(rows[:, 2] * 1e-6 + 0.01)
    data = {"rows": rows.tolist(), "seconds": secs, "seconds_alone": secs, "window": 10, "span": 500.0}
    entry = {"model": model.to_dict() | {"source": "profile", "devices": 1}, "datasets": {"a": data}}
    note = "cost model: profiled on this machine (a) from X, fitted around steps of 20000 pairs"
    trained = {"cost_note": note, "cost_model": {"span": 700.0}, "window": 8}
    got = validation.run_model(entry, trained)
    assert got.window == 8 and got.span == 700.0
    np.testing.assert_allclose(got.predict_costs(rows, 10), secs, rtol=1e-6)  # the entry's steps, refitted


def test_the_epochs_of_one_run_are_simulated_on_one_plan(monkeypatch):
    """Simulating three epochs of a run plans the run once (its horizon covers them), and each epoch's
    row is the one a simulation planned afresh gives; another model plans anew."""
    from dygnex_jax import simulate as sim

    cfg = config(2)
    calls = []
    real = sim.planning.plan_run

    def counted(*args, **kwargs):
        calls.append(args[5])
        return real(*args, **kwargs)

    monkeypatch.setattr(sim.planning, "plan_run", counted)
    sim._PLANNED.clear()
    shared = validation.simulated_epochs(cfg, MODEL, 2, [1, 2, 3], "none", cores=2)
    assert len(calls) == 1 and {1, 2, 3} <= set(calls[0])
    for e, row in zip((1, 2, 3), shared):
        sim._PLANNED.clear()
        (fresh,) = validation.simulated_epochs(cfg, MODEL, 2, [e], "none", cores=2)
        assert fresh["step_seconds"] == row["step_seconds"] and fresh["budgets"] == row["budgets"]
        assert fresh["epoch_seconds"] == row["epoch_seconds"]
    calls.clear()
    other = dataclasses.replace(MODEL, coef=MODEL.coef * 2)
    validation.simulated_epochs(cfg, other, 2, [1], "none", cores=2)
    assert len(calls) == 1


def test_a_run_trains_until_its_steps_took_long_enough():
    """``epochs`` always; then more while fewer than min_steps ran or they took less than min_seconds;
    never past the horizon the budgets were planned for."""
    steps = [{"seconds": 0.25}] * 8  # 8 steps, 2 s
    assert validation.more_epochs(2, 3, 20, steps * 10, 0, 0.0)  # before `epochs`: always
    assert not validation.more_epochs(3, 3, 20, steps, 0, 0.0)
    assert validation.more_epochs(3, 3, 20, steps, 12, 0.0)  # too few steps
    assert validation.more_epochs(3, 3, 20, steps * 2, 12, 5.0)  # 16 steps but 4 s
    assert not validation.more_epochs(3, 3, 20, steps * 3, 12, 5.0)  # 24 steps, 6 s
    assert not validation.more_epochs(20, 3, 20, steps, 12, 5.0)  # the horizon
    # the processes of one run decide on one figure (their maximum), asked on every call, even while
    # the first `epochs` run: a process whose own steps took 4 s stops with one whose took 6 s
    asked = []
    slowest = lambda s: asked.append(s) or max(s, 6.0)  # noqa: E731
    assert validation.more_epochs(2, 3, 20, steps * 2, 12, 5.0, slowest) and asked == [4.0]
    assert not validation.more_epochs(3, 3, 20, steps * 2, 12, 5.0, slowest) and asked == [4.0, 4.0]
