"""Per-epoch comparison of all five methods in the same trainer: psg, snapshot, vertex, dygnex_g, dygnex_l.

For every dataset (``--datasets``), model (``--models``) and fake CPU device count (``--devices``, plus
``--two-core`` devices: the 2-device configuration that has one core per device on this machine), the
five methods train the same model on the same data with the same optimiser for ``--epochs`` epochs,
interleaved epoch by epoch (epoch e of every method, then e + 1, ...) so that load from other users of
a shared machine hits all methods alike. Reported per method:

* measured epoch seconds: the median over the epochs that compiled nothing (``clean``); when fewer
  than 3 epochs are clean, the median over all epochs after the first of the non-compiling steps'
  seconds scaled to the epoch's step count (``timing: scaled`` in the JSON);
* padding efficiency (real / padded work as the devices ran it; for snapshot it includes the
  pipeline bubble and the padded time offsets) and, for snapshot, the bubble fraction;
* bytes sent by collectives per epoch (comm.py: traced from the step), split into gradients, states,
  features;
* val / test MAP after the last epoch (sampled candidates, ``eval.neg_per_source``);
* ratios to psg's epoch time and bytes in the same run.

Every (devices) configuration runs in its own subprocess (fake devices are fixed when JAX starts).
Writes ``bench_epoch.json``, ``bench_epoch.png`` and ``bench_epoch.md`` (the README table) to ``--out``.

    python tools/bench_epoch.py                                   # the full table
    python tools/bench_epoch.py --datasets bitcoin_otc --devices 4 --two-core 0 --epochs 4
    python tools/bench_epoch.py --quick                           # tiny synthetic run, for tests
    python tools/bench_epoch.py --report --out DIR                # table + plot of DIR/rows_*.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dygnex_jax.devices import force_host_devices  # noqa: E402
from dygnex_jax.errors import run_tool  # noqa: E402

METHODS = ("psg", "snapshot", "vertex", "dygnex_g", "dygnex_l")
# Sized for a 2-core CPU: the comparison needs the same settings for every method, not the paper's.
COMMON = [
    "model.hidden=16",
    "model.head_hidden=32",
    "data.neg_mult=2",
    "train.batch_size=16",
    "eval.candidates=sampled",
    "eval.neg_per_source=20",
    "eval.batch_size=16",
    "parallel.bucket_ratio=1.5",
    "schedule.time_limit=2.0",
]
QUICK = [
    "data.syn_nodes=120",
    "data.syn_snapshots=24",
    "data.syn_edges=150",
    "data.window=4",
    "model.hidden=8",
    "model.head_hidden=8",
    "train.batch_size=8",
    "parallel.min_bucket=32",
    "parallel.bucket_ratio=2.0",
]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="bitcoin_otc,as733")
    ap.add_argument("--models", default="egcn_o,gcrn_gru")
    ap.add_argument("--devices", default="4,8", help="fake CPU device counts")
    ap.add_argument("--two-core", type=int, default=2, help="also run this many devices (0 = no)")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--epochs", type=int, default=4, help="epochs per method (the first compiles)")
    ap.add_argument("--out", default="runs/bench_epoch")
    ap.add_argument("--quick", action="store_true", help="tiny synthetic settings (tests)")
    ap.add_argument(
        "--report", action="store_true", help="run nothing: table and plot from the rows_*.json in --out"
    )
    ap.add_argument("--worker", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("overrides", nargs="*", help="key=value config overrides for every run")
    return ap.parse_args(argv)


# --- worker: one device count, every dataset x model x method ------------------------------------


def epoch_seconds(history: list[dict]) -> tuple[float, str, list[float]]:
    """(median epoch seconds without compilation, how it was obtained, the per-epoch figures)."""
    clean = [h["seconds"] for h in history if not h["compiled_steps"]]
    if len(clean) >= 3:
        return statistics.median(clean), "clean", clean
    scaled = []
    for h in history[1:] or history:
        steps = h["step_seconds"]
        warm = [s for s, c in zip(steps, h["step_compiled"]) if not c]
        if warm:
            scaled.append(sum(warm) * len(steps) / len(warm))
    return (statistics.median(scaled) if scaled else float("nan")), "scaled", scaled


def run_case(dataset: str, model: str, p: int, methods: list[str], args) -> list[dict]:
    from dygnex_jax.config import load_config
    from dygnex_jax.data import datasets as _datasets
    from dygnex_jax.train import Trainer

    base = [f"data.dataset={dataset}", f"model.name={model}", f"parallel.devices={p}"]
    base += QUICK if args.quick else COMMON
    base += list(args.overrides)
    graph = _datasets.load_dataset(load_config(None, base).data)
    trainers = {m: Trainer(load_config(None, [*base, f"schedule.method={m}"]), graph=graph) for m in methods}
    history: dict[str, list[dict]] = {m: [] for m in methods}
    for epoch in range(1, args.epochs + 1):
        for m, tr in trainers.items():
            stats = tr.train_epoch(epoch)
            history[m].append(
                {
                    "seconds": stats["epoch_seconds"],
                    "loss": stats["loss"],
                    "compiled_steps": sum(s["compiled"] for s in tr.last_steps),
                    "step_seconds": [s["seconds"] for s in tr.last_steps],
                    "step_compiled": [s["compiled"] for s in tr.last_steps],
                    "padding_efficiency": stats["padding_efficiency"],
                    "bubble_fraction": stats.get("bubble_fraction"),
                    "comm_bytes": stats["comm_bytes"],
                    "comm": {k: stats[f"comm_bytes_{k}"] for k in ("gradients", "states", "features")},
                }
            )
            print(f"  {dataset} {model} P={p} {m} epoch {epoch}: {stats['epoch_seconds']:.2f}s", flush=True)
    rows = []
    for m, tr in trainers.items():
        ev = {s: tr.evaluate(s) for s in ("val", "test")}
        seconds, how, figures = epoch_seconds(history[m])
        h = history[m]
        rows.append(
            {
                "dataset": dataset,
                "model": model,
                "devices": p,
                "method": m,
                "epoch_seconds": seconds,
                "timing": how,
                "timed_epochs": figures,
                "padding_efficiency": statistics.mean(x["padding_efficiency"] for x in h),
                "bubble_fraction": h[-1]["bubble_fraction"],
                "comm_bytes": h[-1]["comm_bytes"],
                "comm": h[-1]["comm"],
                "final_loss": h[-1]["loss"],
                "val_map": ev["val"]["map"],
                "test_map": ev["test"]["map"],
                "steps": len(h[-1]["step_seconds"]),
                "compilations": len(tr.train_step.traces),
                "history": h,
            }
        )
    psg = next((r for r in rows if r["method"] == "psg"), None)
    for r in rows:
        if psg:
            r["time_vs_psg"] = r["epoch_seconds"] / psg["epoch_seconds"]
            r["bytes_vs_psg"] = r["comm_bytes"] / psg["comm_bytes"]
    return rows


def worker(args) -> int:
    import tempfile

    import jax

    # A persistent compilation cache: psg, dygnex_g and dygnex_l run the same step program, so a shape
    # bucket compiled for one loads for the others (compile time is no epoch time, but it is bench time).
    jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp(prefix="bench_epoch_cache_"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    rows = []
    for dataset in args.datasets.split(","):
        for model in args.models.split(","):
            rows += run_case(dataset, model, args.worker, args.methods.split(","), args)
            # written after every case, so that an interrupted run keeps what it measured
            Path(args.out, f"rows_{args.worker}.json").write_text(json.dumps(rows))
    return 0


# --- driver ------------------------------------------------------------------------------------------


def table(rows: list[dict]) -> str:
    head = (
        "| dataset | model | P | method | epoch s | × psg | pad. eff. | bubble | MB / epoch | × psg bytes "
        "| val MAP | test MAP |\n|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    lines = []
    for r in rows:
        bubble = f"{r['bubble_fraction']:.2f}" if r["bubble_fraction"] is not None else ""
        timing = "" if r["timing"] == "clean" else "*"
        lines.append(
            f"| {r['dataset']} | {r['model']} | {r['devices']} | {r['method']} | {r['epoch_seconds']:.2f}{timing} "
            f"| {r.get('time_vs_psg', float('nan')):.2f} | {r['padding_efficiency']:.3f} | {bubble} "
            f"| {r['comm_bytes'] / 1e6:.2f} | {r.get('bytes_vs_psg', float('nan')):.1f} "
            f"| {r['val_map']:.4f} | {r['test_map']:.4f} |"
        )
    return head + "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = sorted({(r["dataset"], r["model"], r["devices"]) for r in rows})
    methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    fig, axes = plt.subplots(1, 2, figsize=(max(8, 1.6 * len(cases)) * 2, 4.5))
    width = 0.8 / len(methods)
    for ax, key, label in (
        (axes[0], "time_vs_psg", "epoch time / psg (lower is better)"),
        (axes[1], "comm_bytes", "bytes sent per epoch (log)"),
    ):
        for i, m in enumerate(methods):
            vals = [
                next(
                    (
                        r.get(key, float("nan"))
                        for r in rows
                        if (r["dataset"], r["model"], r["devices"]) == c and r["method"] == m
                    ),
                    float("nan"),
                )
                for c in cases
            ]
            ax.bar([j + i * width for j in range(len(cases))], vals, width, label=m)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(cases))])
        ax.set_xticklabels([f"{d}\n{mo}\nP={p}" for d, mo, p in cases], fontsize=7)
        ax.set_ylabel(label)
        if key == "comm_bytes":
            ax.set_yscale("log")
        else:
            ax.axhline(1.0, color="k", lw=0.5)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    args = parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    if args.worker:
        force_host_devices(args.worker)
        return worker(args)
    counts = [int(x) for x in args.devices.split(",") if x]
    if args.two_core:
        counts = [args.two_core] + [c for c in counts if c != args.two_core]
    start = time.perf_counter()
    rows = []
    if args.report:
        counts = []
        for path in sorted(Path(args.out).glob("rows_*.json"), key=lambda f: int(f.stem.split("_")[1])):
            rows += json.loads(path.read_text())
    for p in counts:
        cmd = [
            sys.executable,
            __file__,
            "--worker",
            str(p),
            "--datasets",
            args.datasets,
            "--models",
            args.models,
            "--methods",
            args.methods,
            "--epochs",
            str(args.epochs),
            "--out",
            args.out,
        ]
        cmd += ["--quick"] if args.quick else []
        cmd += list(args.overrides)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={p}"
        print(f"P={p}: {' '.join(cmd[1:])}", flush=True)
        subprocess.run(cmd, check=True, env=env)
        rows += json.loads(Path(args.out, f"rows_{p}.json").read_text())
    meta = {
        "command": " ".join(sys.argv),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load average {os.getloadavg()}",
        "settings": (QUICK if args.quick else COMMON) + list(args.overrides),
        "epochs": args.epochs,
        "two_core_devices": args.two_core,
        "seconds": time.perf_counter() - start,
    }
    out = Path(args.out)
    (out / "bench_epoch.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (out / "bench_epoch.md").write_text(table(rows))
    plot(rows, out / "bench_epoch.png")
    print(table(rows))
    print(f"wrote {out}/bench_epoch.json, .md, .png in {meta['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
