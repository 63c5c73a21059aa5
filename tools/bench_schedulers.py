"""Schedule-only benchmark (no training): psg vs dygnex_g vs dygnex_l on window cost vectors.

For each device count P and batch size B it reports padding efficiency (DESIGN §2), imbalance, the
summed step objective, scheduler seconds and, for dygnex_l, the gap to its lower bound (the best of
the MILP's dual bound and the analytic bound, per step). It also times dygnex_g at scale
(default 100,000 windows x 1,024 devices, B = 4,096 and 8,192). Writes ``bench_schedulers.json`` and
``bench_schedulers.png`` to --out.

    python tools/bench_schedulers.py                         # synthetic log-normal costs
    python tools/bench_schedulers.py --costs costs.npy       # [K, 3] (nodes, edges, pairs), .npy or .json
    python tools/bench_schedulers.py --dataset bitcoin_otc   # via the costs_for() hook

Real window costs plug in through ``costs_for(dataset_name)`` below (marked HOOK).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dygnex_jax.config import ScheduleConfig  # noqa: E402
from dygnex_jax.errors import UserError  # noqa: E402
from dygnex_jax.schedule import schedule  # noqa: E402
from dygnex_jax.schedule.cost import default_cost_model  # noqa: E402
from dygnex_jax.schedule.metrics import (  # noqa: E402
    imbalance,
    padding_efficiency,
    step_loads,
    step_objectives,
)

METHODS = ("psg", "dygnex_g", "dygnex_l")


def lognormal_costs(n_windows: int, seed: int, sigma: float = 1.0, window: int = 10, neg_mult: int = 10):
    """[K, 3] synthetic skewed window costs (nodes, edges, pairs), i.i.d. log-normal sizes.

    nodes ~ 200 · exp(sigma · z); edges over the W snapshots ~ nodes · 4 · W; target pairs ~
    nodes · 2 · (1 + neg_mult); each with its own log-normal noise (sigma 0.3), so the three columns
    are correlated but not proportional (the multi-dimensional case the scheduler must handle).
    """
    rng = np.random.default_rng([seed, 7919])
    nodes = np.round(200.0 * np.exp(sigma * rng.standard_normal(n_windows))) + 1
    edges = np.round(nodes * 4 * window * np.exp(0.3 * rng.standard_normal(n_windows)))
    pairs = np.round(nodes * 2 * (1 + neg_mult) * np.exp(0.3 * rng.standard_normal(n_windows)))
    return np.column_stack([nodes, edges, pairs]).astype(np.float64)


def load_costs_file(path: str) -> np.ndarray:
    """[K, 3] costs from a .npy file or a .json file holding a [K, 3] list (or {"costs": [...]})."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"costs file {path!r} does not exist")
    if p.suffix == ".npy":
        costs = np.load(p)
    else:
        data = json.loads(p.read_text())
        costs = np.asarray(data["costs"] if isinstance(data, dict) else data, dtype=np.float64)
    costs = np.asarray(costs, dtype=np.float64)
    if costs.ndim != 2 or costs.shape[1] != 3:
        raise UserError(f"costs file {path!r} must hold a [K, 3] array, got {costs.shape}")
    return costs


# ================================================================================================
# HOOK: real window costs. Return the [K, 3] (nodes, edges, pairs) cost vectors of a dataset's
# training windows, in time order. "lognormal" is the synthetic default; any other name goes
# through the data package (dygnex_jax.data: load_dataset + WindowSet.costs), which the data
# owner may replace with a cached or faster path.
# ================================================================================================
def costs_for(dataset_name: str, *, seed: int = 0, n_windows: int = 100, sigma: float = 1.0) -> np.ndarray:
    if dataset_name == "lognormal":
        return lognormal_costs(n_windows, seed, sigma)
    try:
        from dygnex_jax.config import DataConfig
        from dygnex_jax.data.datasets import load_dataset
        from dygnex_jax.data.windows import WindowSet
    except ImportError as e:
        raise UserError(f"dataset {dataset_name!r}: the data package is not available ({e})") from None
    cfg = DataConfig(dataset=dataset_name)
    graph = load_dataset(cfg)
    return WindowSet(graph, cfg).costs("train", cfg.neg_mult)


# ================================================================================================


def run_one(costs, n_devices, batch_size, method, settings, seed) -> dict:
    cfg = dataclasses.replace(settings, method=method)
    sched = schedule(costs, n_devices, batch_size, cfg, seed=seed)
    w = np.array([cfg.alpha, cfg.beta, cfg.gamma])
    loads = step_loads(costs, sched)
    row = {
        "method": method,
        "devices": n_devices,
        "batch_size": batch_size,
        "windows": len(costs),
        "steps": sched.num_steps,
        "padding_efficiency": padding_efficiency(loads, w),
        "imbalance": imbalance(loads, w),
        "objective": float(step_objectives(loads, w).sum()),
        "scheduler_seconds": sched.seconds,
        "fallback": sched.fallback,
    }
    if "lower_bound" in sched.info:
        row["lower_bound"] = float(sched.info["lower_bound"])
        row["gap_to_lower_bound"] = (row["objective"] - row["lower_bound"]) / row["objective"]
    if method == "dygnex_l":
        row["ilp_statuses"] = sched.info["statuses"]
        row["ilp_improved_steps"] = sched.info["improved_steps"]
        row["greedy_objective"] = sched.info["greedy_objective"]
    return row


def big_timing(n_windows, n_devices, batch_sizes, repeats, settings, seed) -> list[dict]:
    """dygnex_g wall time at scale (min over repeats; the first run is also reported)."""
    costs = lognormal_costs(n_windows, seed)
    cfg = dataclasses.replace(settings, method="dygnex_g")
    w = np.array([cfg.alpha, cfg.beta, cfg.gamma])
    out = []
    for b in batch_sizes:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            sched = schedule(costs, n_devices, b, cfg, seed=seed)
            times.append(time.perf_counter() - t0)
        loads = step_loads(costs, sched)
        row = {
            "windows": n_windows,
            "devices": n_devices,
            "batch_size": b,
            "seconds_min": min(times),
            "seconds_all": times,
            "method_seconds": sched.seconds,
            "padding_efficiency": padding_efficiency(loads, w),
            "objective_over_lower_bound": sched.info["objective"] / sched.info["lower_bound"],
            "lpt_over_lower_bound": sched.info["lpt_objective"] / sched.info["lower_bound"],
            "local_search": sched.info["local_search"],
        }
        psg = schedule(costs, n_devices, b, dataclasses.replace(settings, method="psg"), seed=seed)
        row["psg_padding_efficiency"] = padding_efficiency(step_loads(costs, psg), w)
        print(
            f"  big: K={n_windows} P={n_devices} B={b}: dygnex_g {min(times):.3f} s (runs "
            f"{', '.join(f'{t:.3f}' for t in times)}), padding eff {row['padding_efficiency']:.3f} "
            f"(psg {row['psg_padding_efficiency']:.3f}), objective/LB {row['objective_over_lower_bound']:.4f}",
            flush=True,
        )
        out.append(row)
    return out


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = sorted({(r["devices"], r["batch_size"]) for r in rows})
    methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    x = np.arange(len(configs))
    width = 0.8 / max(len(methods), 1)
    for i, m in enumerate(methods):
        eff, sec = [], []
        for p, b in configs:
            sel = [r for r in rows if r["method"] == m and r["devices"] == p and r["batch_size"] == b]
            eff.append(np.mean([r["padding_efficiency"] for r in sel]) if sel else np.nan)
            sec.append(np.mean([r["scheduler_seconds"] for r in sel]) if sel else np.nan)
        axes[0].bar(x + i * width, eff, width, label=m)
        axes[1].bar(x + i * width, sec, width, label=m)
    labels = [f"P={p}\nB={b}" for p, b in configs]
    for ax in axes:
        ax.set_xticks(x + width * (len(methods) - 1) / 2)
        ax.set_xticklabels(labels)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="upper center", ncol=len(methods), frameon=False)
    axes[0].set_ylabel("padding efficiency (1 = perfect)")
    axes[0].set_ylim(0, 1.05)
    axes[0].set_title("load balance")
    axes[1].set_yscale("log")
    axes[1].set_ylabel("scheduler seconds per epoch")
    axes[1].set_title("scheduler time")
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="results/bench_schedulers")
    ap.add_argument("--dataset", default="lognormal", help="lognormal (synthetic) or a name for costs_for()")
    ap.add_argument("--costs", default="", help="a [K, 3] .npy/.json file (overrides --dataset)")
    ap.add_argument("--windows", type=int, default=100, help="synthetic windows K")
    ap.add_argument("--sigma", type=float, default=1.0, help="synthetic log-normal skew")
    ap.add_argument("--seeds", type=int, default=1, help="synthetic instances (seeds 0..n-1)")
    ap.add_argument("--devices", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[16, 32])
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--time-limit", type=float, default=10.0, help="dygnex_l seconds per step")
    ap.add_argument("--mip-gap", type=float, default=0.01)
    ap.add_argument("--solver", default="HIGHS")
    ap.add_argument("--jitter", type=float, default=0.1)
    ap.add_argument(
        "--weights", default="ones", help="ones (config defaults 1,1,1) or model (default cost model's)"
    )
    ap.add_argument("--big-windows", type=int, default=100_000, help="0 skips the at-scale timing")
    ap.add_argument("--big-devices", type=int, default=1024)
    ap.add_argument("--big-batch-sizes", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--big-repeats", type=int, default=3)
    args = ap.parse_args(argv)

    if args.weights == "model":
        alpha, beta, gamma = default_cost_model().weights()
    elif args.weights == "ones":
        alpha = beta = gamma = 1.0
    else:
        raise SystemExit("--weights must be ones or model")
    settings = ScheduleConfig(
        jitter=args.jitter,
        alpha=float(alpha),
        beta=float(beta),
        gamma=float(gamma),
        time_limit=args.time_limit,
        mip_gap=args.mip_gap,
        solver=args.solver,
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    if args.costs:
        instances = [(Path(args.costs).name, load_costs_file(args.costs))]
    elif args.dataset == "lognormal":
        instances = [
            (
                f"lognormal(sigma={args.sigma},seed={s})",
                costs_for("lognormal", seed=s, n_windows=args.windows, sigma=args.sigma),
            )
            for s in range(args.seeds)
        ]
    else:
        instances = [(args.dataset, costs_for(args.dataset))]

    rows = []
    for name, costs in instances:
        for p in args.devices:
            for b in args.batch_sizes:
                if p > min(b, len(costs)):
                    print(f"skip {name} P={p} B={b}: more devices than windows per step", flush=True)
                    continue
                for m in args.methods:
                    print(f"{name}: K={len(costs)} P={p} B={b} {m} ...", end=" ", flush=True)
                    row = run_one(costs, p, b, m, settings, seed=0)
                    row["instance"] = name
                    rows.append(row)
                    print(
                        f"eff {row['padding_efficiency']:.3f}, {row['scheduler_seconds']:.2f} s"
                        + (
                            f", gap {100 * row['gap_to_lower_bound']:.2f}%"
                            if "gap_to_lower_bound" in row
                            else ""
                        )
                        + (f" [{row['fallback']}]" if row["fallback"] else ""),
                        flush=True,
                    )

    # every method against the best lower bound known for the instance (dygnex_l's MILP bound is
    # usually tighter than the analytic one dygnex_g reports)
    for r in rows:
        same = [
            q.get("lower_bound", 0.0)
            for q in rows
            if (q["instance"], q["devices"], q["batch_size"])
            == (r["instance"], r["devices"], r["batch_size"])
        ]
        r["best_lower_bound"] = max(same)
        r["gap_to_best_bound"] = (r["objective"] - r["best_lower_bound"]) / r["objective"] if same else None

    big = []
    if args.big_windows > 0:
        print(f"dygnex_g at scale: {args.big_windows} windows x {args.big_devices} devices", flush=True)
        big = big_timing(
            args.big_windows, args.big_devices, args.big_batch_sizes, args.big_repeats, settings, seed=0
        )

    # table: mean over instances. gap.own: (objective - the method's own lower bound) / objective;
    # gap.best: the same against the best bound any method found for the instance.
    print()
    header = (
        f"{'P':>3} {'B':>4} {'method':<9} {'pad.eff':>8} {'imbal':>7} {'gap.own':>9} {'gap.best':>9} "
        f"{'sched s':>8}  notes"
    )
    print(header)
    print("-" * len(header))
    keys = sorted({(r["devices"], r["batch_size"], METHODS.index(r["method"])) for r in rows})
    summary = []
    for p, b, mi in keys:
        m = METHODS[mi]
        sel = [r for r in rows if r["devices"] == p and r["batch_size"] == b and r["method"] == m]
        s = {
            "devices": p,
            "batch_size": b,
            "method": m,
            "padding_efficiency": float(np.mean([r["padding_efficiency"] for r in sel])),
            "imbalance": float(np.mean([r["imbalance"] for r in sel])),
            "scheduler_seconds": float(np.mean([r["scheduler_seconds"] for r in sel])),
            "instances": len(sel),
        }
        gaps = [r["gap_to_lower_bound"] for r in sel if "gap_to_lower_bound" in r]
        s["gap_to_own_lower_bound"] = float(np.mean(gaps)) if gaps else None
        s["gap_to_best_bound"] = float(np.mean([r["gap_to_best_bound"] for r in sel]))
        notes = sum(1 for r in sel if r["fallback"])
        summary.append(s)
        own = f"{100 * s['gap_to_own_lower_bound']:8.2f}%" if gaps else f"{'-':>9}"
        print(
            f"{p:>3} {b:>4} {m:<9} {s['padding_efficiency']:8.3f} {s['imbalance']:7.3f} {own} "
            f"{100 * s['gap_to_best_bound']:8.2f}% {s['scheduler_seconds']:8.3f}  "
            f"{f'{notes} fallback(s)' if notes else ''}"
        )
    for r in big:
        print(
            f"dygnex_g K={r['windows']} P={r['devices']} B={r['batch_size']}: {r['seconds_min']:.3f} s "
            f"(min of {len(r['seconds_all'])}), padding eff {r['padding_efficiency']:.3f}"
        )

    result = {
        "settings": dataclasses.asdict(settings),
        "weights": [settings.alpha, settings.beta, settings.gamma],
        "instances": [name for name, _ in instances],
        "rows": rows,
        "summary": summary,
        "big": big,
    }
    (out / "bench_schedulers.json").write_text(json.dumps(result, indent=2, default=float) + "\n")
    if rows:
        plot(rows, out / "bench_schedulers.png")
    print(
        f"\nwrote {out / 'bench_schedulers.json'}" + (f" and {out / 'bench_schedulers.png'}" if rows else "")
    )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
