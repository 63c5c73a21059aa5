"""Command line: ``python -m dygnex_jax train --config configs/X.yaml [key=value ...] [--out DIR]``.

Thin by design: parse, load the config, call the library. Bad input (``UserError``) prints one line
``error: ...`` on stderr and exits with code 2.
"""

from __future__ import annotations

import argparse
import os
import sys

from .errors import ArgumentParser, UserError, run_tool
from .files import staged

# simulate --param-bytes: at most a petabyte all-reduced per step (larger sizes are typos; they made
# every simulated step 1e22 seconds)
MAX_PARAM_BYTES = 1e15


def _parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="python -m dygnex_jax", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=ArgumentParser
    )  # one-line usage errors
    train = sub.add_parser("train", help="train a DGNN on all local devices")
    train.add_argument("--config", help="YAML config (default: the embedded synthetic default)")
    train.add_argument("--out", help="output directory (default runs/<name>-<time>)")
    train.add_argument("--resume", metavar="DIR", help="continue the run in DIR from its latest checkpoint")
    train.add_argument(
        "overrides", nargs="*", metavar="key=value", help="config overrides, e.g. train.epochs=3"
    )
    _add_multi_process(train)
    _add_schedule_and_profile(sub)
    _add_simulate(sub)
    look = sub.add_parser("inspect", help="per-snapshot nodes / edges / new edges, windows, empty snapshots")
    look.add_argument("--config", help="YAML config (default: the embedded synthetic default)")
    look.add_argument("--out", help="also write inspect.json and inspect.png to this folder")
    look.add_argument("--rows", type=int, default=12, help="snapshots shown in the table (default 12)")
    look.add_argument("overrides", nargs="*", metavar="key=value")
    report = sub.add_parser("report", help="plots and a Markdown table of one or more training runs")
    report.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories written by train")
    report.add_argument("--out", help="output directory (default: report-<time>)")
    fetch = sub.add_parser("download", help="fetch a named dataset from its public source (SNAP)")
    fetch.add_argument("name", help="dataset name, e.g. bitcoin_otc, uci_collegemsg, as733")
    fetch.add_argument("--root", help="data folder to fetch into (default: $DYGNEX_DATA)")
    return parser


def _add_multi_process(command) -> None:
    """The options that start a command as one process of a multi-process (multi-host) run."""
    multi = command.add_argument_group(
        "multi-process (multi-host)",
        "all three, or a cluster launcher's environment (SLURM); see distributed.py",
    )
    multi.add_argument("--coordinator", metavar="HOST:PORT", help="process 0's address, the same for all")
    multi.add_argument("--num-processes", type=int, metavar="N", help="processes in the run")
    multi.add_argument("--process-id", type=int, metavar="I", help="this process, 0..N-1")
    multi.add_argument(
        "--coordinator-timeout", type=int, default=60, metavar="S", help="seconds to wait for the coordinator"
    )


def _start_processes(args, config) -> None:
    """Join the multi-process run the options (or the cluster's environment) describe, if any; the host
    allocator (``parallel.host_malloc``) first: glibc fixes its arena limit when a second thread first
    allocates, and ``jax.distributed`` starts threads (host_memory.py)."""
    from . import distributed, host_memory

    host_memory.configure(config.parallel.host_malloc)
    spec = distributed.resolve(
        args.coordinator, args.num_processes, args.process_id, args.coordinator_timeout
    )
    distributed.initialize(spec)  # before any other JAX call


def _add_schedule_and_profile(sub) -> None:
    sched = sub.add_parser("schedule", help="build one epoch's schedule without training and measure it")
    sched.add_argument("--config", help="YAML config (default: the embedded synthetic default)")
    sched.add_argument("--devices", type=int, default=0, help="P (default parallel.devices, else 8)")
    sched.add_argument("--json", help="write the figures as JSON to this file")
    sched.add_argument("--plot", help="draw per-device loads per step to this PNG")
    sched.add_argument("overrides", nargs="*", metavar="key=value")
    prof = sub.add_parser("profile", help="time train steps over a spread of sizes and fit the cost model")
    prof.add_argument("--config", help="YAML config (default: the embedded synthetic default)")
    prof.add_argument("--out", help="output directory (default runs/profile-<name>-<time>)")
    prof.add_argument("--steps", type=int, default=24, help="steps to time (default 24)")
    prof.add_argument("--repeats", type=int, default=3, help="timed runs per step after its compile")
    prof.add_argument(
        "--design",
        default="bands",
        choices=("bands", "designed", "mixed", "random"),
        help="which budgets to time: bands (similar windows, small to large), designed (nodes, edges, "
        "pairs varied apart), mixed (the two alternately) or random (random windows, as training draws "
        "its steps) (default bands)",
    )
    prof.add_argument(
        "--no-cache", action="store_true", help="do not add the profile to this machine's cost-model cache"
    )
    prof.add_argument(
        "--max-load",
        type=float,
        default=0.0,
        help="refuse to profile above this load average (0: only flag it)",
    )
    prof.add_argument("overrides", nargs="*", metavar="key=value")
    _add_multi_process(prof)  # the steps of a multi-process run, timed as it runs them


def _add_simulate(sub) -> None:
    sim = sub.add_parser("simulate", help="simulate step and epoch times on 1..1024+ devices (no JAX)")
    sim.add_argument("--config", help="YAML config (default: the embedded synthetic default)")
    sim.add_argument(
        "--devices", default="4..1024", help="4,8,16 or 4..1024 (powers of two; default 4..1024)"
    )
    sim.add_argument("--methods", default="psg,dygnex_g,dygnex_l,snapshot,vertex", help="comma list")
    sim.add_argument("--link", default="nvlink", help="nvlink, ethernet, loopback or none (default nvlink)")
    sim.add_argument("--alpha", type=float, help="override the link latency, seconds per message")
    sim.add_argument("--bandwidth", type=float, help="override the link bandwidth, GB/s")
    sim.add_argument(
        "--cost-model",
        help="profiled cost model JSON, or a cost-model cache entry (refitted around the simulated "
        "steps' size); default schedule.cost_model, else analytic",
    )
    sim.add_argument(
        "--windows", type=int, default=0, help="scale up to K windows (default: 8 steps at max P)"
    )
    sim.add_argument("--batch-per-device", type=int, default=4, help="b: B = b x P (default 4)")
    sim.add_argument("--batch-size", type=int, default=0, help="a fixed B instead of b x P")
    sim.add_argument(
        "--shapes",
        choices=("trained", "buckets", "exact"),
        default="trained",
        help="budgets a window-parallel step is charged: trained (default: the config's parallel.budgets, "
        "as the trainer pays), buckets (the shape grid), exact (the exact need: no padding to budgets)",
    )
    sim.add_argument("--buckets", action="store_true", help="the same as --shapes buckets")
    sim.add_argument(
        "--plan-epochs",
        type=int,
        default=None,
        metavar="N",
        help="planned budgets are planned from epochs 1..N (default: the trainer's, train.epochs; "
        "0: the simulated epoch alone)",
    )
    sim.add_argument("--param-bytes", type=float, default=0, help="all-reduced bytes (default: the model's)")
    sim.add_argument(
        "--ilp-budget", type=float, default=60, help="dygnex_l only if steps x time limit <= this"
    )
    sim.add_argument("--instance", help="cache of the windows' costs (.npz): written once, then read")
    sim.add_argument("--json", help="write the rows and assumptions as JSON")
    sim.add_argument("--plot", help="draw the scaling curves to this PNG")
    sim.add_argument("overrides", nargs="*", metavar="key=value")


def _train(args, config) -> None:
    from .train import train_and_evaluate

    if args.resume:
        from .resume import resume_config

        if args.out and args.out != args.resume:
            raise UserError("--resume writes to the run's own directory: drop --out")
        config = resume_config(args.resume, args.config, args.overrides)
    _start_processes(args, config)
    train_and_evaluate(config, args.resume or args.out, resume=bool(args.resume))


def _schedule(args, config) -> None:
    import jax  # the backend: fake CPU devices share the cores (the auto compile price)

    from . import cost_cache, plan
    from .config import step_layout
    from .data.datasets import load_dataset
    from .data.node_windows import task_windows
    from .runlog import header_line
    from .schedule.base import check_sizes
    from .schedule.cost import mean_span
    from .tasks import get_task

    if args.devices < 0:  # before the data is loaded and its header line printed
        raise UserError(f"schedule --devices must be >= 0 (0: parallel.devices, else 8), got {args.devices}")
    devices = args.devices or config.parallel.devices or 8
    graph = load_dataset(config.data)
    ws = task_windows(graph, config.data)
    check_sizes(len(ws.splits["train"]), devices, config.train.batch_size)  # before the header line
    candidates = get_task(config.data.task).candidate_mode(ws, config)
    print(header_line(graph, ws, devices, config, candidates), file=sys.stderr, flush=True)
    costs = ws.costs("train", config.data.neg_mult)
    model, note = cost_cache.resolve(  # the model a training run on these devices here would use
        config,
        window=ws.window,
        num_features=ws.num_features,
        layout=step_layout(config),
        devices=devices,
        processes=1,
        platform=jax.default_backend(),
        scale=cost_cache.step_scale(costs[:, 2], config.train.batch_size, devices),
        span=mean_span(costs),
    )
    if note:
        print(note, file=sys.stderr, flush=True)
    slowdown = plan.model_slowdown(model, devices, plan.available_cores(), jax.default_backend())
    result = plan.plan(config, devices, ws=ws, model=model, slowdown=slowdown)
    plan.print_table([result])
    with staged():  # --json and --plot both, or neither
        if args.json:
            plan.write_json(result, args.json)
        if args.plot:
            plan.plot_loads(result, args.plot)


def _simulated_cost_model(path):
    """``simulate --cost-model``: a model file, or a cost-model cache entry (refitted around the
    simulated steps by ``simulate.run``); None without the flag."""
    from . import cost_cache
    from .schedule.cost import CostModel

    if not path:
        return None
    entry = cost_cache.read_entry(path)
    return entry if entry is not None else CostModel.load(path)


def _simulate(args, config) -> None:
    from . import simulate as sim
    from .plan import write_json

    if not 0 <= args.param_bytes <= MAX_PARAM_BYTES:  # nan and inf too
        raise UserError(
            f"--param-bytes must be in [0, {MAX_PARAM_BYTES:g}] (0: the model's own), got {args.param_bytes:g}"
        )
    link = sim.resolve_link(args.link, args.alpha, args.bandwidth)
    result = sim.run(
        config,
        sim.parse_devices(args.devices),
        [m.strip() for m in args.methods.split(",") if m.strip()],
        link=link,
        cost_model=_simulated_cost_model(args.cost_model),
        windows=args.windows,
        batch_per_device=args.batch_per_device,
        batch_size=args.batch_size,
        shapes=args.shapes,
        buckets=args.buckets,
        plan_epochs=args.plan_epochs,
        param_bytes=args.param_bytes,
        ilp_budget=args.ilp_budget,
        instance=args.instance,
    )
    print(
        f"{result['instance']}: {result['windows']} windows, W={result['window']}, {result['batch']}, "
        f"{result['layout']} layout, shapes {result['shapes']}, link {link.describe()}, "
        f"all-reduce {result['param_bytes'] / 1e6:.3f} MB, cost model {result['cost_model']['source']}"
    )
    sim.print_table(result["rows"])
    with staged():  # --json and --plot both, or neither
        if args.json:
            write_json(result, args.json)
        if args.plot:
            sim.plot(result["rows"], args.plot, f"{result['instance']}, {result['batch']}, {args.link}")


def _profile(args, config) -> None:
    import time

    from .profile import run_profile

    if args.steps < 2 or args.repeats < 1:
        raise UserError("profile needs --steps >= 2 and --repeats >= 1")
    if args.steps > 1000 or args.repeats > 1000:
        raise UserError(
            f"profile --steps {args.steps:,} --repeats {args.repeats:,}: every step compiles once (seconds) "
            "and runs repeats times; use --steps 2..1000 and --repeats 1..1000"
        )
    if not args.max_load >= 0:
        raise UserError(
            f"profile --max-load must be >= 0 (0: only flag a loaded machine), got {args.max_load}"
        )
    _start_processes(args, config)
    out = args.out or f"runs/profile-{config.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    run_profile(
        config,
        out,
        n_steps=args.steps,
        repeats=args.repeats,
        cache=not args.no_cache,
        max_load=args.max_load,
        design_kind=args.design,
    )


def _inspect(args, config) -> None:
    from . import inspect_data

    if args.rows < 2:
        raise UserError(f"inspect needs --rows >= 2, got {args.rows}")
    if args.out:
        from pathlib import Path

        from .runlog import check_out_path

        check_out_path(Path(args.out))
    result = inspect_data.inspect(config)
    inspect_data.print_report(result, rows=args.rows)
    if args.out:
        paths = inspect_data.write(result, args.out)
        print("wrote " + ", ".join(map(str, paths)))


COMMANDS = {
    "train": _train,
    "schedule": _schedule,
    "simulate": _simulate,
    "profile": _profile,
    "inspect": _inspect,
}


def _check_output_files(args) -> None:
    """``--json`` / ``--plot`` files can be written: checked before any work, so a bad path costs nothing."""
    from pathlib import Path

    from .files import unwritable

    for flag in ("out", "resume", "json", "plot", "instance"):
        value = getattr(args, flag, None)
        if value is not None and not value.strip():
            # an unset shell variable (--out "$DIR"): never the current folder by accident
            raise UserError(f"--{flag} is empty: give a path (is a shell variable unset?)")
    for flag in ("json", "plot"):
        path = getattr(args, flag, None)
        reason = unwritable(Path(path)) if path else None
        if reason:
            raise UserError(f"--{flag} {path!r} {reason}")


def _download(args) -> None:
    from .data.download import download

    root = args.root if args.root is not None else os.environ.get("DYGNEX_DATA")
    if not root or not root.strip():  # also an empty --root "$DIR" (an unset shell variable)
        raise UserError("download needs a data folder: pass --root DIR (or set DYGNEX_DATA=DIR)")
    print(f"{args.name}: {download(args.name, root)}")


def _run(args) -> int:
    _check_output_files(args)
    if args.command == "download":
        _download(args)
        return 0
    if args.command == "report":
        from .report import report

        report(args.runs, args.out or None)
        return 0
    from .config import load_config

    COMMANDS[args.command](args, load_config(args.config, args.overrides))
    return 0


def parse_args(argv: list[str] | None = None):
    """The command line, key=value overrides anywhere after the command: ``train a=1 --out d b=2``
    (argparse alone takes only the first run of them) applies a=1 then b=2."""
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra and (not hasattr(args, "overrides") or any(t.startswith("-") or "=" not in t for t in extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        args.overrides = [*(args.overrides or []), *extra]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run_tool(lambda: _run(args))  # bad input and file-system faults: one line, exit 2
    except KeyboardInterrupt:
        if args.command != "train":  # train said it already, with how to continue
            print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
