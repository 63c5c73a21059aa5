"""Simulated vs measured epoch time of real training runs on this machine, with profiled cost models.

For every device count P of --devices (and N of --processes): profiles the --fit datasets at P fake
devices into the run's own cost-model cache (one pooled model per P), trains every dataset (--fit and
--check) at P devices in one process — and at N processes x 1 device (``tools/launch_local.py``, gloo,
with the model profiled at N processes x 1 device, ``launch_local.py --command profile``) — as a user's
run trains (``schedule.cost_model: auto``, planned
budgets), simulates the same epochs with ``simulate.py`` (the run's model, the trainer's budgets, the
all-reduce over the link) and compares: error = simulated / measured - 1 on the epoch's step time.
The protocol: ``dygnex_jax/research/simulator_validation.py``.

Writes ``validate_simulator.json``, ``.md`` (the README table) and ``.png`` to --out; every run's
files stay under ``--out/pP`` (a second call re-uses them: delete the folder to measure again). With
``--trials N`` every row is trained N times (trial 1 of every row, then trial 2, ...), each trial is
compared on its own, and a row is its median trial; ``validate_simulator_trials.md`` shows them all,
with the minutes from the profile to each trial. ``--order count`` (the default) profiles one device
count and trains its rows before the next count's profile, so every model is used within the hour it
was measured; ``--order all`` profiles every count first, then trains every row.
A run trains --epochs epochs, then more while it ran fewer than --min-steps steps or they took
less than --min-seconds (default 5: the machine's speed wanders on a ~10 s scale; a short trial
samples one moment of it), up to the epochs its budgets were planned for (every process of a
2-process run stops after the same epoch: the slowest process's seconds decide).
``--control R``: after each run, its most used budget re-timed in the same process as the profile
times a step, R rounds (``research/validation_control.py``): ``validate_simulator_control.md``
splits each trial's error into the model's (price / control) and the regime's (training / control).

    python tools/validate_simulator.py --out runs/validate              # every dataset, 1,2,4,8 + 2 processes: ~85 min
    python tools/validate_simulator.py --devices 1 --processes 0 --fit synthetic --check "" --epochs 2
    python tools/validate_simulator.py --out runs/validate --trials 3   # 3 trials a row, 43-51 min with --min-seconds 5 (2026-12-07)

The training runs are this file in ``--worker`` mode (one process, or each of the launcher's).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from dygnex_jax.config import load_config
from dygnex_jax.cost_cache import PROFILE_DESIGNS
from dygnex_jax.errors import ArgumentParser, UserError, run_tool
from dygnex_jax.files import output_dir
from dygnex_jax.research import cost_model_check as check
from dygnex_jax.research import simulator_validation as validation
from dygnex_jax.research.validation_control import table as control_table

REPO = Path(__file__).resolve().parents[1]


def worker(argv: list[str]) -> int:
    """``--worker OUT.json --epochs E key=value ... [--coordinator ...]``: train and write the steps."""
    from dygnex_jax import distributed

    p = ArgumentParser()
    p.add_argument("--worker", required=True)
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--min-steps", type=int, default=0)
    p.add_argument("--min-seconds", type=float, default=0.0)
    p.add_argument("--control", type=int, default=0)
    p.add_argument("overrides", nargs="*")
    p.add_argument("--coordinator")
    p.add_argument("--num-processes", type=int)
    p.add_argument("--process-id", type=int)
    a = p.parse_args(argv)
    distributed.initialize(distributed.resolve(a.coordinator, a.num_processes, a.process_id))
    validation.worker(a.worker, a.epochs, a.overrides, a.min_steps, a.min_seconds, a.control)
    return 0


def parse(argv: list[str]) -> argparse.Namespace:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=output_dir, default="runs/validate_simulator")
    p.add_argument(
        "--fit", default="bitcoin_otc,uci_collegemsg,as733", help="datasets profiled into the model"
    )
    p.add_argument("--check", default="bitcoin_alpha,synthetic", help="datasets the model never saw")
    p.add_argument("--devices", default="1,2,4,8", help="fake devices of the one-process runs")
    p.add_argument("--processes", type=int, default=2, help="processes x 1 device run (0: none)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument(
        "--min-steps", type=int, default=12, help="train more epochs while fewer steps ran (small datasets)"
    )
    p.add_argument(
        "--min-seconds",
        type=float,
        default=5.0,
        help="train more epochs while the steps took less (the machine wanders on a ~10 s scale)",
    )
    p.add_argument(
        "--control",
        type=int,
        default=0,
        help="R > 0: after each run, its most used budget re-timed as the profile times it, R rounds "
        "(the row's error split into model and regime: validate_simulator_control.md)",
    )
    p.add_argument("--profile-steps", type=int, default=12)
    p.add_argument(
        "--profile-design",
        choices=PROFILE_DESIGNS,
        default="bands",
        help="the budgets the profiles time (profile --design)",
    )
    p.add_argument("--repeats", type=int, default=5, help="timed runs of each profiled step (medians)")
    p.add_argument(
        "--trials",
        type=int,
        default=1,
        help="train every row this many times, interleaved; a row is its median trial (the spread beside it)",
    )
    p.add_argument(
        "--order",
        choices=("count", "all"),
        default="count",
        help="count: profile a device count, then train its rows; all: every profile first, then every row",
    )
    p.add_argument("--host-cores", type=int, default=os.cpu_count() or 1, help="cores the fake devices share")
    p.add_argument("--set", action="append", default=[], help="extra key=value for every run")
    p.add_argument(
        "--previous",
        help="an earlier run's validate_simulator.json: its rows beside these (validate_simulator_runs.md)",
    )
    return checked(p.parse_args(argv))


def checked(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with the device counts, the datasets and an earlier run's rows read; a bad value is one
    UserError."""
    try:
        args.counts = [int(x) for x in args.devices.split(",") if x]
    except ValueError:
        raise UserError(f"--devices must be comma-separated integers, got {args.devices!r}") from None
    args.fit_sets = [d for d in args.fit.split(",") if d]
    args.check_sets = [d for d in args.check.split(",") if d and d not in args.fit_sets]
    unknown = [d for d in args.fit_sets + args.check_sets if d not in validation.DATASETS]
    if unknown:
        raise UserError(
            f"unknown dataset(s) {', '.join(unknown)}: choose from {', '.join(validation.DATASETS)}"
        )
    if not args.fit_sets:
        raise UserError("--fit needs at least one dataset (the cost model is profiled on them)")
    if not args.counts or min(args.counts) < 1 or args.processes < 0 or args.processes == 1:
        raise UserError("--devices must be >= 1 and --processes 0 (none) or >= 2")
    if (
        args.epochs < 1
        or args.profile_steps < 5
        or args.repeats < 1
        or args.trials < 1
        or not args.min_seconds >= 0
        or args.control < 0
    ):
        raise UserError(
            "--epochs >= 1, --profile-steps >= 5, --repeats >= 1, --trials >= 1, --min-seconds >= 0 "
            "and --control >= 0"
        )
    args.previous_rows = previous_rows(args.previous) if args.previous else None
    return args


def previous_rows(path: str) -> list[dict]:
    """The rows of an earlier run's validate_simulator.json (read before this run's hour of work)."""
    try:
        rows = json.loads(Path(path).read_text())["rows"]
        if not all({"run", "dataset", "measured_step_seconds", "error_vs_steps"} <= set(r) for r in rows):
            raise ValueError("a row lacks its run, dataset, measured seconds or error")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError(
            f"--previous {path!r} is not a validate_simulator.json ({e}): give an earlier run's file"
        ) from None
    return rows


def train(
    dataset: str, procs: int, per: int, extra: list[str], args, work: Path, log, trial: int = 1
) -> dict:
    """The worker's payload of one run (``procs`` processes x ``per`` devices; ``trial`` > 1: a repeat,
    its own file), trained unless its JSON is already in ``work``."""
    label = f"{procs}proc" if procs > 1 else "train"
    result = work / f"{label}_{dataset}{'' if trial == 1 else f'_t{trial}'}.json"
    if not result.exists():
        log(
            f"training {dataset} at {procs} process(es) x {per} device(s){'' if trial == 1 else f', trial {trial}'}"
        )
        me = [str(Path(__file__).resolve()), "--worker", str(result), "--epochs", str(args.epochs)]
        me += ["--min-steps", str(args.min_steps), "--min-seconds", str(args.min_seconds)]
        me += ["--control", str(args.control)]
        cfg = validation.overrides(dataset, 0 if procs > 1 else per, args.batch, [*args.set, *extra])
        env = check.env(per, work / "cache")
        if procs == 1:
            validation.run_checked([sys.executable, *me, *cfg], env, log)
        else:
            launch = [str(REPO / "tools" / "launch_local.py"), str(procs), "--devices-per-process", str(per)]
            validation.run_checked(
                [sys.executable, *launch, "--script", me[0], "--", *me[1:], *cfg], env, log
            )
    return json.loads(result.read_text())


def row(dataset: str, procs: int, data: dict, args, profiled: float) -> dict:
    p = data["devices"]
    config = load_config(REPO / validation.CONFIG, validation.overrides(dataset, p, args.batch, args.set))
    label = f"{procs} proc x 1 dev" if procs > 1 else f"{p} dev"
    r = validation.compare(dataset, dataset in args.fit_sets, label, procs, data, config, args.host_cores)
    started = r.get("started_unix")  # absent in runs made before it was recorded
    r["profile_age_minutes"] = None if started is None else (started - profiled) / 60
    print(
        f"{dataset} {label}: measured {r['measured_step_seconds']:.3f} s (steps), simulated "
        f"{r['simulated_seconds']:.3f} s, error {100 * r['error_vs_steps']:+.1f}% (analytic "
        f"{100 * r['analytic_error_vs_steps']:+.0f}%), budgets as trained: {r['same_budgets']}",
        flush=True,
    )
    return r


def groups(args) -> list[tuple[Path, int, int]]:
    """Every (folder, processes, devices per process) of the validation: one per device count of
    --devices, then the --processes x 1 device one. A group's rows share its profiled model."""
    out = Path(args.out)
    todo = [(out / f"p{devices}", 1, devices) for devices in args.counts]
    if args.processes:  # profiled and trained as N processes (their own entry: schedule.cost_model auto)
        todo.append((out / f"proc{args.processes}", args.processes, 1))
    return todo


def profile_group(work: Path, procs: int, per: int, args, log) -> float:
    """Profile the group's fit datasets into its cache (a profile already there is re-used); the time
    the last of them was written (what a row's ``profile_age_minutes`` counts from)."""
    work.mkdir(parents=True, exist_ok=True)
    args.devices = per  # what cost_model_check.profile reads
    for d in args.fit_sets:
        check.profile(d, args, work, log, processes=procs)
    return max(f.stat().st_mtime for f in work.glob("profile_*/profile.json"))


def measured_rows(args, log) -> list[dict]:
    """Profile and train every row ``args.trials`` times and compare each trial; a row is its median
    trial (``simulator_validation.median_trial``). ``--order count``: one group (device count) at a
    time — its profiles, then its rows' trials (trial 1 of each row, then trial 2, ...) — so a model is
    measured in the hour it was profiled; ``all``: every group's profiles first, then trial 1 of every
    row, then trial 2, ... (a slow phase of the machine falls on several rows' trials rather than on
    all of one row's). The run's model (the cache's profile refitted around this dataset's steps) is
    written beside its steps."""
    order, datasets = groups(args), args.fit_sets + args.check_sets
    rounds = [order] if args.order == "all" else [[g] for g in order]
    trials: dict[tuple, list[tuple[dict, float]]] = {}
    for batch in rounds:
        profiled = {work: profile_group(work, procs, per, args, log) for work, procs, per in batch}
        for t in range(1, args.trials + 1):
            for work, procs, per in batch:
                for dataset in datasets:
                    data = train(dataset, procs, per, [], args, work, log, trial=t)
                    if t == 1:
                        (work / f"cost_model_{dataset}.json").write_text(
                            json.dumps(data["cost_model"], indent=2) + "\n"
                        )
                    trials.setdefault((dataset, procs, per), []).append((data, profiled[work]))
    return [
        validation.median_trial([row(d, procs, data, args, at) for data, at in trials[(d, procs, per)]])
        for _, procs, per in order
        for d in datasets
    ]


def earlier_calls(path: Path) -> list[float]:
    """The seconds of the calls before this one into the same --out (a call re-using their profiles and
    runs takes minutes, so ``seconds`` alone would hide what the measurement took)."""
    try:
        old = json.loads(path.read_text())
        return [float(x) for x in old.get("calls_seconds", [old["seconds"]])]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--worker" in argv:
        return worker(argv)
    args = parse(argv)
    out = Path(args.out)
    start, log = time.perf_counter(), (lambda s: print(s, flush=True))
    rows = measured_rows(args, log)
    seconds = time.perf_counter() - start
    payload = {
        "fit": args.fit_sets,
        "check": args.check_sets,
        "batch": args.batch,
        "epochs": args.epochs,
        "trials": args.trials,
        "order": args.order,
        "host_cores": args.host_cores,
        "config": validation.CONFIG,
        "seconds": seconds,
        "calls_seconds": earlier_calls(out / "validate_simulator.json") + [seconds],
        "rows": rows,
    }
    if args.previous_rows:  # the machine's run-to-run spread beside the errors
        payload["previous"] = {"path": args.previous, "rows": args.previous_rows}
        (out / "validate_simulator_runs.md").write_text(validation.two_runs(rows, args.previous_rows))
    if args.trials > 1:
        (out / "validate_simulator_trials.md").write_text(validation.trials_table(rows))
    if args.control:
        (out / "validate_simulator_control.md").write_text(control_table(rows))
    (out / "validate_simulator.json").write_text(json.dumps(payload, indent=2) + "\n")
    (out / "validate_simulator.md").write_text(validation.markdown(rows))
    validation.plot(rows, out / "validate_simulator.png")
    print(validation.markdown(rows))
    if args.trials > 1:
        print(validation.trials_table(rows))
    print(f"wrote {out} in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
