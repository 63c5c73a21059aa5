"""Profiling: time real SPMD train steps over a spread of packed sizes and fit the cost model.

``python -m dygnex_jax profile --config X [--out DIR] [--steps N]`` builds steps of 1, 2, ... windows
per device drawn from the training windows (small to large), runs each budget once to compile it and
then times it ``repeats`` times (median), and fits ``seconds ≈ coef · features(padded budget)`` by
non-negative least squares (``schedule/cost.py``). The mean absolute % error is measured on held-out
steps. The model is saved as JSON; training uses it with ``schedule.cost_model=PATH`` (the
scheduler's alpha/beta/gamma become seconds per node, edge and pair) and re-fits it during training
with ``schedule.reschedule_every``.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from pathlib import Path

import numpy as np

from . import parallel
from .config import Config
from .errors import UserError
from .schedule.cost import CostModel, fit, window_features
from .train import Trainer


def time_step(trainer: Trainer, step: list, repeats: int) -> tuple[np.ndarray, float]:
    """(padded work [3], median seconds) of one train step; the first run (compile) is not timed."""
    batch, _, budget = trainer.pack(step, "train", epoch=0)
    times = []
    for i in range(repeats + 1):
        sharded = parallel.shard_batch(trainer.mesh, batch)
        start = time.perf_counter()
        trainer.params, trainer.opt_state, stats = trainer.train_step(
            trainer.params, trainer.opt_state, sharded
        )
        float(stats["loss"])
        if i:
            times.append(time.perf_counter() - start)
    return trainer.padded_work(budget), statistics.median(times)


def profile_steps(trainer: Trainer, n_steps: int, seed: int) -> list[list]:
    """A spread of steps: device p gets m windows (m = 1 .. slots), windows drawn over the size range."""
    rng = np.random.default_rng(seed)
    ids = np.arange(len(trainer.train_costs))
    order = ids[np.argsort(trainer.train_costs @ np.array([1.0, 1.0, 1.0]))]
    slots = max(4, -(-trainer.config.train.batch_size // trainer.n_devices))
    steps = []
    for i in range(n_steps):
        m = 1 + i % slots
        # a band of similar windows, moving from the lightest to the heaviest
        lo = int(len(order) * (i / max(n_steps - 1, 1)) * 0.9)
        band = order[lo : lo + max(m * trainer.n_devices * 2, 1)]
        pick = rng.choice(band, size=min(len(band), m * trainer.n_devices), replace=False)
        steps.append([list(part) for part in np.array_split(pick, trainer.n_devices)])
    return steps


def run_profile(
    config: Config, out_dir: str | Path, n_steps: int = 24, repeats: int = 3, log=print
) -> CostModel:
    # every step on its own bucket: re-using a larger compiled budget would blur the spread of sizes
    exact = dataclasses.replace(config.parallel, budgets="buckets", reuse_slack=0.0, compile_steps=0.0)
    config = dataclasses.replace(config, parallel=exact)
    trainer = Trainer(config)
    out = Path(out_dir)
    steps = profile_steps(trainer, n_steps, config.train.seed)
    rows, seconds = [], []
    seen: dict[tuple, float] = {}
    for i, step in enumerate(steps):
        work, sec = time_step(trainer, step, repeats)
        key = tuple(work)
        log(
            f"profile step {i + 1}/{len(steps)}: nodes {work[0]:.0f} edges {work[1]:.0f} pairs {work[2]:.0f}  {sec * 1e3:.1f} ms"
        )
        if key in seen:
            continue
        seen[key] = sec
        rows.append(work)
        seconds.append(sec)
    if len(rows) < 5:
        raise UserError(
            f"only {len(rows)} distinct step sizes to fit the cost model on: use more --steps, a smaller "
            "parallel.bucket_ratio, or a dataset with more windows"
        )
    model = fit(
        window_features(np.array(rows), trainer.windows.window),
        np.array(seconds),
        window=trainer.windows.window,
        source=f"profile:{config.name}:{trainer.n_devices}dev",
    )
    out.mkdir(parents=True, exist_ok=True)
    model.save(out / "cost_model.json")
    (out / "profile.json").write_text(
        json.dumps(
            {
                "rows": [list(map(float, r)) for r in rows],
                "seconds": seconds,
                "devices": trainer.n_devices,
                "window": trainer.windows.window,
                "mape": model.mape,
            },
            indent=2,
        )
        + "\n"
    )
    log(
        f"fitted {len(rows)} distinct step budgets: held-out mean abs error {100 * model.mape:.1f}% "
        f"-> {out / 'cost_model.json'}"
    )
    return model
