"""Multi-process training on jax.distributed (gloo on CPU) and the local launcher.

2 processes x 2 fake devices must train exactly like 1 process x 4 devices on the same schedule;
a process that dies makes the launcher fail loudly and name it; bad topology input is one line, exit 2.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_one_line_error, run_cli

from dygnex_jax import distributed
from dygnex_jax.errors import UserError

REPO = Path(__file__).resolve().parents[1]
LAUNCH = REPO / "tools" / "launch_local.py"


def launcher(*args, timeout=240, **kw):
    return subprocess.run(
        [sys.executable, str(LAUNCH), *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )


@pytest.mark.parametrize("method", ["dygnex_g", "snapshot", "vertex"])
def test_two_processes_match_one_process(tmp_path, method):
    """2 processes x 2 devices == 1 process x 4 devices: every step's loss and the parameters, 1e-5,
    also for the partitioned steps (the pipeline's permutes and vertex's all-gathers cross processes)."""
    out = tmp_path / "mp.npz"
    override = f"schedule.method={method}"
    proc = launcher(
        2, "--devices-per-process", 2, "--script", REPO / "tests" / "multihost_worker.py", "--", out, override
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    multi = np.load(out)
    assert int(multi["processes"]) == 2 and int(multi["devices"]) == 4

    import jax

    from dygnex_jax.config import load_config
    from dygnex_jax.train import Trainer

    single = Trainer(load_config(REPO / "configs" / "smoke.yaml", ["parallel.devices=4", override]))
    single.train_epoch(1)
    losses = np.array([s["loss"] for s in single.last_steps])
    assert len(losses) >= 2
    np.testing.assert_allclose(multi["losses"], losses, rtol=1e-5, atol=1e-5)
    leaves = jax.tree_util.tree_leaves_with_path(jax.device_get(single.params))
    assert len(leaves) == len([k for k in multi.files if k.startswith("[")])
    for path, value in leaves:
        np.testing.assert_allclose(multi[jax.tree_util.keystr(path)], value, rtol=1e-5, atol=1e-5)


def test_two_processes_profile_their_own_steps_and_train_with_them(tmp_path, monkeypatch):
    """``profile`` through the launcher times the steps as 2 processes run them (all-reduce across
    processes included): process 0 alone writes and prints, the cache entry is of 2 processes, and a
    2-process run with ``schedule.cost_model: auto`` finds it (a 1-process run of 2 devices does not)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("DYGNEX_COST_MODELS", str(cache))
    # retain: its one heap must be set before jax.distributed's threads (host_arenas below)
    same = [
        "train.batch_size=4",
        "parallel.bucket_ratio=1.1",
        "parallel.min_bucket=8",
        "parallel.host_malloc=retain",
    ]
    prof = tmp_path / "prof"
    proc = launcher(
        2, "--command", "profile", "--", "--config", "configs/smoke.yaml", "--out", prof,
        "--steps", 6, "--repeats", 1, *same, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[0] profile step 6/6" in proc.stdout and "[1] profile step" not in proc.stdout
    summary = json.loads((prof / "profile.json").read_text())
    assert summary["devices"] == 2 and len(summary["seconds_alone"]) == len(summary["seconds"]) >= 5
    entries = list(cache.glob("*.json"))
    assert len(entries) == 1
    entry = json.loads(entries[0].read_text())
    assert entry["signature"]["processes"] == 2 and entry["signature"]["devices"] == 2
    run = launcher(
        2, "--", "--config", "configs/smoke.yaml", "--out", tmp_path / "run", "train.epochs=1", *same,
        timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "cost model: profiled on this machine" in run.stdout, run.stdout
    arenas = json.loads((tmp_path / "run" / "summary.json").read_text())["host_arenas"]
    assert arenas in (1, None), arenas  # the host allocator set before jax.distributed's threads (glibc)
    one = run_cli("schedule", "--config", "configs/smoke.yaml", "--devices", "2", *same)
    assert one.returncode == 0 and "profiled on this machine" not in one.stderr, one.stderr


def test_two_processes_agree_on_a_profiled_cost_model(tmp_path):
    """A cost-model file given to every process is the run's model on all of them (their digests are
    all-gathered; a first version gathered a 48-bit value as int32, never matched, and every
    multi-process run fell back to the analytic model)."""
    from dygnex_jax.schedule.cost import CostModel

    model = tmp_path / "model.json"
    CostModel(
        np.array([1e-6, 2e-7, 3e-8, 1e-4, 1e-3]), window=3, n_samples=9, source="profile:t", devices=4
    ).save(model)
    out = tmp_path / "mp.npz"
    worker = REPO / "tests" / "multihost_worker.py"
    proc = launcher(
        2, "--devices-per-process", 2, "--script", worker, "--", out, f"schedule.cost_model={model}"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = np.load(out)
    assert str(got["cost_source"]) == "profile:t", str(got["cost_note"])
    assert "different" not in str(got["cost_note"])


DYING = """
import sys, time
i = int(sys.argv[sys.argv.index("--process-id") + 1])
if i == 1:
    time.sleep(0.5)
    print("process 1 fails now", flush=True)
    sys.exit(3)
time.sleep(3600)
"""


def test_launcher_names_the_process_that_died(tmp_path):
    script = tmp_path / "dying.py"
    script.write_text(DYING)
    start = time.monotonic()
    # process 0 sleeps an hour: the launcher must stop it, not wait for it. The bound is generous for a
    # loaded machine (two Python processes took over 115 s to start and stop beside a CI run and two
    # training runs on 2 cores) and still far below the hour a launcher that waited would take.
    proc = launcher(2, "--script", script, "--", timeout=900)
    assert proc.returncode != 0
    assert "error: process 1" in proc.stderr and "code 3" in proc.stderr, proc.stderr
    assert "[1] process 1 fails now" in proc.stdout
    assert time.monotonic() - start < 900


def test_launcher_forwards_ctrl_c(tmp_path):
    script = tmp_path / "wait.py"
    script.write_text(
        "import signal, sys, time\n"
        "signal.signal(signal.SIGINT, lambda *a: (print('got SIGINT', flush=True), sys.exit(5)))\n"
        "print('ready', flush=True)\ntime.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, str(LAUNCH), "2", "--script", str(script), "--"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ready = 0
    while ready < 2:
        line = proc.stdout.readline()
        assert line, "the launcher ended early"
        ready += line.strip().endswith("ready")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert out.count("got SIGINT") == 2, out


def run_train(*args, timeout=60):
    return run_cli("train", *args, timeout=timeout)


def test_unreachable_coordinator_is_a_one_line_error(tmp_path):
    port = __import__("socket").socket()
    port.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    address = f"127.0.0.1:{port.getsockname()[1]}"
    proc = run_train(
        "--coordinator",
        address,
        "--num-processes",
        2,
        "--process-id",
        1,
        "--coordinator-timeout",
        2,
        "--out",
        tmp_path / "run",
    )
    port.close()
    # the message names the 2 s asked for; no wall-clock bound (a loaded machine took 52 s to start Python)
    assert_one_line_error(proc, "cannot reach the coordinator", address, "2 s")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--coordinator", "nohost", "--num-processes", "2", "--process-id", "0"], "not HOST:PORT"),
        (["--coordinator", "h:1", "--num-processes", "2", "--process-id", "2"], "outside 0..1"),
        (["--coordinator", "h:1", "--num-processes", "0", "--process-id", "0"], "must be >= 1"),
        (["--coordinator", "h:1"], "needs all of"),
    ],
)
def test_bad_topology_is_a_one_line_error(flags, needle):
    assert_one_line_error(run_train(*flags), needle)


def test_topology_from_slurm_and_env():
    slurm = {
        "SLURM_NTASKS": "4",
        "SLURM_PROCID": "3",
        "SLURM_JOB_NODELIST": "gpu[07-10,12]",
        "SLURM_JOB_ID": "7",
    }
    spec = distributed.resolve(env=slurm)
    assert (spec.coordinator, spec.num_processes, spec.process_id, spec.source) == (
        "gpu07:12007",
        4,
        3,
        "slurm",
    )
    assert distributed.resolve(env={"SLURM_NTASKS": "1", "SLURM_PROCID": "0"}) is None
    assert distributed.resolve(env={}) is None
    env = {"DYGNEX_COORDINATOR": "10.0.0.1:999", "DYGNEX_NUM_PROCESSES": "2", "DYGNEX_PROCESS_ID": "1"}
    assert distributed.resolve(env=env).coordinator == "10.0.0.1:999"
    flags = distributed.resolve("a:1", 2, 0, env=slurm)  # flags win over the environment
    assert (flags.coordinator, flags.source) == ("a:1", "flags")
    assert distributed.first_slurm_host("node1,node2") == "node1"
    with pytest.raises(UserError, match="not an integer"):
        distributed.resolve(env={**env, "DYGNEX_PROCESS_ID": "x"})


@pytest.mark.slow
def test_cli_two_processes_write_once(tmp_path):
    """The real ``train`` command through the launcher: process 0 alone writes; same losses as 1 x 4."""
    multi, single = tmp_path / "multi", tmp_path / "single"
    proc = launcher(
        2, "--devices-per-process", 2, "--", "--config", "configs/smoke.yaml", "--out", multi,
        "parallel.host_malloc=retain",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[0] epoch 2/2" in proc.stdout and "[1] epoch" not in proc.stdout
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu"}
    ref = subprocess.run(
        [sys.executable, "-m", "dygnex_jax", "train", "--config", "configs/smoke.yaml", "--out", str(single)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert ref.returncode == 0, ref.stderr
    rows = lambda d: [json.loads(x) for x in (d / "steps.jsonl").read_text().splitlines()]  # noqa: E731
    np.testing.assert_allclose([r["loss"] for r in rows(multi)], [r["loss"] for r in rows(single)], rtol=1e-5)
    summary = json.loads((multi / "summary.json").read_text())
    assert summary["devices"] == 4
    if summary["host_arenas"] is not None:  # glibc: the host allocator set before jax.distributed's threads
        assert summary["host_arenas"] == 1, summary["host_arenas"]


def test_two_processes_checkpoint_and_resume(tmp_path):
    """Process 0 saves while process 1 goes on to the next step's collective: the save must not wait
    for process 1 (orbax's default barrier deadlocked here). Then both processes resume from it."""
    out = tmp_path / "run"
    first = launcher(2, "--", "--config", "configs/smoke.yaml", "--out", out, "train.epochs=2", timeout=300)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["epoch_000001", "epoch_000002"]
    again = launcher(2, "--", "--resume", out, "train.epochs=3", timeout=300)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "[0] resuming" in again.stdout and "[0] epoch 3/3" in again.stdout
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2, 3] and all(np.isfinite(r["loss"]) for r in rows)
