"""How the process's C library hands out host memory (``parallel.host_malloc``). No JAX.

XLA:CPU (and numpy) allocate a step's buffers with ``malloc`` and free them when the step ends. glibc
serves a block above its mmap threshold (at most 32 MiB) with fresh pages from the kernel, and gives a
freed heap top back to the kernel, so every step of a large model faults all of its buffers in again,
page by page, zeroed by the kernel. Measured on T-GCN, UC Irvine, 16 windows on 2 fake CPU devices
(``tools/bench_step.py``'s step): 660,000 minor page faults and 2.5 s of kernel time in a 4.4 s step.

``retain`` tells glibc (``mallopt``) to serve every block from one heap (one arena, no mmap'd blocks,
1 GiB of top padding) and never to give freed memory back (no trim): the buffers of the last step are
reused by the next, 0 page faults per step, 2.6-3.1 s steps. ``system`` (the default) leaves the C
library as it is. The setting is process-wide and one-way (a process that retained keeps retaining); it
changes no result, only where buffers live. Without glibc (macOS, musl) it does nothing and says so.

What ``retain`` costs (2026-12-06, ``tools/bench_host_malloc.py``): XLA asks for its buffers with
``posix_memalign(64, n)``, and glibc before 2.38 serves an aligned request by asking its heap for
n + 64 + 32 bytes; the hole a freed n-byte buffer leaves fits it only while its neighbours are free too.
When another allocation lands beside it (the next step packed on the prefetch thread), the next step's
buffer goes to fresh heap and the hole stays empty: GCRN-GRU at B = 32, one 2.55 GB temporary buffer a
step, held 5.1-9.6 GB resident under ``retain`` against 3.0 GB under ``system`` (``heap()`` showed 6.5 GB
of the heap free). With many fake devices the one arena's lock also slows XLA's threads (EvolveGCN-O on
8 devices). So ``retain`` pays where a step's buffers are large and re-used in place (T-GCN, 2 devices:
0.7-0.9x the step) and costs memory or time elsewhere.

``configure`` must come before any other thread of the process allocates: glibc fixes its limit of
arenas (one heap per thread, up to 8 per core) when a second thread first allocates, and a later
``M_ARENA_MAX`` does not change it. XLA's worker threads then get heaps of their own, and a block above
a thread heap's 64 MiB is mapped for every step and unmapped after it whatever ``M_MMAP_MAX`` says
(glibc's fallback for such heaps). Measured on T-GCN, UC Irvine, 2 fake devices, B = 16, a 675 MiB
step buffer: the CLI's interrupt watcher thread, started before the Trainer, left 691,000 page faults
and 1.3-2.0 s of kernel time in every 3.6-4.9 s epoch; configured first, 3 faults and 2.7-3.4 s epochs.
``train.train_and_evaluate`` configures before it starts any thread, the ``train`` and ``profile``
commands before ``jax.distributed`` starts its own (a 2-process run had 16 heaps); ``arenas`` counts the heaps
(``summary.json``: ``host_arenas``, 1 when it held).
"""

from __future__ import annotations

import ctypes
import sys
import tempfile

CHOICES = ("retain", "system")

# mallopt parameters (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8
_RETAIN = (
    # an int; glibc stores it as a size_t, so -1 is the largest threshold there is: never trim
    (_M_TRIM_THRESHOLD, -1),
    (_M_MMAP_MAX, 0),  # no block from mmap: every block from the heap, so a freed one is reused
    (_M_ARENA_MAX, 1),  # one heap for every thread (XLA's workers free what another allocated)
    (_M_TOP_PAD, 1 << 30),  # grow the heap in large steps
)

_state = {"mode": None}  # what this process runs under once ``configure`` was called


def _glibc():
    """The process's C library when it is glibc (it has ``mallopt``), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
    except OSError:  # pragma: no cover - a process without a dynamic C library
        return None
    if not (hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "mallopt")):
        return None
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    libc.mallopt.restype = ctypes.c_int
    return libc


def configure(mode: str) -> str:
    """Apply ``parallel.host_malloc`` ``mode`` to this process; returns ``state()``."""
    if mode not in CHOICES:
        raise ValueError(f"parallel.host_malloc must be one of {', '.join(CHOICES)}, got {mode!r}")
    if _state["mode"] == "retain" or mode == "system":
        _state["mode"] = _state["mode"] or "system"
        return state()
    libc = _glibc()
    if libc is None:
        _state["mode"] = "unsupported"
        return state()
    ok = all(libc.mallopt(param, value) == 1 for param, value in _RETAIN)
    _state["mode"] = "retain" if ok else "unsupported"
    return state()


def arenas() -> int | None:
    """How many malloc arenas (heaps) glibc holds in this process (``malloc_info``), None without glibc.
    Under ``retain`` it is 1 when ``configure`` came first; more means threads allocated before it."""
    libc = _glibc()
    if libc is None or not hasattr(libc, "malloc_info"):
        return None
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
    libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
    libc.fclose.argtypes = (ctypes.c_void_p,)
    try:  # a diagnostic: a temp folder that refuses the file costs the figure, never the run
        with tempfile.NamedTemporaryFile("r", suffix=".xml") as f:
            stream = libc.fopen(f.name.encode(), b"w")
            if not stream:
                return None
            libc.malloc_info(0, stream)
            libc.fclose(stream)
            return f.read().count("<heap nr=")
    except OSError:
        return None


class _MallInfo2(ctypes.Structure):  # glibc >= 2.33's struct mallinfo2
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()
    ]


def heap() -> dict | None:
    """The memory glibc's malloc holds now (``mallinfo2``): ``bytes`` its heaps span, ``in_use`` the part
    allocated, ``mapped`` the blocks in mappings of their own; None without glibc >= 2.33. Under
    ``retain`` ``bytes - in_use`` between steps is freed memory kept for reuse, or left in holes a step's
    buffers no longer fit (module docstring)."""
    libc = _glibc()
    if libc is None or not hasattr(libc, "mallinfo2"):
        return None
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return {"bytes": int(info.arena), "in_use": int(info.uordblks), "mapped": int(info.hblkhd)}


def state() -> str:
    """What this process runs under: "retain", "system", "unsupported" (no glibc: the C library's own
    behaviour), or "unset" (``configure`` not called)."""
    return _state["mode"] or "unset"
