"""One training step's time, before and after a change, side by side: the same config packed into one
step, compiled once, run ``--repeats`` times (median), with the dygnex_jax of this checkout and of a
reference checkout (``--ref``, e.g. a git worktree at the previous commit) in alternating subprocesses.

    git worktree add /tmp/base HEAD~1
    python tools/bench_step.py --ref /tmp/base --json runs/bench_step.json
    python tools/bench_step.py --ref /tmp/base --cases egcn_o:scan tgcn:auto --rounds 4 --repeats 30

A case is ``MODEL:LAYOUT`` (``parallel.layout``; auto = the model's own) on ``--config`` (default
configs/egcn_o_bitcoin_otc.yaml, its dataset from ``$DYGNEX_DATA``, else ../shared/datasets) with
``--devices`` fake CPU devices and ``train.batch_size=--batch``: the step is the first ``--batch``
training windows, split evenly over the devices. The rounds run the checkouts in A B / B A order, so a
drift of the machine's load weighs on both alike; the table gives each side's median over its rounds (of
the per-round medians) with the mean 1-min load average of its runs beside it, their ratio (this /
reference), the median of the per-round ratios (``paired``: the two runs of a round are neighbours in
time, so it is the figure least moved by other users of a shared machine), the compiled step's FLOPs
(XLA cost analysis) and whether both compiled programs have the same instructions per opcode (``same HLO
ops``: the same program up to names). The JSON also holds every round and where each side's dygnex_jax
was imported from.

Only the stable public pieces of the library are used (``load_config``, ``Trainer(config)``,
``Trainer.pack_train``, ``Trainer.train_step``, ``parallel.shard_batch``), so one script runs against
either checkout. ``--worker`` measures one case in this process (what the rounds run).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from dygnex_jax.errors import ArgumentParser, run_tool
from dygnex_jax.files import atomic_write_text, output_file

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "egcn_o_bitcoin_otc.yaml"
CASES = ("egcn_o:scan", "gcrn_gru:scan", "tgcn:auto", "tgcn:scan")
MARK = "BENCH_STEP "


def hlo_ops(text: str) -> collections.Counter:
    """Instructions per opcode of an optimised HLO module, fused computations included: equal counts on
    both sides = the same program up to names and the order of loop-carried values."""
    found = (_OPCODE.match(line) for line in text.splitlines())
    return collections.Counter(m.group(1) for m in found if m)


_OPCODE = re.compile(r"\s*(?:ROOT )?%\S+ = .*?\b([a-z][a-z0-9_\-]*)\(")


def measure(args) -> dict:
    """Worker: build the trainer, pack and compile one step, time ``args.repeats`` runs of it."""
    import jax
    import numpy as np

    import dygnex_jax.models.layers
    import dygnex_jax.train
    from dygnex_jax import parallel
    from dygnex_jax.config import load_config
    from dygnex_jax.train import Trainer

    model, layout = args.case.split(":")
    overrides = [
        f"model.name={model}",
        f"parallel.layout={layout}",
        f"parallel.devices={args.devices}",
        f"train.batch_size={args.batch}",
        *args.override,
    ]
    trainer = Trainer(load_config(args.config, overrides))
    ids = np.arange(args.batch)
    step = [part.tolist() for part in np.array_split(ids, args.devices)]
    batch = trainer.pack_train(step, 1)[0]
    placed = parallel.shard_batch(trainer.mesh, batch)
    params, opt_state = trainer.params, trainer.opt_state
    start = time.perf_counter()
    compiled = trainer.train_step.lower(params, opt_state, placed).compile()
    compile_s = time.perf_counter() - start
    ops = hlo_ops(compiled.as_text())
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list | tuple) else cost or {}
    for _ in range(args.warmup):
        params, opt_state, stats = compiled(params, opt_state, placed)
    jax.block_until_ready((params, opt_state))
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        params, opt_state, stats = compiled(params, opt_state, placed)
        jax.block_until_ready((params, opt_state, stats))
        times.append(time.perf_counter() - start)
    return {
        "case": args.case,
        "median_s": statistics.median(times),
        "times_s": times,
        "compile_s": compile_s,
        "flops": float(cost.get("flops", float("nan"))),
        "bytes_accessed": float(cost.get("bytes accessed", float("nan"))),
        "hlo_instructions": sum(ops.values()),
        "hlo_ops_sha1": hashlib.sha1(json.dumps(sorted(ops.items())).encode()).hexdigest(),
        "batch_shapes": {k: list(v.shape) for k, v in sorted(batch.items())},
        # the modules the step ran (dygnex_jax is a namespace package: an editable install may add portions)
        "imported_from": [
            str(Path(m.__file__).resolve()) for m in (dygnex_jax.train, dygnex_jax.models.layers)
        ],
        "layout": trainer.layout,
        "loadavg": os.getloadavg()[0],
    }


def run_worker(tree: Path, case: str, args, env: dict) -> dict:
    """``--worker`` for ``case`` in a subprocess importing dygnex_jax from ``tree``."""
    argv = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        "--case",
        case,
        "--config",
        str(args.config),
        "--devices",
        str(args.devices),
        "--batch",
        str(args.batch),
        "--repeats",
        str(args.repeats),
        "--warmup",
        str(args.warmup),
        *[a for o in args.override for a in ("--override", o)],
    ]
    from dygnex_jax.research import ab_runs  # the driver's alone: a worker may run an older tree

    load_before = os.getloadavg()[0]
    out = ab_runs.run_worker(tree, argv, env, MARK, case)
    out["loadavg_before"] = load_before
    return out


def compare(args) -> dict:
    """Alternate the two checkouts over ``args.rounds`` rounds for every case; figures per side."""
    from dygnex_jax.research import ab_runs

    trees = {"ref": ab_runs.reference_tree(args.ref), "this": REPO}
    env = {
        **os.environ,
        "DYGNEX_DATA": os.environ.get("DYGNEX_DATA", str(REPO.parent / "shared" / "datasets")),
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={args.devices}",
        "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu"),
    }
    cache = tempfile.TemporaryDirectory(prefix="bench-step-cache-")  # compile once per side and case
    env["DYGNEX_CACHE"] = cache.name
    rounds: dict[str, dict[str, list]] = {c: {"ref": [], "this": []} for c in args.cases}
    try:
        for r in range(args.rounds):
            for case in args.cases:
                for side in ab_runs.side_order(r):
                    res = run_worker(trees[side], case, args, env)
                    rounds[case][side].append(res)
                    print(
                        f"round {r + 1}/{args.rounds} {case:<14} {side:<4} median {res['median_s'] * 1e3:8.2f} ms"
                        f"  load {res['loadavg']:.2f}",
                        flush=True,
                    )
    finally:
        cache.cleanup()
    summary = {}
    for case, sides in rounds.items():
        s = {}
        for side, runs in sides.items():
            s[side] = {
                "median_ms": statistics.median(x["median_s"] for x in runs) * 1e3,
                "round_medians_ms": [x["median_s"] * 1e3 for x in runs],
                "loadavg": statistics.mean(x["loadavg"] for x in runs),
                "round_loadavg": [x["loadavg"] for x in runs],
                "flops": runs[0]["flops"],
                "bytes_accessed": runs[0]["bytes_accessed"],
                "hlo_instructions": runs[0]["hlo_instructions"],
                "layout": runs[0]["layout"],
                "imported_from": runs[0]["imported_from"],
            }
        s["ratio"] = s["this"]["median_ms"] / s["ref"]["median_ms"]
        s["same_shapes"] = sides["this"][0]["batch_shapes"] == sides["ref"][0]["batch_shapes"]
        s["same_hlo_ops"] = sides["this"][0]["hlo_ops_sha1"] == sides["ref"][0]["hlo_ops_sha1"]
        s["paired_ratio"] = statistics.median(
            b["median_s"] / a["median_s"] for a, b in zip(sides["ref"], sides["this"])
        )
        summary[case] = s
    config_text = Path(args.config).read_bytes()
    return {
        "config": str(args.config),
        "config_sha1": hashlib.sha1(config_text).hexdigest(),
        "devices": args.devices,
        "batch": args.batch,
        "repeats": args.repeats,
        "rounds_per_side": args.rounds,
        "overrides": args.override,
        "ref": str(trees["ref"]),
        "this": str(trees["this"]),
        "cores": os.cpu_count(),
        "summary": summary,
        "rounds": rounds,
    }


def table(result: dict) -> str:
    head = (
        f"{'case':<14} {'layout':<6} {'ref ms':>9} {'load':>5} {'this ms':>9} {'load':>5} {'ratio':>6}"
        f" {'paired':>6} {'GFLOP ref/this':>15} {'same HLO ops':>12}"
    )
    rows = [head, "-" * len(head)]
    for case, s in result["summary"].items():
        a, b = s["ref"], s["this"]
        rows.append(
            f"{case:<14} {b['layout']:<6} {a['median_ms']:9.2f} {a['loadavg']:5.2f} {b['median_ms']:9.2f}"
            f" {b['loadavg']:5.2f} {s['ratio']:6.3f} {s['paired_ratio']:6.3f}"
            f" {a['flops'] / 1e9:7.2f}/{b['flops'] / 1e9:<7.2f} {str(s['same_hlo_ops']):>12}"
        )
    return "\n".join(rows)


def main(argv=None) -> None:
    ap = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", help="reference checkout (its dygnex_jax is compared with this one's)")
    ap.add_argument("--cases", nargs="+", default=list(CASES), help="MODEL:LAYOUT ... (default: %(default)s)")
    ap.add_argument("--config", default=str(CONFIG))
    ap.add_argument("--override", action="append", default=[], help="one more config override KEY=VALUE")
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--batch", type=int, default=16, help="training windows in the step")
    ap.add_argument("--repeats", type=int, default=20, help="timed runs of the step per round")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3, help="rounds per checkout (A B, B A, ...)")
    ap.add_argument("--json", type=output_file, help="write the figures here")
    ap.add_argument("--worker", action="store_true", help="measure --case in this process, print JSON")
    ap.add_argument("--case", help="(--worker) MODEL:LAYOUT")
    args = ap.parse_args(argv)
    if args.worker:
        print(MARK + json.dumps(measure(args)), flush=True)
        return
    if not args.ref:
        ap.error("--ref DIR is required (or --worker --case MODEL:LAYOUT)")
    result = compare(args)
    print(table(result))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(Path(args.json), json.dumps(result, indent=1))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    sys.exit(run_tool(lambda: main() or 0))
