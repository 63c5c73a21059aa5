"""Does the cost model predict what the devices run? (``tools/bench_cost_model.py``)

1. ``profile`` (the CLI, a subprocess per dataset) at P devices on the *fit* datasets, into a cache
   folder of the benchmark's own (``DYGNEX_COST_MODELS``): one pooled model for the signature.
2. Every dataset — fitted and held out — trains ``epochs`` epochs at P devices in a worker process with
   ``schedule.cost_model: auto`` (so the run uses the pooled model, as a user's run would) and no
   evaluation; the worker writes every step's budget, seconds, compiled flag and prediction.
3. Per dataset: the median absolute error of the predicted step seconds over the steps that compiled
   nothing (a held-out figure for every dataset: the fit never saw these steps), the predicted and
   measured epoch seconds (those steps summed, per epoch, median over epochs), and the same two figures
   of the analytic model on the very same budgets (x its fake-device slowdown, P) — the
   before / after of one run.

The load average is recorded before and after every run.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

from .. import plan
from ..errors import UserError
from ..padding import Budget
from ..schedule.cost import default_cost_model
from .simulator_validation import CONFIG, REPO, overrides, run_checked
from .simulator_validation import worker as worker  # the training worker both tools run (re-exported)


def env(devices: int, cache: Path) -> dict:
    return {
        **os.environ,
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
        "JAX_PLATFORMS": "cpu",
        "DYGNEX_COST_MODELS": str(cache),
    }


def profile(dataset: str, args, work: Path, log, processes: int = 1) -> dict:
    """Profile ``dataset`` into the tool's cache (``work / "cache"``) unless done; its profile.json. One
    process at ``args.devices`` fake devices, or ``processes`` > 1 processes x 1 device
    (``tools/launch_local.py N --command profile``: an entry of that many processes, which a run of as
    many processes finds)."""
    multi = processes > 1
    out = work / (f"profile_{processes}proc_{dataset}" if multi else f"profile_{dataset}")
    if not (out / "profile.json").exists():
        log(
            f"profiling {dataset} at "
            + (f"{processes} processes x 1 device" if multi else f"{args.devices} devices")
        )
        launch = [str(REPO / "tools" / "launch_local.py"), str(processes), "--command", "profile", "--"]
        cmd = [sys.executable, *(launch if multi else ["-m", "dygnex_jax", "profile"])]
        cmd += ["--config", CONFIG, "--out", str(out), "--steps", str(args.profile_steps)]
        cmd += ["--design", args.profile_design]
        cmd += [
            "--repeats",
            str(args.repeats),
            *overrides(dataset, 0 if multi else args.devices, args.batch, args.set),
        ]
        run_checked(cmd, env(1 if multi else args.devices, work / "cache"), log)
    return json.loads((out / "profile.json").read_text())


def train(dataset: str, args, work: Path, script: str, log) -> dict:
    out = work / f"train_{dataset}.json"
    if not out.exists():
        cmd = [sys.executable, script, "--worker", str(out), "--epochs", str(args.epochs)]
        cmd += overrides(dataset, args.devices, args.batch, args.set)
        run_checked(cmd, env(args.devices, work / "cache"), log)
    return json.loads(out.read_text())


def errors(predicted: np.ndarray, seconds: np.ndarray, epochs: np.ndarray) -> dict:
    """Median |predicted / measured - 1| per step, and the epoch sums' median ratio."""
    per_epoch = [(predicted[epochs == e].sum(), seconds[epochs == e].sum()) for e in sorted(set(epochs))]
    return {
        "step_error_median": float(np.median(np.abs(predicted / seconds - 1))),
        "epoch_predicted": float(statistics.median(p for p, _ in per_epoch)),
        "epoch_measured": float(statistics.median(s for _, s in per_epoch)),
        "epoch_error": float(statistics.median(p / s - 1 for p, s in per_epoch)),
    }


def row(dataset: str, fitted: bool, data: dict, cores: int) -> dict:
    """The dataset's figures under the run's (profiled) model and under the analytic one."""
    timed = [s for s in data["steps"] if not s["compiled"]]
    if not timed:
        raise UserError(f"{dataset}: every step compiled; train more epochs")
    secs = np.array([s["seconds"] for s in timed])
    epochs = np.array([s["epoch"] for s in timed])
    pred = np.array([s["predicted_seconds"] for s in timed])
    w, layout = data["window"], data["layout"]
    slow = plan.shared_cores(data["devices"], cores, "cpu")
    analytic = plan.step_seconds_fn(default_cost_model(w, layout), w, layout, slow)
    before = np.array([analytic(Budget(*s["budget"])) for s in timed])
    return {
        "dataset": dataset,
        "fitted_on": fitted,
        "steps_timed": len(timed),
        "model": data["cost_model"]["source"],
        "profiled": errors(pred, secs, epochs),
        "analytic": errors(before, secs, epochs),
        "load": data["load"],
        "compile_seconds": data["compile_seconds"],
        "devices": data["devices"],
    }


def markdown(rows: list[dict]) -> str:
    lines = [
        "| devices | dataset | in the fit | steps timed | step error, median (profiled / analytic) | epoch s measured "
        "| epoch s predicted, profiled (error) | analytic (error) | load before / after |",
        "|---:|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        p, a = r["profiled"], r["analytic"]
        lines.append(
            f"| {r['devices']} | {r['dataset']} | {'yes' if r['fitted_on'] else '**no**'} | {r['steps_timed']} | "
            f"{100 * p['step_error_median']:.1f}% / {100 * a['step_error_median']:.0f}% | {p['epoch_measured']:.3f} | "
            f"{p['epoch_predicted']:.3f} ({100 * p['epoch_error']:+.1f}%) | {a['epoch_predicted']:.3f} "
            f"({100 * a['epoch_error']:+.0f}%) | {r['load'][0]:.1f} / {r['load'][1]:.1f} |"
        )
    lines.append("")
    lines.append("Fake CPU devices; steps that compiled nothing; error = predicted / measured - 1.")
    return "\n".join(lines) + "\n"
