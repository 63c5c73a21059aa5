"""The cost model against the steps the devices run: profiled (pooled over --fit datasets) vs analytic.

    python tools/bench_cost_model.py --devices 8 --fit bitcoin_otc,uci_collegemsg \
        --check bitcoin_alpha,synthetic --epochs 3 --out runs/bench_cost_model

For every device count of --devices (e.g. 1,2,4,8): profiles every --fit dataset at that count into the
run's own cost-model cache, then trains every dataset (--fit and --check) with
``schedule.cost_model: auto`` and compares each step's predicted and measured seconds (steps that
compiled nothing). Writes ``bench_cost_model.json`` / ``.md`` to --out (one folder per count under it).
The protocol: ``dygnex_jax/research/cost_model_check.py``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from dygnex_jax.cost_cache import PROFILE_DESIGNS
from dygnex_jax.errors import ArgumentParser, UserError, run_tool
from dygnex_jax.files import output_dir
from dygnex_jax.research import cost_model_check as check


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--worker" in argv:
        p = ArgumentParser()
        p.add_argument("--worker", required=True)
        p.add_argument("--epochs", type=int, required=True)
        p.add_argument("overrides", nargs="*")
        a = p.parse_args(argv)
        check.worker(a.worker, a.epochs, a.overrides)
        return 0
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=output_dir, default="runs/bench_cost_model")
    p.add_argument("--devices", default="8", help="fake CPU device counts, comma-separated")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--fit", default="bitcoin_otc,uci_collegemsg", help="datasets profiled into the model")
    p.add_argument("--check", default="bitcoin_alpha,synthetic", help="datasets the model never saw")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--profile-steps", type=int, default=16)
    p.add_argument(
        "--profile-design",
        choices=PROFILE_DESIGNS,
        default="bands",
        help="the budgets the profiles time (profile --design)",
    )
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--set", action="append", default=[], help="extra key=value for every run")
    args = p.parse_args(argv)
    try:
        counts = [int(x) for x in args.devices.split(",") if x]
    except ValueError:
        raise UserError(f"--devices must be comma-separated integers, got {args.devices!r}") from None
    if not counts or min(counts) < 1 or args.epochs < 2 or args.profile_steps < 5:
        raise UserError("--devices >= 1, --epochs >= 2 (the first compiles) and --profile-steps >= 5")
    fit = [d for d in args.fit.split(",") if d]
    held = [d for d in args.check.split(",") if d and d not in fit]
    out = Path(args.out)
    start, log = time.perf_counter(), (lambda s: print(s, flush=True))
    rows, profiles = [], {}
    for devices in counts:
        args.devices = devices
        work = out if len(counts) == 1 else out / f"p{devices}"
        work.mkdir(parents=True, exist_ok=True)
        for d in fit:
            profiles[f"{d}@{devices}"] = check.profile(d, args, work, log)
        for d in fit + held:
            log(f"training {d} at {devices} devices")
            rows.append(
                check.row(d, d in fit, check.train(d, args, work, __file__, log), os.cpu_count() or 1)
            )
            r = rows[-1]
            log(
                f"{d}: step error median {100 * r['profiled']['step_error_median']:.1f}% (analytic "
                f"{100 * r['analytic']['step_error_median']:.0f}%), epoch {r['profiled']['epoch_predicted']:.3f} s "
                f"predicted vs {r['profiled']['epoch_measured']:.3f} s measured"
            )
    payload = {
        "devices": counts,
        "batch": args.batch,
        "fit": fit,
        "profiles": {
            k: {f: v for f, v in pr.items() if f not in ("rows", "seconds")} for k, pr in profiles.items()
        },
        "rows": rows,
        "seconds": time.perf_counter() - start,
    }
    (out / "bench_cost_model.json").write_text(json.dumps(payload, indent=2) + "\n")
    (out / "bench_cost_model.md").write_text(check.markdown(rows))
    print(check.markdown(rows))
    print(f"wrote {out} in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
