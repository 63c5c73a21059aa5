"""A config over the cross product of value grids (``tools/sweep.py``): the grid, its points, their figures.

``parse_grid`` reads one ``KEY=V1,V2,...`` (values parsed like ``key=value`` overrides; a value may be a
bracketed list); ``build_points`` validates every point's config up front (unknown keys and bad values
are UserErrors, before anything runs). A point is measured by ``schedule_point`` (one epoch's schedule
by ``dygnex_jax.plan.plan``: padding efficiency, imbalance, predicted epoch seconds, scheduler seconds;
no JAX) or ``train_point`` (``train_and_evaluate``: its final and best validation metric and median
epoch seconds). ``print_table`` and ``plot`` show the rows.
"""

from __future__ import annotations

import itertools
import re
import sys
from pathlib import Path

from ..config import Config, load_config, parse_override, selection_metric
from ..errors import UserError
from ..files import save_figure

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
        cfg = load_config(config_path, [*overrides, *(f"{k}={v}" for k, v in point)])  # validates every key
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
    from ..data import datasets
    from ..data.windows import WindowSet
    from ..plan import plan

    key = repr(cfg.data)
    if key not in cache:
        cache[key] = WindowSet(datasets.load_dataset(cfg.data), cfg.data)
    r = plan(cfg, devices, cache[key])
    return {"devices": devices, "batch_size": cfg.train.batch_size, **{k: r[k] for k in SCHEDULE_FIGURES}}


def train_point(cfg: Config, out_dir: Path) -> dict:
    from ..train import train_and_evaluate

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


def print_table(rows: list[dict], columns: list[str], stream=None) -> None:
    stream = sys.stdout if stream is None else stream  # the stdout of the call, not of the import
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
    save_figure(fig, path, dpi=110)
    plt.close(fig)
