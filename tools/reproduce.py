"""Reproduce EvolveGCN's link-prediction table (configs/repro/) over seeds, the EvolveGCN way and the
DyGNeX way; resumable.

    python tools/reproduce.py --cells egcn_o_uci,egcn_o_bitcoin_otc --seeds 0,1,2 --out runs/repro
    python tools/reproduce.py --out runs/repro --report      # the table of what has finished

Every (cell, way, seed) trains in its own child process into OUT/<cell>/<way>/seed<s>; run the same
command again after a kill and finished runs are skipped, an interrupted one continues from its newest
checkpoint (``train --resume``). Ways: ``evolvegcn`` (the config as written: B = 1, one device, psg),
``dygnex`` (dygnex_g on --devices fake devices, B = --batch, learning rate x sqrt(B) by default:
--lr-scale) and ``dygnex_chrono`` (the same with ``schedule.compose=chrono``: steps of consecutive
windows in time order, EvolveGCN's order; not in the default set). ``--set KEY=VALUE`` (repeatable)
overrides the cells' configs for every way, a deviation measured as its own way ``<way>+KEY=VALUE``
(e.g. ``--set data.neg_sampling=uniform``). After every run (and with --report) the
table of every finished run in OUT — whichever call trained it, so two calls into one OUT side by side
both end on the whole table — replaces OUT/reproduce.json and OUT/reproduce.md and is printed: test MAP / MRR
at the best val MAP, mean +- sd over seeds, beside the published value (Pareja et al., AAAI 2020,
Table 2) with a verdict, the epochs and the wall seconds per run. Bad arguments: one line
``error: ...``, exit code 2, before anything runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dygnex_jax.config import load_config
from dygnex_jax.errors import ArgumentParser, UserError, run_tool
from dygnex_jax.files import atomic_write_text, json_text, output_dir, staged
from dygnex_jax.research import reproduce


def parse_args(argv) -> argparse.Namespace:
    ap = ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--cells", default="all", help="comma-separated config stems of configs/repro (default all)"
    )
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    ap.add_argument(
        "--ways",
        default=",".join(reproduce.DEFAULT_WAYS),
        help=f"comma-separated, among {', '.join(reproduce.WAYS)} (default {','.join(reproduce.DEFAULT_WAYS)})",
    )
    ap.add_argument("--devices", type=int, default=8, help="dygnex way: fake CPU devices (default 8)")
    ap.add_argument("--batch", type=int, default=8, help="dygnex way: windows per step (default 8)")
    ap.add_argument(
        "--lr-scale",
        default="sqrt",
        choices=sorted(reproduce.LR_SCALES),
        help="dygnex way: learning rate x sqrt(B) (default), x B (linear) or unchanged (none)",
    )
    ap.add_argument(
        "--patience-scale",
        default="none",
        choices=reproduce.PATIENCE_SCALES,
        help="dygnex ways: train.patience as written (none, default) or x B / the config's batch "
        "(updates: as many optimiser updates without progress as the EvolveGCN way; way <way>-patience<N>)",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config override for every run (repeatable): a deviation from the cell's protocol, "
        "e.g. data.neg_sampling=uniform; its runs are the way <way>+KEY=VALUE",
    )
    ap.add_argument("--out", type=output_dir, default="runs/repro", help="output folder (default runs/repro)")
    ap.add_argument("--report", action="store_true", help="only write and print the table of finished runs")
    return ap.parse_args(argv)


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"{what} must be comma-separated integers, got {text!r}") from None
    if not values or min(values) < 0:
        raise UserError(f"{what} must name at least one integer >= 0, got {text!r}")
    return values


def select_configs(cells: str) -> list[Path]:
    names = reproduce.cells()
    if cells == "all":
        return list(names.values())
    chosen = [c.strip() for c in cells.split(",") if c.strip()]
    unknown = [c for c in chosen if c not in names]
    if unknown or not chosen:
        raise UserError(f"unknown --cells {', '.join(unknown) or cells!r}: choose from {', '.join(names)}")
    return [names[c] for c in chosen]


def report(out: Path) -> None:
    """The table of every finished run in ``out`` (not only this call's), each file replaced whole."""
    rows = reproduce.table(
        [r for r in map(reproduce.run_result, reproduce.folder_runs(out)) if r is not None]
    )
    text = reproduce.markdown(rows)
    with staged():  # both or neither
        for name, body in (("reproduce.json", json_text(rows, indent=2)), ("reproduce.md", text)):
            atomic_write_text(out / name, body)
    print(text, flush=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    configs = select_configs(args.cells)
    seeds = _ints(args.seeds, "--seeds")
    ways = [w.strip() for w in args.ways.split(",") if w.strip()]
    if not ways or any(w not in reproduce.WAYS for w in ways):
        raise UserError(f"--ways must be among {', '.join(reproduce.WAYS)}, got {args.ways!r}")
    if args.devices < 1 or args.batch < 1:
        raise UserError(f"--devices and --batch must be >= 1, got {args.devices} and {args.batch}")
    sets = tuple(s.strip() for s in args.set)
    if any("=" not in s or "/" in s or s.startswith(("=", ".")) for s in sets):
        raise UserError(f"--set takes KEY=VALUE without '/', got {', '.join(sets)!r}")
    for c in configs:
        load_config(c, list(sets))  # a config that cannot load fails here, before anything runs
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = reproduce.plan_runs(
        configs, seeds, ways, out, args.devices, args.batch, args.lr_scale, args.patience_scale, sets
    )
    if args.report:
        report(out)
        return 0
    failed = []
    todo = [r for r in runs if not r.done]
    print(f"reproduce: {len(runs)} run(s), {len(runs) - len(todo)} finished, {len(todo)} to run -> {out}")
    for i, run in enumerate(todo, 1):
        print(f"[{i}/{len(todo)}]", end=" ", flush=True)
        try:
            code = reproduce.execute(run)
        except KeyboardInterrupt:
            print(f"interrupted: {run.out} stopped at a safe point; run the same command again to resume it")
            return 130
        if code != 0:
            failed.append(run)
        report(out)
    for run in failed:
        print(
            f"failed: {run.out} (its output above); run the same command again to resume it", file=sys.stderr
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
