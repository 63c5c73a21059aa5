"""Files replaced whole (dygnex_jax.files): a failed or interrupted write leaves the old file and no temp."""

import os
import subprocess
import sys

import pytest

from dygnex_jax.files import atomic_write, atomic_write_text


def test_a_write_replaces_the_file_whole(tmp_path):
    dest = tmp_path / "deep" / "summary.json"
    assert atomic_write_text(dest, "one\n") == dest and dest.read_text() == "one\n"
    atomic_write_text(dest, "two\n")
    assert dest.read_text() == "two\n" and sorted(p.name for p in dest.parent.iterdir()) == ["summary.json"]


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
