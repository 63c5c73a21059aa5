"""Schedules without training: what a method does to a dataset's windows (the ``schedule`` command).

Two padding-efficiency figures are reported:
  * ``schedule`` level — real loads against the per-step maximum over devices of each cost column
    (what the scheduler optimises, DESIGN §2);
  * ``packed`` level — against the budget the SPMD step really runs with: nodes + 1 padding node,
    edges per time offset (the scan over W needs one edge budget for every offset, so the padded edge
    work is W × the maximum over devices *and* offsets), pairs, each rounded up to its shape bucket.
No JAX here: this runs in a second on a laptop for any method.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from .config import Config
from .data import datasets
from .data.node_windows import task_windows
from .data.windows import WindowSet
from .graphs import bucket
from .schedule import Schedule, cost_weights, schedule
from .schedule.cost import CostModel, default_cost_model
from .schedule.ilp import require_installed
from .schedule.metrics import (
    padding_efficiency,
    predicted_epoch_seconds,
    scalar_loads,
    step_loads,
    summarize,
)


def packed_budgets(
    costs: np.ndarray, profile: np.ndarray, sched: Schedule, ratio: float, minimum: int
) -> np.ndarray:
    """[S, 3] (nodes, edges summed over offsets, pairs) each device is padded to in every step."""
    w = profile.shape[1]
    out = np.zeros((sched.num_steps, 3))
    for s, step in enumerate(sched.steps):
        nodes = max(costs[ids, 0].sum() for ids in step) + 1
        edges = max(profile[ids].sum(axis=0).max(initial=0) for ids in step)
        pairs = max(costs[ids, 2].sum() for ids in step)
        out[s] = [
            bucket(int(nodes), ratio, minimum),
            w * bucket(max(int(edges), 1), ratio, minimum),
            bucket(max(int(pairs), 1), ratio, minimum),
        ]
    return out


def plan(config: Config, devices: int, ws: WindowSet | None = None, model: CostModel | None = None) -> dict:
    """Schedule one epoch of the training windows and measure it (no training)."""
    if config.schedule.method == "dygnex_l":
        require_installed(config.schedule)
    ws = ws if ws is not None else task_windows(datasets.load_dataset(config.data), config.data)
    costs = ws.costs("train", config.data.neg_mult)
    weights = cost_weights(config.schedule)
    sched_costs = ws.schedule_costs("train", config.data.neg_mult, config.schedule.time_resolved)
    sched = schedule(
        sched_costs, devices, config.train.batch_size, config.schedule, seed=config.train.seed, epoch=1
    )
    loads = step_loads(costs, sched)
    budgets = packed_budgets(
        costs, ws.edge_profile("train"), sched, config.parallel.bucket_ratio, config.parallel.min_bucket
    )
    model = model if model is not None else default_cost_model(ws.window)
    stats = summarize(costs, sched, weights)
    return {
        "method": sched.method,
        "dataset": ws.graph.name,
        "devices": devices,
        "batch_size": config.train.batch_size,
        "windows": int(len(costs)),
        "steps": sched.num_steps,
        "padding_efficiency": stats["padding_efficiency"],
        "packed_padding_efficiency": padding_efficiency(loads, weights, budgets),
        "imbalance": stats["imbalance"],
        "predicted_epoch_seconds": predicted_epoch_seconds(loads, model, ws.window, padded=budgets),
        "cost_model": model.source,
        "scheduler_seconds": sched.seconds,
        "fallback": sched.fallback,
        "step_loads": scalar_loads(loads, weights).tolist(),
    }


def print_table(rows: list[dict], stream=sys.stdout) -> None:
    head = f"{'method':<10} {'P':>4} {'B':>4} {'pad-eff':>8} {'packed':>8} {'imbal':>7} {'pred s':>8} {'sched s':>8}  fallback"
    print(head, file=stream)
    for r in rows:
        print(
            f"{r['method']:<10} {r['devices']:>4} {r['batch_size']:>4} {r['padding_efficiency']:>8.3f} "
            f"{r['packed_padding_efficiency']:>8.3f} {r['imbalance']:>7.3f} {r['predicted_epoch_seconds']:>8.3f} "
            f"{r['scheduler_seconds']:>8.3f}  {r['fallback'] or '-'}",
            file=stream,
        )


def plot_loads(result: dict, path: str | Path) -> None:
    """Per-device weighted load of every step (bars), one panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loads = np.asarray(result["step_loads"])  # [S, P]
    s, p = loads.shape
    fig, ax = plt.subplots(figsize=(max(6, s * 0.5), 3.5))
    width = 0.8 / p
    for d in range(p):
        ax.bar(np.arange(s) + d * width, loads[:, d], width, label=f"device {d}" if p <= 8 else None)
    ax.set_xticks(np.arange(s) + 0.4 - width / 2, [str(i) for i in range(s)])
    ax.set_xlabel("step")
    ax.set_ylabel("load (a·nodes + b·edges + g·pairs)")
    ax.set_title(
        f"{result['dataset']}: {result['method']}, P={p}, B={result['batch_size']}, "
        f"padding efficiency {result['padding_efficiency']:.3f}"
    )
    if p <= 8:
        ax.legend(fontsize=7, ncol=4)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_json(result: dict, path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(result, indent=2) + "\n")
