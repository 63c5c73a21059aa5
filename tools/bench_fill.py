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

With ``--same-budget`` it asks the other question: do two datasets' steps cost the same on one budget?
Each draw packs one full step per dataset, the largest of their budgets (column by column) becomes every
dataset's planned budget, and the datasets' steps — one program, their own windows — are timed
round-robin; each row gives its time over the first dataset's.

With ``--budgets N,E,Q,K ...`` it times given budgets (a run's planned ones, say, from ``summary.json``)
with the same small step of the first dataset (one window a device) on each, round-robin: what each
budget costs as a program, without the run's windows, packing or schedule around it. ``--order both``
asks whether a program costs more right after another program ran (the profile's rounds) than after
itself (a training run on one budget): ``--blocks`` times, every budget runs ``--repeats`` times
round-robin, then ``--repeats`` times back to back, budget after budget (the first run of each block
dropped); each row gives both medians and their ratio.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

from dygnex_jax import parallel, profile
from dygnex_jax.config import load_config
from dygnex_jax.epoch_loop import run_step
from dygnex_jax.errors import ArgumentParser, UserError, run_tool
from dygnex_jax.files import atomic_write_text, output_file
from dygnex_jax.padding import Budget
from dygnex_jax.train import Trainer

REPO = Path(__file__).resolve().parents[1]

FRACTIONS = (1.0, 0.75, 0.5, 0.25)


def round_robin(runs: list[tuple[Trainer, dict, Budget]], repeats: int) -> list[list[float]]:
    """Seconds of each (trainer, host batch, budget) step as training times it (``epoch_loop.run_step``),
    ``repeats`` rounds of one run each after a round that compiles and warms up; alternated so that a
    drift of the machine weighs on all alike."""
    seconds = [[] for _ in runs]
    for rep in range(repeats + 1):
        for got, (trainer, batch, budget) in zip(seconds, runs):
            took = run_step(trainer, parallel.shard_batch(trainer.mesh, batch), budget)[1]
            if rep:
                got.append(took)
    return seconds


def back_to_back(runs: list[tuple[Trainer, dict, Budget]], repeats: int) -> list[list[float]]:
    """As ``round_robin``, but each step's ``repeats`` timed runs come one after another (one untimed run
    first: the program that ran before it was another's)."""
    seconds = []
    for trainer, batch, budget in runs:
        took = [
            run_step(trainer, parallel.shard_batch(trainer.mesh, batch), budget)[1]
            for _ in range(repeats + 1)
        ]
        seconds.append(took[1:])
    return seconds


def ordered(runs: list, repeats: int, order: str, blocks: int) -> dict[str, list[list[float]]]:
    """Seconds of each run per order ("round_robin", "back_to_back"); with ``order`` "both" the two
    alternate ``blocks`` times, so that a drift of the machine weighs on both alike."""
    got = {name: [[] for _ in runs] for name in ("round_robin", "back_to_back")}
    kinds = ("round_robin", "back_to_back") if order == "both" else (order.replace("-", "_"),)
    for _ in range(blocks):
        for kind in kinds:
            timed = (round_robin if kind == "round_robin" else back_to_back)(runs, repeats)
            for mine, more in zip(got[kind], timed):
                mine.extend(more)
    return {kind: got[kind] for kind in kinds}


def draw_step(trainer: Trainer, rng, batch_size: int) -> tuple[list[list[int]], Budget]:
    """``batch_size`` random training windows split over the devices, and the budget they pack on alone."""
    parts = profile.random_step(trainer, rng, batch_size)
    trainer.planned = None
    return parts, trainer.pack(parts, "train", epoch=0)[2]


def measure(trainer: Trainer, rng, batch_size: int, repeats: int) -> list[dict]:
    """One random step and its thinner variants on the full step's budget -> one row per variant."""
    parts, budget = draw_step(trainer, rng, batch_size)
    trainer.planned = [budget]  # every variant runs on the full step's budget
    variants = []
    for frac in FRACTIONS:
        step = [part[: max(1, round(len(part) * frac))] for part in parts]
        batch, _, got = trainer.pack(step, "train", epoch=0)
        if got != budget:  # a subset of a step's windows always fits the step's own budget
            raise RuntimeError(f"a {frac:.0%} step packed on {got}, not the full step's {budget}")
        real = np.max([trainer.train_costs[part].sum(axis=0) for part in step], axis=0)
        variants.append((frac, batch, real))
    seconds = dict(
        zip(FRACTIONS, round_robin([(trainer, batch, budget) for _, batch, _ in variants], repeats))
    )
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


def same_budget(trainers: dict[str, Trainer], rngs: dict, batch_size: int, repeats: int) -> list[dict]:
    """One full step per dataset, all on the largest of their budgets -> one row per dataset."""
    drawn = {name: draw_step(t, rngs[name], batch_size) for name, t in trainers.items()}
    budget = Budget(*np.max([b.as_tuple() for _, b in drawn.values()], axis=0).tolist())
    batches = {}
    for name, t in trainers.items():
        t.planned = [budget]
        batch, _, got = t.pack(drawn[name][0], "train", epoch=0)
        if got != budget:
            raise RuntimeError(f"{name}'s step packed on {got}, not the common {budget}")
        batches[name] = batch
    seconds = dict(
        zip(trainers, round_robin([(t, batches[name], budget) for name, t in trainers.items()], repeats))
    )
    first = statistics.median(seconds[next(iter(trainers))])
    return [
        {
            "dataset": name,
            "own_budget": list(drawn[name][1].as_tuple()),
            "budget": list(budget.as_tuple()),
            "seconds_median": statistics.median(seconds[name]),
            "seconds": seconds[name],
            "over_first": statistics.median(seconds[name]) / first,
        }
        for name in trainers
    ]


def trainer_for(a, dataset: str) -> Trainer:
    overrides = [
        f"data.dataset={dataset}",
        f"parallel.devices={a.devices}",
        f"train.batch_size={a.batch}",
        "parallel.prefetch=0",
        "parallel.compile_cache=off",
        *a.set,
    ]
    return Trainer(load_config(REPO / a.config, overrides))


def fills(a) -> tuple[list[dict], str]:
    rows = []
    for dataset in a.datasets:
        load = os.getloadavg()[0]
        trainer = trainer_for(a, dataset)
        rng = np.random.default_rng(trainer.config.train.seed)
        for draw in range(a.draws):
            for row in measure(trainer, rng, a.batch, a.repeats):
                rows.append(row | {"dataset": dataset, "draw": draw, "load_before": load})
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
    return rows, "\n".join(lines)


def same(a) -> tuple[list[dict], str]:
    trainers = {d: trainer_for(a, d) for d in a.datasets}
    rngs = {d: np.random.default_rng(t.config.train.seed) for d, t in trainers.items()}
    rows = []
    for draw in range(a.draws):
        load = os.getloadavg()[0]
        for row in same_budget(trainers, rngs, a.batch, a.repeats):
            rows.append(row | {"draw": draw, "load_before": load})
            print(
                f"draw {draw} {row['dataset']}: own budget {row['own_budget']} on {row['budget']} "
                f"{row['seconds_median'] * 1e3:.1f} ms ({row['over_first']:.3f}x {a.datasets[0]}'s)",
                flush=True,
            )
    lines = [
        f"| dataset | time over {a.datasets[0]}'s on the same budget (median of draws; each draw) | load |",
        "|---|---|---|",
    ]
    for dataset in a.datasets:
        mine = [r for r in rows if r["dataset"] == dataset]
        each = " / ".join(f"{r['over_first']:.3f}" for r in mine)
        loads = " / ".join(f"{r['load_before']:.1f}" for r in mine)
        lines.append(
            f"| {dataset} | {statistics.median(r['over_first'] for r in mine):.3f} ({each}) | {loads} |"
        )
    return rows, "\n".join(lines)


def given(a) -> tuple[list[dict], str]:
    budgets = []
    for text in a.budgets:
        try:
            budgets.append(Budget(*(int(x) for x in text.split(","))))
            if min(budgets[-1].as_tuple()) < 1:
                raise ValueError
        except (TypeError, ValueError):
            msg = f"--budgets {text!r}: give four integers N,E,Q,K >= 1 (nodes, edges, pairs, windows)"
            raise UserError(msg) from None
    trainer = trainer_for(a, a.datasets[0])
    parts, own = draw_step(trainer, np.random.default_rng(trainer.config.train.seed), trainer.n_devices)
    batches = []
    for b in budgets:
        if not b.holds(own):
            raise UserError(
                f"--budgets {b.as_tuple()} cannot hold a step of one window a device ({own.as_tuple()})"
            )
        trainer.planned = [b]
        batches.append(trainer.pack(parts, "train", epoch=0)[0])
    load = os.getloadavg()[0]
    runs = [(trainer, batch, b) for batch, b in zip(batches, budgets)]
    seconds = ordered(runs, a.repeats, a.order, a.blocks)
    kinds, first = list(seconds), next(iter(seconds))
    both = len(kinds) == 2
    rows = []
    for i, b in enumerate(budgets):
        row = {"budget": list(b.as_tuple()), "load_before": load}
        for kind, each in seconds.items():
            row[f"seconds_{kind}"] = each[i]
            row[f"median_{kind}"] = statistics.median(each[i])
        row["seconds_median"], row["seconds"] = row[f"median_{first}"], row[f"seconds_{first}"]
        if both:
            row["round_robin_over_back_to_back"] = row["median_round_robin"] / row["median_back_to_back"]
        rows.append(row)
    head = " | ".join(f"seconds, {k.replace('_', ' ')} (median)" for k in kinds)
    lines = [f"| budget (nodes, edges, pairs, windows) | {head} |" + (" ratio |" if both else "")]
    lines.append("|---|" + "---:|" * (len(kinds) + both))
    for r in rows:
        cells = " | ".join(f"{r[f'median_{k}']:.4f}" for k in kinds)
        ratio = f" {r['round_robin_over_back_to_back']:.3f} |" if both else ""
        lines.append(f"| {r['budget']} | {cells} |{ratio}")
    lines.append(f"\nload before: {load:.1f}, after: {os.getloadavg()[0]:.1f}")
    return rows, "\n".join(lines)


def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="configs/egcn_o_bitcoin_otc.yaml")
    ap.add_argument("--datasets", nargs="+", default=["bitcoin_otc", "uci_collegemsg"])
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--draws", type=int, default=4, help="random steps per dataset (default 4)")
    ap.add_argument("--repeats", type=int, default=7, help="timed runs of each variant (default 7)")
    ap.add_argument("--same-budget", action="store_true", help="the datasets' steps on one common budget")
    ap.add_argument("--budgets", nargs="+", default=None, help="N,E,Q,K budgets to time as programs")
    ap.add_argument(
        "--order",
        choices=("round-robin", "back-to-back", "both"),
        default="round-robin",
        help="with --budgets: time the budgets in turn, each one's runs back to back, or both alternated",
    )
    ap.add_argument("--blocks", type=int, default=1, help="with --order: how many times the orders alternate")
    ap.add_argument("--set", action="append", default=[], help="extra key=value for every run")
    ap.add_argument("--json", type=output_file, default=None)
    a = ap.parse_args(argv)
    for name in ("devices", "batch", "draws", "repeats", "blocks"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be at least 1")
    rows, text = given(a) if a.budgets else same(a) if a.same_budget else fills(a)
    print(text)
    if a.json:
        payload = {"args": {k: str(v) for k, v in vars(a).items()}, "rows": rows, "table": text}
        atomic_write_text(a.json, json.dumps(payload, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
