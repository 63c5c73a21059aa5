"""Host packing of training steps timed, before and after a change, side by side: ``Trainer.pack_train``
(sampling the step's negatives, mapping them to local ids, packing the padded batch) of the first
``--steps`` training steps of a config, with the dygnex_jax of this checkout and of a reference checkout
(``--ref``, e.g. a git worktree at the previous commit) in alternating subprocesses.

    git worktree add /tmp/base HEAD~1
    python tools/bench_pack.py --ref /tmp/base --config configs/repro/egcn_o_as733.yaml --json runs/pack.json

Every step is one training window per device (``--devices`` fake devices, ``train.batch_size`` =
devices), packed once to warm up and then timed (wall and process CPU seconds); a side's figure is the
median over its steps, and the rounds alternate A B / B A so that a drift of the machine's load weighs
on both alike. The 1-minute load average is recorded with every run, and a SHA-1 of the packed arrays
shows whether both checkouts packed the same batches.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

from dygnex_jax.errors import ArgumentParser, UserError, run_tool
from dygnex_jax.files import atomic_write_text, json_text, output_file

REPO = Path(__file__).resolve().parents[1]
MARK = "BENCH_PACK "


def worker(args) -> dict:
    """Pack the config's first ``args.steps`` steps in this process: per-step wall and CPU seconds."""
    import numpy as np

    from dygnex_jax.config import load_config
    from dygnex_jax.train import Trainer

    trainer = Trainer(load_config(args.config, [f"parallel.devices={args.devices}", *args.override]))
    have = len(trainer.windows.splits["train"])
    if args.steps * args.devices > have:
        raise UserError(f"--steps {args.steps} x --devices {args.devices} windows, but the config has {have}")
    steps = [[[d + s * args.devices] for d in range(args.devices)] for s in range(args.steps)]
    trainer.pack_train(steps[0], 1)  # warm-up
    wall, cpu, digest = [], [], hashlib.sha1()
    for step in steps:
        w0, c0 = time.perf_counter(), time.process_time()
        batch = trainer.pack_train(step, 1)[0]
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
        for key in sorted(batch):
            digest.update(np.ascontiguousarray(batch[key]).tobytes())
    import dygnex_jax.data.windows

    out = {"wall_s": wall, "cpu_s": cpu, "sha1": digest.hexdigest(), "loadavg": os.getloadavg()[0]}
    return out | {"imported_from": str(Path(dygnex_jax.data.windows.__file__).resolve())}


def run_side(tree: Path, args) -> dict:
    argv = [sys.executable, str(Path(__file__).resolve()), "--worker", "--config", str(args.config)]
    argv += ["--devices", str(args.devices), "--steps", str(args.steps)]
    argv += [a for o in args.override for a in ("--override", o)]
    env = {
        **os.environ,
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={args.devices}",
        "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu"),
    }
    from dygnex_jax.research.ab_runs import run_worker  # the driver's alone: a worker may run an older tree

    return run_worker(tree, argv, env, MARK, "packing")


def main(argv=None) -> dict | None:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ref", help="reference checkout (its dygnex_jax is compared with this one's)")
    ap.add_argument("--config", default=str(REPO / "configs" / "repro" / "egcn_o_as733.yaml"))
    ap.add_argument("--override", action="append", default=[], help="one more config override KEY=VALUE")
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--steps", type=int, default=8, help="training steps packed per run")
    ap.add_argument("--rounds", type=int, default=2, help="runs per checkout (A B, B A, ...)")
    ap.add_argument("--json", type=output_file, help="write the figures here")
    ap.add_argument("--worker", action="store_true", help="pack in this process and print JSON")
    args = ap.parse_args(argv)
    if not (1 <= args.steps <= 1000 and 1 <= args.rounds <= 20 and 1 <= args.devices <= 64):
        raise UserError("--steps must be 1..1000, --rounds 1..20 and --devices 1..64")
    if args.worker:
        try:
            print(MARK + json.dumps(worker(args)), flush=True)
        except UserError as e:
            raise SystemExit(f"error: {e}") from None
        return None
    from dygnex_jax.research.ab_runs import reference_tree, side_order

    trees = {"ref": reference_tree(args.ref), "this": REPO}
    runs: dict[str, list] = {"ref": [], "this": []}
    for r in range(args.rounds):
        for side in side_order(r):
            res = run_side(trees[side], args)
            runs[side].append(res)
            print(
                f"round {r + 1}/{args.rounds} {side:<4} median {statistics.median(res['wall_s']) * 1e3:8.1f} ms"
                f" wall, {statistics.median(res['cpu_s']) * 1e3:8.1f} ms CPU per step, load {res['loadavg']:.2f}",
                flush=True,
            )
    summary = {
        side: {
            "median_wall_ms": statistics.median(x for r in rs for x in r["wall_s"]) * 1e3,
            "median_cpu_ms": statistics.median(x for r in rs for x in r["cpu_s"]) * 1e3,
            "loadavg": statistics.mean(r["loadavg"] for r in rs),
        }
        for side, rs in runs.items()
    }
    summary["ratio_wall"] = summary["this"]["median_wall_ms"] / summary["ref"]["median_wall_ms"]
    summary["same_batches"] = len({r["sha1"] for rs in runs.values() for r in rs}) == 1
    print(
        f"ref {summary['ref']['median_wall_ms']:.1f} ms, this {summary['this']['median_wall_ms']:.1f} ms per step"
        f" (ratio {summary['ratio_wall']:.3f}); same batches: {summary['same_batches']}"
    )
    out = {"config": args.config, "devices": args.devices, "steps": args.steps, "overrides": args.override}
    out |= {"ref": str(trees["ref"]), "this": str(trees["this"]), "summary": summary, "runs": runs}
    if args.json:
        atomic_write_text(args.json, json_text(out, indent=1))
        print(f"wrote {args.json}")
    return out


if __name__ == "__main__":
    sys.exit(run_tool(lambda: main() and 0))
