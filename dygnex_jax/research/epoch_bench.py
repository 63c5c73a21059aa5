"""All five methods in the same trainer, per epoch (``tools/bench_epoch.py``): psg, snapshot, vertex,
dygnex_g, dygnex_l.

One device configuration runs in one process (or in each of the processes of a multi-process run):
``run_worker`` trains every dataset x model of it, and per case (``run_case``):

1. one Trainer per method in one process (the dataset is loaded once; evaluation's jitted programs
   and sampled candidates are shared, as they do not depend on the method);
2. warm-up (``warm_up``): every epoch's schedule is computed once (and reused by the timed epoch),
   every step is packed and each new batch shape is compiled by one step on copies of the parameters
   (results discarded), so no timed epoch compiles (``timing: clean``; ``scaled`` if one still did: its
   compiling steps left out and the rest scaled to the epoch's step count, ``epoch_seconds``);
3. ``--epochs`` timed epochs, interleaved epoch by epoch (epoch e of every method, then e + 1, ...) so
   that load from other users of a shared machine hits all methods alike; then val / test MAP.

Per method a row: the median epoch seconds; padding efficiency (real / padded work as the devices ran
it; for snapshot including the pipeline bubble and padded time offsets) and, for snapshot, the bubble
fraction; bytes sent by collectives per epoch (comm.py: traced from the step), split into gradients,
states, features; val / test MAP after the last epoch (sampled candidates, ``eval.neg_per_source``);
ratios to psg's epoch time and bytes in the same configuration; warm-up (compilation) and evaluation
seconds. ``table`` and ``plot`` show the rows of every configuration. The functions take the script's
parsed flags (``args``, an ``argparse.Namespace``). JAX is imported by the functions that train.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

from ..files import save_figure

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

    from .. import parallel

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


def build_trainers(base: list[str], graph, methods: list[str], args, say, label: str):
    """One Trainer per method on the same graph, each warmed up on its schedules of every timed epoch:
    (trainers, schedules, warm-up figures), each keyed by method."""
    from ..config import load_config
    from ..train import Trainer

    trainers, schedules, warm, shared_comm = {}, {}, {}, {}
    for m in methods:
        t = time.perf_counter()
        trainers[m] = tr = Trainer(load_config(None, [*base, f"schedule.method={m}"]), graph=graph)
        first = next(iter(trainers.values()))
        if tr is not first:
            # Evaluation is the same program for every method (whole windows per device): one jitted
            # embed step, pair scorer and candidate sample for all, instead of compiling it 5 times.
            tr.evaluator = first.evaluator
        if m in WHOLE_WINDOWS:  # the same step program: the same bytes per batch shape
            tr.comm_cache = shared_comm
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
            f"  {label} {m}: init {init_seconds:.1f}s, schedules {sched_seconds:.1f}s, "
            f"warm-up {warm[m]['seconds']:.1f}s ({warm[m]['shapes']} shapes)"
        )
    return trainers, schedules, warm


def timed_epochs(trainers: dict, schedules: dict, epochs: int, say, label: str) -> dict[str, list[dict]]:
    """``epochs`` epochs of every method, interleaved epoch by epoch: per method, each epoch's figures."""
    history: dict[str, list[dict]] = {m: [] for m in trainers}
    for epoch in range(1, epochs + 1):
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
            say(f"  {label} {m} epoch {epoch}: {stats['epoch_seconds']:.2f}s")
    return history


def method_row(tr, h: list[dict], warm: dict, case: dict) -> dict:
    """One method's row: ``case`` (dataset, model, devices, ...), its timed epochs ``h`` summarized,
    val / test MAP after them and its warm-up figures."""
    t = time.perf_counter()
    ev = {s: tr.evaluate(s) for s in ("val", "test")}
    eval_seconds = time.perf_counter() - t
    seconds, how, figures = epoch_seconds(h)
    return {
        **case,
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
        "warm_up": warm,
        "eval_seconds": eval_seconds,
        "history": h,
    }


def run_case(dataset: str, model: str, devices: int, methods: list[str], args, say) -> list[dict]:
    """Every method on one dataset x model x device configuration: one row per method."""
    from ..config import load_config
    from ..data import datasets as _datasets

    base = case_overrides(dataset, model, devices, args)
    name = config_name(devices, args.processes)
    label = f"{dataset} {model} {name}"
    case_start = time.perf_counter()
    graph = _datasets.load_dataset(load_config(None, base).data)
    trainers, schedules, warm = build_trainers(base, graph, methods, args, say, label)
    history = timed_epochs(trainers, schedules, args.epochs, say, label)
    case = {"dataset": dataset, "model": model, "devices": devices, "processes": args.processes}
    case["config"] = name
    rows = [method_row(tr, history[m], warm[m], {**case, "method": m}) for m, tr in trainers.items()]
    psg = next((r for r in rows if r["method"] == "psg"), None)
    for r in rows:
        if psg:
            r["time_vs_psg"] = r["epoch_seconds"] / psg["epoch_seconds"]
            r["bytes_vs_psg"] = r["comm_bytes"] / psg["comm_bytes"]
        r["case_seconds"] = time.perf_counter() - case_start
    say(f"  {label}: {time.perf_counter() - case_start:.0f}s, load {os.getloadavg()}")
    return rows


def run_worker(args) -> int:
    """One device configuration (``args.worker`` devices over ``args.processes`` processes; joins the
    multi-process run first): every dataset x model; process 0 writes ``rows_CONFIG.json`` to
    ``args.out`` after every case, so that an interrupted run keeps what it measured."""
    import tempfile

    from .. import distributed

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
            if main:
                Path(args.out, f"rows_{name}.json").write_text(json.dumps(rows))
    return 0


# --- driver ------------------------------------------------------------------------------------------


def worker_command(devices: int, processes: int, args) -> list[str]:
    """The script's arguments that run one device configuration (``--worker``) with the same settings."""
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


def config_order(name: str) -> tuple[int, int]:
    processes, _, rest = name.partition("x")
    if rest:  # "2x1proc"
        return int(processes), 1
    return int(name.removesuffix("fake")), 0


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
    save_figure(fig, path, dpi=120)
