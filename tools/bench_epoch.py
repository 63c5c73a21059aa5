"""Per-epoch comparison of all five methods in the same trainer: psg, snapshot, vertex, dygnex_g, dygnex_l.

For every device configuration (``--devices``: fake CPU device counts in one process; ``--two-core``:
``2`` = one process with 2 fake devices, ``2p`` = 2 processes x 1 device joined by jax.distributed over
gloo, started by tools/launch_local.py, the configuration with one core per device on a 2-core
machine), every dataset (``--datasets``) and model (``--models``), the five methods train the same
model on the same data with the same optimiser: one Trainer per method in one process, a warm-up
that compiles every shape the timed epochs will run, then ``--epochs`` timed epochs interleaved
epoch by epoch, then val / test MAP. The protocol and the figures reported per method (epoch seconds,
padding efficiency, bytes sent by collectives, MAP, ratios to psg): ``dygnex_jax/research/epoch_bench.py``.

Every configuration runs in its own subprocess(es) (fake devices are fixed when JAX starts); ``--jobs``
runs several at once. Writes ``bench_epoch.json``, ``bench_epoch.png`` and ``bench_epoch.md`` (the
README table) to ``--out``, and ``rows_CONFIG.json`` after every case.

    python tools/bench_epoch.py --out runs/bench_epoch               # the full table (README), ~23 min
    python tools/bench_epoch.py --datasets bitcoin_otc --devices 4 --two-core ''
    python tools/bench_epoch.py --quick                               # tiny synthetic run, for tests
    python tools/bench_epoch.py --report --out DIR                    # table + plot of DIR/rows_*.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from dygnex_jax.devices import force_host_devices
from dygnex_jax.errors import ArgumentParser, run_tool
from dygnex_jax.files import output_dir
from dygnex_jax.research import epoch_bench as bench

REPO = Path(__file__).resolve().parents[1]


def parse_args(argv=None):
    ap = ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="bitcoin_otc,as733")
    ap.add_argument("--models", default="egcn_o,gcrn_gru")
    ap.add_argument("--devices", default="4,8", help="fake CPU device counts")
    ap.add_argument(
        "--two-core",
        default="2,2p",
        help="the 2-core configurations: 2 = one process with 2 fake devices, 2p = 2 processes x 1 device "
        "(tools/launch_local.py); '' or 0 = none",
    )
    ap.add_argument("--methods", default=",".join(bench.METHODS))
    ap.add_argument(
        "--jobs",
        type=int,
        default=2,
        help="device configurations run at the same time (each in its own processes; > 1 shortens the "
        "benchmark on a machine that others load, at the price of noisier epoch times); logs go to "
        "OUT/log_CONFIG.txt",
    )
    ap.add_argument("--epochs", type=int, default=3, help="timed epochs per method, after the warm-up")
    ap.add_argument("--out", type=output_dir, default="runs/bench_epoch")
    ap.add_argument("--quick", action="store_true", help="tiny synthetic settings (tests)")
    ap.add_argument(
        "--report", action="store_true", help="run nothing: table and plot from the rows_*.json in --out"
    )
    ap.add_argument("--worker", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--processes", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--coordinator", help=argparse.SUPPRESS)  # set by tools/launch_local.py
    ap.add_argument("--num-processes", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--process-id", type=int, help=argparse.SUPPRESS)
    ap.add_argument("overrides", nargs="*", help="key=value config overrides for every run")
    return ap.parse_args(argv)


def run_configs(args) -> tuple[list[str], list[str], list, dict]:
    """Every device configuration in its own subprocess(es), ``args.jobs`` at a time (none with
    ``--report``): (configuration names, those that failed, load averages, seconds per configuration)."""
    configs = [c for c in args.devices.split(",") if c] + [
        c for c in args.two_core.split(",") if c not in ("", "0")
    ]
    loads = [os.getloadavg()]
    names, failed = [], []
    running: list[tuple[str, subprocess.Popen, float]] = []
    config_seconds = {}

    def finish(name: str, proc: subprocess.Popen, began: float) -> None:
        if proc.wait():  # keep what the other configurations measured
            print(f"error: configuration {name} failed (rows of its finished cases are kept)", flush=True)
            failed.append(name)
        config_seconds[name] = time.perf_counter() - began
        loads.append(os.getloadavg())
        print(f"{name}: done in {config_seconds[name]:.0f} s, load {os.getloadavg()}", flush=True)

    for c in [] if args.report else configs:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        if c.endswith("p"):  # N processes x 1 device, jax.distributed over gloo
            n = int(c[:-1])
            cmd = [
                sys.executable,
                str(REPO / "tools" / "launch_local.py"),
                str(n),
                "--script",
                __file__,
                "--",
            ]
            cmd += bench.worker_command(n, n, args)
            names.append(bench.config_name(n, n))
        else:
            cmd = [sys.executable, __file__, *bench.worker_command(int(c), 1, args)]
            env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={c}"
            names.append(bench.config_name(int(c), 1))
        while len(running) >= args.jobs:
            finish(*running.pop(0))
        log = Path(args.out, f"log_{names[-1]}.txt") if args.jobs > 1 else None
        print(f"{names[-1]}: {' '.join(cmd[1:])}" + (f" > {log}" if log else ""), flush=True)
        stdout = log.open("w") if log else None
        running.append(
            (names[-1], subprocess.Popen(cmd, env=env, stdout=stdout, stderr=stdout), time.perf_counter())
        )
    while running:
        finish(*running.pop(0))
    return names, failed, loads, config_seconds


def main(argv=None) -> int:
    args = parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    if args.worker:
        if args.processes == 1:
            force_host_devices(args.worker)
        return bench.run_worker(args)
    start = time.perf_counter()
    names, failed, loads, config_seconds = run_configs(args)
    if args.report:
        names = sorted(
            (f.stem.removeprefix("rows_") for f in Path(args.out).glob("rows_*.json")), key=bench.config_order
        )
    rows = []
    for name in names:
        if Path(args.out, f"rows_{name}.json").exists():
            rows += json.loads(Path(args.out, f"rows_{name}.json").read_text())
    meta = {
        "command": " ".join(sys.argv),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "load_averages": loads,  # (1, 5, 15 min) at the start and after every configuration
        "settings": bench.QUICK if args.quick else {"common": bench.COMMON, "per_dataset": bench.PER_DATASET},
        "overrides": list(args.overrides),
        "epochs": args.epochs,
        "configs": names,
        "jobs": args.jobs,  # configurations run at the same time
        "config_seconds": config_seconds,
        "failed": failed,
        "seconds": time.perf_counter() - start,
    }
    out = Path(args.out)
    if args.report and (out / "bench_epoch.json").exists():
        meta = json.loads((out / "bench_epoch.json").read_text())["meta"] | {"report_of": names}
    (out / "bench_epoch.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (out / "bench_epoch.md").write_text(bench.table(rows))
    bench.plot(rows, out / "bench_epoch.png")
    print(bench.table(rows))
    print(f"wrote {out}/bench_epoch.json, .md, .png in {meta['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
