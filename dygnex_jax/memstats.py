"""Peak memory of this process, for the run's records (``metrics.jsonl`` rows, ``summary.json``).

``peak_rss_bytes``: the process's peak resident set so far (``getrusage``'s ``ru_maxrss``: KiB on Linux,
bytes on macOS). ``device_peak_bytes``: the largest ``peak_bytes_in_use`` over this process's local
devices, where JAX reports it (GPU, TPU); None where it does not (CPU's ``memory_stats()`` is None).
Both are peaks since the process started, so a multi-process run's figures are each process's own, and
a resumed run's rows after the resume are those of the new process.
"""

from __future__ import annotations

import os
import resource
import sys

KEYS = ("peak_rss_bytes", "device_peak_bytes")


def peak_rss_bytes() -> int:
    """This process's peak resident set size so far, in bytes."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss) if sys.platform == "darwin" else int(rss) * 1024


def resident_bytes() -> float:
    """This process's resident set now (Linux /proc; 0 where unknown)."""
    try:
        with open("/proc/self/statm") as f:
            return float(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0.0


def _memory_stats(device) -> dict:
    """``device.memory_stats()``, or {} for a backend without memory statistics (CPU gives None)."""
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 - a backend without memory statistics
        return {}
    return stats if isinstance(stats, dict) else {}


def device_peak_bytes(devices=None) -> int | None:
    """The largest ``peak_bytes_in_use`` of ``devices`` (default: this process's local devices), or None
    when none of them reports it."""
    import jax

    peaks = [
        int(stats["peak_bytes_in_use"])
        for d in (jax.local_devices() if devices is None else devices)
        if "peak_bytes_in_use" in (stats := _memory_stats(d))
    ]
    return max(peaks) if peaks else None


def device_limit() -> float | None:
    """The bytes the first local device says a program may use (``bytes_limit``; None on CPU, or when
    unknown)."""
    import jax

    limit = _memory_stats(jax.local_devices()[0]).get("bytes_limit")
    return float(limit) if limit else None


def peak_memory() -> dict:
    """{"peak_rss_bytes", "device_peak_bytes"} of this process now."""
    return {"peak_rss_bytes": peak_rss_bytes(), "device_peak_bytes": device_peak_bytes()}


def run_peak(rows: list[dict]) -> dict:
    """The peaks of a whole run: the largest of its rows' figures and this process's now (a resumed run's
    rows before the resume come from earlier processes); None for a figure nobody reported."""
    now = peak_memory()
    out = {}
    for key in KEYS:
        values = [v for v in [now[key], *(r.get(key) for r in rows)] if v is not None]
        out[key] = max(values) if values else None
    return out
