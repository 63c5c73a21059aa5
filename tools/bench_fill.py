"""Does a step cost its padded budget, whatever share of it is real work? (the premise of the cost model)

    python tools/bench_fill.py --datasets bitcoin_otc uci_collegemsg --json runs/bench_fill.json

The cost model, the packed padding efficiency and the scheduler all price a step by its padded budget:
padding rows, edges and pairs are computed like real ones. This measures it. Per dataset: a step of
``--batch`` random training windows is packed (``parallel.prefetch=0``, one process) and its budget
becomes the run's only planned budget; then the same step with the first 75 %, 50 % and 25 % of each
device's windows is packed into that same budget, so the four variants run one compiled program and
differ only in how much of it is real work. The variants are timed round-robin, ``--repeats`` times each
after one warm-up round (medians), for ``--draws`` random steps. Printed and saved: each variant's budget,
real load (the largest device's nodes, edges, pairs), median seconds, and its time over the full step's.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from dygnex_jax import parallel
from dygnex_jax.config import load_config
from dygnex_jax.errors import ArgumentParser, run_tool
from dygnex_jax.files import atomic_write_text
from dygnex_jax.train import Trainer

REPO = Path(__file__).resolve().parents[1]

FRACTIONS = (1.0, 0.75, 0.5, 0.25)


def timed(trainer: Trainer, batch) -> float:
    sharded = parallel.shard_batch(trainer.mesh, batch)
    start = time.perf_counter()
    trainer.params, trainer.opt_state, stats = trainer.train_step(trainer.params, trainer.opt_state, sharded)
    float(stats["loss"])
    return time.perf_counter() - start


def measure(trainer: Trainer, rng, batch_size: int, repeats: int) -> list[dict]:
    """One random step and its thinner variants on the full step's budget -> one row per variant."""
    p = trainer.n_devices
    ids = rng.choice(len(trainer.train_costs), size=min(batch_size, len(trainer.train_costs)), replace=False)
    parts = [list(map(int, part)) for part in np.array_split(ids, p)]
    trainer.planned = None
    _, _, budget = trainer.pack(parts, "train", epoch=0)
    trainer.planned = [budget]  # every variant runs on the full step's budget
    variants = []
    for frac in FRACTIONS:
        step = [part[: max(1, round(len(part) * frac))] for part in parts]
        batch, _, got = trainer.pack(step, "train", epoch=0)
        if got != budget:  # a subset of a step's windows always fits the step's own budget
            raise RuntimeError(f"a {frac:.0%} step packed on {got}, not the full step's {budget}")
        real = np.max([trainer.train_costs[part].sum(axis=0) for part in step], axis=0)
        variants.append((frac, batch, real))
    seconds = {frac: [] for frac in FRACTIONS}
    for rep in range(repeats + 1):  # round 0 compiles and warms up
        for frac, batch, _ in variants:
            t = timed(trainer, batch)
            if rep:
                seconds[frac].append(t)
    full = statistics.median(seconds[1.0])
    return [
        {
            "fraction": frac,
            "budget": list(budget.as_tuple()),
            "real_max_load": [float(x) for x in real],
            "seconds_median": statistics.median(seconds[frac]),
            "seconds": seconds[frac],
            "over_full": statistics.median(seconds[frac]) / full,
        }
        for frac, _, real in variants
    ]


def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="configs/egcn_o_bitcoin_otc.yaml")
    ap.add_argument("--datasets", nargs="+", default=["bitcoin_otc", "uci_collegemsg"])
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--draws", type=int, default=4, help="random steps per dataset (default 4)")
    ap.add_argument("--repeats", type=int, default=7, help="timed runs of each variant (default 7)")
    ap.add_argument("--set", action="append", default=[], help="extra key=value for every run")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    for name in ("devices", "batch", "draws", "repeats"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be at least 1")
    rows = []
    for dataset in a.datasets:
        overrides = [
            f"data.dataset={dataset}",
            f"parallel.devices={a.devices}",
            f"train.batch_size={a.batch}",
            "parallel.prefetch=0",
            "parallel.compile_cache=off",
            *a.set,
        ]
        load = os.getloadavg()[0]
        trainer = Trainer(load_config(REPO / a.config, overrides))
        rng = np.random.default_rng(trainer.config.train.seed)
        for draw in range(a.draws):
            for row in measure(trainer, rng, a.batch, a.repeats):
                row |= {"dataset": dataset, "draw": draw, "load_before": load}
                rows.append(row)
                print(
                    f"{dataset} draw {draw} fill {row['fraction']:.2f}: budget {row['budget']} real "
                    f"{[round(x) for x in row['real_max_load']]} {row['seconds_median'] * 1e3:.1f} ms "
                    f"({row['over_full']:.3f}x the full step)",
                    flush=True,
                )
    lines = [
        "| dataset | windows kept | time over the full step (median of draws; each draw) | load |",
        "|---|---:|---|---|",
    ]
    for dataset in a.datasets:
        for frac in FRACTIONS:
            mine = [r for r in rows if r["dataset"] == dataset and r["fraction"] == frac]
            each = " / ".join(f"{r['over_full']:.3f}" for r in mine)
            med = statistics.median(r["over_full"] for r in mine)
            lines.append(f"| {dataset} | {frac:.0%} | {med:.3f} ({each}) | {mine[0]['load_before']:.1f} |")
    text = "\n".join(lines)
    print(text)
    if a.json:
        payload = {"args": {k: str(v) for k, v in vars(a).items()}, "rows": rows, "table": text}
        atomic_write_text(a.json, json.dumps(payload, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
