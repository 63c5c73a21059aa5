"""Run a config over the cross product of value grids: schedule figures, or full training runs.

    python tools/sweep.py --config configs/egcn_o_bitcoin_otc.yaml \\
        --grid 'schedule.method=psg,dygnex_g,dygnex_l' --grid 'train.batch_size=8,32' --devices 8
    python tools/sweep.py --config configs/smoke.yaml --grid 'schedule.method=psg,dygnex_g' \\
        --train --devices 8 train.epochs=3 --out results/sweep/smoke

Each ``--grid KEY=V1,V2,...`` names a config key and its values (parsed like ``key=value`` overrides,
so ``data.window=5,10`` are integers; a value may be a bracketed list: ``train.class_weights=[0.1,0.9],
[0.5,0.5]``); trailing ``key=value`` pairs apply to every point. Without ``--train`` every point is one
epoch's schedule measured by ``dygnex_jax.plan.plan`` (padding efficiency, imbalance, predicted epoch
seconds, scheduler seconds; no JAX, seconds per point). With ``--train`` every point is
``train_and_evaluate(config, OUT/<point>)`` in this process on ``--devices`` devices (fake CPU devices
are requested before JAX is imported) and the row holds its final and best validation metric (the
task's first: MAP, edge_cls F1, node_reg MSE; `metric` names it) and its median
epoch seconds. Writes ``OUT/sweep.json`` (a list of rows: the grid values, then the figures) and
``OUT/sweep.png``, and prints a table. Bad grids, keys or values: one line ``error: ...``, exit code 2,
before anything runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from dygnex_jax.config import load_config
from dygnex_jax.devices import force_host_devices
from dygnex_jax.errors import ArgumentParser, UserError, run_tool
from dygnex_jax.files import output_dir
from dygnex_jax.research import sweep


def parse_args(argv) -> argparse.Namespace:
    ap = ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--config", default=None, help="YAML config (default: the embedded default)")
    ap.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help="a config key and its values; several --grid make a cross product",
    )
    ap.add_argument(
        "--devices",
        type=int,
        default=0,
        help="P (default: parallel.devices of the config, else 8); a grid over parallel.devices overrides it",
    )
    ap.add_argument("--train", action="store_true", help="train every point (default: schedule figures only)")
    ap.add_argument(
        "--out",
        type=output_dir,
        default=None,
        help="output folder (default results/sweep/<config name>-<time>)",
    )
    ap.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides for every point")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if not args.grid:
        raise UserError("give at least one --grid KEY=V1,V2,... (e.g. --grid 'schedule.method=psg,dygnex_g')")
    grids = [sweep.parse_grid(g) for g in args.grid]
    keys = [k for k, _ in grids]
    if len(set(keys)) != len(keys):
        raise UserError("a key appears in two --grid options: give all its values in one")
    if args.devices < 0:
        raise UserError(f"--devices must be positive, got {args.devices}")
    base = load_config(args.config, args.overrides)
    devices = args.devices or base.parallel.devices or 8
    # --devices before the grid values, so that a grid over parallel.devices wins
    overrides = [*args.overrides, f"parallel.devices={devices}"]
    points = sweep.build_points(args.config, grids, overrides)

    out = (
        Path(args.out)
        if args.out
        else Path("results/sweep") / f"{base.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {str(out)!r} is a file: choose a directory")
    if args.train:
        taken = [p["name"] for p in points if (out / p["name"] / "metrics.jsonl").exists()]
        if taken:
            raise UserError(
                f"--out {str(out)!r} already holds runs ({', '.join(taken)}): choose another folder"
            )
        force_host_devices(max(p["config"].parallel.devices for p in points))  # before JAX is imported
    out.mkdir(parents=True, exist_ok=True)

    mode = "train" if args.train else "schedule"
    print(f"sweep of {base.name}: {len(points)} point(s), {mode}, {devices} devices -> {out}", flush=True)
    rows, cache = [], {}
    start = time.perf_counter()
    for i, p in enumerate(points, 1):
        label = " ".join(f"{k}={v}" for k, v in p["grid"].items())
        print(f"[{i}/{len(points)}] {label} ...", flush=True)
        t0 = time.perf_counter()
        if args.train:
            figures = sweep.train_point(p["config"], out / p["name"])
        else:
            figures = sweep.schedule_point(p["config"], p["config"].parallel.devices, cache)
        row = {"point": p["name"], **p["grid"], **figures, "seconds": time.perf_counter() - t0}
        rows.append(row)
        shown = ("metric", "best_val", "median_epoch_seconds") if args.train else ("padding_efficiency",)
        print(
            f"[{i}/{len(points)}] {label}: "
            + ", ".join(f"{k} {sweep.fmt(row[k])}" for k in shown)
            + f" ({row['seconds']:.1f} s)",
            flush=True,
        )
        (out / "sweep.json").write_text(json.dumps(rows, indent=2) + "\n")

    if args.train:
        columns = [*keys, "metric", "final_val", "best_val", "best_epoch", "median_epoch_seconds"]
        columns += ["mean_padding_efficiency", "compilations"]
    else:
        columns = [*keys, "padding_efficiency", "packed_padding_efficiency", "imbalance"]
        columns += ["predicted_epoch_seconds", "scheduler_seconds", "fallback"]
    print()
    sweep.print_table(rows, columns)
    title = f"{base.name}: {mode} sweep, P={devices}"
    sweep.plot(rows, keys, args.train, out / "sweep.png", title)
    print(f"\nwrote {out / 'sweep.json'} and {out / 'sweep.png'} in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
