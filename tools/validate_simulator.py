"""Simulated vs measured per-epoch time of real training runs on this machine (issue 6, part 3).

For every dataset (default: the embedded synthetic default and ``bitcoin_otc``): profile the cost model
at 1 device, train with it at 1, 2, 4 and 8 fake CPU devices in one process and at 2 processes x 1
device (``tools/launch_local.py``, gloo), simulate the same epochs with ``simulate.py`` (the profiled
model, a calibrated device slowdown, the all-reduce over the link) and compare: error = simulated /
measured - 1, against the sum of step times and against wall time. The protocol and the calibration:
``dygnex_jax/research/simulator_validation.py``.

Writes ``validate_simulator.json``, ``validate_simulator.png`` and ``validate_simulator.md`` (the README
table) to ``--out``. CPU timings on a shared 2-core machine are noisy: the JSON keeps every epoch.

    python tools/validate_simulator.py --out runs/validate          # about 15-20 min on 2 cores
    python tools/validate_simulator.py --datasets synthetic --devices 1,2 --epochs 2   # quick

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
from dygnex_jax.errors import UserError, run_tool
from dygnex_jax.research import simulator_validation as validation
from dygnex_jax.schedule.cost import CostModel

REPO = Path(__file__).resolve().parents[1]


def worker(argv: list[str]) -> int:
    """``--worker OUT.json --epochs E CONFIG|- key=value ... [--coordinator ...]``: train and time epochs."""
    from dygnex_jax import distributed

    p = argparse.ArgumentParser()
    p.add_argument("--worker", required=True)
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("config")
    p.add_argument("overrides", nargs="*")
    p.add_argument("--coordinator")
    p.add_argument("--num-processes", type=int)
    p.add_argument("--process-id", type=int)
    a = p.parse_args(argv)
    distributed.initialize(distributed.resolve(a.coordinator, a.num_processes, a.process_id))
    from dygnex_jax.train import Trainer

    trainer = Trainer(load_config(None if a.config == "-" else REPO / a.config, a.overrides))
    payload = validation.time_epochs(trainer, a.epochs)
    if distributed.is_main_process():
        Path(a.worker).write_text(json.dumps(payload, indent=2) + "\n")
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--worker" in argv:
        return worker(argv)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/validate_simulator")
    p.add_argument("--datasets", default="synthetic,bitcoin_otc")
    p.add_argument("--devices", default="1,2,4,8", help="fake devices of the one-process runs")
    p.add_argument("--processes", type=int, default=2, help="processes x 1 device run (0: none)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--profile-steps", type=int, default=12)
    p.add_argument("--host-cores", type=int, default=os.cpu_count() or 1, help="cores the fake devices share")
    p.add_argument(
        "--cost-model-from",
        default="",
        help="also simulate every other dataset with this dataset's profiled model (already in --out)",
    )
    p.add_argument("--set", action="append", default=[], help="extra key=value for every run")
    args = p.parse_args(argv)
    args.devices = [int(x) for x in args.devices.split(",") if x]
    names = [n for n in args.datasets.split(",") if n]
    unknown = [n for n in names if n not in validation.DATASETS]
    if unknown:
        raise UserError(
            f"unknown dataset(s) {', '.join(unknown)}: choose from {', '.join(validation.DATASETS)}"
        )
    if args.epochs < 1:
        raise UserError("--epochs must be >= 1")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    log = lambda s: print(s, flush=True)  # noqa: E731
    rows = []
    alt = None
    if args.cost_model_from:
        alt = (
            args.cost_model_from,
            CostModel.load(out / args.cost_model_from / "profile" / "cost_model.json"),
        )
    for name in names:
        rows += validation.validate_dataset(name, args, out, log, alt, script=__file__)
    payload = {
        "host_cores": args.host_cores,
        "epochs": args.epochs,
        "load_average": os.getloadavg(),
        "seconds": time.perf_counter() - start,
        "rows": rows,
    }
    (out / "validate_simulator.json").write_text(json.dumps(payload, indent=2) + "\n")
    (out / "validate_simulator.md").write_text(validation.markdown(rows))
    if rows:
        validation.plot(rows, out / "validate_simulator.png")
    print(validation.markdown(rows))
    print(f"wrote {out} in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
