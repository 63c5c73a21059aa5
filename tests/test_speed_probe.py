"""The machine's speed probe (dygnex_jax/speed_probe.py), kept beside a profile in the cost-model cache
(cost_cache.entry_probe) and used by the validation (research/validation_speed.py)."""

import numpy as np
import pytest
from test_validate_simulator import config, payload

from dygnex_jax import cost_cache, speed_probe
from dygnex_jax.research import simulator_validation as validation
from dygnex_jax.research import validation_speed as speed


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(cost_cache.ENV, str(tmp_path / "cost_models"))
    return tmp_path / "cost_models"


def _sig():
    from dygnex_jax.config import load_config

    return cost_cache.signature(
        load_config(None, []), num_features=7, layout="last", devices=1, processes=1, platform="cpu"
    )


def _record(name, probe):
    r = np.random.default_rng(len(name))
    work = r.uniform(1e3, 1e5, (8, 3)).round()
    secs = 1e-3 + work @ np.array([1e-7, 2e-7, 3e-8])
    return cost_cache.record(
        _sig(), name, work, secs, 10, [1.0], [0.1, 0.1], log=lambda _: None, probe_seconds=probe
    )


def test_the_probe_runs_one_fixed_program_compiled_once():
    """Its seconds are positive and its program is built once: a second call re-uses it and computes the
    same value (the same program on the same data every time, whatever the run)."""
    assert speed_probe.seconds(runs=3) > 0
    run = speed_probe._RUN
    first = np.asarray(run())
    assert speed_probe.seconds(runs=2) > 0 and speed_probe._RUN is run
    np.testing.assert_array_equal(np.asarray(run()), first)


def test_an_entry_keeps_each_profiles_probe_and_gives_their_median(cache):
    """``record`` keeps a dataset's probe; ``entry_probe`` is the median over the datasets that probed
    (a profile from before the probe, or a malformed value, is left out; none at all: None)."""
    _, path, _ = _record("a", None)
    assert cost_cache.entry_probe(cost_cache.read_entry(path)) is None
    _record("b", 0.010)
    _record("c", 0.030)
    data = cost_cache.read_entry(path)
    assert data["datasets"]["b"]["probe_seconds"] == 0.010
    assert cost_cache.entry_probe(data) == pytest.approx(0.020)
    for bad in (True, -1.0, "x", 0):
        data["datasets"]["a"]["probe_seconds"] = bad
        assert cost_cache.entry_probe(data) == pytest.approx(0.020)


def test_a_runs_profile_probe_is_read_from_the_entry_its_cost_note_names(cache):
    _record("b", 0.012)
    note = cost_cache.lookup(_sig())[1]
    assert speed.profile_probe(note) == pytest.approx(0.012)
    assert speed.profile_probe("cost model: analytic (no profile ...)") is None
    assert speed.profile_probe("") is None and speed.profile_probe(None) is None


def test_the_simulation_at_the_probed_speed_is_the_simulation_times_the_probe_ratio():
    """A run measured at 1.25x the simulator's steps (error -20 %) on a machine probed 1.2x slower than
    at its profile: simulated x 1.2 against the measured, -4 %; the probe after the run beside it. The
    row's error at the profile's speed is unchanged; a run without the probes has no speed."""
    data = payload(2, 1.25) | {"speed": {"profile": 0.010, "before": 0.012, "after": 0.011}}
    r = validation.compare("synthetic", False, "2 dev", 1, data, config(2), cores=2)
    assert r["error_vs_steps"] == pytest.approx(-0.2)
    assert r["speed"]["factor"] == pytest.approx(1.2) and r["speed"]["factor_after"] == pytest.approx(1.1)
    assert r["speed"]["error"] == pytest.approx(0.8 * 1.2 - 1)
    assert (
        validation.compare("synthetic", False, "2 dev", 1, payload(2, 1.25), config(2), cores=2)["speed"]
        is None
    )
    no_profile = data | {"speed": {"profile": None, "before": 0.012, "after": 0.011}}
    assert speed.fields(no_profile, -0.2) == {"speed": None}


def test_the_speed_table_counts_rows_and_trials_each_way():
    """Two rows of three trials: the first measured 1.25x (error -20 %) every trial, probed 1.2x, 1.0x
    and 1.3x slower than its profile (errors -4 %, -20 %, +4 %); the second within on both counts.
    Rows are their median trial (the table does not choose: ``median_trial``, by the measured epoch,
    took trial 2, whose probe saw no change)."""
    trials = []
    for factor in (1.2, 1.0, 1.3):
        data = payload(2, 1.25) | {"speed": {"profile": 0.01, "before": 0.01 * factor, "after": 0.01}}
        trials.append(validation.compare("synthetic", False, "2 dev", 1, data, config(2), cores=2))
    row = validation.median_trial(trials)
    good = payload(2, 1.0) | {"speed": {"profile": 0.01, "before": 0.0105, "after": 0.01}}
    other = validation.compare("synthetic", False, "4 dev", 1, good, config(2), cores=2)
    text = speed.table([row, other])
    assert "| 2 dev | synthetic | -20.0% / -20.0% / -20.0% | 1.20, 1.00 / 1.00, 1.00 / 1.30, 1.00 |" in text
    assert (
        "| -4.0% / -20.0% / +4.0% |" in text and "| 4 dev | synthetic | +0.0% | 1.05, 1.00 | +5.0% |" in text
    )
    assert "at the profile's speed 1 of 2 within 15%, median 10.0%" in text
    assert row["trial"] == 2 and "with the speed probed 1 of 2 within 15%, median 12.5%" in text
    assert (
        "Trials: 1 of 4 within 15%, median 20.0%; with the speed probed 3 of 4 within 15%, median 4.5%"
        in text
    )
