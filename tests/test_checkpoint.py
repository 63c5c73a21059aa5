"""Checkpoints, resume, the numerics guard and determinism.

Acceptance: a training run killed with SIGKILL in the middle of an epoch and resumed ends with exactly
the parameters, optimiser state and metrics of an uninterrupted run; a non-finite step stops the run
with one line naming the step, its windows and the last good checkpoint, exit code 2.
"""

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest
from helpers import LOOP, make_trainer

from dygnex_jax import checkpoint, resume
from dygnex_jax.__main__ import main
from dygnex_jax.errors import UserError
from dygnex_jax.train import NonFiniteStep

REPO = Path(__file__).resolve().parents[1]
SMOKE = str(REPO / "configs" / "smoke.yaml")
RUN = ["--config", SMOKE, "train.epochs=3"]
# Figures that are wall-clock measurements (or say whether this process compiled): the only ones
# allowed to differ between two runs of one config.
WALL = {
    "epoch_seconds",
    "epoch_cpu_seconds",
    "scheduler_seconds",
    "eval_seconds",
    "peak_rss_bytes",
    "device_peak_bytes",
    "step_seconds",  # the steps that compiled nothing: which ones did is this process's
    "predicted_step_seconds",
}
STEP_WALL = {"seconds", "cpu_seconds", "compiled"}

# Runs `python -m dygnex_jax ARGS` and SIGKILLs itself just before step KILL_STEP of epoch KILL_EPOCH
# is packed (the steps before it in that epoch have updated the parameters in memory).
KILLER = """
import os, signal, sys
from dygnex_jax import packer
from dygnex_jax.__main__ import main

kill_epoch, kill_step = int(sys.argv[1]), int(sys.argv[2])
seen = []
pack = packer.Packer.pack

def pack_or_die(self, step, split, epoch, **kw):
    if split == "train" and epoch == kill_epoch:
        seen.append(step)
        if len(seen) == kill_step + 1:
            print(f"killing myself before step {kill_step} of epoch {epoch}", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
    return pack(self, step, split, epoch, **kw)

packer.Packer.pack = pack_or_die
sys.exit(main(sys.argv[3:]))
"""


def cli(*args, script=None, cache=None, timeout=600):
    """``python -m dygnex_jax ARGS`` (or ``script ARGS``) in a fresh process; ``cache``: a folder for
    JAX's persistent compilation cache, so that later processes load the executables the first one
    compiled (the same programs; it only saves compile time on these 2 cores)."""
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    if cache:
        env |= {"JAX_COMPILATION_CACHE_DIR": str(cache), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
    head = [sys.executable, str(script)] if script else [sys.executable, "-m", "dygnex_jax"]
    return subprocess.run([*head, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def rows(path: Path, drop: set) -> list[dict]:
    return [
        {k: v for k, v in json.loads(line).items() if k not in drop} for line in path.read_text().splitlines()
    ]


def arrays(ckpt_dir: Path) -> list[np.ndarray]:
    """Every array of a checkpoint (params, then optimiser state), as numpy."""
    import orbax.checkpoint as ocp

    with warnings.catch_warnings():  # "sharding info not provided": read it from the checkpoint, fine here
        warnings.simplefilter("ignore", UserWarning)
        tree = ocp.PyTreeCheckpointer().restore(ckpt_dir / "state")
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


@pytest.fixture(scope="module")
def jax_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("jax_cache")


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory, jax_cache):
    """The smoke config, 3 epochs, uninterrupted, in its own process."""
    out = tmp_path_factory.mktemp("reference") / "run"
    result = cli("train", "--out", str(out), *RUN, cache=jax_cache)
    assert result.returncode == 0, result.stderr
    return out


def test_sigkill_mid_epoch_then_resume_equals_uninterrupted(reference_run, jax_cache, tmp_path):
    killer = tmp_path / "killer.py"
    killer.write_text(KILLER)
    out = tmp_path / "run"
    killed = cli("3", "1", "train", "--out", str(out), *RUN, script=killer, cache=jax_cache)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert "killing myself before step 1 of epoch 3" in killed.stderr
    assert [e for e, _ in checkpoint.complete(out)] == [1, 2]
    assert [r["epoch"] for r in rows(out / "metrics.jsonl", set())] == [1, 2]  # epoch 3 was cut

    resumed = cli("train", "--resume", str(out), cache=jax_cache)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming" in resumed.stderr and "epoch_000002" in resumed.stderr

    assert rows(out / "metrics.jsonl", WALL) == rows(reference_run / "metrics.jsonl", WALL)
    assert rows(out / "steps.jsonl", STEP_WALL) == rows(reference_run / "steps.jsonl", STEP_WALL)
    ours, theirs = checkpoint.latest(out), checkpoint.latest(reference_run)
    assert ours.epoch == theirs.epoch == 3
    a, b = arrays(ours.path), arrays(theirs.path)
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)  # bit for bit
    final = lambda run: json.loads((run / "summary.json").read_text())["final"]  # noqa: E731
    assert final(out) == final(reference_run)


def test_same_config_and_seed_same_metrics(reference_run, jax_cache, tmp_path):
    """Determinism: a second run of the config in another process writes the same metrics and steps."""
    out = tmp_path / "again"
    result = cli("train", "--out", str(out), *RUN, cache=jax_cache)
    assert result.returncode == 0, result.stderr
    assert rows(out / "metrics.jsonl", WALL) == rows(reference_run / "metrics.jsonl", WALL)
    assert rows(out / "steps.jsonl", STEP_WALL) == rows(reference_run / "steps.jsonl", STEP_WALL)
    for x, y in zip(arrays(checkpoint.latest(out).path), arrays(checkpoint.latest(reference_run).path)):
        np.testing.assert_array_equal(x, y)


def test_nan_stops_with_step_windows_and_last_checkpoint(reference_run, tmp_path, capsys):
    """A learning rate that overflows float32 (1e39 -> inf) makes the first update non-finite."""
    run = tmp_path / "run"
    shutil.copytree(reference_run, run)
    before = {p: p.read_bytes() for p in (run / "checkpoints").rglob("*") if p.is_file()}
    code = main(["train", "--resume", str(run), "train.epochs=4", "train.learning_rate=1e39"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    error = [line for line in lines if line.startswith("error: ")]
    assert error == [lines[-1]], lines
    assert "non-finite loss or gradient" in error[0] and "at epoch 4 step 0 (windows " in error[0]
    assert f"last good checkpoint {run / 'checkpoints' / 'epoch_000003'} (epoch 3)" in error[0]
    assert f"train --resume {run}" in error[0]
    # nothing after the last good epoch was written, and its checkpoint is intact
    assert [r["epoch"] for r in rows(run / "metrics.jsonl", set())] == [1, 2, 3]
    assert {p: p.read_bytes() for p in (run / "checkpoints").rglob("*") if p.is_file()} == before


# ------------------------------------------------------------------------------- in-process units

ONE_BUDGET = ["parallel.min_bucket=512", "parallel.bucket_ratio=4.0"]  # one compilation per trainer
# the toy graph, 2 devices, 4 windows a step
toy = functools.partial(make_trainer, base=[*LOOP, *ONE_BUDGET, "train.batch_size=4"])


def leaves(tree) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def test_nonfinite_step_stop_names_the_windows():
    tr = toy("train.learning_rate=1e39")
    with pytest.raises(NonFiniteStep, match=r"at epoch 1 step 0 \(windows \d+(, \d+)*\)"):
        tr.train_epoch(1)


def test_nonfinite_step_skip_keeps_parameters_and_counts():
    tr = toy("train.learning_rate=1e39", "train.on_nonfinite=skip")
    params, opt = leaves(tr.params), leaves(tr.opt_state)
    stats = tr.train_epoch(1)
    assert stats["skipped_steps"] == stats["steps"] > 0 and np.isnan(stats["loss"])
    assert all(s["finite"] is False for s in tr.last_steps)
    for x, y in zip(params + opt, leaves(tr.params) + leaves(tr.opt_state)):
        np.testing.assert_array_equal(x, y)


def test_save_restore_round_trip_is_exact(tmp_path, monkeypatch):
    tr = toy()
    history = [{"epoch": 1, **tr.train_epoch(1)}]
    saved = leaves(tr.params) + leaves(tr.opt_state)
    state = tr.packer.state_dict()
    monkeypatch.chdir(
        tmp_path
    )  # a relative run directory, as `train --out runs/x` gives (orbax wants absolute)
    checkpoint.save(tr, "run", 1, history, keep=3)
    log = [(w.tolist(), s, a) for w, s, a in tr.step_log]  # the refit's data, alone flags included
    after = tr.train_epoch(2)  # moves the parameters on
    tr.packer.load_state_dict({"budgets": [], "rent": [[[1, 2, 3, 4], 5.0]]})
    got = checkpoint.restore(tr, checkpoint.latest("run"))
    assert got == json.loads(json.dumps(history))
    for x, y in zip(saved, leaves(tr.params) + leaves(tr.opt_state)):
        np.testing.assert_array_equal(x, y)
    assert tr.packer.state_dict() == state
    assert [(w.tolist(), s, a) for w, s, a in tr.step_log] == log
    assert tr.train_epoch(2)["loss"] == after["loss"]  # the same epoch 2 again


def test_half_written_checkpoints_are_never_picked_and_old_ones_go(tmp_path, monkeypatch):
    tr = toy()
    for epoch in (1, 2, 3):
        checkpoint.save(tr, tmp_path, epoch, [], keep=2)
    assert [e for e, _ in checkpoint.complete(tmp_path)] == [2, 3]

    def die(path):  # the process dies after the arrays, before meta.json is synced and renamed
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint, "_fsync", die)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save(tr, tmp_path, 4, [], keep=2)
    monkeypatch.undo()
    assert [p.name for p in (tmp_path / "checkpoints").glob(".tmp-*")]  # the leftover is there ...
    (tmp_path / "checkpoints" / "epoch_000005" / "state").mkdir(parents=True)  # ... and a folder without meta
    assert checkpoint.latest(tmp_path).epoch == 3  # ... neither is picked up
    checkpoint.save(tr, tmp_path, 4, [], keep=2)
    assert not list((tmp_path / "checkpoints").glob(".tmp-*"))  # the next save cleans up
    assert [e for e, _ in checkpoint.complete(tmp_path)] == [3, 4]


def test_the_best_epochs_checkpoint_outlives_the_newest_keep(tmp_path):
    tr = toy()
    for epoch in (1, 2, 3, 4, 5):
        checkpoint.save(tr, tmp_path, epoch, [], keep=2, best=2)
    assert [e for e, _ in checkpoint.complete(tmp_path)] == [2, 4, 5]
    checkpoint.save(tr, tmp_path, 6, [], keep=2, best=6)  # a new best: the old one goes, as any
    assert [e for e, _ in checkpoint.complete(tmp_path)] == [5, 6]
    assert checkpoint.latest(tmp_path).epoch == 6
    assert checkpoint.restore_epoch(tr, tmp_path, 5).epoch == 5  # one named epoch, not the newest
    (tmp_path / "checkpoints" / "epoch_000005" / "meta.json").write_text("{")
    with pytest.raises(UserError, match="epoch_000005 is damaged .*not valid JSON.*: name another epoch"):
        checkpoint.restore_epoch(tr, tmp_path, 5)
    with pytest.raises(UserError, match=r"no checkpoint of epoch 2 \(it has 5, 6\)"):
        checkpoint.restore_epoch(tr, tmp_path, 2)


def _fake_run(path: Path, trained: dict) -> Path:
    """A run folder without config.yaml whose complete-looking checkpoint of epoch 2 trained ``trained``
    (resume_config reads only the checkpoint's meta.json)."""
    ckpt = path / checkpoint.FOLDER / "epoch_000002"
    (ckpt / "state").mkdir(parents=True)
    (ckpt / "meta.json").write_text(json.dumps({"epoch": 2, "config": trained, "history": []}))
    return path


def test_resume_restores_a_deleted_config_from_the_checkpoint(tmp_path, capsys):
    """--resume of a run whose config.yaml was deleted: the checkpoint's config is written back (a note
    says so) and resumed with the allowed overrides; a checkpoint config that does not load here (an
    unknown key) is the one-line refusal, with nothing written."""
    from dygnex_jax.config import load_config, to_dict

    trained = to_dict(load_config(SMOKE))
    run = _fake_run(tmp_path / "run", trained)
    config = resume.resume_config(run, None, ["train.epochs=9"])
    assert (run / "config.yaml").is_file() and "was missing: restored" in capsys.readouterr().err
    assert to_dict(load_config(run / "config.yaml")) == trained and config.train.epochs == 9
    bad = _fake_run(tmp_path / "bad", {**trained, "no_such_section": {"x": 1}})
    with pytest.raises(checkpoint.UserError, match="has no config.yaml"):
        resume.resume_config(bad, None, [])
    assert not (bad / "config.yaml").exists()


def test_a_run_of_a_relative_data_path_resumes_from_any_folder(tmp_path, monkeypatch):
    """config.yaml names data.path absolutely (the run started in another folder than the resume)."""
    import yaml

    rng = np.random.default_rng(0)
    (tmp_path / "data").mkdir()
    rows = [f"{a} {b} {t}" for a, b, t in zip(rng.integers(0, 30, 400), rng.integers(0, 30, 400), range(400))]
    (tmp_path / "data" / "e.txt").write_text("\n".join(rows) + "\n")
    monkeypatch.chdir(tmp_path)
    args = ["data.dataset=edges", "data.path=data/e.txt", "data.aggr_time=20", *LOOP, "eval.every=100"]
    assert main(["train", "--out", "run", *args, "train.epochs=1"]) == 0
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["data"]["path"]
    assert saved == str(tmp_path / "data" / "e.txt")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["train", "--resume", str(tmp_path / "run"), "train.epochs=2"]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["epochs"] == 2


def test_a_run_whose_data_moved_resumes_from_the_new_place_only_with_the_same_data(tmp_path, monkeypatch):
    """--resume with data.path naming where the file moved continues the run (config.yaml then names the
    new place: a later resume needs no override) and trains the same epochs as a run never interrupted;
    a file of other contents there, or the file edited in place, is refused before anything is written."""
    import yaml

    rng = np.random.default_rng(0)
    rows = [f"{a} {b} {t}" for a, b, t in zip(rng.integers(0, 30, 400), rng.integers(0, 30, 400), range(400))]
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "e.txt").write_text("\n".join(rows) + "\n")
    monkeypatch.chdir(tmp_path)
    args = ["data.dataset=edges", "data.path=old/e.txt", "data.aggr_time=20", *LOOP, "eval.every=100"]
    assert main(["train", "--out", "whole", *args, "train.epochs=3"]) == 0
    assert main(["train", "--out", "run", *args, "train.epochs=2"]) == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()}
    original = (tmp_path / "old" / "e.txt").read_text()
    (tmp_path / "old" / "e.txt").write_text(original + "3 4 401\n")  # edited in place: refused too
    with pytest.raises(checkpoint.UserError, match="changed since this run trained on it"):
        from dygnex_jax.train import train_and_evaluate

        train_and_evaluate(
            resume.resume_config(tmp_path / "run", None, ["train.epochs=3"]), tmp_path / "run", resume=True
        )
    assert {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()} == before
    (tmp_path / "old" / "e.txt").write_text(original)
    (tmp_path / "new").mkdir()
    (tmp_path / "old" / "e.txt").rename(tmp_path / "new" / "e.txt")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "e.txt").write_text("\n".join(rows[:-40]) + "\n")
    with pytest.raises(checkpoint.UserError, match="is not the data this run trained on"):
        config = resume.resume_config(tmp_path / "run", None, ["train.epochs=3", "data.path=other/e.txt"])
        train_and_evaluate(config, tmp_path / "run", resume=True)
    assert {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()} == before
    assert main(["train", "--resume", "run", "train.epochs=3", "data.path=new/e.txt"]) == 0
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["data"]["path"]
    assert saved == str(tmp_path / "new" / "e.txt")
    ours, theirs = (
        [json.loads(line) for line in (tmp_path / d / "metrics.jsonl").read_text().splitlines()]
        for d in ("run", "whole")
    )
    assert [r["loss"] for r in ours] == [r["loss"] for r in theirs]
    assert main(["train", "--resume", "run", "train.epochs=4"]) == 0  # no override: config.yaml moved too
