"""Fault injection: a run killed or interrupted anywhere, damaged checkpoints, two runs of one folder.

Acceptance (issue 17): after any of these the run directory is resumable in place; a resumed run ends
with exactly the metrics, steps and parameters of an uninterrupted one (the smoke config, 3 epochs, as in
test_checkpoint.py); every failure the user sees is exit code 2 and one line ``error: ...``, an interrupt
exit code 130; no traceback on stderr.

Where a process stops is chosen with the test hook ``DYGNEX_TEST_PAUSE=<point>@<epoch>``
(``runlock.pause_point``: the process prints ``paused at ...`` and waits there), so no case depends on
timing; the tests poll for that line with bounds of minutes. Points: ``epoch`` (before an epoch trains)
and, inside ``checkpoint.save``, ``save-start`` (temporary folder made), ``save-state`` (arrays written),
``save-meta`` (``meta.json`` written, not yet renamed), ``save-commit`` (renamed).

Counted cases (default suite / ``-m slow``):

* kill during a run (``test_stop_during_a_run``): SIGKILL and SIGINT at a save point of epoch 2, resume,
  compare: 2 / 8 more (every signal x point);
* the backstop (``test_ctrl_c_backstop_when_a_save_does_not_end``): 1 / 0;
* interrupted before the first checkpoint, re-run in place (``test_interrupted_before_first_checkpoint``):
  2 / 2 more;
* two runs of one folder, then a stale lock (``test_second_run_of_a_folder_is_refused``): 1 / 0;
* damaged newest checkpoint, restore falls back (``test_damaged_checkpoint_falls_back``, in-process):
  every file x truncate / empty / garbage / missing: 32 / 0; format-1 checkpoint without hashes: 1 / 0;
  the cases cover every file (``test_every_checkpoint_file_is_covered``): 1 / 0;
* damaged newest checkpoint through the CLI (``test_damaged_checkpoint_cli``): 1 / 31 more;
* every checkpoint damaged (``test_no_checkpoint_restores``): 1 / 0;
* the lock alone (in-process): stale, foreign host, unreadable, held, released: 5 / 0;
* Ctrl-C at random moments (``test_ctrl_c_at_random_moments``): 0 / 1.
"""

import asyncio
import gc
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_one_line_error
from test_checkpoint import STEP_WALL, WALL, arrays, rows

from dygnex_jax import checkpoint, runlock
from dygnex_jax.checkpoint import FOLDER
from dygnex_jax.errors import UserError

REPO = Path(__file__).resolve().parents[1]
SMOKE = str(REPO / "configs" / "smoke.yaml")
RUN = ["--config", SMOKE, "train.epochs=3"]
BOUND = 600  # seconds: every wait is bounded by minutes, never by a tight figure
SAVE_POINTS = ("save-start", "save-state", "save-meta", "save-commit")

# ---------------------------------------------------------------------------------------------- helpers


class Run:
    """``python -m dygnex_jax ARGS`` started in the background, stderr to a file."""

    def __init__(self, log: Path, *args, pause: str | None = None, grace: float = BOUND):
        env = {
            **os.environ,
            "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
            "JAX_PLATFORMS": "cpu",
            runlock.GRACE_ENV: str(grace),  # the graceful path, whatever the machine's load
        }
        env.pop(runlock.PAUSE_ENV, None)
        if pause:
            env[runlock.PAUSE_ENV] = pause
        self.log = log
        with open(log, "w") as err:
            cmd = [sys.executable, "-m", "dygnex_jax", *map(str, args)]
            self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=err)

    @property
    def stderr(self) -> str:
        return self.log.read_text()

    def wait_paused(self) -> None:
        deadline = time.monotonic() + BOUND
        while "paused at " not in self.stderr:
            assert self.proc.poll() is None, f"ended before its pause point:\n{self.stderr}"
            assert time.monotonic() < deadline, self.stderr
            time.sleep(0.1)

    def stop(self, sig: int) -> int:
        self.proc.send_signal(sig)
        return self.wait()

    def wait(self) -> int:
        try:
            return self.proc.wait(timeout=BOUND)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def run(tmp_path: Path, *args, name: str = "run") -> tuple[int, str]:
    """Run to the end -> (exit code, stderr)."""
    r = Run(tmp_path / f"{name}.log", *args)
    return r.wait(), r.stderr


def assert_clean(stderr: str) -> None:
    assert "Traceback" not in stderr and "Fatal Python error" not in stderr, stderr


def assert_same_as(out: Path, reference: Path) -> None:
    """The run in ``out`` ended with the metrics, steps and parameters of ``reference``."""
    assert rows(out / "metrics.jsonl", WALL) == rows(reference / "metrics.jsonl", WALL)
    assert rows(out / "steps.jsonl", STEP_WALL) == rows(reference / "steps.jsonl", STEP_WALL)
    ours, theirs = checkpoint.latest(out), checkpoint.latest(reference)
    assert ours.epoch == theirs.epoch == 3
    for x, y in zip(arrays(ours.path), arrays(theirs.path), strict=True):
        np.testing.assert_array_equal(x, y)
    final = lambda run: json.loads((run / "summary.json").read_text())["final"]  # noqa: E731
    assert final(out) == final(reference)
    assert not (out / runlock.LOCK_FILE).exists()


def epochs_saved(out: Path) -> list[int]:
    return [e for e, _ in checkpoint.complete(out)]


def copy_run(reference: Path, dest: Path, upto: int) -> Path:
    """A copy of ``reference`` as a run killed after the checkpoint of epoch ``upto`` (later rows kept)."""
    shutil.copytree(reference, dest)
    for epoch, path in checkpoint.complete(dest):
        if epoch > upto:
            shutil.rmtree(path)
    (dest / "summary.json").unlink()
    return dest


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The smoke config, 3 epochs, uninterrupted, in its own process."""
    out = tmp_path_factory.mktemp("reference") / "run"
    code, err = run(out.parent, "train", "--out", out, *RUN)
    assert code == 0, err
    return out


# ------------------------------------------------------------------------------- kills and Ctrl-C


def _stop_cases():
    default = {("SIGKILL", "save-state"), ("SIGINT", "save-state")}
    for sig in ("SIGKILL", "SIGINT"):
        for point in (*SAVE_POINTS, "epoch"):
            marks = () if (sig, point) in default else (pytest.mark.slow,)
            yield pytest.param(sig, point, marks=marks, id=f"{sig}-{point}")


@pytest.mark.parametrize("sig,point", list(_stop_cases()))
def test_stop_during_a_run(sig, point, reference, tmp_path):
    """Killed (SIGKILL) or interrupted (SIGINT) at ``point`` of epoch 2; resume; same as uninterrupted.
    A Ctrl-C inside a save lets the save complete first; a kill there leaves it unfinished, never
    taken for complete."""
    out = tmp_path / "run"
    first = Run(tmp_path / "first.log", "train", "--out", out, *RUN, pause=f"{point}@2")
    first.wait_paused()
    code = first.stop(getattr(signal, sig))
    kept = 2 if point == "save-commit" or (sig == "SIGINT" and point != "epoch") else 1
    assert epochs_saved(out) == list(range(1, kept + 1))
    if sig == "SIGINT":
        assert code == 130, first.stderr
        assert_clean(first.stderr)
        assert f"interrupted: continue with `python -m dygnex_jax train --resume {out}`" in first.stderr
        assert not (out / runlock.LOCK_FILE).exists()  # released on the way out
    else:
        assert code == -signal.SIGKILL

    code, err = run(tmp_path, "train", "--resume", out, name="resume")
    assert code == 0, err
    assert_clean(err)
    assert f"resuming {out} from epoch_{kept:06d}" in err
    assert ("took over the stale lock" in err) == (sig == "SIGKILL")
    assert not list((out / FOLDER).glob(".tmp-*"))  # the unfinished save was cleaned up
    assert_same_as(out, reference)


def test_ctrl_c_backstop_when_a_save_does_not_end(reference, tmp_path):
    """A Ctrl-C while a save hangs: the backstop exits with 130 after the grace period, the unfinished
    save is not taken for complete, and the run resumes from the checkpoint before it."""
    out = tmp_path / "run"
    first = Run(tmp_path / "first.log", "train", "--out", out, *RUN, pause="save-state@2:hold", grace=2)
    first.wait_paused()
    assert first.stop(signal.SIGINT) == 130, first.stderr
    assert "interrupted (still running 2 s after Ctrl-C): exiting now; continue with" in first.stderr
    assert_clean(first.stderr)
    assert epochs_saved(out) == [1] and not (out / runlock.LOCK_FILE).exists()
    code, err = run(tmp_path, "train", "--resume", out, name="resume")
    assert code == 0, err
    assert_same_as(out, reference)


@pytest.mark.parametrize(
    "sig,again",
    [
        pytest.param("SIGKILL", "out", id="SIGKILL-then-out"),
        pytest.param("SIGINT", "resume", id="SIGINT-then-resume"),
        pytest.param("SIGKILL", "resume", id="SIGKILL-then-resume", marks=pytest.mark.slow),
        pytest.param("SIGINT", "out", id="SIGINT-then-out", marks=pytest.mark.slow),
    ],
)
def test_interrupted_before_first_checkpoint(sig, again, reference, tmp_path):
    """Stopped in epoch 2 of a run that checkpoints only at its end (epoch 1's rows are written, no
    checkpoint): the same ``train --out`` command starts it over in place, and so does ``--resume``."""
    out = tmp_path / "run"
    args = ["train", "--out", out, *RUN, "train.checkpoint_every=0"]
    first = Run(tmp_path / "first.log", *args, pause="epoch@2")
    first.wait_paused()
    first.stop(getattr(signal, sig))
    assert epochs_saved(out) == [] and len(rows(out / "metrics.jsonl", set())) == 1

    code, err = run(tmp_path, *(args if again == "out" else ["train", "--resume", out]), name="again")
    assert code == 0, err
    assert_clean(err)
    if again == "out":
        assert f"{out} holds this run, interrupted before its first checkpoint (1 epoch row(s))" in err
    else:
        assert f"restarting {out} from epoch 1" in err
    assert [r["epoch"] for r in rows(out / "metrics.jsonl", set())] == [1, 2, 3]
    assert rows(out / "metrics.jsonl", WALL) == rows(reference / "metrics.jsonl", WALL)
    for x, y in zip(
        arrays(checkpoint.latest(out).path), arrays(checkpoint.latest(reference).path), strict=True
    ):
        np.testing.assert_array_equal(x, y)


def test_second_run_of_a_folder_is_refused(reference, tmp_path):
    """While a resume trains, a second ``--resume`` and an ``--out`` of the same folder are refused with
    one line naming the holder; after the holder is killed, its stale lock is taken over with a note."""
    out = copy_run(reference, tmp_path / "run", upto=2)
    holder = Run(tmp_path / "holder.log", "train", "--resume", out, pause="epoch@3")
    holder.wait_paused()
    for i, args in enumerate((["--resume", out], ["--out", out, *RUN])):
        second = subprocess.CompletedProcess([], 0, "", "")
        second.returncode, second.stderr = run(tmp_path, "train", *args, name=f"second{i}")
        assert_one_line_error(second, f"run directory '{out}' is in use by process {holder.proc.pid} on host")
    assert holder.stop(signal.SIGKILL) == -signal.SIGKILL

    code, err = run(tmp_path, "train", "--resume", out, name="after")
    assert code == 0, err
    assert_clean(err)
    assert f"took over the stale lock '{out / runlock.LOCK_FILE}' of process {holder.proc.pid}" in err
    assert_same_as(out, reference)


@pytest.mark.slow
def test_ctrl_c_at_random_moments(reference, tmp_path):
    """Ctrl-C at moments spread over a whole run (compiling, training, evaluating, saving): always exit
    130 with the run resumable to the uninterrupted result (the delays only spread the moments; any
    moment must pass)."""
    for i, delay in enumerate((0.0, 1.0, 2.0, 3.0, 4.0, 6.0)):
        out = tmp_path / f"run{i}"
        first = Run(tmp_path / f"first{i}.log", "train", "--out", out, *RUN)
        deadline = time.monotonic() + BOUND
        while "synthetic:" not in first.stderr and first.proc.poll() is None:  # the run has started
            assert time.monotonic() < deadline, first.stderr
            time.sleep(0.05)
        time.sleep(delay)
        code = first.stop(signal.SIGINT)
        # a run that had written its summary may end 0, or die of the signal on its way out of Python
        finished = (out / "summary.json").exists()
        assert code == 130 or (finished and code in (0, -signal.SIGINT)), first.stderr
        assert_clean(first.stderr)
        if code == 130 and (out / "config.yaml").exists():
            code, err = run(tmp_path, "train", "--resume", out, name=f"resume{i}")
            assert code == 0, err
        if (out / "summary.json").exists():
            assert_same_as(out, reference)


# ------------------------------------------------------------------------------ damaged checkpoints

# Every file of a checkpoint, by pattern (test_every_checkpoint_file_is_covered keeps the list whole).
FILES = (
    "meta.json",
    "state/_METADATA",
    "state/_CHECKPOINT_METADATA",
    "state/commit_success.txt",
    "state/manifest.ocdbt",
    "state/d/*",
    "state/ocdbt.process_0/manifest.ocdbt",
    "state/ocdbt.process_0/d/*",
)
DAMAGE = ("truncate", "empty", "garbage", "missing")


def damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "missing":
        path.unlink()
    else:
        cut = {"truncate": data[: len(data) // 2], "empty": b""}
        path.write_bytes(cut[how] if how in cut else bytes(b ^ 0x5A for b in data))


def why(rel: str, how: str) -> str:
    """What the skip note must say for ``rel`` damaged ``how``."""
    if rel == "meta.json":
        return {
            "truncate": "meta.json is not valid JSON",
            "empty": "meta.json is empty",
            "garbage": "meta.json is not valid JSON",
            "missing": "meta.json is missing",
        }[how]
    return {
        "truncate": f"{rel} is cut short",
        "empty": f"{rel} is empty",
        "garbage": f"{rel} is corrupt",
        "missing": f"{rel} is missing",
    }[how]


@pytest.fixture(scope="module")
def trainer(reference):
    """An in-process trainer of the reference's config, to restore into."""
    from dygnex_jax.config import load_config
    from dygnex_jax.train import Trainer

    return Trainer(load_config(reference / "config.yaml"))


def restore_fallback(trainer, run: Path, rel_pattern: str, how: str) -> None:
    """Damage each file matching ``rel_pattern`` of the newest checkpoint in turn: the restore skips it
    with one note naming the file and why, and restores the one before, exactly."""
    newest = run / FOLDER / "epoch_000003"
    before = arrays(run / FOLDER / "epoch_000002")
    targets = sorted(newest.glob(rel_pattern))
    assert targets, rel_pattern
    for target in targets:
        rel = target.relative_to(newest).as_posix()
        keep = run.parent / "keep"
        shutil.copytree(newest, keep)
        damage(target, how)
        notes = []
        ckpt, history = checkpoint.restore_newest(trainer, run, notes.append)
        assert ckpt.epoch == 2 and [r["epoch"] for r in history] == [1, 2]
        assert len(notes) == 1 and notes[0].startswith("skipping checkpoint epoch_000003: "), notes
        assert why(rel, how) in notes[0], notes
        for x, y in zip(host_arrays(trainer), before, strict=True):
            np.testing.assert_array_equal(x, y)
        shutil.rmtree(newest)
        keep.rename(newest)


def host_arrays(trainer) -> list[np.ndarray]:
    """The trainer's parameters and optimiser state in the order ``arrays`` reads a checkpoint's."""
    import jax

    from dygnex_jax import parallel

    tree = {"params": trainer.params, "opt_state": jax.tree.leaves(trainer.opt_state)}
    return [np.asarray(x) for x in jax.tree.leaves(parallel.to_host(tree))]


@pytest.mark.parametrize("how", DAMAGE)
@pytest.mark.parametrize("rel", FILES)
def test_damaged_checkpoint_falls_back(rel, how, reference, trainer, tmp_path):
    run = copy_run(reference, tmp_path / "run", upto=3)
    restore_fallback(trainer, run, rel, how)


def test_every_checkpoint_file_is_covered(reference):
    newest = checkpoint.latest(reference).path
    files = {p.relative_to(newest).as_posix() for p in newest.rglob("*") if p.is_file()}
    covered = {p.relative_to(newest).as_posix() for pattern in FILES for p in newest.glob(pattern)}
    assert files == covered, files ^ covered


def damage_as_format_1(folder: Path) -> None:
    """Make the checkpoint in ``folder`` one of format 1 (no file hashes in meta.json) and garble its arrays."""
    meta = json.loads((folder / "meta.json").read_text())
    del meta["files"]
    (folder / "meta.json").write_text(json.dumps({**meta, "version": 1}))
    for data in (folder / "state" / "d").iterdir():
        damage(data, "garbage")


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_damaged_checkpoint_of_format_1_falls_back(reference, trainer, tmp_path):
    """A checkpoint without file hashes (format 1): the damage shows as orbax's read error, which is
    caught, said in one line, and the one before restores (also after orbax failed in this process);
    the reads orbax left behind raise nothing more (an unraisable exception fails the test)."""
    run = copy_run(reference, tmp_path / "run", upto=3)
    damage_as_format_1(run / FOLDER / "epoch_000003")
    notes = []
    ckpt, _ = checkpoint.restore_newest(trainer, run, notes.append)
    assert ckpt.epoch == 2
    assert len(notes) == 1 and "epoch_000003: orbax cannot read its arrays" in notes[0], notes


def _cli_damage_cases():
    for rel in FILES:
        for how in DAMAGE:
            slow = (rel, how) != ("state/d/*", "garbage")
            yield pytest.param(rel, how, marks=(pytest.mark.slow,) if slow else (), id=f"{rel}-{how}")


@pytest.mark.parametrize("rel,how", list(_cli_damage_cases()))
def test_damaged_checkpoint_cli(rel, how, reference, tmp_path):
    """``train --resume`` of a run whose newest checkpoint is damaged: one line says which and why, the
    run goes on from the one before and ends as the uninterrupted run did (its epoch 3 checkpoint
    rewritten)."""
    run = copy_run(reference, tmp_path / "run", upto=3)
    target = sorted((run / FOLDER / "epoch_000003").glob(rel))[0]
    damage(target, how)
    code, err = run_cli_resume(tmp_path, run)
    assert code == 0, err
    assert_clean(err)
    skipped = [line for line in err.splitlines() if line.startswith("skipping checkpoint")]
    assert len(skipped) == 1 and skipped[0].startswith("skipping checkpoint epoch_000003: "), err
    assert why(target.relative_to(run / FOLDER / "epoch_000003").as_posix(), how) in skipped[0]
    assert f"resuming {run} from epoch_000002" in err
    assert_same_as(run, reference)


def test_damaged_checkpoint_of_format_1_cli(reference, tmp_path):
    """``train --resume`` past a damaged checkpoint of format 1: orbax's read error is the one line (the
    reads orbax left behind print no tracebacks), and the run ends as the uninterrupted one did."""
    run = copy_run(reference, tmp_path / "run", upto=3)
    damage_as_format_1(run / FOLDER / "epoch_000003")
    code, err = run_cli_resume(tmp_path, run)
    assert code == 0, err
    assert_clean(err)
    assert "Event loop is closed" not in err, err
    skipped = [line for line in err.splitlines() if line.startswith("skipping checkpoint")]
    assert len(skipped) == 1 and "epoch_000003: orbax cannot read its arrays" in skipped[0], err
    assert_same_as(run, reference)


def run_cli_resume(tmp_path: Path, out: Path) -> tuple[int, str]:
    return run(tmp_path, "train", "--resume", out, name="resume")


def test_no_checkpoint_restores(reference, tmp_path):
    """Every checkpoint damaged: one line ``error: ...`` naming each and why, exit 2, nothing changed."""
    out = copy_run(reference, tmp_path / "run", upto=3)
    for _, path in checkpoint.complete(out):
        damage(path / "meta.json", "truncate")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    result = subprocess.CompletedProcess([], 0, "", "")
    result.returncode, result.stderr = run(tmp_path, "train", "--resume", out)
    assert_one_line_error(
        result, f"--resume '{out}': none of its checkpoints restores (epoch_000003: meta.json is not valid"
    )
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


# ------------------------------------------------------------------------------------- the lock alone


def dead_pid() -> int:
    """The pid of a process of this host that has ended (and was reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def write_lock(folder: Path, **record) -> Path:
    path = folder / runlock.LOCK_FILE
    path.write_text(json.dumps({**runlock.this_process(), **record}))
    return path


def test_lock_stale_is_taken_over_with_a_note(tmp_path):
    write_lock(tmp_path, pid=dead_pid())
    notes = []
    with runlock.RunLock(tmp_path, notes.append) as lock:
        lock.acquire()
        assert json.loads((tmp_path / runlock.LOCK_FILE).read_text())["pid"] == os.getpid()
    assert len(notes) == 1 and "took over the stale lock" in notes[0] and "no longer running" in notes[0]
    assert not (tmp_path / runlock.LOCK_FILE).exists()


def test_lock_of_another_host_is_not_taken(tmp_path):
    path = write_lock(tmp_path, host="some-other-host")
    before = path.read_bytes()
    with pytest.raises(UserError, match="in use by process .* on host some-other-host .*delete"):
        runlock.RunLock(tmp_path).acquire()
    assert path.read_bytes() == before


def test_lock_unreadable_is_taken_over(tmp_path):
    (tmp_path / runlock.LOCK_FILE).write_bytes(b"\x00garbage")
    notes = []
    with runlock.RunLock(tmp_path, notes.append) as lock:
        lock.acquire()
    assert len(notes) == 1 and "unreadable" in notes[0]


def test_lock_held_is_refused_and_released_on_exit(tmp_path):
    """Two locks of one folder (flock: also within one process); the holder's exit frees it."""
    first = runlock.RunLock(tmp_path)
    first.acquire()
    with pytest.raises(UserError, match=f"is in use by process {os.getpid()} on host"):
        runlock.RunLock(tmp_path).acquire()
    first.release()
    assert not (tmp_path / runlock.LOCK_FILE).exists()
    with runlock.RunLock(tmp_path) as again:
        again.acquire()


def test_lock_of_a_live_process_without_flock_is_refused(tmp_path):
    """A record of a running process of this host (here: this one) whose flock is gone (a filesystem
    without locks): still in use."""
    write_lock(tmp_path)
    with pytest.raises(UserError, match="wait for that run to end"):
        runlock.RunLock(tmp_path).acquire()


def test_a_damaged_checkpoints_unread_reads_print_nothing(caplog):
    """After orbax gave up on a damaged checkpoint (``checkpoint._quiet_closed_loop_callbacks``), a
    tensorstore read collected with its error unread logs nothing (asyncio's "Task exception was never
    retrieved", which would print a traceback after the one line), while another task's unread error
    and asyncio's other messages still go out."""

    async def failing(text):
        raise ValueError(text)

    checkpoint._quiet_closed_loop_callbacks()
    loop = asyncio.new_event_loop()
    try:
        read = loop.create_task(failing("DATA_LOSS: Error opening zarr [tensorstore_spec='{}']"))
        mine = loop.create_task(failing("a user's own task"))
        loop.run_until_complete(asyncio.sleep(0))
        assert read.done() and mine.done()
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            del read
            gc.collect()
            del mine
            gc.collect()
            loop.call_exception_handler({"message": "another asyncio error"})
    finally:
        loop.close()
    got = [
        (r.getMessage().splitlines()[0], str(r.exc_info[1]) if r.exc_info else None) for r in caplog.records
    ]
    assert got == [
        ("Task exception was never retrieved", "a user's own task"),
        ("another asyncio error", None),
    ], got
