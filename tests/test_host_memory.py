"""``parallel.host_malloc`` (host_memory.py): a retained heap ends the page faults of a step's buffers and
changes no result."""

from __future__ import annotations

import sys

import pytest
from helpers import run_python, smoke_run

from dygnex_jax import cost_cache, host_memory
from dygnex_jax.config import load_config

glibc_only = pytest.mark.skipif(host_memory._glibc() is None, reason="needs Linux with glibc (mallopt)")

# A step's pattern: allocate large buffers, write them, free them; the page faults of rounds 3..8.
FAULTS = """
import resource, sys
import numpy as np
from dygnex_jax import host_memory
print("STATE", host_memory.configure(sys.argv[1]))
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()
def step():
    a = np.ones(24 << 20 >> 3)  # 24 MiB: under glibc's largest mmap threshold, freed at the heap top
    b = np.ones(96 << 20 >> 3)  # 96 MiB: above it
    return float(a[-1] + b[-1]), rss()
step(); step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(6):
    _, during = step()
print("FAULTS", resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print("RETURNED", during - rss())
"""


def _faults(mode: str) -> tuple[str, int, int]:
    """(state, page faults of six rounds, bytes the process gave back when a round's buffers were freed)."""
    proc = run_python(["-c", FAULTS, mode], timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    return lines["STATE"], int(lines["FAULTS"]), int(lines["RETURNED"])


@glibc_only
def test_a_retained_heap_keeps_freed_buffers_and_faults_no_page_in_again():
    """Rounds of 120 MiB of buffers. With the C library's defaults a round's freed buffers go back to the
    kernel (the process's resident memory falls by at least the 96 MiB block) and the next round faults
    them in again (how many faults depends on the kernel's page size: transparent huge pages are 2 MiB);
    retained, the memory stays with the process and six rounds fault (almost) nothing."""
    state, faults, returned = _faults("system")
    assert state == "system"
    assert returned >= 96 << 20 and faults > 0
    state, faults, returned = _faults("retain")
    assert state == "retain"
    assert returned < 1 << 20 and faults < 1000


HEAP = """
import sys
import numpy as np
from dygnex_jax import host_memory
host_memory.configure(sys.argv[1])
block = np.ones(64 << 20 >> 3)  # 64 MiB, above glibc's largest mmap threshold
during = host_memory.heap()
del block
after = host_memory.heap()
print("HEAP", *(d[k] for d in (during, after) for k in ("bytes", "in_use", "mapped")))
"""


@pytest.mark.skipif(host_memory.heap() is None, reason="needs glibc >= 2.33 (mallinfo2)")
def test_the_heap_figure_says_where_a_large_block_lives_and_whether_it_is_kept():
    """``heap()`` (summary.json's host_heap): with the C library's defaults a 64 MiB block lives in a
    mapping of its own and goes back to the kernel when freed; retained it lives in the heap, and the heap
    keeps spanning it once it is freed (in_use falls, bytes does not)."""
    mib = 64 << 20
    for mode in ("system", "retain"):
        proc = run_python(["-c", HEAP, mode], timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        line = next(x for x in proc.stdout.splitlines() if x.startswith("HEAP "))
        bytes_, in_use, mapped, bytes_after, in_use_after, mapped_after = map(int, line.split()[1:])
        assert in_use <= bytes_ and in_use_after <= bytes_after
        if mode == "system":
            assert mapped >= mib and mapped_after < mib, line
        else:
            assert mapped < mib and in_use >= mib, line
            assert bytes_after >= mib and in_use_after < mib, line


def test_configure_is_one_way_and_checks_its_mode(monkeypatch):
    monkeypatch.setitem(host_memory._state, "mode", None)
    assert host_memory.state() == "unset"
    with pytest.raises(ValueError, match="parallel.host_malloc must be one of retain, system"):
        host_memory.configure("keep")
    assert host_memory.configure("system") == "system"
    expect = "retain" if host_memory._glibc() is not None else "unsupported"
    assert host_memory.configure("retain") == expect
    assert host_memory.configure("system") == expect  # what holds in the process, not what was asked


def test_cost_profiles_are_kept_apart_by_the_allocator():
    """A profile timed with the default allocator does not price steps run on a retained heap."""

    def sig(mode):
        c = load_config(None, [f"parallel.host_malloc={mode}"])
        return cost_cache.signature(c, num_features=8, layout="flat", devices=2, processes=1, platform="cpu")

    assert sig("retain")["host_malloc"] == "retain"
    assert cost_cache.entry_path(sig("retain")) != cost_cache.entry_path(sig("system"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the retained heap is glibc's")
def test_results_are_bit_identical_with_the_heap_retained_or_not(tmp_path):
    """The same run with parallel.host_malloc retain and system writes the same losses and metrics, and
    its summary says which held."""
    rows, states = [], []
    for mode in ("system", "retain"):
        metrics, summary = smoke_run(tmp_path / mode, f"parallel.host_malloc={mode}")
        rows.append(metrics)
        states.append(summary["host_malloc"])
    assert rows[0] == rows[1] and len(rows[0]) > 0
    expect = "retain" if host_memory._glibc() is not None else "unsupported"
    assert states == ["system", expect]
    if host_memory.arenas() is not None:  # retained before the run's first thread: one heap for all
        assert summary["host_arenas"] == 1, summary["host_arenas"]


ORDER = """
import sys, threading
from dygnex_jax import host_memory
def spawn():
    t = threading.Thread(target=lambda: bytearray(1 << 20))  # a thread that allocates
    t.start(); t.join()
if sys.argv[1] == "thread-first":
    spawn()
host_memory.configure("retain")
spawn(); spawn()
print("ARENAS", host_memory.arenas())
"""


@glibc_only
def test_retain_holds_for_every_thread_only_when_configured_before_the_first_one():
    """glibc fixes its arena limit when a second thread first allocates: configured first, every later
    thread shares the one heap; after a thread, later threads get heaps of their own (whose blocks above
    64 MiB glibc maps and unmaps every time, whatever M_MMAP_MAX says) — why ``train_and_evaluate``
    configures before it starts its interrupt watcher. Fresh processes."""
    counts = {}
    for order in ("configure-first", "thread-first"):
        proc = run_python(["-c", ORDER, order], timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        counts[order] = int(proc.stdout.split("ARENAS")[1])
    assert counts["configure-first"] == 1 and counts["thread-first"] >= 2, counts


def test_the_heap_count_is_none_where_no_temp_file_can_be_written(monkeypatch, tmp_path):
    """``arenas`` is a diagnostic of the summary: an unusable temp folder loses the figure, not the run."""
    import tempfile

    missing = tmp_path / "gone"
    monkeypatch.setattr(tempfile, "tempdir", str(missing))
    assert host_memory.arenas() is None
