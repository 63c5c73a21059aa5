"""Run a config over the cross product of value grids: schedule figures, or full training runs.

    python tools/sweep.py --config configs/egcn_o_bitcoin_otc.yaml \\
        --grid 'schedule.method=psg,dygnex_g,dygnex_l' --grid 'train.batch_size=8,32' --devices 8
    python tools/sweep.py --config configs/smoke.yaml --grid 'schedule.method=psg,dygnex_g' \\
        --train --devices 8 train.epochs=3 --out results/sweep/smoke

Each ``--grid KEY=V1,V2,...`` names a config key and its values (parsed like ``key=value`` overrides,
so ``data.window=5,10`` are integers; a value may be a bracketed list: ``train.class_weights=[0.1,0.9],
[0.5,0.5]``); trailing ``key=value`` pairs apply to every point. Without ``--train`` every point is one
epoch's schedule measured by ``dygnex_jax.plan.plan`` (padding efficiency, imbalance, predicted epoch
seconds, scheduler seconds; no JAX, seconds per point). With ``--train`` every point is
``train_and_evaluate(config, OUT/<point>)`` in this process on ``--devices`` devices (fake CPU devices
are requested before JAX is imported) and the row holds its final and best validation metric (the
task's first: MAP, edge_cls F1, node_reg MSE; `metric` names it) and its median
epoch seconds. Writes ``OUT/sweep.json`` (a list of rows: the grid values, then the figures) and
``OUT/sweep.png``, and prints a table. Bad grids, keys or values: one line ``error: ...``, exit code 2,
before anything runs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dygnex_jax.config import Config, load_config, parse_override, selection_metric  # noqa: E402
from dygnex_jax.devices import force_host_devices  # noqa: E402
from dygnex_jax.errors import UserError, run_tool  # noqa: E402
from dygnex_jax.schedule import available_methods  # noqa: E402

SCHEDULE_FIGURES = (
    "padding_efficiency",
    "packed_padding_efficiency",
    "imbalance",
    "predicted_epoch_seconds",
    "scheduler_seconds",
    "steps",
    "windows",
    "fallback",
)


def split_values(text: str) -> list[str]:
    """``"a,[1,2],'x,y'"`` -> ``["a", "[1,2]", "'x,y'"]``: commas inside brackets or quotes stay."""
    out, cur, depth, quote = [], [], 0, ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur).strip())
    if quote or depth != 0:
        raise UserError(f"--grid value list {text!r} has an unclosed bracket or quote")
    return out


def parse_grid(text: str) -> tuple[str, list[str]]:
    """``"schedule.method=psg,dygnex_g"`` -> ``("schedule.method", ["psg", "dygnex_g"])``."""
    if "=" not in text:
        raise UserError(f"--grid {text!r} is not KEY=V1,V2,... (e.g. --grid 'schedule.method=psg,dygnex_g')")
    key, raw = (s.strip() for s in text.split("=", 1))
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", key):
        raise UserError(f"--grid {text!r}: {key!r} is not a config key like schedule.method")
    values = split_values(raw)
    if not raw or any(v == "" for v in values):
        raise UserError(f"--grid {text!r} has an empty value: write KEY=V1,V2,...")
    if len(set(values)) != len(values):
        raise UserError(f"--grid {text!r} repeats a value")
    return key, values


def point_name(point: list[tuple[str, str]]) -> str:
    """A directory-safe name: ``method=psg_batch_size=8``."""
    parts = [f"{key.rsplit('.', 1)[-1]}={value}" for key, value in point]
    return re.sub(r"[^A-Za-z0-9._=+-]+", "-", "_".join(parts)) or "point"


def build_points(config_path, grids, overrides) -> list[dict]:
    """Every grid point's config, validated up front (unknown keys and bad values are UserErrors)."""
    points = []
    keys = [k for k, _ in grids]
    for values in itertools.product(*(v for _, v in grids)):
        point = list(zip(keys, values))
        cfg = load_config(config_path, [*overrides, *(f"{k}={v}" for k, v in point)])
        if cfg.schedule.method not in available_methods():
            raise UserError(
                f"unknown schedule.method {cfg.schedule.method!r}: choose one of {', '.join(available_methods())}"
            )
        grid = {}
        for k, v in point:
            node = parse_override(f"{k}={v}")
            for part in k.split("."):
                node = node[part]
            grid[k] = list(node) if isinstance(node, tuple) else node
        points.append({"name": point_name(point), "grid": grid, "config": cfg})
    names = [p["name"] for p in points]
    if len(set(names)) != len(names):
        raise UserError("two grid points get the same directory name: use distinct values")
    return points


def schedule_point(cfg: Config, devices: int, cache: dict) -> dict:
    from dygnex_jax.data import datasets
    from dygnex_jax.data.windows import WindowSet
    from dygnex_jax.plan import plan

    key = repr(cfg.data)
    if key not in cache:
        cache[key] = WindowSet(datasets.load_dataset(cfg.data), cfg.data)
    r = plan(cfg, devices, cache[key])
    return {"devices": devices, "batch_size": cfg.train.batch_size, **{k: r[k] for k in SCHEDULE_FIGURES}}


def train_point(cfg: Config, out_dir: Path) -> dict:
    from dygnex_jax.train import train_and_evaluate

    s = train_and_evaluate(cfg, out_dir)
    name, _ = selection_metric(cfg.data.task)  # map, f1 or mse
    return {
        "devices": s["devices"],
        "batch_size": cfg.train.batch_size,
        "metric": name,
        "final_val": s["final"].get(f"val_{name}"),
        "best_val": s["best"].get(f"val_{name}"),
        "best_epoch": s["best"]["epoch"],
        "final_test": s["final"].get(f"test_{name}"),
        "median_epoch_seconds": s["median_epoch_seconds"],
        "mean_padding_efficiency": s["mean_padding_efficiency"],
        "compilations": s["compilations"],
        "run_dir": str(out_dir),
    }


def fmt(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.4f}" if abs(x) < 100 else f"{x:.1f}"
    return str(x)


def print_table(rows: list[dict], columns: list[str], stream=sys.stdout) -> None:
    cells = [[fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)), file=stream)
    print("  ".join("-" * w for w in widths), file=stream)
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)), file=stream)


def plot(rows: list[dict], keys: list[str], train: bool, path: Path, title: str) -> None:
    """One bar per grid point: padding efficiency (schedule-only), or the validation metric and epoch
    seconds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    labels = ["\n".join(f"{k.rsplit('.', 1)[-1]}={r[k]}" for k in keys) for r in rows]
    x = np.arange(len(rows))
    width = max(6.0, 0.9 * len(rows))

    def val(r, k):
        v = r.get(k)
        return np.nan if v is None else float(v)

    if train:
        fig, axes = plt.subplots(1, 2, figsize=(2 * width, 4.5))
        axes[0].bar(x - 0.2, [val(r, "final_val") for r in rows], 0.4, label="final")
        axes[0].bar(x + 0.2, [val(r, "best_val") for r in rows], 0.4, label="best")
        names = sorted({r.get("metric", "?") for r in rows})
        axes[0].set_ylabel(f"validation {'/'.join(n.upper() for n in names)}")
        axes[0].legend(fontsize=8)
        axes[1].bar(x, [val(r, "median_epoch_seconds") for r in rows], 0.6, color="C2")
        axes[1].set_ylabel("median epoch seconds")
    else:
        fig, ax = plt.subplots(figsize=(width, 4.5))
        axes = [ax]
        ax.bar(x - 0.2, [val(r, "padding_efficiency") for r in rows], 0.4, label="schedule")
        ax.bar(
            x + 0.2, [val(r, "packed_padding_efficiency") for r in rows], 0.4, label="packed (SPMD budget)"
        )
        ax.set_ylabel("padding efficiency (1 = perfect)")
        ax.set_ylim(0, 1.05)
        ax.legend(fontsize=8)
    for ax in axes:
        ax.set_xticks(x)
        ax.set_xticklabels(labels, fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--config", default=None, help="YAML config (default: the embedded default)")
    ap.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help="a config key and its values; several --grid make a cross product",
    )
    ap.add_argument(
        "--devices",
        type=int,
        default=0,
        help="P (default: parallel.devices of the config, else 8); a grid over parallel.devices overrides it",
    )
    ap.add_argument("--train", action="store_true", help="train every point (default: schedule figures only)")
    ap.add_argument("--out", default=None, help="output folder (default results/sweep/<config name>-<time>)")
    ap.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides for every point")
    args = ap.parse_args(argv)

    if not args.grid:
        raise UserError("give at least one --grid KEY=V1,V2,... (e.g. --grid 'schedule.method=psg,dygnex_g')")
    grids = [parse_grid(g) for g in args.grid]
    keys = [k for k, _ in grids]
    if len(set(keys)) != len(keys):
        raise UserError("a key appears in two --grid options: give all its values in one")
    if args.devices < 0:
        raise UserError(f"--devices must be positive, got {args.devices}")
    base = load_config(args.config, args.overrides)
    devices = args.devices or base.parallel.devices or 8
    # --devices before the grid values, so that a grid over parallel.devices wins
    overrides = [*args.overrides, f"parallel.devices={devices}"]
    points = build_points(args.config, grids, overrides)

    out = (
        Path(args.out)
        if args.out
        else Path("results/sweep") / f"{base.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {str(out)!r} is a file: choose a directory")
    if args.train:
        taken = [p["name"] for p in points if (out / p["name"] / "metrics.jsonl").exists()]
        if taken:
            raise UserError(
                f"--out {str(out)!r} already holds runs ({', '.join(taken)}): choose another folder"
            )
        force_host_devices(max(p["config"].parallel.devices for p in points))  # before JAX is imported
    out.mkdir(parents=True, exist_ok=True)

    mode = "train" if args.train else "schedule"
    print(f"sweep of {base.name}: {len(points)} point(s), {mode}, {devices} devices -> {out}", flush=True)
    rows, cache = [], {}
    start = time.perf_counter()
    for i, p in enumerate(points, 1):
        label = " ".join(f"{k}={v}" for k, v in p["grid"].items())
        print(f"[{i}/{len(points)}] {label} ...", flush=True)
        t0 = time.perf_counter()
        if args.train:
            figures = train_point(p["config"], out / p["name"])
        else:
            figures = schedule_point(p["config"], p["config"].parallel.devices, cache)
        row = {"point": p["name"], **p["grid"], **figures, "seconds": time.perf_counter() - t0}
        rows.append(row)
        shown = ("metric", "best_val", "median_epoch_seconds") if args.train else ("padding_efficiency",)
        print(
            f"[{i}/{len(points)}] {label}: "
            + ", ".join(f"{k} {fmt(row[k])}" for k in shown)
            + f" ({row['seconds']:.1f} s)",
            flush=True,
        )
        (out / "sweep.json").write_text(json.dumps(rows, indent=2) + "\n")

    if args.train:
        columns = [*keys, "metric", "final_val", "best_val", "best_epoch", "median_epoch_seconds"]
        columns += ["mean_padding_efficiency", "compilations"]
    else:
        columns = [*keys, "padding_efficiency", "packed_padding_efficiency", "imbalance"]
        columns += ["predicted_epoch_seconds", "scheduler_seconds", "fallback"]
    print()
    print_table(rows, columns)
    title = f"{base.name}: {mode} sweep, P={devices}"
    plot(rows, keys, args.train, out / "sweep.png", title)
    print(f"\nwrote {out / 'sweep.json'} and {out / 'sweep.png'} in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
