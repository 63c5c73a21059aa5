"""Per-epoch comparison of all five methods in the same trainer: psg, snapshot, vertex, dygnex_g, dygnex_l.

For every device configuration (``--devices``: fake CPU device counts in one process; ``--two-core``:
``2`` = one process with 2 fake devices, ``2p`` = 2 processes x 1 device joined by jax.distributed over
gloo, started by tools/launch_local.py, the configuration with one core per device on a 2-core
machine), every dataset (``--datasets``) and model (``--models``), the five methods train the same
model on the same data with the same optimiser. Per case:

1. one Trainer per method in one process (the dataset is loaded once; evaluation's jitted programs
   and sampled candidates are shared, as they do not depend on the method);
2. warm-up: every epoch's schedule is computed once (and reused by the timed epoch), every step is
   packed and each new batch shape is compiled by one step on copies of the parameters (results
   discarded), so no timed epoch compiles (``timing: clean``; ``scaled`` if one still did: its
   compiling steps left out and the rest scaled to the epoch's step count);
3. ``--epochs`` timed epochs, interleaved epoch by epoch (epoch e of every method, then e + 1, ...) so
   that load from other users of a shared machine hits all methods alike; then val / test MAP.

Reported per method: the median epoch seconds; padding efficiency (real / padded work as the devices
ran it; for snapshot including the pipeline bubble and padded time offsets) and, for snapshot, the
bubble fraction; bytes sent by collectives per epoch (comm.py: traced from the step), split into
gradients, states, features; val / test MAP after the last epoch (sampled candidates,
``eval.neg_per_source``); ratios to psg's epoch time and bytes in the same configuration; warm-up
(compilation) and evaluation seconds.

Every configuration runs in its own subprocess(es) (fake devices are fixed when JAX starts); ``--jobs``
runs several at once. Writes ``bench_epoch.json``, ``bench_epoch.png`` and ``bench_epoch.md`` (the
README table) to ``--out``, and ``rows_CONFIG.json`` after every case.

    python tools/bench_epoch.py --out runs/bench_epoch               # the full table (README), ~23 min
    python tools/bench_epoch.py --datasets bitcoin_otc --devices 4 --two-core ''
    python tools/bench_epoch.py --quick                               # tiny synthetic run, for tests
    python tools/bench_epoch.py --report --out DIR                    # table + plot of DIR/rows_*.json
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
WHOLE_WINDOWS = ("psg", "dygnex_g", "dygnex_l")  # one step program: whole windows per device
# Sized so that the whole table fits in about half an hour on a shared 2-core CPU (the comparison needs
# the same settings for every method, not the paper's). W = 8 splits evenly over 2, 4 and 8 pipeline
# stages (snapshot partition pads no time offsets). Few shapes (bucket ratio 1.5, re-use of a
# compiled budget up to 2x the step's own padded work) keep compilations to a few per method: on this
# machine compiling a step program takes 5-15 s, longer than the timed epochs of a method.
COMMON = [
    "data.window=8",
    "model.hidden=8",
    "model.head_hidden=16",
    "data.neg_mult=2",
    "train.batch_size=16",
    "eval.candidates=sampled",
    "eval.neg_per_source=20",
    "eval.batch_size=16",
    "parallel.budgets=buckets",  # the bucket grid of the README's table (measured before planned budgets)
    "parallel.bucket_ratio=1.5",
    "parallel.reuse_slack=1.0",
    "parallel.compile_steps=0",  # no ski rental: the shapes of the README's table (measured before it)
    "schedule.time_limit=1.0",
]
# Fewer windows per epoch: Bitcoin-OTC's last 76 snapshots (48 train windows = 3 steps of 16; 7 val,
# 13 test); AS-733's last 31 days (16 train windows of 2,100-6,400 active nodes = 2 steps of 8; 2 val,
# 5 test; EvolveGCN uses the last 100 days).
PER_DATASET = {
    "bitcoin_otc": ["data.last_snapshots=76"],
    "as733": ["data.last_snapshots=31", "train.batch_size=8"],
}
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
    ap.add_argument(
        "--two-core",
        default="2,2p",
        help="the 2-core configurations: 2 = one process with 2 fake devices, 2p = 2 processes x 1 device "
        "(tools/launch_local.py); '' or 0 = none",
    )
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument(
        "--jobs",
        type=int,
        default=2,
        help="device configurations run at the same time (each in its own processes; > 1 shortens the "
        "benchmark on a machine that others load, at the price of noisier epoch times); logs go to "
        "OUT/log_CONFIG.txt",
    )
    ap.add_argument("--epochs", type=int, default=3, help="timed epochs per method, after the warm-up")
    ap.add_argument("--out", default="runs/bench_epoch")
    ap.add_argument("--quick", action="store_true", help="tiny synthetic settings (tests)")
    ap.add_argument(
        "--report", action="store_true", help="run nothing: table and plot from the rows_*.json in --out"
    )
    ap.add_argument("--worker", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--processes", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--coordinator", help=argparse.SUPPRESS)  # set by tools/launch_local.py
    ap.add_argument("--num-processes", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--process-id", type=int, help=argparse.SUPPRESS)
    ap.add_argument("overrides", nargs="*", help="key=value config overrides for every run")
    return ap.parse_args(argv)


# --- worker: one device configuration, every dataset x model x method --------------------------------


def config_name(devices: int, processes: int) -> str:
    return f"{processes}x{devices // processes}proc" if processes > 1 else f"{devices}fake"


def case_overrides(dataset: str, model: str, devices: int, args) -> list[str]:
    base = [f"data.dataset={dataset}", f"model.name={model}", f"parallel.devices={devices}"]
    if args.quick:
        return base + QUICK + list(args.overrides)
    return base + COMMON + PER_DATASET.get(dataset, []) + list(args.overrides)


def epoch_seconds(history: list[dict]) -> tuple[float, str, list[float]]:
    """(median epoch seconds, how it was obtained, the per-epoch figures). After the warm-up no timed
    epoch should compile (``clean``); if one did, its compiling steps are left out and the rest scaled
    to the epoch's step count (``scaled``)."""
    if all(not h["compiled_steps"] for h in history):
        figures = [h["seconds"] for h in history]
        return statistics.median(figures), "clean", figures
    scaled = []
    for h in history:
        steps = h["step_seconds"]
        warm = [s for s, c in zip(steps, h["step_compiled"]) if not c]
        if warm:
            scaled.append(h["seconds"] - sum(steps) + sum(warm) * len(steps) / len(warm))
    return (statistics.median(scaled) if scaled else float("nan")), "scaled", scaled


def warm_up(tr, schedules: dict) -> dict:
    """Compile every step program the timed epochs will run, before timing them.

    Packs every step of every epoch's schedule in order (so that the shape buckets chosen, and their
    re-use, are those of the timed epochs), traces the collectives once per shape (comm.py) and runs
    the train step once per new batch shape on *copies* of the parameters and optimiser state (the
    step donates them; the results are discarded, training is not advanced). Returns figures of it.
    """
    import jax
    import jax.numpy as jnp

    from dygnex_jax import parallel

    copy = jax.jit(lambda tree: jax.tree.map(jnp.copy, tree))
    start = time.perf_counter()
    shapes = set()
    compile_seconds = 0.0
    for epoch, sched in schedules.items():
        for step in sched.steps:
            batch, *_ = tr.pack_train(step, epoch)
            tr.comm_bytes(batch)
            key = tuple((k, v.shape) for k, v in sorted(batch.items()))
            if key in shapes:
                continue
            shapes.add(key)
            t = time.perf_counter()
            out = tr.train_step(copy(tr.params), copy(tr.opt_state), parallel.shard_batch(tr.mesh, batch))
            jax.block_until_ready(out)
            compile_seconds += time.perf_counter() - t
    return {"shapes": len(shapes), "seconds": time.perf_counter() - start, "compile_seconds": compile_seconds}


def run_case(dataset: str, model: str, devices: int, methods: list[str], args, say) -> list[dict]:
    from dygnex_jax.config import load_config
    from dygnex_jax.data import datasets as _datasets
    from dygnex_jax.train import Trainer

    base = case_overrides(dataset, model, devices, args)
    name = config_name(devices, args.processes)
    case_start = time.perf_counter()
    graph = _datasets.load_dataset(load_config(None, base).data)
    trainers, schedules, warm, shared_comm = {}, {}, {}, {}
    for m in methods:
        t = time.perf_counter()
        trainers[m] = tr = Trainer(load_config(None, [*base, f"schedule.method={m}"]), graph=graph)
        first = next(iter(trainers.values()))
        if tr is not first:
            # Evaluation is the same program for every method (whole windows per device): one jitted
            # embed step, pair scorer and candidate sample for all, instead of compiling it 5 times.
            tr.embed_step, tr.score_fn, tr._eval_candidates = (
                first.embed_step,
                first.score_fn,
                first._eval_candidates,
            )
        if m in WHOLE_WINDOWS:  # the same step program: the same bytes per batch shape
            tr._comm_bytes = shared_comm
        init_seconds = time.perf_counter() - t
        t = time.perf_counter()
        schedules[m] = {e: tr.epoch_schedule(e) for e in range(1, args.epochs + 1)}
        sched_seconds = time.perf_counter() - t
        warm[m] = {
            "init_seconds": init_seconds,
            "schedule_seconds": sched_seconds,
            **warm_up(tr, schedules[m]),
        }
        say(
            f"  {dataset} {model} {name} {m}: init {init_seconds:.1f}s, schedules {sched_seconds:.1f}s, "
            f"warm-up {warm[m]['seconds']:.1f}s ({warm[m]['shapes']} shapes)"
        )
    history: dict[str, list[dict]] = {m: [] for m in methods}
    for epoch in range(1, args.epochs + 1):
        for m, tr in trainers.items():
            stats = tr.train_epoch(epoch, sched=schedules[m][epoch])
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
            say(f"  {dataset} {model} {name} {m} epoch {epoch}: {stats['epoch_seconds']:.2f}s")
    rows = []
    for m, tr in trainers.items():
        t = time.perf_counter()
        ev = {s: tr.evaluate(s) for s in ("val", "test")}
        eval_seconds = time.perf_counter() - t
        seconds, how, figures = epoch_seconds(history[m])
        h = history[m]
        rows.append(
            {
                "dataset": dataset,
                "model": model,
                "devices": devices,
                "processes": args.processes,
                "config": name,
                "method": m,
                "epoch_seconds": seconds,
                "timing": how,
                "timed_epochs": figures,
                "padding_efficiency": statistics.mean(x["padding_efficiency"] for x in h),
                "bubble_fraction": h[-1]["bubble_fraction"],
                "comm_bytes": statistics.mean(x["comm_bytes"] for x in h),
                "comm": h[-1]["comm"],
                "final_loss": h[-1]["loss"],
                "val_map": ev["val"]["map"],
                "test_map": ev["test"]["map"],
                "steps": len(h[-1]["step_seconds"]),
                "compilations": len(tr.train_step.traces),
                "warm_up": warm[m],
                "eval_seconds": eval_seconds,
                "history": h,
            }
        )
    psg = next((r for r in rows if r["method"] == "psg"), None)
    for r in rows:
        if psg:
            r["time_vs_psg"] = r["epoch_seconds"] / psg["epoch_seconds"]
            r["bytes_vs_psg"] = r["comm_bytes"] / psg["comm_bytes"]
        r["case_seconds"] = time.perf_counter() - case_start
    say(f"  {dataset} {model} {name}: {time.perf_counter() - case_start:.0f}s, load {os.getloadavg()}")
    return rows


def worker(args) -> int:
    import tempfile

    from dygnex_jax import distributed

    if args.processes > 1:
        distributed.initialize(distributed.resolve(args.coordinator, args.num_processes, args.process_id))
    import jax

    main = distributed.is_main_process()
    say = (lambda text: print(text, flush=True)) if main else (lambda text: None)
    # A persistent compilation cache: psg, dygnex_g and dygnex_l run the same step program, so a shape
    # bucket compiled for one loads for the others (compile time is no epoch time, but it is bench time).
    jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp(prefix="bench_epoch_cache_"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    rows = []
    name = config_name(args.worker, args.processes)
    for dataset in args.datasets.split(","):
        for model in args.models.split(","):
            rows += run_case(dataset, model, args.worker, args.methods.split(","), args, say)
            # written after every case, so that an interrupted run keeps what it measured
            if main:
                Path(args.out, f"rows_{name}.json").write_text(json.dumps(rows))
    return 0


# --- driver ------------------------------------------------------------------------------------------


def table(rows: list[dict]) -> str:
    head = (
        "| dataset | model | devices | method | epoch s | × psg | pad. eff. | bubble | MB / epoch | × psg bytes "
        "| val MAP | test MAP |\n|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    lines = []
    for r in rows:
        bubble = f"{r['bubble_fraction']:.2f}" if r["bubble_fraction"] is not None else ""
        timing = "" if r["timing"] == "clean" else "*"
        lines.append(
            f"| {r['dataset']} | {r['model']} | {r['config']} | {r['method']} | {r['epoch_seconds']:.2f}{timing} "
            f"| {r.get('time_vs_psg', float('nan')):.2f} | {r['padding_efficiency']:.3f} | {bubble} "
            f"| {r['comm_bytes'] / 1e6:.2f} | {r.get('bytes_vs_psg', float('nan')):.1f} "
            f"| {r['val_map']:.4f} | {r['test_map']:.4f} |"
        )
    return head + "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(dict.fromkeys((r["dataset"], r["model"], r["config"]) for r in rows))
    methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    # one panel above the other, each as wide as the cases need (at most 16 inches)
    fig, axes = plt.subplots(2, 1, figsize=(min(16, max(8, 0.8 * len(cases))), 8))
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
                        if (r["dataset"], r["model"], r["config"]) == c and r["method"] == m
                    ),
                    float("nan"),
                )
                for c in cases
            ]
            ax.bar([j + i * width for j in range(len(cases))], vals, width, label=m)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(cases))])
        ax.set_xticklabels([f"{d}\n{mo}\n{p}" for d, mo, p in cases], fontsize=6)
        ax.set_ylabel(label)
        if key == "comm_bytes":
            ax.set_yscale("log")
        else:
            ax.axhline(1.0, color="k", lw=0.5)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def config_order(name: str) -> tuple[int, int]:
    processes, _, rest = name.partition("x")
    if rest:  # "2x1proc"
        return int(processes), 1
    return int(name.removesuffix("fake")), 0


def worker_command(devices: int, processes: int, args) -> list[str]:
    cmd = ["--worker", str(devices), "--processes", str(processes), "--datasets", args.datasets]
    cmd += [
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
    return cmd + list(args.overrides)


def main(argv=None) -> int:
    args = parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    if args.worker:
        if args.processes == 1:
            force_host_devices(args.worker)
        return worker(args)
    configs = [c for c in args.devices.split(",") if c] + [
        c for c in args.two_core.split(",") if c not in ("", "0")
    ]
    start = time.perf_counter()
    loads = [os.getloadavg()]
    names, failed = [], []
    running: list[tuple[str, subprocess.Popen, float]] = []
    config_seconds = {}

    def finish(name: str, proc: subprocess.Popen, began: float) -> None:
        if proc.wait():  # keep what the other configurations measured
            print(f"error: configuration {name} failed (rows of its finished cases are kept)", flush=True)
            failed.append(name)
        config_seconds[name] = time.perf_counter() - began
        loads.append(os.getloadavg())
        print(f"{name}: done in {config_seconds[name]:.0f} s, load {os.getloadavg()}", flush=True)

    for c in [] if args.report else configs:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        if c.endswith("p"):  # N processes x 1 device, jax.distributed over gloo
            n = int(c[:-1])
            cmd = [
                sys.executable,
                str(REPO / "tools" / "launch_local.py"),
                str(n),
                "--script",
                __file__,
                "--",
            ]
            cmd += worker_command(n, n, args)
            names.append(config_name(n, n))
        else:
            cmd = [sys.executable, __file__, *worker_command(int(c), 1, args)]
            env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={c}"
            names.append(config_name(int(c), 1))
        while len(running) >= args.jobs:
            finish(*running.pop(0))
        log = Path(args.out, f"log_{names[-1]}.txt") if args.jobs > 1 else None
        print(f"{names[-1]}: {' '.join(cmd[1:])}" + (f" > {log}" if log else ""), flush=True)
        stdout = log.open("w") if log else None
        running.append(
            (names[-1], subprocess.Popen(cmd, env=env, stdout=stdout, stderr=stdout), time.perf_counter())
        )
    while running:
        finish(*running.pop(0))
    if args.report:
        names = sorted(
            (f.stem.removeprefix("rows_") for f in Path(args.out).glob("rows_*.json")), key=config_order
        )
    rows = []
    for name in names:
        if Path(args.out, f"rows_{name}.json").exists():
            rows += json.loads(Path(args.out, f"rows_{name}.json").read_text())
    meta = {
        "command": " ".join(sys.argv),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "load_averages": loads,  # (1, 5, 15 min) at the start and after every configuration
        "settings": QUICK if args.quick else {"common": COMMON, "per_dataset": PER_DATASET},
        "overrides": list(args.overrides),
        "epochs": args.epochs,
        "configs": names,
        "jobs": args.jobs,  # configurations run at the same time
        "config_seconds": config_seconds,
        "failed": failed,
        "seconds": time.perf_counter() - start,
    }
    out = Path(args.out)
    if args.report and (out / "bench_epoch.json").exists():
        meta = json.loads((out / "bench_epoch.json").read_text())["meta"] | {"report_of": names}
    (out / "bench_epoch.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (out / "bench_epoch.md").write_text(table(rows))
    plot(rows, out / "bench_epoch.png")
    print(table(rows))
    print(f"wrote {out}/bench_epoch.json, .md, .png in {meta['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
