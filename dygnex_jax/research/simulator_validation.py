"""Simulated vs measured per-epoch time of real training runs on this machine (``tools/validate_simulator.py``).

For every dataset (``DATASETS``), ``validate_dataset``:

1. profiles the cost model on this machine at 1 device (``python -m dygnex_jax profile``);
2. trains with it (``schedule.cost_model=`` that file, so the trainer's scheduler and the simulator's
   balance the same seconds) at each device count in one process (fake CPU devices), and at N processes
   x 1 device through ``tools/launch_local.py`` (gloo); ``parallel.reuse_slack=0`` and
   ``parallel.compile_steps=0`` so that every step runs on its own shape bucket, as the simulator
   assumes. The training runs are the calling script in worker mode, which times them with
   ``time_epochs``;
3. simulates the same epochs (same seed, epoch numbers, batch size, buckets) with ``simulate.py``
   (``simulated_epochs``): the profiled model on the padded budgets, × a *device slowdown* for fake
   devices sharing this machine's cores (and with other users' work), plus a ring all-reduce over the
   ``loopback`` link for the multi-process run (the fake devices of one process all-reduce in memory:
   link ``none``). The slowdown is calibrated per epoch (``calibrate``): right before and after every
   timed epoch, the run times one step in which *each* device runs the same two windows; slowdown = the
   mean of the two (less the modelled all-reduce) / the cost model's prediction for that step's budget.
   The uncalibrated figure (``host_slowdown(P, cores)``: P / cores when the fake devices outnumber the
   cores, as if the machine were ours alone) is reported beside it;
4. compares. *Measured* epoch time (the protocol of ``tools/bench_schedulers.py``): every epoch runs
   with ``Trainer.train_epoch(e)``; if it compiled a shape bucket it was a warm-up and runs again with
   the same epoch number (same schedule, negatives and buckets, no compilation), and that run is timed.
   Two figures per epoch: the sum of its step times (what the simulator models) and its wall time (adds
   host-side packing of the batches, which the simulator does not model); the median over epochs is
   reported. Error = simulated / measured - 1.

``markdown`` and ``plot`` show the rows. The runs start from the checkout (``REPO``: its ``configs/``
and ``tools/launch_local.py``); JAX is imported by the functions that train, in the worker processes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .. import simulate as sim
from ..config import load_config
from ..errors import UserError
from ..schedule.cost import CostModel

REPO = Path(__file__).resolve().parents[2]  # the checkout the runs start in (configs/, tools/)
DATASETS = {
    "synthetic": (None, ()),
    "bitcoin_otc": ("configs/egcn_o_bitcoin_otc.yaml", ()),
}


def _env(devices: int) -> dict:
    return {
        **os.environ,
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
        "JAX_PLATFORMS": "cpu",
    }


def run_checked(cmd: list[str], env: dict, log) -> None:
    """Run ``cmd`` in the checkout; a failure is one UserError with the last lines of its output."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise UserError(f"{' '.join(cmd[:4])} ... failed (exit {proc.returncode}): {' | '.join(tail)}")
    log(f"  done in {time.perf_counter() - start:.0f} s: {' '.join(cmd[2:6])} ...")


def config_args(name: str) -> list[str]:
    path, overrides = DATASETS[name]
    return (["--config", path] if path else []) + list(overrides)


# --- the training runs (worker processes) -------------------------------------------------------------


def calibrate(trainer, n_windows: int = 2, repeats: int = 5) -> tuple[float, list[float]]:
    """Median seconds of one step in which *every* device runs the same first ``n_windows`` training
    windows: the same per-device budget at any P, so its ratio to the 1-device figure is the speed of a
    device at this P (fake devices sharing the cores, plus in-process or cross-process collectives)."""
    from .. import parallel

    step = [list(range(n_windows))] * trainer.n_devices
    batch, _, budget = trainer.pack(step, "train", epoch=0)
    times = []
    for i in range(repeats + 1):
        start = time.perf_counter()
        trainer.params, trainer.opt_state, stats = trainer.train_step(
            trainer.params, trainer.opt_state, parallel.shard_batch(trainer.mesh, batch)
        )
        float(stats["loss"])
        if i:
            times.append(time.perf_counter() - start)
    trainer.packer.forget()
    return statistics.median(times), trainer.padded_work(budget).tolist()


def time_epochs(trainer, epochs: int) -> dict:
    """Train and time epochs 1..``epochs`` (a compiling epoch is a warm-up, run again and timed), each
    bracketed by calibration steps: the worker's result (devices, calibration, per-epoch rows)."""
    calibration, calibration_budget = calibrate(trainer)
    rows = []
    for e in range(1, epochs + 1):
        before = len(trainer.train_step.traces)
        row = trainer.train_epoch(e)
        warmup = len(trainer.train_step.traces) > before
        if warmup:  # it compiled: run the same epoch again (same schedule and shapes) and time that
            before = len(trainer.train_step.traces)
            calib_before = calibrate(trainer)[0]
            row = trainer.train_epoch(e)
        else:
            calib_before = calibration
        calibration = calibrate(trainer)[0]  # the machine's load drifts: bracket every timed epoch
        rows.append(
            {
                "epoch": e,
                "calibration_seconds": 0.5 * (calib_before + calibration),
                "wall_seconds": row["epoch_seconds"],
                "step_seconds": sum(s["seconds"] for s in trainer.last_steps),
                "steps": len(trainer.last_steps),
                "warmed_up": warmup,
                "compiled_in_timed_run": len(trainer.train_step.traces) > before,
                "budgets": [s["budget"] for s in trainer.last_steps],
            }
        )
    return {
        "devices": trainer.n_devices,
        "calibration_seconds": calibration,
        "calibration_budget": calibration_budget,
        "epochs": rows,
    }


# --- the simulator ----------------------------------------------------------------------------------


def simulated_epochs(
    config,
    model: CostModel,
    p: int,
    epochs: list[int],
    link: str,
    cores: int,
    slowdown: float = 0.0,
    timing: CostModel | None = None,
) -> list[float]:
    """The simulator's epoch seconds; ``model`` gives the scheduler's weights (as in the trainer's run),
    ``timing`` (default ``model``) the step times."""
    inst = sim.instance_from_config(config)
    model = dataclasses.replace(model, window=inst.window)
    alpha, beta, gamma = (float(x) for x in model.weights(inst.window))
    sched_cfg = config.schedule
    if alpha + beta + gamma > 0:
        sched_cfg = dataclasses.replace(sched_cfg, alpha=alpha, beta=beta, gamma=gamma)
    features = config.data.max_degree if config.data.features == "degree" else 1
    out = []
    for e in epochs:
        setup = sim.Setup(
            model=dataclasses.replace(timing or model, window=inst.window),
            link=sim.LINKS[link],
            param_bytes=4.0 * sim.param_count(config.model, features),
            model_cfg=config.model,
            num_features=features,
            schedule_cfg=sched_cfg,
            batch_size=config.train.batch_size,
            bucket_ratio=config.parallel.bucket_ratio,
            min_bucket=config.parallel.min_bucket,
            host_cores=cores,
            slowdown=slowdown,
            seed=config.train.seed,
            epoch=e,
        )
        out.append(sim.simulate(inst, config.schedule.method, p, setup)["epoch_seconds"])
    return out


# --- one dataset: profile, train, simulate, compare ---------------------------------------------------


def profiled_model(name: str, args, work: Path, log) -> Path:
    """The dataset's cost model profiled at 1 device (``work/profile/cost_model.json``, kept)."""
    prof = work / "profile"
    if not (prof / "cost_model.json").exists():
        log(f"{name}: profiling the cost model at 1 device")
        cmd = [sys.executable, "-m", "dygnex_jax", "profile", *config_args(name), "--out", str(prof)]
        cmd += [
            "--steps",
            str(args.profile_steps),
            "--repeats",
            "2",
            "--no-cache",
            "parallel.devices=1",
            *args.set,
        ]
        run_checked(cmd, _env(1), log)
    return prof / "cost_model.json"


def train_run(name: str, label: str, procs: int, per: int, overrides, args, work: Path, log, script) -> dict:
    """The worker's result of one training run (``procs`` processes x ``per`` devices), trained by
    ``script`` in worker mode unless its JSON is already in ``work``."""
    result = work / f"{label.replace(' ', '_')}.json"
    if not result.exists():
        log(f"{name}: training at {label}")
        me = [str(Path(script).resolve()), "--worker", str(result), "--epochs", str(args.epochs)]
        cfg = [DATASETS[name][0] or "-", *overrides, f"parallel.devices={0 if procs > 1 else per}"]
        if procs == 1:
            run_checked([sys.executable, *me, *cfg], _env(per), log)
        else:
            launch = [
                str(REPO / "tools" / "launch_local.py"),
                str(procs),
                "--devices-per-process",
                str(per),
            ]
            run_checked([sys.executable, *launch, "--script", me[0], "--", *me[1:], *cfg], _env(per), log)
    return json.loads(result.read_text())


def compare_run(name, label, procs, p, data, model, overrides, args, alt) -> dict:
    """One run's row: measured (step and wall) vs simulated epoch seconds, calibrated and not, and
    with ``alt`` = (another dataset, its profiled model) for the step times when given."""
    measured = data["epochs"]
    config_path = DATASETS[name][0]
    config = load_config(REPO / config_path if config_path else None, [*overrides, f"parallel.devices={p}"])
    link = "loopback" if procs > 1 else "none"
    epochs = [m["epoch"] for m in measured]
    calib_model = float(model.predict_costs(np.array([data["calibration_budget"]]))[0])
    features = config.data.max_degree if config.data.features == "degree" else 1
    allreduce = sim.ring_allreduce_seconds(4.0 * sim.param_count(config.model, features), p, sim.LINKS[link])
    uncalibrated = simulated_epochs(config, model, p, epochs, link, args.host_cores)
    slowdowns = [max(m["calibration_seconds"] - allreduce, 1e-9) / calib_model for m in measured]
    simulated = [
        simulated_epochs(config, model, p, [e], link, args.host_cores, f)[0]
        for e, f in zip(epochs, slowdowns)
    ]
    step = statistics.median(m["step_seconds"] for m in measured)
    wall = statistics.median(m["wall_seconds"] for m in measured)
    pred = statistics.median(simulated)
    other = {}
    if alt is not None and alt[0] != name:  # the other dataset's profiled model: a cross-dataset check
        alt_calib = float(alt[1].predict_costs(np.array([data["calibration_budget"]]))[0])
        alt_sim = [
            simulated_epochs(
                config,
                model,
                p,
                [e],
                link,
                args.host_cores,
                max(m["calibration_seconds"] - allreduce, 1e-9) / alt_calib,
                timing=alt[1],
            )[0]
            for e, m in zip(epochs, measured)
        ]
        other = {"model_from": alt[0], "simulated_seconds": statistics.median(alt_sim)}
        other["error_vs_steps"] = other["simulated_seconds"] / step - 1
    return {
        "dataset": name,
        "run": label,
        "processes": procs,
        "devices": p,
        "measured_step_seconds": step,
        "measured_wall_seconds": wall,
        "simulated_seconds": pred,
        "error_vs_steps": pred / step - 1,
        "error_vs_wall": pred / wall - 1,
        "per_epoch": {"measured": measured, "simulated": simulated},
        "link": link,
        "slowdown": statistics.median(slowdowns),
        "calibration_seconds": data["calibration_seconds"],
        "simulated_uncalibrated_seconds": statistics.median(uncalibrated),
        "other_cost_model": other,
        "host_slowdown": sim.host_slowdown(p, args.host_cores),
        "cost_model": model.to_dict(),
    }


def validate_dataset(name: str, args, out: Path, log, alt=None, *, script) -> list[dict]:
    """Profile, train (``script`` in worker mode) at every run of ``args``, simulate and compare: one
    row per run. ``alt``: (dataset name, its profiled model) for the cross-dataset check, or None."""
    work = out / name
    work.mkdir(parents=True, exist_ok=True)
    model_path = profiled_model(name, args, work, log)
    model = CostModel.load(model_path)
    overrides = [
        "parallel.budgets=buckets",
        "parallel.reuse_slack=0",
        "parallel.compile_steps=0",
        *args.set,
        f"schedule.cost_model={model_path}",
    ]
    runs = [(f"{p} dev", 1, p) for p in args.devices]
    if args.processes:
        runs.append((f"{args.processes} proc x 1 dev", args.processes, 1))
    rows = []
    for label, procs, per in runs:
        data = train_run(name, label, procs, per, overrides, args, work, log, script)
        r = compare_run(name, label, procs, procs * per, data, model, overrides, args, alt)
        rows.append(r)
        step, wall, pred = r["measured_step_seconds"], r["measured_wall_seconds"], r["simulated_seconds"]
        log(
            f"{name} {label}: measured {step:.3f} s (steps) / {wall:.3f} s (wall), simulated {pred:.3f} s, "
            f"error {100 * (pred / step - 1):+.1f}% / {100 * (pred / wall - 1):+.1f}% (slowdown {r['slowdown']:.2f}; "
            f"uncalibrated {r['simulated_uncalibrated_seconds']:.3f} s)"
        )
    return rows


# --- output -------------------------------------------------------------------------------------------


def markdown(rows: list[dict]) -> str:
    lines = [
        "| dataset | run | measured epoch s (steps) | measured epoch s (wall) | simulated s | error vs steps "
        "| error vs wall | device slowdown | uncalibrated s (error vs steps) | other dataset's cost model s (error) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        unc = r["simulated_uncalibrated_seconds"]
        lines.append(
            f"| {r['dataset']} | {r['run']} | {r['measured_step_seconds']:.3f} | {r['measured_wall_seconds']:.3f} | "
            f"{r['simulated_seconds']:.3f} | {100 * r['error_vs_steps']:+.1f}% | {100 * r['error_vs_wall']:+.1f}% | "
            f"{r['slowdown']:.2f} | {unc:.3f} ({100 * (unc / r['measured_step_seconds'] - 1):+.0f}%) | "
            + (
                f"{o['simulated_seconds']:.3f} ({100 * o['error_vs_steps']:+.1f}%, {o['model_from']}) |"
                if (o := r["other_cost_model"])
                else "- |"
            )
        )
    errs = [abs(r["error_vs_steps"]) for r in rows]
    if errs:
        lines.append("")
        lines.append(
            f"Mean |error| vs step time {100 * np.mean(errs):.1f}% (max {100 * max(errs):.1f}%); vs wall time "
            f"{100 * np.mean([abs(r['error_vs_wall']) for r in rows]):.1f}%."
        )
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({r["dataset"] for r in rows})
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 3.8), squeeze=False)
    for ax, name in zip(axes[0], names):
        rs = [r for r in rows if r["dataset"] == name]
        x = np.arange(len(rs))
        ax.bar(x - 0.27, [r["measured_step_seconds"] for r in rs], 0.27, label="measured (steps)")
        ax.bar(x, [r["measured_wall_seconds"] for r in rs], 0.27, label="measured (wall)")
        ax.bar(x + 0.27, [r["simulated_seconds"] for r in rs], 0.27, label="simulated")
        for i, r in enumerate(rs):
            ax.text(
                i + 0.27,
                r["simulated_seconds"],
                f"{100 * r['error_vs_steps']:+.0f}%",
                ha="center",
                va="bottom",
                fontsize=7,
            )
        ax.set_xticks(x, [r["run"] for r in rs], fontsize=8)
        ax.set_ylabel("epoch seconds")
        ax.set_title(f"{name}: simulated vs measured")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
