"""Command line: ``python -m dygnex_jax train --config configs/X.yaml [key=value ...] [--out DIR]``.

Thin by design: parse, load the config, call the library. Bad input (``UserError``) prints one line
``error: ...`` on stderr and exits with code 2.
"""

from __future__ import annotations

import argparse
import sys

from .errors import UserError


class _Parser(argparse.ArgumentParser):
    """argparse, but usage mistakes are one line and exit code 2 like every other bad input."""

    def error(self, message):
        self.exit(2, f"error: {message} (see --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m dygnex_jax", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    train = sub.add_parser("train", help="train a DGNN on all local devices")
    train.add_argument("--config", help="YAML config (default: the embedded synthetic default)")
    train.add_argument("--out", help="output directory (default runs/<name>-<time>)")
    train.add_argument(
        "overrides", nargs="*", metavar="key=value", help="config overrides, e.g. train.epochs=3"
    )
    multi = train.add_argument_group(
        "multi-process (multi-host)",
        "all three, or a cluster launcher's environment (SLURM); see distributed.py",
    )
    multi.add_argument("--coordinator", metavar="HOST:PORT", help="process 0's address, the same for all")
    multi.add_argument("--num-processes", type=int, metavar="N", help="processes in the run")
    multi.add_argument("--process-id", type=int, metavar="I", help="this process, 0..N-1")
    multi.add_argument(
        "--coordinator-timeout", type=int, default=60, metavar="S", help="seconds to wait for the coordinator"
    )

    sched = sub.add_parser("schedule", help="build one epoch's schedule without training and measure it")
    sched.add_argument("--config", help="YAML config (default: the embedded synthetic default)")
    sched.add_argument("--devices", type=int, default=0, help="P (default parallel.devices, else 8)")
    sched.add_argument("--json", help="write the figures as JSON to this file")
    sched.add_argument("--plot", help="draw per-device loads per step to this PNG")
    sched.add_argument("overrides", nargs="*", metavar="key=value")

    prof = sub.add_parser("profile", help="time train steps over a spread of sizes and fit the cost model")
    prof.add_argument("--config", help="YAML config (default: the embedded synthetic default)")
    prof.add_argument("--out", default="", help="output directory (default runs/profile-<name>-<time>)")
    prof.add_argument("--steps", type=int, default=24, help="steps to time (default 24)")
    prof.add_argument("--repeats", type=int, default=3, help="timed runs per step after its compile")
    prof.add_argument("overrides", nargs="*", metavar="key=value")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        from .config import load_config

        config = load_config(args.config, args.overrides)
        if args.command == "train":
            from . import distributed

            spec = distributed.resolve(
                args.coordinator, args.num_processes, args.process_id, args.coordinator_timeout
            )
            distributed.initialize(spec)  # before any other JAX call
            from .train import train_and_evaluate

            train_and_evaluate(config, args.out)
        elif args.command == "schedule":
            from . import plan

            devices = args.devices or config.parallel.devices or 8
            result = plan.plan(config, devices)
            plan.print_table([result])
            if args.json:
                plan.write_json(result, args.json)
            if args.plot:
                plan.plot_loads(result, args.plot)
        elif args.command == "profile":
            import time

            from .profile import run_profile

            if args.steps < 2 or args.repeats < 1:
                raise UserError("profile needs --steps >= 2 and --repeats >= 1")
            out = args.out or f"runs/profile-{config.name}-{time.strftime('%Y%m%d-%H%M%S')}"
            run_profile(config, out, n_steps=args.steps, repeats=args.repeats)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
