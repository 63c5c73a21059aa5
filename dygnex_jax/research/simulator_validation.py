"""Simulated vs measured epoch time of real training runs on this machine (``tools/validate_simulator.py``).

The protocol — nothing in the simulation is calibrated on the run it is compared with:

1. **Profile** (``cost_model_check.profile``: ``python -m dygnex_jax profile`` in a subprocess) every
   *fit* dataset at each device count P of the validation, into the tool's own cost-model cache
   (``DYGNEX_COST_MODELS`` = ``OUT/pP/cache``): one model per P pooled over the fit datasets, as a user's
   ``profile`` runs build it. The *check* datasets are never profiled.
2. **Train** every dataset (fit and check) at every run — P fake CPU devices in one process, and N
   processes x 1 device through ``tools/launch_local.py`` (gloo) — as a user's run trains: the config's
   defaults (planned budgets, prefetch), ``schedule.cost_model: auto`` (the pooled model of step 1; the
   N-process run's: the fit datasets profiled as N processes x 1 device, ``launch_local.py --command
   profile``, an entry of its own signature). The planned budgets are compiled before epoch 1; the
   worker (the calling script in worker mode, ``worker``) writes every step's budget, measured and
   predicted seconds, the epoch wall times, the planned budgets, the run's cost model and the load
   average before and after.
3. **Simulate** (``simulate.simulate``, no JAX) the same epochs: the same config, seed and epoch
   numbers, the scheduler with the run's cost-model weights, the trainer's planned budgets
   (``--shapes trained``), the run's cost model for every step's compute (x ``simulate``'s device
   slowdown: 1 where the model was profiled at the run's own device count) and a ring all-reduce of the
   gradients over the link (fake devices of one process all-reduce in memory: ``none``; the processes
   of one host: ``loopback``). Beside it, the analytic model (what the simulator used before profiles).
4. **Compare** per epoch that compiled nothing: measured = the sum of the epoch's step seconds (what the
   simulator models; the wall time adds host-side packing not overlapped and is reported too); error =
   simulated / measured - 1, median over epochs. The step figure: the median over those steps of
   |simulated step / measured step - 1| (the simulator's steps are the trainer's when the budgets and
   schedules agree, which ``same_budgets`` checks).

``markdown`` and ``plot`` show the rows. The runs start from the checkout (``REPO``: its ``configs/``
and ``tools/launch_local.py``); JAX is imported only by ``worker``, in the worker processes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np

from .. import plan
from .. import simulate as sim
from ..config import load_config
from ..errors import UserError
from ..files import save_figure
from ..schedule.cost import CostModel, default_cost_model, mean_span
from .validation_control import alone_flags, control

REPO = Path(__file__).resolve().parents[2]  # the checkout the runs start in (configs/, tools/)
CONFIG = "configs/egcn_o_bitcoin_otc.yaml"  # EvolveGCN-O with Bitcoin-OTC's settings, any dataset
DATASETS = ("synthetic", "bitcoin_otc", "bitcoin_alpha", "uci_collegemsg", "as733")


def run_checked(cmd: list[str], env: dict, log) -> None:
    """Run ``cmd`` in the checkout; a failure is one UserError with the last lines of its output."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise UserError(f"{' '.join(cmd[:4])} ... failed (exit {proc.returncode}): {' | '.join(tail)}")
    log(f"  done in {time.perf_counter() - start:.0f} s: {' '.join(cmd[2:6])} ...")


def overrides(dataset: str, devices: int, batch: int, extra: list[str]) -> list[str]:
    """The config overrides of every run of ``dataset`` (``devices``: 0 = all the processes' devices)."""
    return [f"data.dataset={dataset}", f"parallel.devices={devices}", f"train.batch_size={batch}", *extra]


# --- the training runs (worker processes) -------------------------------------------------------------


def more_epochs(
    done: int, epochs: int, horizon: int, steps: list, min_steps: int, min_seconds: float, agree=None
) -> bool:
    """Whether a validation run trains another epoch after ``done``: until ``epochs``, then while its
    ``steps`` are fewer than ``min_steps`` or took less than ``min_seconds`` in all, up to ``horizon``.
    ``agree``: the seconds made one figure for every process of a run (``parallel.max_over_processes``,
    called on every call, so each process calls it as often), so that all stop after the same epoch —
    each measures its own steps, and a process that trained one epoch more waited on the others'
    gradients until the run aborted."""
    seconds = sum(s["seconds"] for s in steps)
    seconds = agree(seconds) if agree is not None else seconds
    if done < epochs:
        return True
    return (len(steps) < min_steps or seconds < min_seconds) and done < horizon


def worker(
    result: str,
    epochs: int,
    config_overrides: list[str],
    min_steps: int = 0,
    min_seconds: float = 0.0,
    control_rounds: int = 0,
) -> None:
    """Train epochs 1..``epochs`` — more while fewer than ``min_steps`` steps ran or they took less than
    ``min_seconds`` in all (a trial of a small dataset's 3 epochs times ~1 s of steps, one moment of a
    machine whose speed wanders on a ~10 s scale), up to the epochs the budgets were planned for — (the
    planned budgets compiled first, no evaluation) and write, on the
    main process, every step, the epochs' wall times, the planned budgets, the cost model and the loads
    (the worker of ``tools/validate_simulator.py`` and ``tools/bench_cost_model.py``).
    ``control_rounds`` > 0: then the run's most used budget re-timed as the profile times a step
    (``validation_control.control``)."""
    from .. import distributed, parallel
    from ..train import Trainer

    load, started = [os.getloadavg()[0]], time.time()
    trainer = Trainer(load_config(REPO / CONFIG, config_overrides))
    planned = trainer.plan_budgets()
    horizon = max(epochs, plan.planned_epochs(trainer.config)[-1])
    trainer.compile_planned(lambda _: None)
    steps, walls = [], []
    e = 0
    while more_epochs(e, epochs, horizon, steps, min_steps, min_seconds, parallel.max_over_processes):
        e += 1
        walls.append(trainer.train_epoch(e)["epoch_seconds"])
        steps += trainer.last_steps
    load.append(os.getloadavg()[0])
    checked = control(trainer, steps, control_rounds, lambda _: None)
    if not distributed.is_main_process():
        return
    payload = {
        "steps": [
            {k: s[k] for k in ("epoch", "seconds", "compiled", "predicted_seconds", "budget")} for s in steps
        ],
        "epoch_wall_seconds": walls,
        "planned_budgets": [list(b.as_tuple()) for b in planned],
        "cost_model": trainer.cost_model.to_dict(),
        "cost_note": trainer.cost_note,
        "slowdown": trainer.slowdown,
        "layout": trainer.layout,
        "window": trainer.windows.window,
        "devices": trainer.n_devices,
        "compile_seconds": trainer.compile_seconds,
        "load": load,
        "started_unix": started,
        "control": checked,
    }
    Path(result).write_text(json.dumps(payload) + "\n")


# --- the simulator ----------------------------------------------------------------------------------


def simulated_epochs(
    config, model: CostModel, p: int, epochs: list[int], link: str, cores: int, inst=None
) -> list[dict]:
    """``simulate.simulate`` of each epoch of ``epochs`` under ``config`` with ``model`` (its weights
    schedule, as in the trainer's run; its seconds time the steps): the result rows. ``inst``: the
    config's training windows (``simulate.instance_from_config``) when the caller has them."""
    inst = inst if inst is not None else sim.instance_from_config(config)
    model = dataclasses.replace(model, window=inst.window, span=mean_span(inst.costs))
    features = inst.features(config)
    rows = []
    for e in epochs:
        setup = sim.Setup(
            model=model,
            link=sim.LINKS[link],
            param_bytes=4.0 * sim.param_count(config.model, features),
            model_cfg=config.model,
            num_features=features,
            schedule_cfg=plan.run_settings(config.schedule, model, inst.window),
            batch_size=config.train.batch_size,
            shapes="trained",
            layout=sim.window_layout(config),
            parallel=config.parallel,
            planned_epochs=sim.trainer_plan_epochs(config),
            host_cores=cores,
            seed=config.train.seed,
            epoch=e,
        )
        rows.append(sim.simulate(inst, config.schedule.method, p, setup))
    return rows


# (config, model, layout, devices, epochs, link, cores) -> the three simulations of ``compare``: a row's
# trials share their model (the cache's profile refitted around the dataset's steps) and, unless a trial
# compiled a step another did not, their epochs, so a row is simulated once, not once per trial
_SIMULATED: dict[str, tuple] = {}


def _simulations(config, model: CostModel, layout: str, p: int, epochs: list, link: str, cores: int):
    """(with ``model``, with the analytic model, with ``model`` pricing every step beside the packing)
    simulations of ``epochs`` (``simulated_epochs``), computed once per distinct input."""
    key = json.dumps([repr(config), model.to_dict(), layout, p, epochs, link, cores], sort_keys=True)
    if key not in _SIMULATED:
        inst = sim.instance_from_config(config)  # the dataset is loaded once for the three
        got = simulated_epochs(config, model, p, epochs, link, cores, inst)
        before = simulated_epochs(
            config, default_cost_model(model.window, layout), p, epochs, link, cores, inst
        )
        # the same without pricing an epoch's last step alone (as the simulator did before coef_alone)
        beside = (
            simulated_epochs(
                config, dataclasses.replace(model, coef_alone=None), p, epochs, link, cores, inst
            )
            if model.coef_alone is not None
            else got
        )
        _SIMULATED[key] = (got, before, beside)
    return _SIMULATED[key]


def compare(dataset: str, fitted: bool, label: str, procs: int, data: dict, config, cores: int) -> dict:
    """One run's row: measured vs simulated (the run's model, and the analytic one) per clean epoch."""
    p = data["devices"]
    steps = data["steps"]
    clean = sorted({s["epoch"] for s in steps} - {s["epoch"] for s in steps if s["compiled"]})
    if not clean:
        raise UserError(f"{dataset} {label}: every epoch compiled a step; train more epochs")
    link = "loopback" if procs > 1 else "none"
    model = CostModel.from_dict(data["cost_model"])
    got, before, beside = _simulations(config, model, data["layout"], p, clean, link, cores)
    measured = [[s["seconds"] for s in steps if s["epoch"] == e] for e in clean]
    step_errors = [
        s / m - 1
        for ms, r in zip(measured, got)
        if len(ms) == len(r["step_seconds"])
        for s, m in zip(r["step_seconds"], ms)
    ]
    walls = [data["epoch_wall_seconds"][e - 1] for e in clean]
    step_sum = statistics.median(sum(ms) for ms in measured)
    simulated = statistics.median(r["epoch_seconds"] for r in got)
    analytic = statistics.median(r["epoch_seconds"] for r in before)
    trainer_budgets = sorted(map(tuple, data["planned_budgets"]))
    sim_budgets = sorted(map(tuple, got[0]["budgets"]))
    return {
        "dataset": dataset,
        "fitted_on": fitted,
        "run": label,
        "processes": procs,
        "devices": p,
        "epochs": clean,
        "measured_step_seconds": step_sum,
        "measured_wall_seconds": statistics.median(walls),
        "simulated_seconds": simulated,
        "error_vs_steps": statistics.median(r["epoch_seconds"] / sum(ms) - 1 for ms, r in zip(measured, got)),
        "error_vs_wall": simulated / statistics.median(walls) - 1,
        "step_error_median": float(np.median(np.abs(step_errors))) if step_errors else None,
        "trainer_step_error_median": float(
            np.median([abs(s["predicted_seconds"] / s["seconds"] - 1) for s in steps if not s["compiled"]])
        ),
        "analytic_seconds": analytic,
        "beside_only_seconds": statistics.median(r["epoch_seconds"] for r in beside),
        "beside_only_error_vs_steps": statistics.median(
            r["epoch_seconds"] / sum(ms) - 1 for ms, r in zip(measured, beside)
        ),
        "analytic_error_vs_steps": analytic / step_sum - 1,
        "same_budgets": trainer_budgets == sim_budgets,
        "budgets": {"trained": trainer_budgets, "simulated": sim_budgets},
        "inputs": {
            "link": link,
            "allreduce_seconds_per_step": got[0]["allreduce_seconds_per_step"],
            "shapes": got[0]["shapes_label"],
            "layout": got[0]["layout"],
            "slowdown": plan.model_slowdown(model, p, cores, "cpu"),
            "host_cores": cores,
            "per_step_constant_seconds": float(model.coef[3] * model.window + model.coef[4]),
            "window_span": float(model.span),
        },
        "load": data["load"],
        "started_unix": data.get("started_unix"),
        "control": data.get("control"),
        "cost_model": {
            k: data["cost_model"].get(k)
            for k in ("source", "devices", "datasets", "compile_seconds", "coef", "coef_alone")
        },
        "per_epoch": {
            "measured": [sum(ms) for ms in measured],
            "simulated": [r["epoch_seconds"] for r in got],
            "analytic": [r["epoch_seconds"] for r in before],
            "wall": walls,
        },
    }


def run_model(entry: dict, trained: dict) -> CostModel:
    """The model a validation's training run (``worker``'s result) priced its steps with, rebuilt from
    the cost-model cache ``entry`` (``cost_cache.read_entry``): refitted around the run's step scale
    (from its cost note), with its W and span. Under a changed ``schedule.cost.fit``, the same
    measurements priced by the new fit (the A/B scripts in docs/)."""
    import re

    from .. import cost_cache

    scale = float(re.search(r"around steps of (\d+) pairs", trained["cost_note"]).group(1))
    span = float(trained["cost_model"].get("span", 0.0))
    return dataclasses.replace(cost_cache.entry_model(entry, scale), window=trained["window"], span=span)


def repriced_error(model: CostModel, trained: dict) -> float:
    """A training run's steps priced by ``model`` as the trainer prices them (an epoch's last step
    alone): the median over its epochs that compiled nothing of predicted / measured epoch seconds - 1."""
    steps, by = trained["steps"], {}
    for s, alone in zip(steps, alone_flags(steps)):
        p = float(model.predict_costs(np.array([s["budget"][:3]], float), alone=alone)[0])
        b = by.setdefault(s["epoch"], [0.0, 0.0, False])
        b[0] += s["seconds"]
        b[1] += p
        b[2] |= s["compiled"]
    return float(np.median([p / m - 1 for m, p, c in by.values() if not c]))


def median_trial(trials: list[dict]) -> dict:
    """One row of a run trained ``len(trials)`` times, each trial compared on its own (``compare``): the
    trial whose measured epoch is the median (the lower middle one of an even count: a trial that ran,
    not an average), with every trial's measured and simulated seconds, error and load beside it
    (``trials``). One trial: that trial's row unchanged."""
    if len(trials) == 1:
        return trials[0]
    order = sorted(range(len(trials)), key=lambda i: trials[i]["measured_step_seconds"])
    chosen = order[(len(trials) - 1) // 2]
    keys = (
        "measured_step_seconds",
        "simulated_seconds",
        "error_vs_steps",
        "load",
        "profile_age_minutes",
        "control",
    )
    return {
        **trials[chosen],
        "trial": chosen + 1,
        "trials": {k: [t.get(k) for t in trials] for k in keys},
    }


def _bold(text: str, yes: bool) -> str:
    return f"**{text}**" if yes else text


def trials_table(rows: list[dict], within: float = 0.15) -> str:
    """Every row's trials: the measured epoch of each (the row's median trial in bold), their spread
    (max / min - 1), the simulated epoch, the error and the load average before each trial; then how
    many rows are within ``within`` on their median trial, and on each trial; the minutes from the
    profile of the row's model to each trial's start where the run recorded them."""
    lines = [
        "| run | dataset | measured s per trial | spread | simulated s | error per trial | median trial's error "
        "| load before each trial | minutes since the profile |",
        "|---|---|---|---:|---:|---|---:|---|---|",
    ]
    n_trials = 0
    for r in rows:
        t = r.get("trials")
        if not t:
            continue
        ms, errs = t["measured_step_seconds"], t["error_vs_steps"]
        n_trials = max(n_trials, len(ms))
        chosen = r["trial"]
        sims = sorted({round(x, 3) for x in t["simulated_seconds"]})
        lines.append(
            f"| {r['run']} | {r['dataset']} | {' / '.join(_bold(f'{m:.3f}', i + 1 == chosen) for i, m in enumerate(ms))} | "
            f"{100 * (max(ms) / min(ms) - 1):.1f}% | {' / '.join(f'{x:.3f}' for x in sims)} | "
            f"{' / '.join(_bold(_pct(e), i + 1 == chosen) for i, e in enumerate(errs))} | {_pct(r['error_vs_steps'])} | "
            f"{' / '.join(f'{load[0]:.1f}' for load in t['load'])} | "
            f"{' / '.join('-' if a is None else f'{a:.0f}' for a in t.get('profile_age_minutes') or [None])} |"
        )
    timed = [r for r in rows if r.get("trials")]
    if timed:
        ok = sum(abs(r["error_vs_steps"]) <= within for r in timed)
        every = [
            sum(
                abs(r["trials"]["error_vs_steps"][i]) <= within
                for r in timed
                if i < len(r["trials"]["error_vs_steps"])
            )
            for i in range(n_trials)
        ]
        spread = [
            max(r["trials"]["measured_step_seconds"]) / min(r["trials"]["measured_step_seconds"]) - 1
            for r in timed
        ]
        lines += [
            "",
            f"{ok} of {len(timed)} rows within {100 * within:.0f}% on their median trial "
            f"(median |error| {100 * np.median([abs(r['error_vs_steps']) for r in timed]):.1f}%); "
            f"trial by trial: {', '.join(str(k) for k in every)} of {len(timed)}. The measured epoch spread over a row's trials: "
            f"median {100 * np.median(spread):.1f}%, max {100 * max(spread):.1f}%.",
        ]
    return "\n".join(lines) + "\n"


# --- output -------------------------------------------------------------------------------------------


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def _profiled_at(row: dict) -> str:
    """Where the run's model was profiled: N processes x 1 device for the process runs, else P devices."""
    procs = row.get("processes", 1)
    return f"{procs} proc x 1 dev" if procs > 1 else f"{row['cost_model']['devices']} dev"


def _beside_only(row: dict) -> str:
    """The simulation without an epoch's last step priced alone ("-" for a row from before)."""
    if row.get("beside_only_seconds") is None:
        return "-"
    return f"{row['beside_only_seconds']:.3f} ({_pct(row['beside_only_error_vs_steps'])})"


def markdown(rows: list[dict]) -> str:
    lines = [
        "| run | dataset | in the fit | measured epoch s (steps / wall) | simulated s | error vs steps "
        "| step error (median abs) | last step not priced alone (error) | analytic, before (error) "
        "| budgets as trained | link; all-reduce ms | model profiled at; per-step constant s; window span "
        "| load before / after |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|---|---|---|",
    ]
    for r in rows:
        step = r["step_error_median"]
        lines.append(
            f"| {r['run']} | {r['dataset']} | {'yes' if r['fitted_on'] else '**no**'} | "
            f"{r['measured_step_seconds']:.3f} / {r['measured_wall_seconds']:.3f} | {r['simulated_seconds']:.3f} | "
            f"**{_pct(r['error_vs_steps'])}** | {'-' if step is None else f'{100 * step:.1f}%'} | "
            f"{_beside_only(r)} | "
            f"{r['analytic_seconds']:.3f} ({_pct(r['analytic_error_vs_steps'])}) | "
            f"{'yes' if r['same_budgets'] else 'no'} ({len(r['budgets']['trained'])}) | "
            f"{r['inputs']['link']}; {1e3 * r['inputs']['allreduce_seconds_per_step']:.2f} | "
            f"{_profiled_at(r)}; {r['inputs']['per_step_constant_seconds']:.3f}; "
            f"{r['inputs'].get('window_span', 0.0):.0f} | "
            f"{r['load'][0]:.1f} / {r['load'][1]:.1f} |"
        )
    errs = [abs(r["error_vs_steps"]) for r in rows]
    if errs:
        lines += [
            "",
            f"Median |error| vs the steps' time {100 * np.median(errs):.1f}% (max {100 * max(errs):.1f}%); "
            f"the analytic model: {100 * np.median([abs(r['analytic_error_vs_steps']) for r in rows]):.0f}%.",
        ]
    return "\n".join(lines) + "\n"


def two_runs(rows: list[dict], previous: list[dict]) -> str:
    """The rows of this run beside an earlier run's (matched by run and dataset): the measured epoch,
    the simulated one and the error of each, and how far the measured moved between the runs — the
    machine's run-to-run spread, against which a row's error is read."""
    old = {(r["run"], r["dataset"]): r for r in previous}
    lines = [
        "| run | dataset | measured s: this / earlier (moved) | simulated s: this / earlier "
        "| error: this / earlier | load before: this / earlier |",
        "|---|---|---:|---:|---:|---|",
    ]
    moved = []
    for r in rows:
        o = old.get((r["run"], r["dataset"]))
        if o is None:
            continue
        m = r["measured_step_seconds"] / o["measured_step_seconds"] - 1
        moved.append(abs(m))
        lines.append(
            f"| {r['run']} | {r['dataset']} | {r['measured_step_seconds']:.3f} / "
            f"{o['measured_step_seconds']:.3f} ({_pct(m)}) | {r['simulated_seconds']:.3f} / "
            f"{o['simulated_seconds']:.3f} | {_pct(r['error_vs_steps'])} / {_pct(o['error_vs_steps'])} | "
            f"{r['load'][0]:.1f} / {o['load'][0]:.1f} |"
        )
    if moved:
        lines += [
            "",
            f"The measured epoch moved between the runs by {100 * np.median(moved):.1f}% (median over "
            f"{len(moved)} rows; max {100 * max(moved):.1f}%).",
        ]
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({r["dataset"] for r in rows})
    fig, axes = plt.subplots(1, len(names), figsize=(4.5 * len(names), 3.8), squeeze=False)
    for ax, name in zip(axes[0], names):
        rs = [r for r in rows if r["dataset"] == name]
        x = np.arange(len(rs))
        ax.bar(x - 0.2, [r["measured_step_seconds"] for r in rs], 0.4, label="measured (steps)")
        ax.bar(x + 0.2, [r["simulated_seconds"] for r in rs], 0.4, label="simulated")
        for i, r in enumerate(rs):
            ax.text(
                i + 0.2,
                r["simulated_seconds"],
                _pct(r["error_vs_steps"]),
                ha="center",
                va="bottom",
                fontsize=7,
            )
        ax.set_xticks(x, [r["run"] for r in rs], fontsize=7, rotation=20)
        ax.set_ylabel("epoch seconds")
        ax.set_title(f"{name}{'' if rs[0]['fitted_on'] else ' (not in the fit)'}", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
