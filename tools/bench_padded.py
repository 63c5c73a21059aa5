"""The padded step, before and after, side by side: train the same config with a baseline checkout of
dygnex_jax (e.g. main at 6fa57bf, in a git worktree) and with this one, one after the other on the same
machine, and compare what the devices paid: packed padding efficiency (``mean_padding_efficiency``),
the ``schedule`` command's figure for it, steady epoch seconds (compilations excluded), compilation
seconds and count. Writes JSON (and a PNG beside it) and prints a table with the load average.

    git worktree add /tmp/base 6fa57bf
    python tools/bench_padded.py --baseline /tmp/base --json docs/bench_padded.json
    python tools/bench_padded.py --baseline /tmp/base --schedule --methods psg dygnex_g dygnex_l \
        --datasets as733 bitcoin_otc uci_collegemsg --json docs/bench_padded_schedule.json

Each case trains ``--epochs`` epochs of ``configs/egcn_o_bitcoin_otc.yaml`` with ``data.dataset=D`` at
``--devices`` fake CPU devices, ``train.batch_size=--batch``, ``schedule.method=M``; evaluation only after
the last epoch, on sampled candidates (not timed here).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from dygnex_jax.errors import ArgumentParser
from dygnex_jax.files import output_file
from dygnex_jax.research.torch_bench import steady_epoch_seconds

REPO = Path(__file__).resolve().parents[1]
CONFIG = "configs/egcn_o_bitcoin_otc.yaml"


def cli(src: Path, env: dict, what: str, *argv: str) -> subprocess.CompletedProcess:
    """``python -m dygnex_jax ARGV`` with the checkout ``src``; a failure stops the benchmark, naming it."""
    proc = subprocess.run(
        [sys.executable, "-m", "dygnex_jax", *argv], cwd=src, env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"{src} {what} failed:\n{proc.stderr[-3000:]}")
    return proc


# key=value overrides renamed after main at 6fa57bf: new key -> the old one
RENAMED = {"eval.every": "train.eval_every"}


def baseline_key(src: Path, override: str) -> str:
    """``override`` with its key's old name where the checkout ``src`` predates a rename."""
    key, _, value = override.partition("=")
    old = RENAMED.get(key)
    if old and f"{old.split('.')[-1]}:" in (src / "dygnex_jax" / "config.py").read_text():
        return f"{old}={value}"
    return override


def run(src: Path, dataset: str, method: str, args, out: Path) -> dict:
    """Train one case with the dygnex_jax found in ``src``; its figures."""
    env = {
        # the baseline checkout may lie elsewhere: both read this checkout's data root
        "DYGNEX_DATA": str(REPO.parent / "shared" / "datasets"),
        **os.environ,
        "PYTHONPATH": str(src),
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={args.devices}",
    }
    overrides = [
        f"data.dataset={dataset}",
        f"schedule.method={method}",
        f"train.batch_size={args.batch}",
        f"train.epochs={args.epochs}",
        f"eval.every={args.epochs}",
        "train.checkpoint_every=0",
        "eval.candidates=sampled",
        f"parallel.devices={args.devices}",
        *args.override,
    ]
    if src == REPO:  # compilations measured cold, as the baseline (which has no persistent cache) pays them
        overrides.append("parallel.compile_cache=off")
    else:  # keys renamed since the baseline: give it its own names
        overrides = [baseline_key(src, o) for o in overrides]
    config = str(REPO / CONFIG)
    load = os.getloadavg()[0]
    cli(src, env, f"{dataset} {method}", "train", "--config", config, "--out", str(out), *overrides)
    sched = subprocess.run(
        [
            sys.executable,
            "-m",
            "dygnex_jax",
            "schedule",
            "--config",
            config,
            "--devices",
            str(args.devices),
            "--json",
            str(out / "schedule.json"),
            *overrides,
        ],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
    )
    packed = packed_mean = None
    if sched.returncode == 0 and (out / "schedule.json").exists():
        got = json.loads((out / "schedule.json").read_text())
        packed, packed_mean = got["packed_padding_efficiency"], got.get("mean_packed_padding_efficiency")
    summary = json.loads((out / "summary.json").read_text())
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    wall = [r["epoch_seconds"] for r in rows]
    steady = steady_epoch_seconds(out, wall)
    ahead = summary.get("compile_seconds_ahead", 0.0) or 0.0
    return {
        "steady_epoch_seconds": statistics.median(steady),
        "wall_epoch_seconds": statistics.median(wall),
        "compile_seconds": sum(w - s for w, s in zip(wall, steady)) + ahead,
        "compilations": summary["compilations"],
        "mean_padding_efficiency": summary["mean_padding_efficiency"],
        "schedule_packed_efficiency": packed,  # epoch 1
        "schedule_mean_packed_efficiency": packed_mean,  # over the planned epochs (None before planning)
        "final_loss": summary["final"]["loss"],
        "load_average": load,
    }


def schedule_figures(src: Path, dataset: str, method: str, devices: int, args, out: Path) -> dict:
    """The ``schedule`` command of the checkout ``src``: schedule-level and packed padding efficiency,
    budgets, scheduler seconds per step."""
    env = {"DYGNEX_DATA": str(REPO.parent / "shared" / "datasets"), **os.environ, "PYTHONPATH": str(src)}
    overrides = [f"data.dataset={dataset}", f"schedule.method={method}", f"train.batch_size={args.batch}"]
    overrides += [f"schedule.time_limit={args.time_limit}", *args.override]
    cli(
        src,
        env,
        f"schedule {dataset} {method} P={devices}",
        "schedule",
        "--config",
        str(REPO / CONFIG),
        "--devices",
        str(devices),
        "--json",
        str(out),
        *overrides,
    )
    r = json.loads(out.read_text())
    return {
        "schedule_efficiency": r["padding_efficiency"],
        "packed_efficiency": r["packed_padding_efficiency"],
        "mean_packed_efficiency": r.get("mean_packed_padding_efficiency"),
        "budgets": len(r.get("budgets", [])) or None,
        "layout": r.get("layout", "scan"),
        "compose": r.get("compose", "strata")
        + (f" fitted to {r['fitted']}" if r.get("fitted") else "")
        + (f", epoch {r['repeated']} repeated" if r.get("repeated") else ""),
        "scheduler_seconds_per_step": r["scheduler_seconds"] / r["steps"],
        "load_average": os.getloadavg()[0],
    }


def schedule_table(a) -> int:
    """--schedule: the issue's table, ``schedule`` at each P for every dataset and method, both checkouts."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for devices in a.schedule_devices:
            for dataset in a.datasets:
                for method in a.methods:
                    row = {"dataset": dataset, "method": method, "devices": devices, "batch_size": a.batch}
                    for name, src in (("baseline", Path(a.baseline).resolve()), ("current", REPO)):
                        row[name] = schedule_figures(src, dataset, method, devices, a, Path(tmp) / "s.json")
                    rows.append(row)
                    c, b = row["current"], row["baseline"]
                    print(
                        f"| {dataset} | {method} | {devices} | {b['schedule_efficiency']:.3f} / {b['packed_efficiency']:.3f} "
                        f"| {c['schedule_efficiency']:.3f} / **{c['packed_efficiency']:.3f}** ({c['mean_packed_efficiency']:.3f}) | {c['budgets']} | "
                        f"{c['layout']}, {c['compose']} | {c['scheduler_seconds_per_step']:.2f} | {c['load_average']:.1f} |",
                        flush=True,
                    )
                    if a.json:
                        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


def main(argv=None) -> int:
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline", required=True, help="a checkout of the baseline commit (its repo root)")
    p.add_argument("--datasets", nargs="*", default=["bitcoin_otc", "uci_collegemsg"])
    p.add_argument("--methods", nargs="*", default=["dygnex_g"])
    p.add_argument("--devices", type=int, default=8)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--json", type=output_file, default=None, help="write the rows here (and a PNG beside it)")
    p.add_argument(
        "--schedule", action="store_true", help="only the schedule command's figures (no training)"
    )
    p.add_argument("--schedule-devices", type=int, nargs="*", default=[8, 1])
    p.add_argument("--time-limit", type=float, default=2.0, help="schedule.time_limit (dygnex_l)")
    p.add_argument("override", nargs="*", help="extra key=value overrides for both")
    a = p.parse_args(argv)
    if a.schedule:
        print(
            "| dataset | method | P | main: sched / packed | now: sched / packed | budgets | layout, compose | sched s/step | load |"
        )
        print("|---|---|---:|---|---|---:|---|---:|---:|")
        return schedule_table(a)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for dataset in a.datasets:
            for method in a.methods:
                row = {"dataset": dataset, "method": method, "devices": a.devices, "batch_size": a.batch}
                for name, src in (("baseline", Path(a.baseline).resolve()), ("current", REPO)):
                    print(f"[{name}] {dataset} {method}", file=sys.stderr, flush=True)
                    row[name] = run(src, dataset, method, a, Path(tmp) / f"{name}-{dataset}-{method}")
                row["speedup"] = (
                    row["baseline"]["steady_epoch_seconds"] / row["current"]["steady_epoch_seconds"]
                )
                rows.append(row)
                if a.json:
                    Path(a.json).write_text(json.dumps(rows, indent=1))
    print(
        "| dataset | method | P | B | packed eff. base → now (schedule cmd) | steady s/epoch base → now | speed-up | compilations (s) base → now | load |"
    )
    print("|---|---|---:|---:|---|---|---:|---|---|")
    for r in rows:
        b, c = r["baseline"], r["current"]
        print(
            f"| {r['dataset']} | {r['method']} | {r['devices']} | {r['batch_size']} | "
            f"{b['mean_padding_efficiency']:.3f} ({b['schedule_packed_efficiency'] or float('nan'):.3f}) → "
            f"{c['mean_padding_efficiency']:.3f} ({c['schedule_packed_efficiency'] or float('nan'):.3f}) | "
            f"{b['steady_epoch_seconds']:.2f} → {c['steady_epoch_seconds']:.2f} | {r['speedup']:.2f}x | "
            f"{b['compilations']} ({b['compile_seconds']:.1f}) → {c['compilations']} ({c['compile_seconds']:.1f}) | "
            f"{b['load_average']:.1f} / {c['load_average']:.1f} |"
        )
    if a.json:
        plot(rows, Path(a.json).with_suffix(".png"))
    return 0


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    labels = [f"{r['dataset']}\n{r['method']}" for r in rows]
    x = range(len(rows))
    for ax, key, title in (
        (axes[0], "mean_padding_efficiency", "packed padding efficiency"),
        (axes[1], "steady_epoch_seconds", "steady s / epoch"),
    ):
        ax.bar([i - 0.2 for i in x], [r["baseline"][key] for r in rows], 0.4, label="baseline")
        ax.bar([i + 0.2 for i in x], [r["current"][key] for r in rows], 0.4, label="current")
        ax.set_xticks(list(x), labels)
        ax.set_title(title)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
