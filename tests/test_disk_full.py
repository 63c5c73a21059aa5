"""A run whose disk fills up: one line ``error: cannot write ...``, exit 2, no traceback, and once space is
freed ``train --resume`` ends with exactly the uninterrupted run's results (no work lost).

The disk is a small tmpfs mounted for the test (needs root, as in CI's container; skipped with the
reason elsewhere). Its size chooses where the run fails: in its first files (config, logs), or at the
checkpoint of epoch 1 or 2 (the arrays do not fit: refused before orbax writes anything).
"""

import subprocess

import pytest
from test_faults import RUN, assert_clean, assert_same_as, reference, run  # noqa: F401 (fixture)

from dygnex_jax import checkpoint

SIZES = {"first-files": "8k", "checkpoint-1": "40k", "checkpoint-2": "120k"}


def mount(folder, size: str, remount: bool = False) -> subprocess.CompletedProcess:
    opts = f"remount,size={size}" if remount else f"size={size}"
    return subprocess.run(
        ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(folder)], capture_output=True, text=True
    )


@pytest.fixture
def small_disk(tmp_path, request):
    disk = tmp_path / "disk"
    disk.mkdir()
    made = mount(disk, SIZES[request.param])
    if made.returncode:
        pytest.skip(f"cannot mount a small tmpfs here ({made.stderr.strip() or 'mount failed'}): needs root")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], capture_output=True)


@pytest.mark.parametrize(
    "small_disk",
    [
        pytest.param("first-files", marks=pytest.mark.slow),
        "checkpoint-1",
        pytest.param("checkpoint-2", marks=pytest.mark.slow),
    ],
    indirect=True,
)
def test_disk_full_is_one_line_and_the_run_resumes(small_disk, reference, tmp_path):  # noqa: F811
    out = small_disk / "run"
    code, err = run(tmp_path, "train", "--out", out, *RUN)
    assert_clean(err)
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and lines[-1] == err.strip().splitlines()[-1], err
    assert "cannot write" in lines[0] and "--resume" in lines[0], lines[0]
    done = [e for e, _ in checkpoint.complete(out)]
    assert all(e < 3 for e in done) and not list((out / checkpoint.FOLDER).glob(".tmp-*")), done

    assert mount(small_disk, "64m", remount=True).returncode == 0  # space freed
    code, err = run(tmp_path, "train", "--resume", out, name="resume")
    assert_clean(err)
    assert code == 0, err
    assert_same_as(out, reference)
