"""tools/bench_drift.py: one step timed in bursts — as many bursts as the time allows (one at 0 s), each
point the median of its runs, the summary that of the points; bad input is one line."""

import json

from helpers import assert_one_line_error, run_tool


def test_bursts_of_one_step_and_their_summary(tmp_path):
    out = tmp_path / "drift.json"
    r = run_tool(
        "bench_drift.py", "--dataset", "synthetic", "--devices", "2", "--batch", "8", "--seconds", "3",
        "--every", "0.5", "--runs", "3", "--json", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(out.read_text())
    points, summ = got["points"], got["summary"]
    assert summ["bursts"] == len(points) >= 2
    at = [p["at"] for p in points]
    assert at == sorted(at) and all(b - a >= 0.5 for a, b in zip(at, at[1:]))  # a pause between bursts
    assert at[-1] + 0.5 < 3 + 60  # stopped by the time asked, give or take the last burst
    ms = sorted(p["ms"] for p in points)
    assert all(m > 0 for m in ms) and summ["min_ms"] == ms[0] and summ["max_ms"] == ms[-1]
    assert ms[0] <= summ["median_ms"] <= ms[-1] and summ["cv"] >= 0
    assert "bursts of 3 runs" in r.stdout


def test_zero_seconds_is_one_burst(tmp_path):
    out = tmp_path / "d.json"
    r = run_tool("bench_drift.py", "--dataset", "synthetic", "--batch", "4", "--seconds", "0", "--runs", "1",
                 "--json", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(out.read_text())["summary"]["bursts"] == 1


def test_bad_counts_are_one_line(tmp_path):
    r = run_tool("bench_drift.py", "--runs", "0")
    assert_one_line_error(r, "--runs")
