"""The command line: bad input is one line on stderr, exit code 2, and nothing written to --out."""

import json
from pathlib import Path

import helpers
import pytest

REPO = Path(__file__).resolve().parents[1]


def run_cli(*args, cwd=REPO, timeout=300):
    return helpers.run_cli(*args, timeout=timeout, fake_devices=8, cwd=cwd)


def edge_file(tmp_path, text, name="edges.txt"):
    p = tmp_path / name
    p.write_text(text)
    return p


GOOD_ROWS = "".join(f"{i % 7} {(i * 3 + 1) % 7} {i * 10}\n" for i in range(60))

BAD_INPUTS = {
    "missing file": (["data.dataset=edges", "data.path=/nonexistent/edges.txt"], "does not exist"),
    "malformed row": (["data.dataset=edges", "data.path={bad_row}"], "line 3"),
    "non-numeric time": (["data.dataset=edges", "data.path={bad_time}"], "time"),
    "unknown dataset": (["data.dataset=no_such_set"], "unknown dataset"),
    "unknown config key": (["train.no_such_key=1"], "unknown config key 'train.no_such_key'"),
    "window longer than series": (["data.window=500"], "data.window=500"),
    "non-positive batch size": (["train.batch_size=0"], "train.batch_size must be positive"),
    "wrong value type": (["train.epochs=many"], "train.epochs"),
    "unknown model": (["model.name=transformer"], "unknown model.name"),
    "unknown scheduler": (["schedule.method=magic"], "unknown schedule.method"),
    "more devices than windows": (["train.batch_size=4"], "devices but only 4"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_and_exit_2(case, tmp_path):
    overrides, needle = BAD_INPUTS[case]
    bad_row = edge_file(tmp_path, "1 2 10\n2 3 20\n4 5\n", "bad_row.txt")
    bad_time = edge_file(tmp_path, "1 2 10\n2 3 noon\n", "bad_time.txt")
    overrides = [o.format(bad_row=bad_row, bad_time=bad_time) for o in overrides]
    out = tmp_path / "run"
    result = run_cli("train", "--out", str(out), *overrides)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert needle in lines[0], lines[0]
    assert not out.exists(), "nothing may be written on bad input"


def test_missing_config_file(tmp_path):
    result = run_cli("train", "--config", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2 and "does not exist" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_usage_error_is_one_line():
    result = run_cli("fly")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1


def test_smoke_train_writes_the_run_files(tmp_path):
    out = tmp_path / "smoke"
    result = run_cli("train", "--config", "configs/smoke.yaml", "--out", str(out))
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2]
    for r in rows:
        assert 0 < r["padding_efficiency"] <= 1 and r["loss"] > 0
        assert 0 <= r["val_map"] <= 1 and 0 <= r["test_mrr"] <= 1
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert {s["epoch"] for s in steps} == {1, 2} and all(len(s["device_loads"]) == 8 for s in steps)
    assert all(0 < s["padding_efficiency"] <= 1 for s in steps)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["eval_candidates"] == "all" and summary["devices"] == 8
    assert summary["final"]["test_map"] == rows[-1]["test_map"]
    assert "name: smoke" in (out / "config.yaml").read_text()
    # a second run into the same directory is refused, and the first run is left alone
    again = run_cli("train", "--config", "configs/smoke.yaml", "--out", str(out))
    assert again.returncode == 2 and "already holds a run" in again.stderr
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2


def test_schedule_command_writes_json_and_plot(tmp_path):
    out_json, out_png = tmp_path / "s.json", tmp_path / "s.png"
    result = run_cli(
        "schedule",
        "--config",
        "configs/smoke.yaml",
        "--devices",
        "4",
        "--json",
        str(out_json),
        "--plot",
        str(out_png),
        "schedule.method=dygnex_g",
        "train.batch_size=8",
    )
    assert result.returncode == 0, result.stderr
    got = json.loads(out_json.read_text())
    for key in (
        "method",
        "devices",
        "batch_size",
        "padding_efficiency",
        "imbalance",
        "predicted_epoch_seconds",
        "scheduler_seconds",
        "fallback",
    ):
        assert key in got
    assert got["method"] == "dygnex_g" and got["devices"] == 4 and got["batch_size"] == 8
    # the same header line as `train` (the data, its windows, the setup) on stderr
    assert (
        "synthetic: 120 nodes, 20 snapshots, windows train/val/test 11/2/3, 4 devices, model egcn_o, "
        "schedule dygnex_g, task link, eval candidates all" in result.stderr
    )
    assert 0 < got["packed_padding_efficiency"] <= got["padding_efficiency"] <= 1
    assert out_png.read_bytes()[:4] == b"\x89PNG"
    assert "dygnex_g" in result.stdout


def test_profile_fits_and_training_uses_the_model(tmp_path, monkeypatch):
    """profile writes its model and this machine's cache entry; a run with schedule.cost_model=auto (the
    default) and the profile's signature then uses the cached model (its weights, its note, a copy in the
    run folder), the schedule command too; a file path still works."""
    monkeypatch.setenv("DYGNEX_COST_MODELS", str(tmp_path / "cache"))
    prof = tmp_path / "prof"
    same = ["parallel.devices=2", "train.batch_size=4"]
    result = run_cli(
        "profile",
        "--config",
        "configs/smoke.yaml",
        "--steps",
        "6",
        "--repeats",
        "1",
        "--out",
        str(prof),
        "parallel.bucket_ratio=1.1",
        "parallel.min_bucket=8",
        *same,
    )
    assert result.returncode == 0, result.stderr
    model = json.loads((prof / "cost_model.json").read_text())
    assert model["n_samples"] >= 5 and model["mape"] is not None and min(model["coef"]) >= 0
    assert model["devices"] == 2 and model["compile_seconds"] > 0 and len(model["load_average"]) == 2
    # every step also timed alone (as an epoch's last step runs): its own fit, beside the other
    profiled = json.loads((prof / "profile.json").read_text())
    assert len(profiled["seconds_alone"]) == len(profiled["seconds"]) and min(profiled["seconds_alone"]) > 0
    assert len(model["coef_alone"]) == len(model["coef"]) and min(model["coef_alone"]) >= 0
    entries = list((tmp_path / "cache").glob("*.json"))
    assert len(entries) == 1, "the profile is in this machine's cache"
    # the run refits the entry's profiles around its own step size (cost_cache.step_scale)
    from dygnex_jax import cost_cache
    from dygnex_jax.config import load_config
    from dygnex_jax.data.datasets import load_dataset
    from dygnex_jax.data.node_windows import task_windows

    config = load_config(REPO / "configs" / "smoke.yaml", same)
    ws = task_windows(load_dataset(config.data), config.data)
    scale = cost_cache.step_scale(ws.costs("train", config.data.neg_mult)[:, 2], 4, 2)
    cached = cost_cache.entry_model(cost_cache.read_entry(entries[0]), scale).to_dict()
    run = tmp_path / "run"
    result = run_cli("train", "--config", "configs/smoke.yaml", "--out", str(run), "train.epochs=1", *same)
    assert result.returncode == 0, result.stderr
    assert "cost model: profiled on this machine" in result.stderr
    assert f"fitted around steps of {scale:.0f} pairs" in result.stderr
    summary = json.loads((run / "summary.json").read_text())
    assert summary["cost_model"]["coef"] == cached["coef"] and summary["cost_model"]["devices"] == 2
    assert summary["cost_model"]["coef_alone"] == cached["coef_alone"] is not None
    assert json.loads((run / "cost_model.json").read_text())["coef"] == cached["coef"]
    row = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    assert row["predicted_epoch_seconds"] > 0
    scheduled = run_cli("schedule", "--config", "configs/smoke.yaml", "--devices", "2", "train.batch_size=4")
    assert scheduled.returncode == 0 and "cost model: profiled on this machine" in scheduled.stderr
    # another device count has no profile: the analytic model, and the line saying how to get one
    other = run_cli("schedule", "--config", "configs/smoke.yaml", "--devices", "4", "train.batch_size=4")
    assert (
        other.returncode == 0 and "cost model: analytic (no profile of egcn_o at 4 device(s)" in other.stderr
    )
    run2 = tmp_path / "run2"
    result = run_cli(
        "train",
        "--config",
        "configs/smoke.yaml",
        "--out",
        str(run2),
        "train.epochs=1",
        f"schedule.cost_model={prof / 'cost_model.json'}",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads((run2 / "summary.json").read_text())["cost_model"]["coef"] == model["coef"]


def test_missing_cost_model_is_a_user_error(tmp_path):
    result = run_cli(
        "train", "--config", "configs/smoke.yaml", f"schedule.cost_model={tmp_path / 'none.json'}"
    )
    assert result.returncode == 2 and "cost model file" in result.stderr


def test_overrides_may_stand_on_both_sides_of_an_option():
    from dygnex_jax.__main__ import parse_args

    a = parse_args(["train", "data.dataset=edges", "--out", "runs/x", "data.path=a", "train.epochs=1"])
    assert a.out == "runs/x" and a.overrides == ["data.dataset=edges", "data.path=a", "train.epochs=1"]
    a = parse_args(["schedule", "data.window=3", "--devices", "3", "schedule.method=dygnex_l"])
    assert a.devices == 3 and a.overrides == ["data.window=3", "schedule.method=dygnex_l"]
    for argv in (["train", "--out", "d", "a=1", "--bogus"], ["report", "runs/a", "x=1", "--nope"]):
        with pytest.raises(SystemExit) as e:
            parse_args(argv)
        assert e.value.code == 2


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["inspect", "--config", "/dev/null"], "config file '/dev/null' is no regular file"),
        (["train", "--resume", "README.md"], "--resume 'README.md' is a file, not a folder"),
        (["inspect", "data.dataset=snapshots", "data.path=README.md"], "data.path 'README.md' is a file"),
    ],
)
def test_a_path_of_the_wrong_kind_is_named_as_such(argv, needle, capsys):
    from dygnex_jax.__main__ import main

    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines


def test_download_command(tmp_path, monkeypatch):
    """``download NAME --root DIR``: a file already there is kept (no network), an unknown name and a
    missing folder are one-line errors (exit 2)."""
    from dygnex_jax.data.datasets import NAMED

    monkeypatch.delenv("DYGNEX_DATA", raising=False)
    target = NAMED["bitcoin_otc"].path(tmp_path)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"kept")
    proc = helpers.run_cli("download", "bitcoin_otc", "--root", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"bitcoin_otc: {target}" and target.read_bytes() == b"kept"
    helpers.assert_one_line_error(
        helpers.run_cli("download", "nope", "--root", tmp_path), "unknown dataset 'nope'"
    )
    helpers.assert_one_line_error(helpers.run_cli("download", "bitcoin_otc"), "download needs a data folder")
