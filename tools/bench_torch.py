"""Side by side: dygnex_jax (SPMD, PSG split) vs PyTorch Geometric Temporal + DDP (gloo, PSG split) on the
same config, model, data and CPU. Prints per-epoch training time (median after the first, warm-up, epoch),
the ratio, and the validation / test MAP of both; writes the rows to ``--json``.

    python tools/bench_torch.py --procs 2 --epochs 4 --seeds 0 1 2 --json docs/bench_torch.json

Each case is ``model:dataset``; the dataset's config is ``configs/egcn_o_bitcoin_otc.yaml`` or
``configs/egcn_o_uci.yaml`` with ``model.name`` replaced (EvolveGCN-O with PyG-T's row-wise GRU, as its twin).
Both systems run as subprocesses, one after the other, so they do not share the cores.
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

REPO = Path(__file__).resolve().parents[1]
CONFIGS = {"bitcoin_otc": "configs/egcn_o_bitcoin_otc.yaml", "uci_collegemsg": "configs/egcn_o_uci.yaml"}
DEFAULT_CASES = [f"{m}:{d}" for d in CONFIGS for m in ("egcn_o", "gcrn_gru", "tgcn")]


def steady_epoch_seconds(out: Path, wall: list[float]) -> list[float]:
    """Our epoch times without compilation: a step that compiled is charged the median time of the run's
    steps with the same budget that did not (its own time when there is none)."""
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    by_budget: dict = {}
    for s in steps:
        if not s["compiled"]:
            by_budget.setdefault(tuple(s["budget"]), []).append(s["seconds"])
    steady = list(wall)
    for s in steps:
        if s["compiled"] and tuple(s["budget"]) in by_budget:
            steady[s["epoch"] - 1] -= s["seconds"] - statistics.median(by_budget[tuple(s["budget"])])
    return steady


def run_case(system: str, model: str, dataset: str, seed: int, args, work: Path) -> dict:
    out = work / f"{system}-{model}-{dataset}-{seed}"
    overrides = [
        f"model.name={model}",
        "model.egcn_gru=rows",
        f"train.seed={seed}",
        f"train.epochs={args.epochs}",
        f"train.eval_every={args.epochs}",
        "schedule.method=psg",
        *args.override,
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if system == "jax":
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={args.procs}"
        cmd = [sys.executable, "-m", "dygnex_jax", "train", "--config", CONFIGS[dataset], "--out", str(out)]
        cmd += [*overrides, f"parallel.devices={args.procs}"]
    else:
        cmd = [sys.executable, "tools/torch_baseline.py", "--config", CONFIGS[dataset], "--out", str(out)]
        cmd += ["--procs", str(args.procs), "--threads", str(args.threads), *overrides]
    print(f"[{system}] {model} {dataset} seed {seed}", file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{system} {model} {dataset} failed:\n{proc.stderr[-3000:]}")
    summary = json.loads((out / "summary.json").read_text())
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    wall = [r["epoch_seconds"] for r in rows]
    steady = steady_epoch_seconds(out, wall) if system == "jax" else wall
    return {
        "epoch_seconds": statistics.median(steady[1:] or steady),
        "wall_epoch_seconds": statistics.median(wall[1:] or wall),
        "compile_seconds": sum(w - s for w, s in zip(wall, steady)),
        "first_epoch_seconds": rows[0]["epoch_seconds"],
        "val_map": summary["final"]["val_map"],
        "test_map": summary["final"]["test_map"],
        "val_mrr": summary["final"]["val_mrr"],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", nargs="*", default=DEFAULT_CASES, help="model:dataset pairs")
    p.add_argument("--procs", type=int, default=2, help="devices (ours) = DDP processes (PyTorch)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per DDP process")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--seeds", type=int, nargs="*", default=[0])
    p.add_argument("--json", default="", help="write the rows here")
    p.add_argument("--work", default="", help="keep the run directories here (default: a temporary one)")
    p.add_argument("override", nargs="*", help="extra key=value overrides for both systems")
    a = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(a.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        for case in a.cases:
            model, dataset = case.split(":")
            for seed in a.seeds:
                row = {"model": model, "dataset": dataset, "seed": seed}
                for system in ("jax", "torch"):
                    row[system] = run_case(system, model, dataset, seed, a, work)
                row["speedup"] = row["torch"]["epoch_seconds"] / row["jax"]["epoch_seconds"]
                rows.append(row)
                if a.json:
                    Path(a.json).write_text(json.dumps(rows, indent=1))
    print(
        "| model | dataset | seeds | ours s/epoch (wall incl. compiles) | PyG-T+DDP s/epoch | speed-up | "
        "ours val MAP | PyG-T val MAP | ours test MAP | PyG-T test MAP |"
    )
    print("|---|---|---|---:|---:|---:|---|---|---|---|")
    for case in a.cases:
        model, dataset = case.split(":")
        rs = [r for r in rows if r["model"] == model and r["dataset"] == dataset]
        med = lambda sys_, k, rs=rs: statistics.median(r[sys_][k] for r in rs)  # noqa: E731
        fmt = lambda sys_, k, rs=rs: " / ".join(f"{r[sys_][k]:.4f}" for r in rs)  # noqa: E731
        print(
            f"| {model} | {dataset} | {len(rs)} | {med('jax', 'epoch_seconds'):.2f} "
            f"({med('jax', 'wall_epoch_seconds'):.2f}) | "
            f"{med('torch', 'epoch_seconds'):.2f} | {med('torch', 'epoch_seconds') / med('jax', 'epoch_seconds'):.2f}x | "
            f"{fmt('jax', 'val_map')} | {fmt('torch', 'val_map')} | {fmt('jax', 'test_map')} | {fmt('torch', 'test_map')} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
