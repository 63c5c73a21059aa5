"""tools/sweep.py and tools/bench_schedulers.py, run as a user would (subprocesses, tiny settings), and
the library functions behind the tools (dygnex_jax.research)."""

import json
from pathlib import Path

import pytest
from helpers import assert_one_line_error, run_tool

REPO = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_sweep_schedule_only(tmp_path):
    out = tmp_path / "sweep"
    proc = run_tool(
        "sweep.py",
        "--config",
        "configs/smoke.yaml",
        "--grid",
        "schedule.method=psg,dygnex_g",
        "--grid",
        "train.batch_size=4,8",
        "--devices",
        "4",
        "--out",
        out,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[4/4]" in proc.stdout and "padding_efficiency" in proc.stdout
    rows = json.loads((out / "sweep.json").read_text())
    assert isinstance(rows, list) and len(rows) == 4
    points = {(r["schedule.method"], r["train.batch_size"]) for r in rows}
    assert points == {(m, b) for m in ("psg", "dygnex_g") for b in (4, 8)}
    for r in rows:
        assert r["devices"] == 4 and r["batch_size"] == r["train.batch_size"]
        assert 0 < r["padding_efficiency"] <= 1
        assert 0 < r["packed_padding_efficiency"] <= 1
        assert r["imbalance"] >= 0 and r["scheduler_seconds"] >= 0
    # what the devices pay (the packed step), not the schedule's balance on paper
    eff = {(r["schedule.method"], r["train.batch_size"]): r["packed_padding_efficiency"] for r in rows}
    for b in (4, 8):
        assert eff["dygnex_g", b] >= eff["psg", b] - 1e-12, eff
    assert (out / "sweep.png").read_bytes().startswith(PNG_MAGIC)


@pytest.mark.parametrize(
    "grid, fragment",
    [
        ("schedule.method", "KEY=V1,V2"),
        ("schedule.method=psg,,dygnex_g", "empty value"),
        ("schedule.no_such_key=1,2", "unknown config key 'schedule.no_such_key'"),
        ("schedule.method=psg,bogus", "unknown schedule.method 'bogus'"),
    ],
)
def test_sweep_bad_grid(tmp_path, grid, fragment):
    out = tmp_path / "sweep"
    proc = run_tool("sweep.py", "--config", "configs/smoke.yaml", "--grid", grid, "--out", out)
    assert_one_line_error(proc, fragment)
    assert not out.exists()


def test_bench_bad_measure_selector(tmp_path):
    proc = run_tool("bench_schedulers.py", "--quick", "--measure", "smoke:x", "--out", tmp_path / "b")
    assert_one_line_error(proc, "--measure")


def test_bench_quick(tmp_path):
    out = tmp_path / "bench"
    proc = run_tool("bench_schedulers.py", "--quick", "--out", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads((out / "bench_schedulers.json").read_text())
    meta = result["meta"]
    assert meta["nproc"] >= 1 and meta["date"] and meta["flags"]["quick"] is True

    rows = result["datasets"]
    assert {r["method"] for r in rows} == {"psg", "dygnex_g", "dygnex_l"}
    assert {r["batch_size"] for r in rows} == {4, 8}
    for r in rows:
        assert r["dataset"] == "smoke" and r["devices"] == 4
        assert 0 < r["padding_efficiency"] <= 1 and 0 < r["packed_padding_efficiency"] <= 1
        assert r["imbalance"] >= 0 and r["scheduler_seconds"] >= 0

    measured = {r["method"]: r for r in result["measured"]}
    assert set(measured) == {"psg", "dygnex_g", "dygnex_l"}
    for r in measured.values():
        assert (r["devices"], r["batch_size"]) == (4, 4)
        assert r["epoch_seconds"] > 0 and len(r["epoch_seconds_all"]) == 1
        assert 0 < r["measured_padding_efficiency"] <= 1
        assert r["compiled_in_timed_run"] == 0 and r["warmups"] >= 1
        assert r["speedup_vs_psg"] > 0
    assert measured["psg"]["speedup_vs_psg"] == pytest.approx(1.0)

    (big,) = result["big"]
    assert big["windows"] == 2000 and big["devices"] == 64 and big["seconds_min"] > 0
    assert result["rows"] and result["summary"]  # the cost-vector part

    table = (out / "bench_schedulers.md").read_text()
    assert table.startswith("| dataset | P | B | method |")
    assert len([line for line in table.splitlines() if line.startswith("| synthetic (smoke) |")]) == 6
    assert table in proc.stdout
    for name in ("bench_schedulers.png", "bench_schedulers_costs.png"):
        assert (out / name).read_bytes().startswith(PNG_MAGIC)


@pytest.mark.slow
def test_sweep_train(tmp_path):
    out = tmp_path / "sweep"
    proc = run_tool(
        "sweep.py",
        "--config",
        "configs/smoke.yaml",
        "--grid",
        "schedule.method=psg,dygnex_g",
        "--train",
        "--devices",
        "4",
        "train.epochs=1",
        "--out",
        out,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads((out / "sweep.json").read_text())
    assert [r["schedule.method"] for r in rows] == ["psg", "dygnex_g"]
    for r in rows:
        assert r["metric"] == "map" and 0 <= r["best_val"] <= 1 and r["median_epoch_seconds"] > 0
        assert (Path(r["run_dir"]) / "summary.json").is_file()
    assert (out / "sweep.png").read_bytes().startswith(PNG_MAGIC)
    again = run_tool(
        "sweep.py", "--config", "configs/smoke.yaml", "--grid", "schedule.method=psg", "--train", "--out", out
    )
    assert_one_line_error(again, "already holds runs")


def test_schedule_tap_caches_and_samples():
    import numpy as np

    from dygnex_jax.config import ScheduleConfig
    from dygnex_jax.research.scheduler_costs import lognormal_costs
    from dygnex_jax.research.scheduler_timing import ScheduleTap
    from dygnex_jax.schedule import schedule

    tap = ScheduleTap(schedule)
    costs = lognormal_costs(40, seed=0)
    settings = ScheduleConfig(method="dygnex_g")
    first = tap(costs, 4, 8, settings, seed=0, epoch=3)
    assert tap(costs, 4, 8, settings, seed=0, epoch=3) is first and len(tap.cache) == 1
    assert tap(costs, 4, 8, settings, seed=0, epoch=4) is not first
    tap.choose = lambda sched: ([1, 3], np.array([2.0, 3.0]))
    part = tap(costs, 4, 8, settings, seed=0, epoch=3)
    assert tap.full is first and tap.subset == [1, 3] and part.num_steps == 2
    for got, want in zip(part.steps, [first.steps[1], first.steps[3]]):
        assert all(np.array_equal(a, b) for a, b in zip(got, want))


def test_sweep_grid_parsing():
    from dygnex_jax.research import sweep

    assert sweep.parse_grid("train.class_weights=[0.1,0.9], [0.5,0.5]") == (
        "train.class_weights",
        ["[0.1,0.9]", "[0.5,0.5]"],
    )
    assert sweep.parse_grid(" schedule.method = psg,dygnex_g ") == ("schedule.method", ["psg", "dygnex_g"])
    assert sweep.point_name([("schedule.method", "psg"), ("train.batch_size", "8")]) == (
        "method=psg_batch_size=8"
    )


def test_bench_torch_charges_compiled_steps_a_steady_time(tmp_path):
    """A compiling step costs what the same budget costs uncompiled; with no such step, its predicted
    time scaled by the run's measured / predicted ratio; the CPU figure of P processes scales by P."""
    from dygnex_jax.research import torch_bench as bench

    steps = [
        {
            "epoch": 1,
            "compiled": True,
            "budget": [8, 8],
            "seconds": 9.0,
            "cpu_seconds": 9.0,
            "predicted_seconds": 1.0,
        },
        {
            "epoch": 1,
            "compiled": False,
            "budget": [8, 8],
            "seconds": 2.0,
            "cpu_seconds": 2.0,
            "predicted_seconds": 1.0,
        },
        {
            "epoch": 2,
            "compiled": True,
            "budget": [4, 4],
            "seconds": 7.0,
            "cpu_seconds": 7.0,
            "predicted_seconds": 0.5,
        },
        {
            "epoch": 2,
            "compiled": False,
            "budget": [8, 8],
            "seconds": 2.0,
            "cpu_seconds": 2.0,
            "predicted_seconds": 1.0,
        },
    ]
    (tmp_path / "steps.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    # epoch 1: 9 -> 2 (same budget); epoch 2: 7 -> 0.5 * (2 / 1) = 1
    assert bench.steady_epoch_seconds(tmp_path, [11.5, 9.5]) == pytest.approx([4.5, 3.5])
    assert bench.steady_epoch_seconds(tmp_path, [23.0, 19.0], "cpu_seconds", scale=2) == pytest.approx(
        [9.0, 7.0]
    )
