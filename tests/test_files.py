"""Files replaced whole (dygnex_jax.files): a failed or interrupted write leaves the old file and no temp."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from dygnex_jax.files import atomic_write, atomic_write_text, json_text, staged


def test_a_write_replaces_the_file_whole(tmp_path):
    dest = tmp_path / "deep" / "summary.json"
    assert atomic_write_text(dest, "one\n") == dest and dest.read_text() == "one\n"
    atomic_write_text(dest, "two\n")
    assert dest.read_text() == "two\n" and sorted(p.name for p in dest.parent.iterdir()) == ["summary.json"]


def test_a_new_file_gets_the_mode_of_a_plain_open_and_a_replaced_one_keeps_its_own(tmp_path):
    plain = tmp_path / "plain"
    plain.write_text("x")
    new = atomic_write_text(tmp_path / "new", "x")
    assert new.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777
    os.chmod(plain, 0o640)
    atomic_write_text(plain, "y")
    assert plain.stat().st_mode & 0o777 == 0o640 and plain.read_text() == "y"


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    dest = tmp_path / "config.yaml"
    dest.write_text("old\n")

    def half_then_fail(fh):
        fh.write(b"ne")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        atomic_write(dest, half_then_fail)
    assert dest.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["config.yaml"]


def test_a_killed_writer_leaves_the_old_file(tmp_path):
    """A process killed in the middle of a write (SIGKILL: no cleanup runs) leaves ``dest`` as it was;
    only a hidden ``.part`` file can remain."""
    dest = tmp_path / "metrics.jsonl"
    dest.write_text("kept\n")
    code = (
        "import os, signal, sys\n"
        "from dygnex_jax.files import atomic_write\n"
        "def write(fh):\n"
        "    fh.write(b'half')\n"
        "    fh.flush()\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "atomic_write(sys.argv[1], write)\n"
    )
    got = subprocess.run([sys.executable, "-c", code, str(dest)], capture_output=True, timeout=600)
    assert got.returncode == -9, got.stderr
    assert dest.read_text() == "kept\n"
    assert all(p.name == "metrics.jsonl" or p.name.startswith(".metrics.jsonl.") for p in tmp_path.iterdir())


def test_the_library_writes_its_outputs_through_the_atomic_writer():
    """The run's files (summary, config, metrics, cost model, profile, inspect and schedule JSON, the
    cost-model cache) are not written with a bare ``write_text``: a kill or a full disk would leave half.
    The one allowed: a checkpoint's meta.json, written inside the checkpoint's temp folder, which is
    renamed whole."""
    root = os.path.join(os.path.dirname(__file__), "..", "dygnex_jax")
    allowed = {"checkpoint.py": 1}
    names = ["train.py", "checkpoint.py", "config.py", "profile.py", "inspect_data.py", "plan_report.py"]
    for name in [*names, "cost_cache.py", os.path.join("schedule", "cost.py")]:
        with open(os.path.join(root, name)) as f:
            text = f.read()
        assert text.count(".write_text(") == allowed.get(name, 0), name
        assert 'NamedTemporaryFile("w"' not in text, name


@pytest.fixture
def full_disk(tmp_path):
    """A 16 KiB tmpfs (needs root, as in CI's container; skipped elsewhere with the reason)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(disk)], capture_output=True, text=True
    )
    if made.returncode:
        pytest.skip(f"cannot mount a small tmpfs here ({made.stderr.strip() or 'mount failed'}): needs root")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_a_plot_on_a_full_disk_is_one_line_and_leaves_no_half_file(full_disk):
    """The ``schedule`` command's JSON fits on the disk, its plot does not: exit 2, one ``error:`` line
    naming the plot, and neither file (the two are staged together) nor a temp file."""
    repo = os.path.join(os.path.dirname(__file__), "..")
    args = ["schedule", "--config", os.path.join(repo, "configs", "smoke.yaml"), "--devices", "2"]
    args += ["--json", str(full_disk / "s.json"), "--plot", str(full_disk / "s.png")]
    got = subprocess.run(
        [sys.executable, "-m", "dygnex_jax", *args], capture_output=True, text=True, timeout=900
    )
    assert got.returncode == 2, got.stderr
    assert got.stderr.count("error: ") == 1 and "Traceback" not in got.stderr, got.stderr
    last = got.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "s.png" in last and "No space left" in last, last
    assert sorted(p.name for p in full_disk.iterdir()) == []


def test_staged_writes_land_together(tmp_path):
    """Inside ``staged`` nothing appears until the block ends; then every file at once."""
    a, b = tmp_path / "a.json", tmp_path / "new" / "deeper" / "b.png"
    a.write_text("old")
    with staged():
        atomic_write_text(a, "A")
        atomic_write_text(b, "B")
        assert a.read_text() == "old" and not b.exists()
        with staged():  # a nested block leaves the decision to the outer one
            atomic_write_text(tmp_path / "c", "C")
        assert not (tmp_path / "c").exists()
    assert (a.read_text(), b.read_text(), (tmp_path / "c").read_text()) == ("A", "B", "C")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "c", "new"]


def test_a_failed_staged_block_leaves_nothing_it_wrote_nor_folders_it_made(tmp_path):
    """The second file fails (a full disk): the first is not replaced, no temp remains, and the folders
    the block created are gone; a folder that existed before stays."""
    (tmp_path / "kept").mkdir()
    first = tmp_path / "kept" / "x.json"
    first.write_text("old")

    def fail(fh):
        fh.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"), staged():
        atomic_write_text(first, "new")
        atomic_write_text(tmp_path / "made" / "sub" / "y.json", "y")
        atomic_write(tmp_path / "made" / "z.png", fail)
    assert first.read_text() == "old"
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == ["kept", "kept/x.json"]


def test_json_text_is_strict_json():
    """NaN and infinities (numpy's too) become null, numpy numbers plain ones; the text parses with a
    parser that rejects NaN, and finite values survive exactly."""
    row = {
        "loss": float("nan"),
        "map": np.float32(0.25),
        "inf": [np.inf, -np.inf],
        "n": np.int64(3),
        "arr": np.array([1.5, np.nan]),
        "s": "nan",
        "ok": 0.1,
    }
    text = json_text(row)

    def reject(token):
        raise ValueError(token)

    got = json.loads(text, parse_constant=reject)
    assert got == {
        "loss": None,
        "map": 0.25,
        "inf": [None, None],
        "n": 3,
        "arr": [1.5, None],
        "s": "nan",
        "ok": 0.1,
    }
