"""The cluster simulator: invariants of its timing model, the scheduler it drives, and the command."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import run_cli

from dygnex_jax import simulate as sim
from dygnex_jax.config import load_config
from dygnex_jax.schedule.cost import CostModel
from dygnex_jax.schedule.metrics import step_loads

REPO = Path(__file__).resolve().parents[1]
W = 4
MODEL = CostModel(coef=np.array([2e-6, 5e-7, 2e-7, 1e-4, 1e-3]), window=W)


def skewed(k=96, seed=0, sigma=1.0) -> sim.Instance:
    rng = np.random.default_rng(seed)
    size = np.exp(sigma * rng.standard_normal(k))
    profile = np.round(200 * size[:, None] * rng.uniform(0.8, 1.2, (k, W)))
    costs = np.column_stack([np.round(50 * size + 5), profile.sum(1), np.round(300 * size)])
    return sim.Instance("skewed", costs, profile)


def uniform(k=64) -> sim.Instance:
    profile = np.full((k, W), 100.0)
    return sim.Instance(
        "uniform", np.column_stack([np.full(k, 30.0), profile.sum(1), np.full(k, 200.0)]), profile
    )


def setup(link="nvlink", **kw) -> sim.Setup:
    cfg = load_config(None, ["schedule.jitter=0.0"])
    a, b, g = MODEL.weights(W)
    sched = dataclasses.replace(cfg.schedule, alpha=a, beta=b, gamma=g, time_limit=0.5)
    base = dict(
        model=MODEL,
        link=sim.LINKS[link],
        param_bytes=4e5,
        model_cfg=cfg.model,
        num_features=64,
        schedule_cfg=sched,
        batch_per_device=4,
    )
    return sim.Setup(**{**base, **kw})


@pytest.mark.parametrize("p", [1, 2, 8, 16])
def test_efficiency_at_most_one(p):
    inst = skewed()
    for method in sim.ALL_METHODS:
        for link in ("nvlink", "ethernet"):
            r = sim.simulate(inst, method, p, setup(link, ilp_budget=30))
            if "skipped" in r:
                continue
            assert 0 < r["parallel_efficiency"] <= r["efficiency"] <= 1 + 1e-12, (method, link, r)
            assert r["epoch_seconds"] == pytest.approx(sum(r["step_seconds"]))


def test_perfect_balance_gives_compute_over_compute_plus_allreduce():
    inst, p = uniform(), 8
    for method in ("psg", "dygnex_g"):
        r = sim.simulate(inst, method, p, setup("ethernet"))
        allreduce = sim.ring_allreduce_seconds(4e5, p, sim.LINKS["ethernet"])
        compute = r["compute_seconds"]
        assert r["efficiency"] == pytest.approx(1.0)
        assert r["parallel_efficiency"] == pytest.approx(compute / (compute + r["steps"] * allreduce))
        assert r["parallel_efficiency"] < 0.999  # the all-reduce is visible


def test_step_time_is_the_cost_model_of_the_max_device():
    inst, p = skewed(), 8
    s = setup("none")
    r = sim.simulate(inst, "dygnex_g", p, s)
    settings = dataclasses.replace(s.schedule_cfg, method="dygnex_g")
    from dygnex_jax.schedule import schedule

    sched = schedule(inst.schedule_costs(True), p, s.batch(p), settings, seed=s.seed, epoch=s.epoch)
    loads = step_loads(inst.costs, sched)
    for i, step in enumerate(sched.steps):
        edges = max(inst.profile[ids].sum(0).max() for ids in step)  # the largest offset of any device
        budget = np.array([[loads[i, :, 0].max(), W * edges, loads[i, :, 2].max()]])
        assert r["step_seconds"][i] == pytest.approx(float(MODEL.predict_costs(budget, W)[0]))


def test_ring_collectives():
    link = sim.Link("x", 1e-5, 1e9)
    assert sim.ring_allreduce_seconds(1e6, 1, link) == 0
    assert sim.ring_allreduce_seconds(1e6, 4, link) == pytest.approx(6e-5 + 1.5e-3)
    assert sim.ring_allgather_seconds(1e6, 4, link) == pytest.approx(3e-5 + 0.75e-3)
    assert sim.host_slowdown(8, 2) == 4 and sim.host_slowdown(1, 2) == 1 and sim.host_slowdown(8, 0) == 1


@pytest.mark.parametrize("p", [8, 16])
def test_dygnex_g_beats_psg_on_skewed_windows(p):
    inst = skewed(k=256, sigma=1.2)
    g = sim.simulate(inst, "dygnex_g", p, setup())
    psg = sim.simulate(inst, "psg", p, setup())
    assert g["efficiency"] > psg["efficiency"] and g["epoch_seconds"] < psg["epoch_seconds"]


def test_dygnex_l_is_skipped_when_its_time_limit_does_not_fit():
    inst = skewed(k=32)
    r = sim.simulate(inst, "dygnex_l", 4, setup(ilp_budget=1.0))  # 2 steps x 0.5 s fits
    assert "skipped" not in r and r["efficiency"] <= 1
    r = sim.simulate(inst, "dygnex_l", 2, setup(ilp_budget=1.0))  # 4 steps x 0.5 s does not
    assert "steps x" in r["skipped"]


def test_scale_up_keeps_the_rows():
    inst = skewed(k=20)
    big = sim.scale_up(inst, 500, seed=3)
    assert big.costs.shape == (500, 3) and big.profile.shape == (500, W)
    rows = {tuple(r) for r in np.column_stack([inst.costs, inst.profile])}
    assert all(tuple(r) in rows for r in np.column_stack([big.costs, big.profile]))
    assert np.array_equal(big.costs, sim.scale_up(inst, 500, seed=3).costs)  # deterministic


@pytest.mark.parametrize("name", ["egcn_o", "egcn_o/matrix", "gcrn_gru"])
def test_param_count_matches_flax(name):
    import jax
    from conftest import make_toy_graph

    from dygnex_jax.models import create_model
    from dygnex_jax.train import Trainer

    name, _, gru = name.partition("/")
    extra = [f"model.egcn_gru={gru}"] if gru else []
    cfg = load_config(
        None, [f"model.name={name}", "model.hidden=12", "model.head_hidden=10", "model.layers=2", *extra]
    )
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, window=4, max_degree=16))
    tr = Trainer(
        dataclasses.replace(cfg, parallel=dataclasses.replace(cfg.parallel, devices=1)),
        graph=make_toy_graph(),
    )
    assert isinstance(tr.model, type(create_model(cfg.model, 16)))
    n = sum(x.size for x in jax.tree.leaves(tr.params))
    assert sim.param_count(cfg.model, tr.windows.num_features) == n


def test_simulator_imports_no_jax():
    code = "import sys, dygnex_jax.simulate, dygnex_jax.__main__; assert 'jax' not in sys.modules, 'jax imported'"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def run_sim(*args):
    return run_cli("simulate", *args)


def test_simulate_command(tmp_path):
    out, png, cache = tmp_path / "sim.json", tmp_path / "sim.png", tmp_path / "inst.npz"
    methods = ("psg", "dygnex_g", "snapshot", "vertex")
    args = ["--config", "configs/smoke.yaml", "--devices", "2..8", "--methods", ",".join(methods)]
    args += ["--link", "ethernet", "--windows", "256", "--instance", cache]
    proc = run_sim(*args, "--json", out, "--plot", png)
    assert proc.returncode == 0, proc.stderr
    assert "dygnex_g" in proc.stdout and "ethernet" in proc.stdout
    data = json.loads(out.read_text())
    assert data["windows"] == 256 and data["link"]["name"] == "ethernet"
    assert {(r["method"], r["devices"]) for r in data["rows"]} == {(m, p) for m in methods for p in (2, 4, 8)}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # --instance: the windows' costs were saved by the run above and are read back (the dataset named
    # now is never loaded): the same figures
    again = run_sim(*args, "--json", tmp_path / "again.json", "data.dataset=no_such_set")
    assert again.returncode == 0, again.stderr
    rows = json.loads((tmp_path / "again.json").read_text())["rows"]
    assert [r["epoch_seconds"] for r in rows] == [r["epoch_seconds"] for r in data["rows"]]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--devices", "four"], "--devices"),
        (["--link", "pigeon"], "unknown --link"),
        (["--methods", "magic"], "unknown method"),
        (["--devices", "64", "--batch-size", "8"], "devices but only"),
    ],
)
def test_simulate_bad_input_is_one_line(args, needle):
    proc = run_sim("--config", "configs/smoke.yaml", *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr


def test_validate_tool_rejects_an_unknown_dataset():
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "tools" / "validate_simulator.py"),
            "--datasets",
            "nope",
            "--out",
            "/nonexistent/x",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.strip().startswith("error: unknown dataset(s) nope"), (
        proc.stderr
    )
