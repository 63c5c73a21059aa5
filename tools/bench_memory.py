"""Large synthetic graphs on one machine: peak memory measured against the estimate printed before epoch 1.

Each row is one ``python -m dygnex_jax train`` run in a subprocess (one CPU device) on the embedded
synthetic generator (48 snapshots); its figures come from the run's own summary.json: the measured peak
resident set (``peak_rss_bytes``, the process's getrusage maximum), the estimate made before epoch 1
(``memory.estimated_peak_rss_bytes``, memory_plan.py), the largest compiled step's bytes, the micro-steps
per update, the median epoch seconds and the compile seconds (apart). The load average is recorded
beside every row (the machine is shared).

    python tools/bench_memory.py                       # the README rows (about 30 min on 2 cores)
    python tools/bench_memory.py --rows 60k            # one row
    python tools/bench_memory.py --quick               # a small row, for tests

Writes ``bench_memory.json`` and ``bench_memory.md`` (the README table) to ``--out`` (default docs/).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dygnex_jax.errors import ArgumentParser, UserError, run_tool
from dygnex_jax.files import output_dir

# name -> (nodes, edges per snapshot, epochs, extra overrides): the rows; the 200k row with the
# memory-aware options (a 4 GiB step budget: micro-steps, and evaluation steps as small, follow from it)
ROWS = {
    "600": (600, 400, 2, []),
    "6k": (6_000, 4_000, 2, []),
    "60k": (60_000, 40_000, 2, []),
    "200k": (200_000, 100_000, 1, ["parallel.memory_gb=4"]),
    "quick": (300, 200, 1, ["data.window=4"]),
}


def run_row(name: str, work: Path, timeout: float) -> dict:
    nodes, edges, epochs, extra = ROWS[name]
    out = work / name
    args = [
        f"data.syn_nodes={nodes}",
        f"data.syn_edges={edges}",
        f"train.epochs={epochs}",
        "eval.candidates=sampled",
        *extra,
    ]
    load = os.getloadavg()[0]
    start = time.perf_counter()
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        [sys.executable, "-m", "dygnex_jax", "train", *args, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"row": name, "args": args, "error": tail, "wall_seconds": wall, "load_before": load}
    s = json.loads((out / "summary.json").read_text())
    mem = s.get("memory") or {}
    est, peak = mem.get("estimated_peak_rss_bytes"), s.get("peak_rss_bytes")
    return {
        "row": name,
        "nodes": nodes,
        "edges_per_snapshot": edges,
        "epochs": epochs,
        "args": args,
        "median_epoch_seconds": s["median_epoch_seconds"],
        "compile_seconds": s["compile_seconds"],
        "wall_seconds": wall,
        "accumulate": mem.get("accumulate"),
        "step_bytes": mem.get("step_bytes"),
        "whole_step_bytes": mem.get("whole_step_bytes"),
        "device_budget_bytes": mem.get("device_budget_bytes"),
        "estimated_peak_rss_bytes": est,
        "peak_rss_bytes": peak,
        "estimate_error": (est - peak) / peak if est and peak else None,
        "final_test_map": (s.get("final") or {}).get("test_map"),
        "load_before": load,
        "load_after": os.getloadavg()[0],
    }


def markdown(rows: list[dict]) -> str:
    gb = lambda x: f"{x / 2**30:.2f}" if x else "-"  # noqa: E731
    lines = [
        "| nodes | edges / snapshot | options | s / epoch | compile s | micro-steps | step GiB (whole) "
        "| estimated peak GiB | measured peak GiB | estimate error | load |",
        "|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['row']} | | | | | | | | | | error: {r['error']} |")
            continue
        opts = " ".join(a for a in r["args"] if not a.startswith(("data.syn_", "train.epochs", "eval.cand")))
        err = f"{r['estimate_error']:+.0%}" if r["estimate_error"] is not None else "-"
        lines.append(
            f"| {r['nodes']:,} | {r['edges_per_snapshot']:,} | {opts or 'defaults'} | "
            f"{r['median_epoch_seconds']:.1f} | {r['compile_seconds']:.1f} | {r['accumulate']} | "
            f"{gb(r['step_bytes'])} ({gb(r['whole_step_bytes'])}) | {gb(r['estimated_peak_rss_bytes'])} | "
            f"{gb(r['peak_rss_bytes'])} | {err} | {r['load_before']:.1f} / {r['load_after']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", default="600,6k,60k,200k", help=f"comma-separated, of {', '.join(ROWS)}")
    ap.add_argument("--quick", action="store_true", help="the small row alone")
    ap.add_argument("--out", type=output_dir, default="docs", help="folder for bench_memory.json / .md")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per row")
    a = ap.parse_args()
    names = ["quick"] if a.quick else [n.strip() for n in a.rows.split(",") if n.strip()]
    bad = [n for n in names if n not in ROWS]
    if bad:
        raise UserError(f"unknown row(s) {', '.join(bad)}: choose from {', '.join(ROWS)}")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_memory_") as tmp:
        for n in names:
            print(f"row {n} ...", flush=True)
            rows.append(run_row(n, Path(tmp), a.timeout))
            print(json.dumps(rows[-1]), flush=True)
    (out / "bench_memory.json").write_text(json.dumps({"rows": rows}, indent=2))
    (out / "bench_memory.md").write_text(markdown(rows))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
