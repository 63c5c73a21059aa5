"""The host allocator settings side by side in whole training runs (``parallel.host_malloc``).

    python tools/bench_host_malloc.py --json runs/bench_host_malloc.json
    python tools/bench_host_malloc.py --cases tgcn2 gcrn8 --reps 3 --json runs/hm.json
    python tools/bench_host_malloc.py --settings system thp --json runs/thp.json

Each case trains through ``python -m dygnex_jax train`` (compilation cache off, no evaluation before the
last epoch) once per setting per repetition, the settings alternated (A B, then B A) so that a drift of a
shared machine weighs on both. Per run: the median of the steps that compiled nothing (``steps.jsonl``),
the run's wall seconds, its peak host RSS (the kernel's figure for the child), kernel (system) seconds,
minor page faults, the heap glibc holds at the end (``summary.json``'s ``host_heap``) and the 1-minute load
average before it. The table gives each setting's median over repetitions. ``thp`` is ``system`` with
glibc asked for transparent huge pages on its mappings (``GLIBC_TUNABLES=glibc.malloc.hugetlb=1``, set in
the child's environment: glibc reads it only at start).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dygnex_jax.errors import ArgumentParser, run_tool
from dygnex_jax.files import atomic_write_text, output_file

REPO = Path(__file__).resolve().parents[1]
CASES = {
    "tgcn2": "configs/egcn_o_uci.yaml model.name=tgcn model.egcn_gru=rows parallel.devices=2 train.batch_size=16 "
    "train.epochs=6",
    "egcn1": "configs/egcn_o_bitcoin_otc.yaml parallel.devices=1 train.batch_size=32 train.epochs=10",
    "egcn8": "configs/egcn_o_bitcoin_otc.yaml parallel.devices=8 train.batch_size=32 train.epochs=10",
    "gcrn1": "configs/egcn_o_bitcoin_otc.yaml model.name=gcrn_gru parallel.devices=1 train.batch_size=32 "
    "train.epochs=4",
    "gcrn8": "configs/egcn_o_bitcoin_otc.yaml model.name=gcrn_gru parallel.devices=8 train.batch_size=32 "
    "train.epochs=4",
}
# setting -> (parallel.host_malloc, extra environment of the child)
SETTINGS = {
    "system": ("system", {}),
    "retain": ("retain", {}),
    "thp": ("system", {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}),
}


def train(case: str, setting: str, out: Path) -> dict:
    """One training run in a child process -> its figures."""
    mode, extra = SETTINGS[setting]
    config, *overrides = CASES[case].split()
    cmd = [sys.executable, "-m", "dygnex_jax", "train", "--config", config, "--out", str(out), *overrides]
    cmd += [f"parallel.host_malloc={mode}", "parallel.compile_cache=off", "eval.every=1000"]
    env = os.environ | {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"} | extra
    load = os.getloadavg()[0]
    start = time.perf_counter()
    with open(out.parent / f"{out.name}.log", "w") as log:
        child = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{case} under {setting} failed: see {out.parent / (out.name + '.log')}")
    steps = [json.loads(line) for line in open(out / "steps.jsonl")]
    summary = json.loads((out / "summary.json").read_text())
    return {
        "case": case,
        "mode": setting,
        "load": load,
        "wall_seconds": wall,
        "step_median": statistics.median(s["seconds"] for s in steps if not s["compiled"]),
        "peak_rss_gib": usage.ru_maxrss / 2**20,
        "kernel_seconds": usage.ru_stime,
        "minor_faults": usage.ru_minflt,
        "host_heap": summary.get("host_heap"),
        "host_malloc": summary.get("host_malloc"),
    }


def table(runs: list[dict], settings) -> str:
    rows = [
        "| case | setting | runs | step s (median) | run s | peak RSS GiB | kernel s | faults (M) | heap GiB | load |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for case in dict.fromkeys(r["case"] for r in runs):
        for mode in settings:
            mine = [r for r in runs if r["case"] == case and r["mode"] == mode]
            if not mine:
                continue

            def med(key, rs=mine):
                return statistics.median(r[key] for r in rs)

            heaps = [r["host_heap"]["bytes"] / 2**30 for r in mine if r.get("host_heap")]
            heap = f"{statistics.median(heaps):.2f}" if heaps else "-"
            loads = " / ".join(f"{r['load']:.1f}" for r in mine)
            rows.append(
                f"| {case} | {mode} | {len(mine)} | {med('step_median'):.3f} | {med('wall_seconds'):.1f} | "
                f"{med('peak_rss_gib'):.2f} | {med('kernel_seconds'):.1f} | {med('minor_faults') / 1e6:.2f} | "
                f"{heap} | {loads} |"
            )
    return "\n".join(rows)


def main(argv=None) -> int:
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    p.add_argument("--settings", nargs="+", default=["system", "retain"], choices=list(SETTINGS))
    p.add_argument("--reps", type=int, default=2, help="runs per setting and case (default 2)")
    p.add_argument("--json", type=output_file, default=None, help="write every run and the table here")
    a = p.parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench_host_malloc_") as tmp:
        for rep in range(a.reps):
            for case in a.cases:
                for mode in a.settings if rep % 2 == 0 else a.settings[::-1]:
                    run = train(case, mode, Path(tmp) / f"{case}_{mode}_{rep}")
                    runs.append(run | {"rep": rep})
                    print(
                        f"{case} {mode} rep {rep}: step {run['step_median']:.3f} s, run {run['wall_seconds']:.1f} s, "
                        f"peak RSS {run['peak_rss_gib']:.2f} GiB, kernel {run['kernel_seconds']:.1f} s, "
                        f"load {run['load']:.1f}",
                        flush=True,
                    )
    text = table(runs, a.settings)
    print(text)
    if a.json:
        atomic_write_text(
            a.json,
            json.dumps({"cases": {c: CASES[c] for c in a.cases}, "runs": runs, "table": text}, indent=1),
        )
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
