"""The padded step, before and after, side by side: train the same config with a baseline checkout of
dygnex_jax (e.g. main at 6fa57bf, in a git worktree) and with this one, one after the other on the same
machine, and compare what the devices paid: packed padding efficiency (``mean_padding_efficiency``),
the ``schedule`` command's figure for it, steady epoch seconds (compilations excluded), compilation
seconds and count. Writes JSON (and a PNG beside it) and prints a table with the load average.

    git worktree add /tmp/base 6fa57bf
    python tools/bench_padded.py --baseline /tmp/base --json docs/bench_padded.json

Each case trains ``--epochs`` epochs of ``configs/egcn_o_bitcoin_otc.yaml`` with ``data.dataset=D`` at
``--devices`` fake CPU devices, ``train.batch_size=--batch``, ``schedule.method=M``; evaluation only after
the last epoch, on sampled candidates (not timed here).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_torch import steady_epoch_seconds

REPO = Path(__file__).resolve().parents[1]
CONFIG = "configs/egcn_o_bitcoin_otc.yaml"


def run(src: Path, dataset: str, method: str, args, out: Path) -> dict:
    """Train one case with the dygnex_jax found in ``src``; its figures."""
    env = {
        **os.environ,
        "PYTHONPATH": str(src),
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={args.devices}",
    }
    overrides = [
        f"data.dataset={dataset}",
        f"schedule.method={method}",
        f"train.batch_size={args.batch}",
        f"train.epochs={args.epochs}",
        f"train.eval_every={args.epochs}",
        "train.checkpoint_every=0",
        "eval.candidates=sampled",
        f"parallel.devices={args.devices}",
        *args.override,
    ]
    config = str(REPO / CONFIG)
    load = os.getloadavg()[0]
    proc = subprocess.run(
        [sys.executable, "-m", "dygnex_jax", "train", "--config", config, "--out", str(out), *overrides],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{src} {dataset} {method} failed:\n{proc.stderr[-3000:]}")
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
    packed = None
    if sched.returncode == 0 and (out / "schedule.json").exists():
        packed = json.loads((out / "schedule.json").read_text())["packed_padding_efficiency"]
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
        "schedule_packed_efficiency": packed,
        "final_loss": summary["final"]["loss"],
        "load_average": load,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline", required=True, help="a checkout of the baseline commit (its repo root)")
    p.add_argument("--datasets", nargs="*", default=["bitcoin_otc", "uci_collegemsg"])
    p.add_argument("--methods", nargs="*", default=["dygnex_g"])
    p.add_argument("--devices", type=int, default=8)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--json", default="", help="write the rows here (and a PNG beside it)")
    p.add_argument("override", nargs="*", help="extra key=value overrides for both")
    a = p.parse_args(argv)
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
