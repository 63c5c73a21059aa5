"""Test set-up: 8 fake CPU devices, set before JAX is imported anywhere."""

import os
import sys
from pathlib import Path

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# the persistent compilation cache (parallel.compile_cache: auto) of this test session, in a temp folder
# that subprocesses inherit: tests never write to the user's cache
_TEMP_FOLDERS = []  # made here, removed when the session ends
if "DYGNEX_CACHE" not in os.environ:
    import tempfile

    os.environ["DYGNEX_CACHE"] = tempfile.mkdtemp(prefix="dygnex-test-cache-")
    _TEMP_FOLDERS.append(os.environ["DYGNEX_CACHE"])
# ... and this machine's cost-model cache (schedule.cost_model: auto): an empty one, so that a profile on
# the developer's machine never changes what a test schedules
if "DYGNEX_COST_MODELS" not in os.environ:
    import tempfile

    os.environ["DYGNEX_COST_MODELS"] = tempfile.mkdtemp(prefix="dygnex-test-cost-models-")
    _TEMP_FOLDERS.append(os.environ["DYGNEX_COST_MODELS"])

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DATA_ROOT = Path(os.environ.get("DYGNEX_DATA", REPO.parent / "shared" / "datasets"))


def pytest_configure(config):
    sys.path.insert(0, str(REPO))


def pytest_sessionfinish(session, exitstatus):
    """Remove the session's temp caches (every run of the suite left two folders in /tmp before)."""
    import shutil

    for folder in _TEMP_FOLDERS:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def data_root():
    """The real-dataset folder; tests that need it skip with the reason when it is absent."""
    if not DATA_ROOT.is_dir():
        pytest.skip(f"real datasets not found at {DATA_ROOT} (set DYGNEX_DATA)")
    return DATA_ROOT


def make_toy_graph(num_nodes: int = 120, num_snapshots: int = 16, seed: int = 0, grow: int = 4):
    """A small random undirected dynamic graph whose snapshots differ in size and active nodes."""
    import numpy as np

    from dygnex_jax.data.graph import DynamicGraph

    rng = np.random.default_rng(seed)
    snaps = []
    for t in range(num_snapshots):
        hi = min(num_nodes, num_nodes // 3 + t * grow)
        m = int(rng.integers(10, 6 * hi))
        e = rng.integers(0, hi, size=(m, 2))
        e = e[e[:, 0] != e[:, 1]]
        snaps.append(np.unique(np.concatenate([e, e[:, ::-1]]), axis=0).astype(np.int32))
    return DynamicGraph("toy", num_nodes, snaps)


@pytest.fixture
def toy_graph():
    return make_toy_graph()
