"""The schedulers on bare cost vectors (parts 2 and 3 of ``tools/bench_schedulers.py``).

Part 2: synthetic log-normal [K, 3] window costs (``lognormal_costs``), a ``.npy`` / ``.json`` costs
file, or a dataset's training-window costs through the ``costs_for`` hook, scheduled by every method at
every P and B; padding efficiency, imbalance, scheduler seconds and the gap to the lower bounds (the
method's own and the best any method found). Part 3: dygnex_g's wall time at scale
(``big_timing``: by default 100,000 windows x 1,024 devices), with psg's padding efficiency beside it.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from ..errors import UserError
from ..schedule import schedule
from ..schedule.metrics import imbalance, padding_efficiency, step_loads, step_objectives
from .schedulers import METHODS, resolve_batch


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
        from ..config import DataConfig
        from ..data.datasets import load_dataset
        from ..data.windows import WindowSet
    except ImportError as e:
        raise UserError(f"dataset {dataset_name!r}: the data package is not available ({e})") from None
    cfg = DataConfig(dataset=dataset_name)
    graph = load_dataset(cfg)
    return WindowSet(graph, cfg).costs("train", cfg.neg_mult)


# ================================================================================================


def run_one(costs, n_devices, batch_size, method, settings, seed) -> dict:
    """One method's schedule of one cost instance at P devices and batch size B: its figures."""
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


def cost_instances(args) -> list[tuple[str, np.ndarray]]:
    """(name, [K, 3] costs) of part 2: ``args.costs`` (a file), else ``args.seeds`` log-normal instances
    (``args.windows``, ``args.sigma``), else ``costs_for(args.dataset)``."""
    if args.costs:
        return [(Path(args.costs).name, load_costs_file(args.costs))]
    if args.dataset == "lognormal":
        return [
            (
                f"lognormal(sigma={args.sigma},seed={s})",
                costs_for("lognormal", seed=s, n_windows=args.windows, sigma=args.sigma),
            )
            for s in range(args.seeds)
        ]
    return [(args.dataset, costs_for(args.dataset))]


def instance_rows(instances, args, settings) -> list[dict]:
    """``run_one`` of every instance x P x B x method (printing each), then every row's gap to the best
    lower bound known for its instance, P and B (dygnex_l's MILP bound is usually tighter than the
    analytic one dygnex_g reports)."""
    rows = []
    for name, costs in instances:
        for p in args.devices:
            for token in args.batch_sizes:
                b = resolve_batch(token, p)
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
    for r in rows:
        same = [
            q.get("lower_bound", 0.0)
            for q in rows
            if (q["instance"], q["devices"], q["batch_size"])
            == (r["instance"], r["devices"], r["batch_size"])
        ]
        r["best_lower_bound"] = max(same)
        r["gap_to_best_bound"] = (r["objective"] - r["best_lower_bound"]) / r["objective"] if same else None
    return rows


def summarize(rows: list[dict]) -> list[dict]:
    """Mean over instances per P x B x method; prints the table. gap.own: (objective - the method's own
    lower bound) / objective; gap.best: the same against the best bound any method found."""
    summary = []
    print()
    header = (
        f"{'P':>3} {'B':>4} {'method':<9} {'pad.eff':>8} {'imbal':>7} {'gap.own':>9} {'gap.best':>9} "
        f"{'sched s':>8}  notes"
    )
    print(header)
    print("-" * len(header))
    keys = sorted({(r["devices"], r["batch_size"], METHODS.index(r["method"])) for r in rows})
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
    print()
    return summary


def cost_instance_rows(args, settings) -> tuple[list, list[dict], list[dict]]:
    """Part 2: (instances, rows, summary) of the cost-vector benchmark; prints its table."""
    instances = cost_instances(args)
    rows = instance_rows(instances, args, settings)
    summary = summarize(rows) if rows else []
    return instances, rows, summary


def cost_vectors(args, settings) -> dict:
    """Part 2 as the benchmark's JSON holds it: the settings and weights, the instance names, the rows
    and the summary (none unless there is a costs file, a dataset or a seed)."""
    instances, rows, summary = [], [], []
    if args.costs or args.dataset != "lognormal" or args.seeds > 0:
        print("\ncost-vector instances (part 2)")
        instances, rows, summary = cost_instance_rows(args, settings)
    return {
        "settings": dataclasses.asdict(settings),
        "weights": [settings.alpha, settings.beta, settings.gamma],
        "instances": [name for name, _ in instances],
        "rows": rows,
        "summary": summary,
    }


def at_scale(args, settings) -> list[dict]:
    """Part 3: ``big_timing`` at ``args.big_windows`` x ``args.big_devices`` (none if no windows)."""
    if args.big_windows <= 0:
        return []
    print(f"dygnex_g at scale: {args.big_windows} windows x {args.big_devices} devices", flush=True)
    return big_timing(
        args.big_windows, args.big_devices, args.big_batch_sizes, args.big_repeats, settings, seed=0
    )


def big_lines(big: list[dict]) -> list[str]:
    """One line per ``big_timing`` row: dygnex_g's best time and padding efficiency (psg's beside)."""
    return [
        f"dygnex_g K={r['windows']} P={r['devices']} B={r['batch_size']}: {r['seconds_min']:.3f} s "
        f"(min of {len(r['seconds_all'])}), padding eff {r['padding_efficiency']:.3f} "
        f"(psg {r['psg_padding_efficiency']:.3f})"
        for r in big
    ]
