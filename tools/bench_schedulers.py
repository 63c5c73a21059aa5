"""The DyGNeX schedulers measured against PSG: schedule figures and real SPMD epoch times.

Three parts, one run, one JSON: (1) datasets x P x B x method: schedule figures, and measured epoch
times (``--measure``) as a speed-up over psg; (2) cost vectors: gap to lower bounds; (3) dygnex_g at
scale. What they measure and how, and the ``costs_for`` hook (real window costs of part 2): the
modules ``schedulers``, ``scheduler_timing``, ``scheduler_costs`` and ``scheduler_report`` of
``dygnex_jax.research``.

Writes ``bench_schedulers.json`` (all rows + metadata), ``bench_schedulers.png`` (padding efficiency
at the largest P, measured speed-up over psg, greedy runtime at scale), ``bench_schedulers.md`` (the
README table) and, for part 2, ``bench_schedulers_costs.png`` to ``--out``.

    python tools/bench_schedulers.py                      # everything (30-40 min on 2 cores)
    python tools/bench_schedulers.py --no-measure         # schedule figures only (under 2 min)
    python tools/bench_schedulers.py --datasets bitcoin_otc --measure 'bitcoin_otc:8:P'
    python tools/bench_schedulers.py --quick              # tiny settings, for tests
    python tools/bench_schedulers.py --datasets none --costs costs.npy   # [K, 3] costs only
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from dygnex_jax.devices import force_host_devices
from dygnex_jax.errors import ArgumentParser, run_tool
from dygnex_jax.files import output_dir
from dygnex_jax.research import scheduler_costs as costs
from dygnex_jax.research import scheduler_report as report
from dygnex_jax.research import schedulers as bench
from dygnex_jax.research.scheduler_timing import measure_cases


def build_parser() -> argparse.ArgumentParser:
    ap = ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", type=output_dir, default="results/bench_schedulers")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="tiny settings for tests: the smoke config only, P=4, one epoch, small cost instances "
        "and a 2,000 x 64 timing (changes the defaults of " + ", ".join(bench.QUICK) + ")",
    )
    g = ap.add_argument_group("datasets (part 1)")
    g.add_argument(
        "--datasets",
        nargs="+",
        default=list(bench.SUITE),
        help=f"from {', '.join(bench.SUITE)}; 'none' skips part 1",
    )
    g.add_argument("--devices", type=int, nargs="+", default=[4, 8], help="device counts P")
    g.add_argument(
        "--batch-sizes",
        type=bench.parse_batch_token,
        nargs="+",
        default=["P", "32"],
        help="B values; P means B = P",
    )
    g.add_argument("--methods", nargs="+", default=list(bench.METHODS), choices=bench.METHODS)
    g.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="config override for every dataset"
    )
    g.add_argument(
        "--measure",
        nargs="+",
        default=["*:8:*"],
        metavar="DATASET[:P[:B]]",
        help="cases whose epoch time is measured by training (* wildcards; B may be P); default '*:8:*'",
    )
    g.add_argument("--no-measure", action="store_true", help="schedule figures only, no training")
    g.add_argument("--epochs", type=int, default=3, help="measured epochs E per method (median reported)")
    g.add_argument(
        "--warmup",
        choices=("auto", "always"),
        default="auto",
        help="auto: rerun an epoch (timed) when it compiled something; always: warm up before every timed run",
    )
    g.add_argument(
        "--measure-windows",
        type=int,
        default=-1,
        help="windows per measured epoch at most, by stratified step sampling (0 = whole epochs; "
        "default: per dataset, only the AS-733 cases are sampled)",
    )
    g.add_argument("--fake-devices", type=int, default=8, help="XLA fake CPU devices for measuring")
    g.add_argument(
        "--no-compile-cache", action="store_true", help="no persistent compilation cache between trainers"
    )
    g.add_argument("--seed", type=int, default=0, help="step sampling seed")

    g = ap.add_argument_group("cost vectors (part 2)")
    g.add_argument("--dataset", default="lognormal", help="lognormal (synthetic) or a name for costs_for()")
    g.add_argument("--costs", default="", help="a [K, 3] .npy/.json file (overrides --dataset)")
    g.add_argument("--windows", type=int, default=100, help="synthetic windows K")
    g.add_argument("--sigma", type=float, default=1.0, help="synthetic log-normal skew")
    g.add_argument("--seeds", type=int, default=1, help="synthetic instances (seeds 0..n-1); 0 skips part 2")
    g.add_argument("--jitter", type=float, default=0.1)
    g.add_argument(
        "--weights", default="ones", help="ones (config defaults 1,1,1) or model (default cost model's)"
    )

    g = ap.add_argument_group("dygnex_l (parts 1 and 2)")
    g.add_argument("--time-limit", type=float, default=2.0, help="dygnex_l solver seconds per step")
    g.add_argument("--mip-gap", type=float, default=0.01)
    g.add_argument("--solver", default="HIGHS")

    g = ap.add_argument_group("at scale (part 3)")
    g.add_argument("--big-windows", type=int, default=100_000, help="0 skips the at-scale timing")
    g.add_argument("--big-devices", type=int, default=1024)
    g.add_argument("--big-batch-sizes", type=int, nargs="+", default=[4096, 8192])
    g.add_argument("--big-repeats", type=int, default=3)
    return ap


def parse_args(argv) -> argparse.Namespace:
    """The flags; with ``--quick``, ``bench.QUICK``'s values for those not given on the command line."""
    args = build_parser().parse_args(argv)
    if args.quick:
        parser = build_parser()
        for action in parser._actions:
            action.default = argparse.SUPPRESS
        given = set(vars(parser.parse_args(argv)))
        for k, v in bench.QUICK.items():
            if k not in given:
                setattr(args, k, v)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    clock = lambda: time.perf_counter() - started  # noqa: E731
    load_start = os.getloadavg()
    settings = bench.schedule_settings(args)
    suites = bench.resolve_suites(args)
    selectors, fake_devices = bench.measure_selectors(args, suites)
    if fake_devices:
        force_host_devices(fake_devices)  # before JAX is imported (by dygnex_jax.train, when measuring)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = bench.run_meta(args, sys.argv[1:] if argv is None else list(argv), load_start)
    result: dict = {"meta": meta, "datasets": [], "skipped": [], "measured": []}

    def save() -> None:
        meta.update(wall_seconds=clock(), loadavg_end=os.getloadavg())
        (out / "bench_schedulers.json").write_text(json.dumps(result, indent=2, default=float) + "\n")

    def measured(rows: list[dict]) -> None:
        result["measured"] += rows
        save()

    loaded, result["datasets"], result["skipped"] = bench.schedule_figures(suites, args)  # part 1
    save()
    cases = bench.measured_cases(loaded, selectors, args)
    if cases:
        measure_cases(cases, args, clock, meta, measured)
    result.update(costs.cost_vectors(args, settings))  # part 2
    save()
    result["big"] = costs.at_scale(args, settings)  # part 3

    table = report.markdown_table(result["datasets"], result["measured"]) if result["datasets"] else ""
    if table:
        print("\n" + table)
        (out / "bench_schedulers.md").write_text(table)
    for line in costs.big_lines(result["big"]):
        print(line)
    save()
    written = [out / "bench_schedulers.json", out / "bench_schedulers.png"]
    report.plot_summary(result["datasets"], result["measured"], result["big"], written[1])
    if table:
        written.append(out / "bench_schedulers.md")
    if result["rows"]:
        report.plot_cost_instances(result["rows"], out / "bench_schedulers_costs.png")
        written.append(out / "bench_schedulers_costs.png")
    print(f"\nwrote {', '.join(str(p) for p in written)} in {clock():.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
