"""How steady is this machine's speed? One training step timed in bursts over minutes, in one process.

    python tools/bench_drift.py --dataset bitcoin_otc --seconds 120 --every 4 --json runs/bench_drift.json

A full training step (``--batch`` random windows over ``--devices`` fake devices, on its bucket) is
compiled once, then timed in bursts: ``--runs`` runs beside the packing of the next step (as training's
prefetch runs them, ``profile.time_steps``' way), their median one point, a burst every ``--every``
seconds for ``--seconds``. The same program on the same data throughout, so whatever the points vary by
is the machine's (other tenants, frequency, the host's scheduler), not the work. Printed and saved: the
points (ms), their median, min, max and coefficient of variation, and the load average beside each.
This is why ``profile`` times its steps in rounds, not in bursts (README, Cost model: profile once,
reuse): a step timed in one burst takes that moment's speed for its own.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from dygnex_jax import profile
from dygnex_jax.config import load_config
from dygnex_jax.errors import ArgumentParser, run_tool
from dygnex_jax.files import atomic_write_text, output_file
from dygnex_jax.train import Trainer


def bursts(trainer: Trainer, seconds: float, every: float, runs: int, seed: int = 3) -> list[dict]:
    """[{"at": s since the first burst, "ms": the burst's median step, "load": 1-min load}] of one step."""
    step = profile.random_step(trainer, np.random.default_rng(seed), trainer.config.train.batch_size)
    pack_next = profile.next_packer(trainer, profile.beside_step(trainer, trainer.config.train.seed))
    timed = profile.TimedStep(trainer, step)
    points = []
    with ThreadPoolExecutor(1, thread_name_prefix="dygnex-drift-pack") as pool:
        timed.run(trainer, pool, pack_next)  # compiles
        start = time.perf_counter()
        while True:
            ms = statistics.median(1e3 * timed.run(trainer, pool, pack_next) for _ in range(runs))
            points.append({"at": time.perf_counter() - start, "ms": ms, "load": os.getloadavg()[0]})
            if time.perf_counter() - start + every >= seconds:
                return points
            time.sleep(every)


def summary(points: list[dict]) -> dict:
    ms = np.array([p["ms"] for p in points])
    return {
        "bursts": len(ms),
        "median_ms": float(np.median(ms)),
        "min_ms": float(ms.min()),
        "max_ms": float(ms.max()),
        "cv": float(ms.std() / ms.mean()),
    }


def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="configs/egcn_o_bitcoin_otc.yaml")
    ap.add_argument("--dataset", default="bitcoin_otc")
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=120.0, help="how long to keep timing (default 120)")
    ap.add_argument("--every", type=float, default=4.0, help="pause between bursts, s (default 4)")
    ap.add_argument("--runs", type=int, default=8, help="runs a burst, its median one point (default 8)")
    ap.add_argument("--set", action="append", default=[], help="extra key=value")
    ap.add_argument("--json", type=output_file, default=None)
    a = ap.parse_args(argv)
    if a.devices < 1 or a.batch < 1 or a.runs < 1 or a.seconds < 0 or a.every < 0:
        ap.error("--devices, --batch and --runs must be at least 1, --seconds and --every at least 0")
    over = [f"data.dataset={a.dataset}", f"parallel.devices={a.devices}", f"train.batch_size={a.batch}"]
    trainer = Trainer(load_config(a.config, over + ["parallel.budgets=buckets", *a.set]))
    points = bursts(trainer, a.seconds, a.every, a.runs)
    got = summary(points)
    print(" ".join(f"{p['ms']:.0f}" for p in points))
    print(
        f"{got['bursts']} bursts of {a.runs} runs: median {got['median_ms']:.1f} ms, "
        f"{got['min_ms']:.1f}–{got['max_ms']:.1f} ms, coefficient of variation {got['cv']:.3f}"
    )
    if a.json:
        payload = {"args": {k: str(v) for k, v in vars(a).items()}, "points": points, "summary": got}
        atomic_write_text(a.json, json.dumps(payload, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
