"""``report``: the Markdown table holds the runs' figures, and every promised PNG is drawn."""

import json
import os
import subprocess
import sys
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest
import yaml

from dygnex_jax.__main__ import main
from dygnex_jax.report import load_run, median_epoch_seconds, table_row

REPO = Path(__file__).resolve().parents[1]


def fake_run(
    path: Path, method: str, losses, val_maps, seconds, finished=True, devices=4, task="link", metric="map"
) -> Path:
    """A run folder as ``train`` writes it: epochs 1.., two steps per epoch, epoch 1 compiled;
    ``val_maps`` are the values of the task's ``metric`` (test: half of them)."""
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(
        yaml.safe_dump({"schedule": {"method": method}, "model": {"name": "egcn_o"}, "data": {"task": task}})
    )
    rows, steps = [], []
    for e, (loss, vm, sec) in enumerate(zip(losses, val_maps, seconds), start=1):
        rows.append(
            {
                "epoch": e,
                "loss": loss,
                "epoch_seconds": sec,
                "padding_efficiency": 0.5 + 0.1 * e,
                f"val_{metric}": vm,
                f"test_{metric}": vm / 2,
            }
        )
        for s in range(2):
            loads = [float(d + 1 + s) for d in range(devices)]
            steps.append(
                {
                    "epoch": e,
                    "step": s,
                    "compiled": e == 1,
                    "device_loads": loads,
                    "padding_efficiency": sum(loads) / (devices * max(loads)),
                }
            )
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"epoch": 9, "lo')
    (path / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in steps))
    if finished:
        (path / "summary.json").write_text("{}")
    return path


def test_table_row_figures(tmp_path):
    run = load_run(fake_run(tmp_path / "a", "dygnex_g", [0.7, 0.6, 0.5], [0.1, 0.3, 0.2], [9.0, 1.0, 2.0]))
    row = table_row(run)
    assert row["epochs"] == 3  # the half line a kill left is ignored
    assert (row["metric"], row["best_val"], row["best_epoch"], row["test_at_best"]) == ("map", 0.3, 2, 0.15)
    assert row["final_loss"] == 0.5 and row["devices"] == 4 and row["schedule"] == "dygnex_g"
    assert median_epoch_seconds(run) == 1.5  # epoch 1 compiled: median of 1.0 and 2.0
    assert row["padding_efficiency"] == pytest.approx(0.7)


def test_report_two_runs_writes_plots_and_table(tmp_path, capsys):
    a = fake_run(tmp_path / "greedy", "dygnex_g", [0.7, 0.6, 0.5], [0.1, 0.3, 0.2], [9.0, 1.0, 2.0])
    b = fake_run(tmp_path / "even", "psg", [0.8, 0.7], [0.05, 0.1], [9.0, 4.0], finished=False, devices=8)
    out = tmp_path / "report"
    assert main(["report", str(a), str(b), "--out", str(out)]) == 0
    names = {"curves.png", "loads-greedy.png", "loads-even.png", "epoch_time.png", "summary.md"}
    assert {p.name for p in out.iterdir()} == names
    for name in names - {"summary.md"}:
        image = mpimg.imread(out / name)
        assert image.shape[0] > 200 and image.shape[1] > 300 and image.std() > 0.01, name  # drawn, not blank
    table = (out / "summary.md").read_text().splitlines()
    assert len(table) == 4 and table[0].startswith("| run | schedule")
    assert table[2].startswith(
        "| greedy | dygnex_g | egcn_o | 4 | 3 | 0.5000 | 0.3000 (2) | 0.1500 | 1.500 |"
    )
    assert table[3].startswith(
        "| even | psg | egcn_o | 8 | 2 (unfinished) | 0.7000 | 0.1000 (2) | 0.0500 | 4.000 |"
    )
    assert "wrote" in capsys.readouterr().err


def test_node_regression_picks_the_lowest_mse_and_mixed_tasks_name_their_metric(tmp_path):
    """The best epoch follows the task: lowest validation MSE for node regression, highest F1 for edge
    classification; a table of runs of different tasks names each value's metric."""
    reg = fake_run(
        tmp_path / "reg",
        "psg",
        [0.9, 0.8, 0.7],
        [1.2, 0.9, 1.0],
        [5.0, 1.0, 1.0],
        task="node_reg",
        metric="mse",
    )
    cls = fake_run(tmp_path / "cls", "psg", [0.9, 0.8], [0.2, 0.1], [5.0, 1.0], task="edge_cls", metric="f1")
    assert (table_row(load_run(reg))["best_val"], table_row(load_run(reg))["best_epoch"]) == (0.9, 2)
    assert (table_row(load_run(cls))["best_val"], table_row(load_run(cls))["best_epoch"]) == (0.2, 1)
    out = tmp_path / "r"
    assert main(["report", str(reg), "--out", str(out)]) == 0
    assert "best val MSE (epoch)" in (out / "summary.md").read_text()
    assert main(["report", str(reg), str(cls), "--out", str(out)]) == 0
    table = (out / "summary.md").read_text()
    assert (
        "best val metric (epoch)" in table
        and "| mse 0.9000 (2) | mse 0.4500 |" in table
        and "| f1 0.2000 (1) |" in table
    )


def test_one_run_has_no_epoch_time_plot(tmp_path):
    a = fake_run(tmp_path / "only", "psg", [0.7], [0.1], [3.0])
    out = tmp_path / "r"
    assert main(["report", str(a), "--out", str(out)]) == 0
    assert not (out / "epoch_time.png").exists() and (out / "curves.png").is_file()


@pytest.mark.slow
def test_report_on_two_real_runs(tmp_path):
    """End to end: two short smoke runs (psg, dygnex_g) through the CLI, then report."""
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"}
    runs = []
    for method in ("psg", "dygnex_g"):
        out = tmp_path / method
        cmd = ["train", "--config", "configs/smoke.yaml", "--out", str(out), f"schedule.method={method}"]
        result = subprocess.run(
            [sys.executable, "-m", "dygnex_jax", *cmd], cwd=REPO, env=env, capture_output=True
        )
        assert result.returncode == 0, result.stderr
        runs.append(str(out))
    out = tmp_path / "report"
    result = subprocess.run(
        [sys.executable, "-m", "dygnex_jax", "report", *runs, "--out", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
    )
    assert result.returncode == 0, result.stderr
    assert {"curves.png", "loads-psg.png", "loads-dygnex_g.png", "epoch_time.png"} <= {
        p.name for p in out.iterdir()
    }
    table = (out / "summary.md").read_text()
    for method in ("psg", "dygnex_g"):
        final = json.loads((tmp_path / method / "summary.json").read_text())["final"]
        assert f"| {final['loss']:.4f} |" in table
    assert np.all([mpimg.imread(out / n).std() > 0.01 for n in ("curves.png", "epoch_time.png")])


def test_progress_lines_in_a_log_file():
    """Not a terminal (a log file, a pipe): a line per `every` seconds inside an epoch, none at its end."""
    import io

    from dygnex_jax.train import Progress

    stream = io.StringIO()
    update = Progress(stream, every=0.0).bar(2, 5)
    for done in (1, 2, 3):
        update(done, 3)
    lines = stream.getvalue().splitlines()
    assert [line.split(" after ")[0] for line in lines] == ["epoch 2/5: step 1/3", "epoch 2/5: step 2/3"]
    quiet = io.StringIO()
    update = Progress(quiet, every=3600.0).bar(1, 1)
    update(1, 2)
    assert quiet.getvalue() == ""


@pytest.mark.parametrize(
    "damage, needle",
    [
        ("metrics", "row 1 has no number 'epoch_seconds': not a log `train` wrote"),
        ("config", "holds a list, not a run's config"),
        ("yaml", "is not valid YAML"),
    ],
)
def test_a_folder_that_train_did_not_write_is_one_line(tmp_path, capsys, damage, needle):
    """Foreign or damaged files in a run folder: one ``error:`` line, exit 2, nothing written; a
    summary.json cut short only marks the run unfinished."""
    run = fake_run(tmp_path / "run", "psg", [0.5, 0.4], [0.1, 0.2], [1.0, 1.0])
    if damage == "metrics":
        (run / "metrics.jsonl").write_text('{"epoch": 1, "loss": 0.3}\n')
    elif damage == "config":
        (run / "config.yaml").write_text("- a\n- list\n")
    else:
        (run / "config.yaml").write_text("schedule: [unclosed\n")
    out = tmp_path / "rep"
    assert main(["report", str(run), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and needle in err, err
    assert not out.exists()


def test_a_summary_cut_short_marks_the_run_unfinished(tmp_path):
    run = fake_run(tmp_path / "run", "psg", [0.5, 0.4], [0.1, 0.2], [1.0, 1.0])
    (run / "summary.json").write_text('{"name": "x", "epo')
    assert table_row(load_run(run))["finished"] is False


def test_a_diverged_run_logged_as_strict_json_reports(tmp_path):
    """``train`` writes a NaN loss or metric as null (strict JSON): the report reads it as not-a-number,
    keeps the best of the real values, and its table says so."""
    run = fake_run(tmp_path / "run", "psg", [0.5, 0.4, 0.3], [0.1, 0.2, 0.15], [1.0, 1.0, 1.0])
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()[:3]]
    rows[2]["loss"], rows[1]["val_map"] = None, None
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded = load_run(run)
    assert np.isnan(loaded["metrics"][2]["loss"])
    row = table_row(loaded)
    assert (row["best_val"], row["best_epoch"]) == (0.15, 3) and np.isnan(row["final_loss"])
    assert main(["report", str(run), "--out", str(tmp_path / "rep")]) == 0
    line = (tmp_path / "rep" / "summary.md").read_text().splitlines()[2]
    assert line.startswith("| run | psg | egcn_o | 4 | 3 | nan | 0.1500 (3) | 0.0750 |"), line


def test_a_report_that_fails_half_way_leaves_no_folder(tmp_path, capsys, monkeypatch):
    """A write failing after the first plot (a full disk): one error line, and neither the plots written
    before it nor the new folder remain."""
    from dygnex_jax import report

    a = fake_run(tmp_path / "a", "psg", [0.5, 0.4], [0.1, 0.2], [1.0, 1.0])
    b = fake_run(tmp_path / "b", "dygnex_g", [0.5, 0.4], [0.1, 0.2], [1.0, 1.0])

    def full(runs, path):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(report, "plot_epoch_times", full)
    out = tmp_path / "new" / "rep"
    assert main(["report", str(a), str(b), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "No space left" in err, err
    assert not (tmp_path / "new").exists()
