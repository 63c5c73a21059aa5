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
from dygnex_jax.errors import UserError
from dygnex_jax.schedule.cost import CostModel

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
    """Perfect balance under exact shapes: the only padding left is the packer's one padding node per
    step (the ideal runs the real work alone), so compute = ideal compute + steps x one node's cost."""
    inst, p = uniform(), 8
    for layout in ("scan", "flat"):
        for method in ("psg", "dygnex_g"):
            r = sim.simulate(inst, method, p, setup("ethernet", shapes="exact", layout=layout))
            allreduce = sim.ring_allreduce_seconds(4e5, p, sim.LINKS["ethernet"])
            node = float(MODEL.coef[0]) * W  # seconds of one padding node (every offset)
            ideal_compute = r["ideal_epoch_seconds"] - r["steps"] * allreduce
            assert r["compute_seconds"] == pytest.approx(ideal_compute + r["steps"] * node)
            assert r["balance_efficiency"] == pytest.approx(1.0)
            assert 0.99 < r["efficiency"] < 1.0
            assert r["parallel_efficiency"] == pytest.approx(ideal_compute / r["epoch_seconds"])
            assert r["parallel_efficiency"] < 0.999  # the all-reduce is visible


# Two windows on two devices, one window each (one step): W = 2 offsets.
#   A: 10 nodes, edges per offset [3, 5], 7 pairs;  B: 4 nodes, [6, 1], 2 pairs.
# Exact need: nodes max(10, 4) + 1 = 11, pairs 7; edges scan = the largest offset of a device =
# max(5, 6) = 6 (x W = 12 edges of work), flat = the largest sum over offsets = max(8, 7) = 8.
# Planned (align 8; one step, one budget): (16, 8, 8) in both layouts -> work scan [16, 16, 8],
# flat [16, 8, 8]. Buckets (ratio 1.5, min 4: 4, 6, 9, 14, ...): nodes 14, pairs 9, edges scan 6
# (x W = 12), flat 9. Ideal (the whole batch as one device, unpadded): nodes 14, pairs 9, edges scan
# W x max(3 + 6, 5 + 1) = 18, flat 15.
HAND = sim.Instance("hand", np.array([[10.0, 8.0, 7.0], [4.0, 7.0, 2.0]]), np.array([[3.0, 5.0], [6.0, 1.0]]))
HAND_WORK = {
    ("scan", "exact"): [11, 12, 7],
    ("flat", "exact"): [11, 8, 7],
    ("scan", "trained"): [16, 16, 8],
    ("flat", "trained"): [16, 8, 8],
    ("scan", "buckets"): [14, 12, 9],
    ("flat", "buckets"): [14, 9, 9],
}
HAND_IDEAL = {"scan": [14, 18, 9], "flat": [14, 15, 9]}


LOCALITY = {0.0: (0.0, 0.0), 1024.0: (1e-7, 3e-8)}  # span -> per edge / pair and doubling beyond 256 nodes


@pytest.mark.parametrize("span", sorted(LOCALITY))
@pytest.mark.parametrize("layout, shapes", sorted(HAND_WORK))
def test_hand_checked_padded_work(layout, shapes, span):
    """A step costs the model's fixed seconds + its padded work x seconds per unit; with a span of 1,024
    nodes (two doublings beyond 256) an edge and a pair cost twice their locality coefficient more."""
    per_edge, per_pair = LOCALITY[span]
    model = CostModel(coef=np.array([2e-6, 5e-7, 2e-7, 1e-4, 1e-3, per_edge, per_pair]), window=2, span=span)
    cfg = load_config(None, ["parallel.bucket_ratio=1.5", "parallel.min_bucket=4"])
    s = setup("none", model=model, shapes=shapes, layout=layout, parallel=cfg.parallel, batch_size=2)
    fixed, unit = 2 * 1e-4 + 1e-3, np.array([2e-6 * 2, 5e-7 + 2 * per_edge, 2e-7 + 2 * per_pair])
    work = HAND_WORK[layout, shapes]
    for method in ("psg", "dygnex_g"):
        r = sim.simulate(HAND, method, 2, s)
        assert r["steps"] == 1 and r["layout"] == layout and r["shapes"] == shapes
        assert r["budget_policy"] == {"trained": "planned"}.get(shapes, shapes)
        assert r["step_seconds"][0] == pytest.approx(fixed + np.dot(work, unit))
        assert r["ideal_epoch_seconds"] == pytest.approx(fixed + np.dot(HAND_IDEAL[layout], unit) / 2)
        per_offset = work[1] // 2 if layout == "scan" else work[1]  # the budget's edge dimension
        assert r["budgets"] == [[work[0], per_offset, work[2], 1]]


@pytest.mark.parametrize("prefetch", [1, 0])
def test_an_epochs_last_step_is_charged_alone(prefetch):
    """A model whose steps alone cost 3x: under training's prefetch the epoch's last step is charged
    that (it has no next step packed beside it), the others as before; without prefetch every step;
    the ideal step likewise, so the efficiency compares like with like."""
    from dygnex_jax.config import ParallelConfig

    inst, p = skewed(), 8
    par = ParallelConfig(prefetch=prefetch)
    base = sim.simulate(inst, "dygnex_g", p, setup("none", parallel=par))
    alone = dataclasses.replace(MODEL, coef_alone=3 * MODEL.coef)
    got = sim.simulate(inst, "dygnex_g", p, setup("none", parallel=par, model=alone))
    assert base["steps"] > 1 and got["budgets"] == base["budgets"]
    want = np.array(base["step_seconds"])
    want[-1 if prefetch else slice(None)] *= 3
    np.testing.assert_allclose(got["step_seconds"], want, rtol=1e-12)
    if not prefetch:
        assert got["efficiency"] == pytest.approx(base["efficiency"])


@pytest.mark.parametrize("layout", ["scan", "flat"])
@pytest.mark.parametrize("shapes", ["trained", "buckets", "exact"])
def test_step_time_is_the_cost_model_of_the_paid_budget(layout, shapes):
    """Every step costs the cost model on ``padding.padded_work`` of the budget ``plan.py`` pays for
    the step's exact need (``plan.step_needs``; planned budgets from the planned epochs' needs)."""
    from dygnex_jax import plan
    from dygnex_jax.config import Config, TrainConfig
    from dygnex_jax.padding import padded_work
    from dygnex_jax.schedule import cost_weights, schedule

    inst, p = skewed(), 8
    s = setup("none", shapes=shapes, layout=layout, planned_epochs=3, epoch=2)
    s.schedule_cfg = dataclasses.replace(s.schedule_cfg, compose="strata")  # auto: see the next test
    r = sim.simulate(inst, "dygnex_g", p, s)
    settings = dataclasses.replace(s.schedule_cfg, method="dygnex_g")
    # the trainer's plan as simulate makes it: planned budgets (also the exact shapes' schedules), the
    # auto compile price from the same cost model, epochs 1..3
    policy = "planned" if shapes in ("trained", "exact") else "buckets"
    config = Config(
        schedule=settings,
        parallel=dataclasses.replace(s.parallel, budgets=policy),
        train=TrainConfig(batch_size=s.batch(p), seed=s.seed),
    )
    columns = plan.scheduler_costs(sim._TrainWindows(inst), config, layout)
    assert columns.shape[1] == (3 if layout == "flat" else W + 2)
    weights = cost_weights(settings)
    run = plan.plan_run(
        sim._TrainWindows(inst),
        config,
        p,
        layout,
        settings,
        [1, 2, 3],
        step_seconds=plan.step_seconds_fn(MODEL, W, layout),
    )
    needs = run.needs
    if policy == "buckets":  # no plan: the epoch's own schedule, as scheduled
        sched = schedule(columns, p, s.batch(p), settings, seed=s.seed, epoch=2)
        assert all(
            np.array_equal(a, b) for x, y in zip(sched.steps, run.schedules[2].steps) for a, b in zip(x, y)
        )
        assert needs[2] == plan.step_needs(
            inst.costs, inst.profile, sched, layout, plan.window_slots(s.batch(p), p)
        )
    budgets = []
    if shapes == "trained":
        budgets = run.budgets
        assert r["budgets"] == [list(b.as_tuple()) for b in budgets] and r["overflow_steps"] == 0
    for i, need in enumerate(needs[2]):
        paid = need if shapes == "exact" else plan.paid_budget(need, budgets, config, W, layout, weights)
        work = padded_work(paid, W, layout)[None]
        assert r["step_seconds"][i] == pytest.approx(float(MODEL.predict_costs(work, W)[0]))


def test_compose_auto_is_the_trainers_choice():
    """compose=auto with planned budgets: the simulator schedules with the composition the trainer's
    plan (``plan.plan_run``) picks by planned cost, and charges its budgets."""
    from dygnex_jax import plan
    from dygnex_jax.config import Config, TrainConfig

    inst, p = skewed(), 8
    s = setup("none", shapes="trained", layout="flat", planned_epochs=3, epoch=1)
    r = sim.simulate(inst, "dygnex_g", p, s)
    settings = dataclasses.replace(s.schedule_cfg, method="dygnex_g")
    config = Config(
        schedule=settings, parallel=s.parallel, train=TrainConfig(batch_size=s.batch(p), seed=s.seed)
    )
    run = plan.plan_run(sim._TrainWindows(inst), config, p, "flat", settings, [1, 2, 3])
    assert r["compose"] == run.compose and r["budgets"] == [list(b.as_tuple()) for b in run.budgets]


@pytest.mark.parametrize("name", ["egcn_o", "gcrn_gru"])
@pytest.mark.parametrize("budgets", ["planned", "buckets"])
def test_trained_shapes_match_the_schedule_command(name, budgets):
    """On a real window set the simulator pays what ``plan.plan`` (the ``schedule`` command, the
    trainer's planning) pays: the same layout, budgets and packed padding efficiency."""
    from conftest import make_toy_graph

    from dygnex_jax import plan
    from dygnex_jax.data.node_windows import task_windows
    from dygnex_jax.schedule.cost import default_cost_model

    overrides = [f"model.name={name}", "data.window=4", "train.batch_size=4", "train.epochs=3"]
    cfg = load_config(None, [*overrides, "schedule.jitter=0.3", f"parallel.budgets={budgets}"])
    ws = task_windows(make_toy_graph(num_snapshots=40), cfg.data)
    expected = plan.plan(cfg, 2, ws)
    inst = sim.Instance("toy", ws.costs("train", cfg.data.neg_mult), ws.edge_profile("train"))
    s = sim.Setup(
        model=default_cost_model(ws.window),
        link=sim.LINKS["none"],
        param_bytes=0.0,
        model_cfg=cfg.model,
        num_features=1,
        schedule_cfg=cfg.schedule,
        batch_size=cfg.train.batch_size,
        layout=sim.window_layout(cfg),
        parallel=cfg.parallel,
        planned_epochs=sim.trainer_plan_epochs(cfg),
        seed=cfg.train.seed,
    )
    r = sim.simulate(inst, cfg.schedule.method, 2, s)
    assert r["layout"] == expected["layout"] == ("last" if name == "egcn_o" else "scan")
    assert r["budget_policy"] == budgets and r["steps"] == expected["steps"]
    assert r["budgets"] == expected["budgets"]
    assert r["padding_efficiency"] == pytest.approx(expected["packed_padding_efficiency"])
    assert r["balance_efficiency"] == pytest.approx(expected["padding_efficiency"])
    exact = sim.simulate(inst, cfg.schedule.method, 2, dataclasses.replace(s, shapes="exact"))
    assert exact["padding_efficiency"] == pytest.approx(expected["exact_padding_efficiency"])


@pytest.mark.parametrize("layout", ["scan", "flat"])
@pytest.mark.parametrize("p", [4, 16])
def test_exact_shapes_cost_at_most_the_trained_ones(layout, p):
    inst = skewed(k=256, sigma=1.2)
    for method in ("psg", "dygnex_g"):
        rows = {
            shapes: sim.simulate(inst, method, p, setup(shapes=shapes, layout=layout, planned_epochs=4))
            for shapes in sim.SHAPES
        }
        exact = rows["exact"]["step_seconds"]
        # exact shapes keep the trained schedule; buckets schedule alone (compose auto may then differ)
        same = ["trained"] + (["buckets"] if rows["buckets"]["compose"] == rows["exact"]["compose"] else [])
        for shapes in same:
            assert all(a <= b * (1 + 1e-12) for a, b in zip(exact, rows[shapes]["step_seconds"]))
            assert rows["exact"]["efficiency"] >= rows[shapes]["efficiency"] - 1e-12
        for r in rows.values():
            assert 0 < r["padding_efficiency"] <= r["balance_efficiency"] <= 1 + 1e-12
            assert 0 < r["parallel_efficiency"] <= r["efficiency"] <= 1 + 1e-12
        assert rows["exact"]["shapes_label"] == "exact (no padding to budgets)"
        assert rows["trained"]["shapes_label"].startswith("trained: planned budgets")


def test_legacy_bucket_ratio_means_buckets():
    """``Setup(bucket_ratio=r)`` (before ``shapes``; tools/validate_simulator.py) charges the buckets
    of that grid; without it the default is the trained policy."""
    s = setup(bucket_ratio=1.5, min_bucket=4)
    assert s.shapes == "buckets" and s.policy == "buckets"
    assert (s.parallel.bucket_ratio, s.parallel.min_bucket) == (1.5, 4)
    assert setup().shapes == "trained" and setup().policy == "planned"
    with pytest.raises(UserError, match="shapes"):
        setup(shapes="round")


def test_ring_collectives():
    link = sim.Link("x", 1e-5, 1e9)
    assert sim.ring_allreduce_seconds(1e6, 1, link) == 0
    assert sim.ring_allreduce_seconds(1e6, 4, link) == pytest.approx(6e-5 + 1.5e-3)
    assert sim.ring_allgather_seconds(1e6, 4, link) == pytest.approx(3e-5 + 0.75e-3)
    assert (
        sim.host_slowdown(8, 2) == 8
        and sim.host_slowdown(8, 16) == 8
        and sim.host_slowdown(1, 2) == 1
        and sim.host_slowdown(8, 0) == 1
    )


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


def test_simulate_command_shapes(tmp_path):
    """--shapes picks the charged budgets (--buckets is --shapes buckets); every row and the header
    state the policy and the layout (egcn_o: last)."""
    base = ["--config", "configs/smoke.yaml", "--devices", "4", "--methods", "psg,dygnex_g,vertex"]
    base += ["--windows", "128", "model.name=egcn_o"]
    got = {}
    for flags in (["--shapes", "exact"], ["--buckets"], ["--plan-epochs", "2"]):
        out = tmp_path / f"{flags[-1]}.json"
        proc = run_sim(*base, *flags, "--json", out)
        assert proc.returncode == 0, proc.stderr
        assert "last layout" in proc.stdout
        got[flags[-1]] = data = json.loads(out.read_text())
        assert data["layout"] == "last"
        assert {r["layout"] for r in data["rows"] if r["method"] != "vertex"} == {"last"}
    assert "exact (no padding to budgets)" in got["exact"]["shapes"]
    assert {r["budget_policy"] for r in got["exact"]["rows"]} == {"exact", "analytic"}
    assert {r["budget_policy"] for r in got["--buckets"]["rows"]} == {"buckets", "analytic"}
    assert got["2"]["shapes"].startswith("trained: planned budgets") and got["2"]["planned_epochs"] == 2
    for r in got["exact"]["rows"]:
        if r["method"] != "vertex":
            twin = next(x for x in got["2"]["rows"] if x["method"] == r["method"])
            assert r["epoch_seconds"] <= twin["epoch_seconds"]
    bad = run_sim(*base, "--shapes", "exact", "--buckets")
    assert bad.returncode == 2 and "contradicts" in bad.stderr
