"""dygnex_jax against PyTorch Geometric Temporal + DDP on the same config, data and CPU: the runs and
their figures (``tools/bench_torch.py``; ``steady_epoch_seconds`` also serves ``tools/bench_padded.py``).

``run_case`` trains one system on one ``model:dataset`` case and seed in a subprocess — ours with
``python -m dygnex_jax train`` (``ours``: P fake devices in one process; ``ours2p``: P processes x 1
device through ``tools/launch_local.py``), PyG-T with ``tools/torch_baseline.py`` (``torch:full``: each
window on the whole node set; ``torch:packed``: our data layout) — and reads its per-epoch times (ours:
compilations charged as steady steps, ``steady_epoch_seconds``), time to result and final metrics.
``speedups``, ``table``, ``ttr_table`` and ``plot`` compare the systems. The runs start from the
checkout (``REPO``: its ``configs/`` and ``tools/``).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from ..files import save_figure

REPO = Path(__file__).resolve().parents[2]  # the checkout the runs start in (configs/, tools/)
CONFIGS = {"bitcoin_otc": "configs/egcn_o_bitcoin_otc.yaml", "uci_collegemsg": "configs/egcn_o_uci.yaml"}
DEFAULT_CASES = [f"{m}:{d}" for d in CONFIGS for m in ("egcn_o", "gcrn_gru", "tgcn")]


def config_of(dataset: str) -> str:
    """The config a case trains: its own for the README's datasets, else Bitcoin-OTC's settings with
    ``data.dataset`` set (any other link dataset of ``data/datasets.py``, e.g. bitcoin_alpha)."""
    return CONFIGS.get(dataset, CONFIGS["bitcoin_otc"])


CPU_KEY = "epoch_cpu_seconds"
SYSTEMS = ("ours:dygnex_g", "ours:psg", "ours2p:dygnex_g", "torch:full", "torch:packed")


def steady_epoch_seconds(
    out: Path, per_epoch: list[float], key: str = "seconds", scale: float = 1.0
) -> list[float]:
    """Our epoch times (``key``: wall ``seconds`` or ``cpu_seconds``) without compilation. A step that
    compiled is charged the median time of the run's steps with the same budget that did not; when no
    such step ran, its cost-model prediction (``predicted_seconds``, a function of the padded budget)
    times the median ratio of measured to predicted time over the run's steps that did not compile.
    ``scale``: the step log is process 0's, the epoch figure the sum over this many processes (CPU
    seconds of a multi-process run), each of which compiled alike."""
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    by_budget: dict = {}
    for s in steps:
        if not s["compiled"]:
            by_budget.setdefault(tuple(s["budget"]), []).append(s[key])
    clean = [s for s in steps if not s["compiled"] and s["predicted_seconds"] > 0]
    ratio = statistics.median(s[key] / s["predicted_seconds"] for s in clean) if clean else None
    steady = list(per_epoch)
    for s in steps:
        if not s["compiled"]:
            continue
        if tuple(s["budget"]) in by_budget:
            charge = statistics.median(by_budget[tuple(s["budget"])])
        elif ratio is not None:
            charge = ratio * s["predicted_seconds"]
        else:
            continue
        steady[s["epoch"] - 1] -= scale * (s[key] - charge)
    return steady


def run_case(system: str, model: str, dataset: str, seed: int, args, work: Path) -> dict:
    kind, variant = system.split(":")
    out = work / f"{kind}-{variant}-{model}-{dataset}-{seed}"
    overrides = [
        *([] if dataset in CONFIGS else [f"data.dataset={dataset}"]),
        f"model.name={model}",
        "model.egcn_gru=rows",
        f"train.seed={seed}",
        f"train.epochs={args.epochs}",
        f"eval.every={args.epochs}",
        f"schedule.method={variant if kind.startswith('ours') else 'psg'}",
        *args.override,
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    gpu = getattr(args, "device", "cpu") == "cuda"
    if kind == "ours":
        if not gpu:  # on a GPU machine JAX's default platform holds the devices
            env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={args.procs}"
        cmd = [sys.executable, "-m", "dygnex_jax", "train", "--config", config_of(dataset), "--out", str(out)]
        cmd += [*overrides, f"parallel.devices={args.procs}"]
    elif kind == "ours2p":  # P processes x 1 device (multi-host on one machine), as DDP runs P processes
        env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=1"
        cmd = [sys.executable, "tools/launch_local.py", str(args.procs), "--"]
        cmd += ["--config", config_of(dataset), "--out", str(out), *overrides]
    else:
        cmd = [sys.executable, "tools/torch_baseline.py", "--config", config_of(dataset), "--out", str(out)]
        cmd += ["--procs", str(args.procs), "--threads", str(args.threads), "--layout", variant, *overrides]
        cmd += ["--device", "cuda"] if gpu else []
    if kind.startswith("ours"):  # a compilation cache of this case alone: the first run is cold
        cache = work / f"cache-{kind}-{variant}-{model}-{dataset}-{seed}"
        env["DYGNEX_CACHE"] = str(cache)
        if not (args.work and (out / "summary.json").exists()):
            shutil.rmtree(cache, ignore_errors=True)
    result = _run_once(system, model, dataset, seed, cmd, env, out, args, kind)
    if kind.startswith("ours") and args.warm:  # the same run again on the now warm cache
        warm = out.with_name(out.name + "-warm")
        cmd_warm = [warm if x == str(out) else x for x in map(str, cmd)]
        again = _run_once(system + " (warm cache)", model, dataset, seed, cmd_warm, env, warm, args, kind)
        result.update({f"warm_{k}": v for k, v in again.items() if k.startswith(("ttr", "compile", "cache"))})
    return result


def _run_once(system, model, dataset, seed, cmd, env, out: Path, args, kind: str) -> dict:
    if (out / "summary.json").exists() and args.work:
        print(f"[{system}] {model} {dataset} seed {seed}: finished run in {out}, reused", file=sys.stderr)
    else:
        print(f"[{system}] {model} {dataset} seed {seed}", file=sys.stderr, flush=True)
        shutil.rmtree(out, ignore_errors=True)
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"{system} {model} {dataset} failed:\n{proc.stderr[-3000:]}")
    summary = json.loads((out / "summary.json").read_text())
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    wall = [r["epoch_seconds"] for r in rows]
    cpu = [r["epoch_cpu_seconds"] for r in rows]
    steady = steady_epoch_seconds(out, wall) if kind.startswith("ours") else wall
    procs = args.procs if kind == "ours2p" else 1
    steady_cpu = steady_epoch_seconds(out, cpu, "cpu_seconds", procs) if kind.startswith("ours") else cpu
    # time to result: every second of training a user waits for, compilations included (ours: the
    # compilations ahead of epoch 1 plus every epoch's wall time, which holds any on-demand compile)
    ahead = summary.get("compile_seconds_ahead", 0.0) if kind.startswith("ours") else 0.0
    plan_s = summary.get("plan_seconds", 0.0) if kind.startswith("ours") else 0.0
    short = min(3, len(wall))
    return {
        "ttr_seconds": ahead + sum(wall),
        "ttr_epochs": len(wall),
        "ttr3_seconds": ahead + sum(wall[:short]),
        "compile_seconds_ahead": ahead,
        "plan_seconds": plan_s,  # not in ttr: scheduling work before epoch 1, reported apart
        "cache": summary.get("compile_cache"),
        "epoch_seconds": statistics.median(steady[1:] or steady),
        "epoch_cpu_seconds": statistics.median(steady_cpu[1:] or steady_cpu),
        "wall_epoch_seconds": statistics.median(wall[1:] or wall),
        "compile_seconds": sum(w - s for w, s in zip(wall, steady)),
        "first_epoch_seconds": rows[0]["epoch_seconds"],
        "compilations": summary.get("compilations", 0),
        "val_map": summary["final"]["val_map"],
        "test_map": summary["final"]["test_map"],
        "val_mrr": summary["final"]["val_mrr"],
    }


OURS = ("ours:dygnex_g", "ours2p:dygnex_g")  # ours in one process (P fake devices) and on P processes
TORCH = ("torch:full", "torch:packed")


def speedups(row: dict, key: str = "epoch_seconds", ref: str = "ours:dygnex_g") -> dict:
    """Per-epoch time (``key``) of every other system / ``ref`` (> 1: ``ref`` is faster)."""
    ours = row.get(ref, {}).get(key)
    others = {k: v for k, v in row.items() if k in SYSTEMS and k != ref}
    return {k: v[key] / ours for k, v in others.items()} if ours else {}


def table(rows: list[dict], cases: list[str], systems: list[str]) -> str:
    """Markdown: median wall (CPU) s/epoch per system; PyTorch's time over each of ours (speed-up, > 1:
    ours is faster) in wall (CPU) time; final val MAP of every seed (ours: the one-process run where
    there is one, else the P-process run: the same computation)."""
    ours = [s for s in OURS if s in systems]
    theirs = [s for s in TORCH if s in systems]
    pairs = [(t, o) for o in ours for t in theirs]
    head = " | ".join(f"{s} s/epoch" for s in systems)
    ratio_head = " | ".join(f"{t} / {o}" for t, o in pairs)
    lines = [
        f"| model | dataset | seeds | {head} | {ratio_head} | final val MAP per seed, ours vs PyG-T |",
        "|---|---|---|" + "---:|" * (len(systems) + len(pairs)) + "---|",
    ]
    for case in cases:
        model, dataset = case.split(":")
        rs = [r for r in rows if r["model"] == model and r["dataset"] == dataset]
        if not rs:
            continue

        def med(system, key="epoch_seconds", rs=rs):
            vals = [r[system][key] for r in rs if system in r]
            return statistics.median(vals) if vals else float("nan")

        def seeds(systems, rs=rs):
            """Per seed, the val MAP of the first of ``systems`` that ran it; systems in order of use."""
            used = [s for s in systems if any(s in r for r in rs)]
            vals = [next(r[s]["val_map"] for s in used if s in r) for r in rs if any(s in r for s in used)]
            return "/".join(f"{v:.4f}" for v in vals) or "-"

        times = " | ".join(f"{med(s):.1f} ({med(s, CPU_KEY):.1f})" for s in systems)
        ratios = " | ".join(
            f"{med(t) / med(o):.2f}x ({med(t, CPU_KEY) / med(o, CPU_KEY):.2f}x)" for t, o in pairs
        )
        lines.append(
            f"| {model} | {dataset} | {len(rs)} | {times} | {ratios} | {seeds(OURS)} vs {seeds(TORCH)} |"
        )
    return "\n".join(lines)


def ttr_table(
    rows: list[dict], cases: list[str], ours: str = "ours:dygnex_g", theirs: str = "torch:full"
) -> str:
    """Markdown: time to result (training wall seconds, compilations included) of ``theirs`` over ours,
    for the whole run (cold and warm compilation cache) and for its first 3 epochs (cold), with the
    load average of the row."""
    lines = [
        f"| model | dataset | epochs | {theirs} s | ours cold s (compile) | ours warm s (compile) | "
        "ratio cold | ratio warm | first 3 epochs: ratio cold | load |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for case in cases:
        model, dataset = case.split(":")
        for r in rows:
            if (r["model"], r["dataset"]) != (model, dataset) or ours not in r or theirs not in r:
                continue
            o, t = r[ours], r[theirs]
            if "ttr_seconds" not in o:
                continue
            warm = o.get("warm_ttr_seconds", float("nan"))
            lines.append(
                f"| {model} | {dataset} | {o['ttr_epochs']} | {t['ttr_seconds']:.1f} | {o['ttr_seconds']:.1f} "
                f"({o['compile_seconds_ahead']:.1f}) | {warm:.1f} ({o.get('warm_compile_seconds_ahead', float('nan')):.1f}) | "
                f"{t['ttr_seconds'] / o['ttr_seconds']:.2f}x | {t['ttr_seconds'] / warm:.2f}x | "
                f"{t['ttr3_seconds'] / o['ttr3_seconds']:.2f}x | {r.get('load_average', float('nan')):.1f} |"
            )
    return "\n".join(lines)


def plot(rows: list[dict], cases: list[str], systems: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1.6 * len(cases) + 3, 4))
    width = 0.8 / len(systems)
    for j, system in enumerate(systems):
        ys = []
        for case in cases:
            model, dataset = case.split(":")
            vals = [
                r[system][CPU_KEY]
                for r in rows
                if (r["model"], r["dataset"]) == (model, dataset) and system in r
            ]
            ys.append(statistics.median(vals) if vals else 0.0)
        ax.bar([i + j * width for i in range(len(cases))], ys, width, label=system)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(cases))], [c.replace(":", "\n") for c in cases])
    ax.set_ylabel("training CPU s / epoch, all processes\n(median after warm-up; load-robust)")
    ax.set_title("dygnex_jax vs PyTorch Geometric Temporal + DDP, same CPU")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
