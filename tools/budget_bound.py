"""What one budget can pay at best: the ceiling on packed padding efficiency of an epoch on one budget.

For every dataset, the training windows' costs in the run's layout (what the planner balances), their
per-column bound and the one-budget MILP of ``dygnex_jax.research.budget_bound`` (HiGHS, to
``--time-limit`` seconds): the best placement it found and its proven ceiling, beside what the
``schedule`` command plans (``plan.plan``: packed efficiency, budgets, composition). Prints a table with
the load average and writes JSON.

    python tools/budget_bound.py --datasets bitcoin_otc --time-limit 1200 --json docs/budget_bound.json
"""

from __future__ import annotations

import json
import os
import sys

from dygnex_jax import plan
from dygnex_jax.config import load_config, step_layout
from dygnex_jax.data.datasets import load_dataset
from dygnex_jax.data.node_windows import task_windows
from dygnex_jax.errors import ArgumentParser, UserError, run_tool
from dygnex_jax.files import atomic_write_text, output_file
from dygnex_jax.padding import layout_view
from dygnex_jax.research.budget_bound import one_budget_milp, per_column_bound
from dygnex_jax.schedule.base import cost_weights


def measure(config_path: str, dataset: str, devices: int, batch: int, time_limit: float) -> dict:
    config = load_config(config_path, [f"data.dataset={dataset}", f"train.batch_size={batch}"])
    ws = task_windows(load_dataset(config.data), config.data)
    layout = step_layout(config)
    costs = layout_view(ws.costs("train", config.data.neg_mult), ws.edge_profile("train"), layout)[0]
    weights = cost_weights(config.schedule)
    load = os.getloadavg()[0]
    planned = plan.plan(config, devices, ws=ws)
    bound = one_budget_milp(costs, weights, devices, batch, time_limit)
    bound.pop("assignment")
    return {
        "dataset": dataset,
        "devices": devices,
        "batch_size": batch,
        "layout": layout,
        "per_column_bound": per_column_bound(costs, weights, bound["slots"]),
        "milp": bound,
        "planned": {k: planned[k] for k in ("packed_padding_efficiency", "budgets", "compose", "repeated")},
        "time_limit": time_limit,
        "load_average": [load, os.getloadavg()[0]],
    }


def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/egcn_o_bitcoin_otc.yaml")
    ap.add_argument("--datasets", nargs="+", default=["bitcoin_otc"])
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--time-limit", type=float, default=120.0, help="MILP seconds per dataset")
    ap.add_argument("--json", type=output_file, help="write the rows here")
    a = ap.parse_args(argv)
    if a.devices < 1 or a.batch < a.devices or not a.time_limit > 0:
        raise UserError("--devices >= 1, --batch >= --devices and --time-limit > 0 are needed")
    rows = []
    print(
        "| dataset | P | B | per-column bound | one-budget MILP: best / ceiling | planned packed (budgets) | load |"
    )
    print("|---|---:|---:|---:|---|---|---|")
    for ds in a.datasets:
        r = measure(a.config, ds, a.devices, a.batch, a.time_limit)
        rows.append(r)
        m, p = r["milp"], r["planned"]
        best = f"{m['efficiency']:.3f}" if m["efficiency"] is not None else "-"
        print(
            f"| {ds} | {a.devices} | {a.batch} | {r['per_column_bound']:.3f} | {best} / {m['ceiling']:.3f}"
            f"{'' if m['optimal'] else ' (time limit)'} | {p['packed_padding_efficiency']:.3f} "
            f"({len(p['budgets'])}) | {r['load_average'][0]:.1f} / {r['load_average'][1]:.1f} |",
            flush=True,
        )
    if a.json:
        atomic_write_text(a.json, json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(lambda: main()))
