"""Peak memory in a run's records (memstats.py): every ``metrics.jsonl`` row and ``summary.json`` carry
``peak_rss_bytes`` (this process's peak host RSS) and ``device_peak_bytes`` (None on CPU)."""

from __future__ import annotations

import io
import json
import types
from pathlib import Path

from dygnex_jax import memstats

REPO = Path(__file__).resolve().parents[1]
SMOKE = str(REPO / "configs" / "smoke.yaml")


def fake_device(stats):
    def memory_stats():
        if isinstance(stats, Exception):
            raise stats
        return stats

    return types.SimpleNamespace(memory_stats=memory_stats)


def test_device_peak_is_the_largest_reported_else_none():
    gpu = [fake_device({"peak_bytes_in_use": 5, "bytes_in_use": 1}), fake_device({"peak_bytes_in_use": 9})]
    assert memstats.device_peak_bytes(gpu) == 9
    odd = [fake_device(None), fake_device({"bytes_in_use": 3}), fake_device(RuntimeError("unsupported"))]
    assert memstats.device_peak_bytes(odd) is None
    assert memstats.device_peak_bytes([*odd, *gpu]) == 9
    assert memstats.device_peak_bytes() is None  # the test session's CPU devices report nothing


def test_peak_rss_grows_with_an_allocation():
    before = memstats.peak_rss_bytes()
    block = bytearray(64 << 20)
    block[::4096] = b"x" * len(block[::4096])  # touch every page: resident
    assert memstats.peak_rss_bytes() >= before > 0
    assert memstats.peak_rss_bytes() >= 64 << 20


def test_run_peak_takes_earlier_processes_rows_into_account():
    """A resumed run's rows before the resume come from another process: the run's peak is the largest."""
    now = memstats.peak_rss_bytes()
    rows = [
        {"peak_rss_bytes": now * 3, "device_peak_bytes": 7},
        {"peak_rss_bytes": 1, "device_peak_bytes": None},
    ]
    assert memstats.run_peak(rows) == {"peak_rss_bytes": now * 3, "device_peak_bytes": 7}
    peak = memstats.run_peak([{"epoch": 1}])  # rows written before these figures existed
    assert peak["peak_rss_bytes"] >= now and peak["device_peak_bytes"] is None


def test_a_run_records_its_peaks_per_epoch_and_in_the_summary(tmp_path):
    from dygnex_jax.config import load_config
    from dygnex_jax.train import train_and_evaluate

    out = tmp_path / "run"
    summary = train_and_evaluate(load_config(SMOKE, ["parallel.devices=2"]), out, stream=io.StringIO())
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and summary == json.loads((out / "summary.json").read_text())
    for r in rows:
        assert isinstance(r["peak_rss_bytes"], int) and r["peak_rss_bytes"] > 0
        assert "device_peak_bytes" in r and r["device_peak_bytes"] is None  # CPU reports no device memory
    assert rows[0]["peak_rss_bytes"] <= rows[1]["peak_rss_bytes"]  # a peak so far
    assert isinstance(summary["peak_rss_bytes"], int)
    assert summary["peak_rss_bytes"] >= max(r["peak_rss_bytes"] for r in rows)
    assert "device_peak_bytes" in summary and summary["device_peak_bytes"] is None
