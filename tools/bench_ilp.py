"""dygnex_l against dygnex_g on the packed (3-column) objective: objective, bound, gap, seconds per step.

For every dataset (``--datasets``), step composition (``--compose``), epoch (``--epochs``) and
dygnex_l time limit (``--time-limits``): the schedules of dygnex_g and dygnex_l at P devices and batch
size B from ``schedule.schedule`` on the flat costs ``WindowSet.costs("train", neg_mult)`` ([K, 3]:
nodes, edges summed over time, pairs) with weights (1, 1, 1), i.e. what a padded flat step pays
(budget alignment aside). Per row: the summed step objective ``sum_s w · max_p load_p`` (recomputed
from the schedule by ``schedule.metrics``, so every method is scored alike), the summed lower bound the
method proves (dygnex_g: the combinatorial per-dimension bound; dygnex_l: that or the MILP's dual bound,
per step), the relative gap, the scheduler seconds per step (mean and worst step), the solve statuses,
and the 1-minute load average before and after the row (``os.getloadavg``, as ``uptime`` shows it).

    python tools/bench_ilp.py                       # P = 8, B = 32, time limit 2 s; docs/bench_ilp.json
    python tools/bench_ilp.py --time-limits 0.5 1 2 --epochs 1 2 3 --reference-seconds 60

Runs against whatever ``dygnex_jax`` is importable, so an older checkout's scheduler can be measured
with the same script (``PYTHONPATH=/path/to/old python tools/bench_ilp.py --out old.json``); fields that
an older ``info`` lacks are left out.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from dygnex_jax.config import load_config
from dygnex_jax.data import datasets
from dygnex_jax.data.node_windows import task_windows
from dygnex_jax.errors import ArgumentParser
from dygnex_jax.files import output_file
from dygnex_jax.schedule import schedule
from dygnex_jax.schedule.base import cost_weights
from dygnex_jax.schedule.greedy import step_lower_bound
from dygnex_jax.schedule.metrics import step_loads, step_objectives

ROOT = Path(__file__).resolve().parents[1]  # the checkout: default config and output paths


def flat_costs(config: str, dataset: str, batch_size: int):
    """(costs [K, 3], the loaded config) of a dataset's training windows."""
    cfg = load_config(config, [f"data.dataset={dataset}", f"train.batch_size={batch_size}"])
    ws = task_windows(datasets.load_dataset(cfg.data), cfg.data)
    return np.asarray(ws.costs("train", cfg.data.neg_mult), dtype=np.float64), cfg


def measure(costs, n_devices, batch_size, settings, seed, epoch) -> dict:
    """One schedule's row: objective, bound, gap, seconds per step, statuses, load average."""
    load_before = os.getloadavg()[0]
    s = schedule(costs, n_devices, batch_size, settings, seed=seed, epoch=epoch)
    w = cost_weights(settings, costs.shape[1])
    per_step = step_objectives(step_loads(costs, s), w)
    objective = float(per_step.sum())
    info = s.info
    if settings.method == "dygnex_l":
        bounds = [min(r["lower_bound"], r["objective"]) for r in info["steps"]]
        step_seconds = [r["seconds"] for r in info["steps"]]
    else:
        bounds = [step_lower_bound(costs[np.concatenate(step)], n_devices, w) for step in s.steps]
        step_seconds = []
    bound = float(sum(bounds))
    step_gaps = (per_step - np.asarray(bounds)) / np.maximum(per_step, 1e-300)
    row = {
        "method": settings.method,
        "objective": objective,
        "step_objectives": per_step.tolist(),
        "lower_bound": bound,
        "gap": (objective - bound) / objective if objective > 0 else 0.0,
        "step_gaps": step_gaps.tolist(),
        "steps_within_1pct": int(np.sum(step_gaps <= 0.01 + 1e-12)),
        "steps": s.num_steps,
        "seconds": s.seconds,
        "seconds_per_step": s.seconds / max(s.num_steps, 1),
        "max_step_seconds": max(step_seconds) if step_seconds else s.seconds / max(s.num_steps, 1),
        "load_average": [load_before, os.getloadavg()[0]],
    }
    if settings.method == "dygnex_l":
        row["statuses"] = info.get("statuses")
        row["fallback"] = s.fallback
        if "search_objective" in info:
            row["search_objective"] = info["search_objective"]
    return row


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(ROOT / "configs" / "egcn_o_bitcoin_otc.yaml"))
    ap.add_argument("--datasets", nargs="+", default=["as733", "bitcoin_otc", "uci_collegemsg"])
    ap.add_argument("--compose", nargs="+", default=["strata", "rows", "sorted"])
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--time-limits", type=float, nargs="+", default=[2.0])
    ap.add_argument("--mip-gap", type=float, default=0.01)
    ap.add_argument("--node-limit", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, nargs="+", default=[1])
    ap.add_argument(
        "--reference-seconds",
        type=float,
        default=0.0,
        help="also run dygnex_l with this per-step time limit on the first epoch (a long reference run)",
    )
    ap.add_argument("--out", type=output_file, default=str(ROOT / "docs" / "bench_ilp.json"))
    args = ap.parse_args(argv)

    rows = []
    header = f"{'dataset':15s} {'compose':7s} {'ep':>2s} {'method':12s} {'objective':>12s} {'bound':>12s} {'gap%':>6s} {'<=1%':>5s} {'s/step':>7s} {'max s':>6s} {'load':>5s}"
    print(header)
    for dataset in args.datasets:
        costs, cfg = flat_costs(args.config, dataset, args.batch_size)
        for compose in args.compose:
            for epoch in args.epochs:
                runs = [("dygnex_g", None)] + [("dygnex_l", tl) for tl in args.time_limits]
                if args.reference_seconds > 0 and epoch == args.epochs[0]:
                    runs.append(("dygnex_l", args.reference_seconds))
                for method, tl in runs:
                    kw = {"method": method, "compose": compose, "time_resolved": False}
                    if tl is not None:
                        kw.update(time_limit=tl, mip_gap=args.mip_gap, node_limit=args.node_limit)
                    kw = {k: v for k, v in kw.items() if hasattr(cfg.schedule, k)}
                    settings = dataclasses.replace(cfg.schedule, **kw)
                    row = measure(costs, args.devices, args.batch_size, settings, args.seed, epoch)
                    row.update(
                        dataset=dataset, compose=compose, epoch=epoch, windows=len(costs), time_limit=tl
                    )
                    rows.append(row)
                    name = method if tl is None else f"{method}@{tl:g}"
                    print(
                        f"{dataset:15s} {compose:7s} {epoch:2d} {name:12s} {row['objective']:12.1f} "
                        f"{row['lower_bound']:12.1f} {100 * row['gap']:6.2f} "
                        f"{row['steps_within_1pct']:2d}/{row['steps']:<2d} {row['seconds_per_step']:7.3f} "
                        f"{row['max_step_seconds']:6.2f} {row['load_average'][1]:5.2f}",
                        flush=True,
                    )
    result = {
        "what": "dygnex_l vs dygnex_g, flat 3-column costs, weights (1, 1, 1)",
        "devices": args.devices,
        "batch_size": args.batch_size,
        "mip_gap": args.mip_gap,
        "node_limit": args.node_limit,
        "reference_seconds": args.reference_seconds,
        "seed": args.seed,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "load_average_end": list(os.getloadavg()),
        },
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "rows": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
