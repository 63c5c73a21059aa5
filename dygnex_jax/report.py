"""Plots and a Markdown table of training runs: ``python -m dygnex_jax report RUN_DIR [RUN_DIR ...]``.

Reads what ``train`` writes (``config.yaml``, ``metrics.jsonl``, ``steps.jsonl``; ``summary.json`` when
the run finished) and writes to ``--out``:

* ``curves.png``     — training loss and the validation metric per epoch, one line per run (the task's
  first metric, ``config.TASK_METRICS``: MAP for link prediction, minority-class F1 for edge
  classification, MSE for node regression);
* ``loads-<run>.png`` — every device's real load in every step of the run's last epoch (bars), with
  the padded budget the step ran at (the SPMD cost: every device pays for the largest), per run;
* ``epoch_time.png`` — median epoch seconds per run (epochs in which nothing compiled), labelled by
  scheduling method (two runs or more);
* ``summary.md``     — one row per run: schedule, devices, epochs, final loss, the best validation
  metric (highest MAP / F1, lowest MSE) and its epoch, the test metric there, median epoch seconds,
  padding efficiency.

No JAX: matplotlib (Agg) and the JSON lines only.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from .config import TASK_METRICS, selection_metric
from .errors import UserError
from .files import atomic_write_text, make_dirs, save_figure, staged

MAX_BAR_STEPS = 40  # load plots show at most this many steps of the last epoch


# What the report reads of an epoch row (metrics.jsonl) and of a step row (steps.jsonl).
EPOCH_KEYS = ("epoch", "loss", "epoch_seconds", "padding_efficiency")
STEP_KEYS = ("epoch", "device_loads")


def _rows(path: Path) -> list[dict]:
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut by a kill
    return rows


def epoch_rows(d: Path) -> list[dict]:
    """metrics.jsonl's epoch rows; a UserError for a row that is not one of ``train``'s."""
    rows = _rows(d / "metrics.jsonl")
    for i, row in enumerate(rows, 1):
        missing = [k for k in EPOCH_KEYS if not isinstance(row, dict) or not _number(row.get(k, ""), k)]
        if missing:
            raise UserError(
                f"{str(d / 'metrics.jsonl')!r} row {i} has no number {missing[0]!r}: not a log `train` "
                "wrote (pass the --out of a train run)"
            )
        for k in EPOCH_KEYS[1:]:  # an undefined figure (a diverged loss) is logged as null
            if row[k] is None:
                row[k] = float("nan")
    return rows


def _number(value, key: str) -> bool:
    """Whether an epoch row's ``key`` holds what ``train`` writes there: a number (the epoch an int),
    or null for a figure that was not a number (``files.json_text``)."""
    if key == "epoch":
        return isinstance(value, int) and not isinstance(value, bool)
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def _yaml_or_empty(path: Path) -> dict:
    """The run's config.yaml as a dict ({} when absent); a UserError when it is not a mapping."""
    if not path.is_file():
        return {}
    try:
        config = yaml.safe_load(path.read_text(errors="replace"))
    except yaml.YAMLError as e:
        raise UserError(
            f"{str(path)!r} is not valid YAML ({type(e).__name__}): pass the --out of a train run"
        ) from None
    if config is not None and not isinstance(config, dict):
        raise UserError(
            f"{str(path)!r} holds a {type(config).__name__}, not a run's config: pass the --out of a train run"
        )
    return config or {}


def _json_or_none(path: Path) -> dict | None:
    """summary.json as a dict; None when absent or unreadable (a run still going, or cut short)."""
    try:
        data = json.loads(path.read_text(errors="replace"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def load_run(run_dir: str | Path) -> dict:
    """A run directory -> {name, dir, config, metrics, steps, summary}; UserErrors for what is missing."""
    d = Path(run_dir)
    if not d.is_dir():
        what = "is a file, not a folder" if d.exists() else "does not exist"
        raise UserError(f"run directory {str(d)!r} {what}: pass the --out directory of a train run")
    if not (d / "metrics.jsonl").is_file():
        raise UserError(f"{str(d)!r} is not a training run (no metrics.jsonl): pass the --out of `train`")
    metrics = epoch_rows(d)
    if not metrics:
        raise UserError(f"{str(d)!r} has no finished epoch in metrics.jsonl yet: wait for one, or resume it")
    steps = _rows(d / "steps.jsonl") if (d / "steps.jsonl").is_file() else []
    return {
        "name": d.resolve().name,
        "dir": d,
        "config": _yaml_or_empty(d / "config.yaml"),
        "metrics": metrics,
        "steps": [s for s in steps if isinstance(s, dict) and all(k in s for k in STEP_KEYS)],
        "summary": _json_or_none(d / "summary.json"),
    }


def method(run: dict) -> str:
    return str(run["config"].get("schedule", {}).get("method", "?"))


def label(run: dict, runs: list[dict]) -> str:
    """The method, with the run's name where two runs share it."""
    m = method(run)
    return m if sum(method(r) == m for r in runs) == 1 or run["name"] == m else f"{run['name']} ({m})"


def clean_epoch_seconds(run: dict) -> list[float]:
    """Training seconds of the epochs in which no step compiled (``steps.jsonl``)."""
    compiled = {s["epoch"] for s in run["steps"] if s.get("compiled")}
    return [r["epoch_seconds"] for r in run["metrics"] if run["steps"] and r["epoch"] not in compiled]


def median_epoch_seconds(run: dict) -> float:
    """Median over the epochs in which nothing compiled; over all epochs but the first when every epoch
    compiled something (or the steps are missing)."""
    secs = [r["epoch_seconds"] for r in run["metrics"]]
    return statistics.median(clean_epoch_seconds(run) or secs[1:] or secs)


def metric(run: dict) -> tuple[str, object]:
    """The run's model-selection metric (the first of its task's) and max / min (which is best)."""
    task = run["config"].get("data", {}).get("task", "link")
    if task not in TASK_METRICS:
        raise UserError(f"{run['name']!r} has data.task {task!r}, which this version does not know")
    return selection_metric(task)


def evaluated(run: dict) -> list[dict]:
    """The metrics rows with a finite validation metric."""
    key = f"val_{metric(run)[0]}"
    return [r for r in run["metrics"] if r.get(key) is not None and not np.isnan(r[key])]


def shared_label(names: set[str]) -> str | None:
    """The display name of the one metric all runs share (``MAP``, ``F1``, ``MSE``), else None."""
    return next(iter(names)).upper().replace("_", "-") if len(names) == 1 else None


def table_row(run: dict) -> dict:
    m = run["metrics"]
    name, better = metric(run)
    rows = evaluated(run)
    best = better(rows, key=lambda r: r[f"val_{name}"]) if rows else None
    devices = len(run["steps"][0]["device_loads"]) if run["steps"] else None
    return {
        "run": run["name"],
        "schedule": method(run),
        "model": run["config"].get("model", {}).get("name", "?"),
        "devices": devices,
        "epochs": len(m),
        "finished": run["summary"] is not None,
        "final_loss": m[-1]["loss"],
        "metric": name,
        "best_val": best[f"val_{name}"] if best else None,
        "best_epoch": best["epoch"] if best else None,
        "test_at_best": best.get(f"test_{name}") if best else None,
        "median_epoch_s": median_epoch_seconds(run),
        "padding_efficiency": float(np.mean([r["padding_efficiency"] for r in m])),
    }


def markdown(rows: list[dict]) -> str:
    """The summary table; the metric's name heads its columns when every run shares it, else it
    precedes each value."""

    def fmt(x, spec):
        return "–" if x is None else format(x, spec)

    shared = shared_label({r["metric"] for r in rows})
    label = shared or "metric"
    lines = [
        f"| run | schedule | model | devices | epochs | final loss | best val {label} (epoch) | test {label} there "
        "| median epoch s | padding eff. |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        epochs = f"{r['epochs']}" + ("" if r["finished"] else " (unfinished)")
        name = "" if shared else f"{r['metric']} "
        lines.append(
            f"| {r['run']} | {r['schedule']} | {r['model']} | {fmt(r['devices'], 'd')} | {epochs} "
            f"| {r['final_loss']:.4f} | {name}{fmt(r['best_val'], '.4f')} ({fmt(r['best_epoch'], 'd')}) "
            f"| {name}{fmt(r['test_at_best'], '.4f')} | {r['median_epoch_s']:.3f} | {r['padding_efficiency']:.3f} |"
        )
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------------------------------- plots


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_curves(runs: list[dict], path: Path) -> None:
    """Loss and the validation metric per epoch, one line per run."""
    plt = _plt()
    fig, (ax_loss, ax_map) = plt.subplots(1, 2, figsize=(11, 4))
    for run in runs:
        m = run["metrics"]
        name = label(run, runs)
        ax_loss.plot([r["epoch"] for r in m], [r["loss"] for r in m], marker="o", label=name)
        ev, key = evaluated(run), f"val_{metric(run)[0]}"
        ax_map.plot([r["epoch"] for r in ev], [r[key] for r in ev], marker="o", label=name)
    what = shared_label({metric(r)[0] for r in runs}) or "metric"
    ax_loss.set(xlabel="epoch", ylabel="training loss (the task's)", title="training loss per epoch")
    ax_map.set(xlabel="epoch", ylabel=f"validation {what}", title=f"validation {what} per epoch")
    for ax in (ax_loss, ax_map):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.xaxis.get_major_locator().set_params(integer=True)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def plot_loads(run: dict, path: Path) -> bool:
    """Per-device real load of every step of the last epoch, and the padded budget; False if no steps."""
    if not run["steps"]:
        return False
    last = max(s["epoch"] for s in run["steps"])
    steps = [s for s in run["steps"] if s["epoch"] == last][:MAX_BAR_STEPS]
    loads = np.array([s["device_loads"] for s in steps])  # [S, P]
    n_steps, p = loads.shape
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(8, n_steps * 0.45 + 4), 4))
    width = 0.8 / p
    x = np.arange(n_steps)
    colors = plt.cm.viridis(np.linspace(0, 0.9, p))
    for d in range(p):
        ax.bar(
            x - 0.4 + (d + 0.5) * width,
            loads[:, d],
            width,
            color=colors[d],
            label=f"device {d}" if p <= 8 else None,
        )
    # the padded load: real load / padding efficiency = P x padded work per device, divided by P
    padded = loads.sum(axis=1) / np.array([s["padding_efficiency"] for s in steps]) / p
    ax.step(
        np.r_[x - 0.5, x[-1] + 0.5],
        np.r_[padded, padded[-1]],
        where="post",
        color="red",
        lw=1.2,
        ls="--",
        label="padded budget (what every device pays)",
    )
    ax.set_xticks(x, [str(s["step"]) for s in steps])
    eff = loads.sum() / (padded.sum() * p)
    ax.set(
        xlabel=f"step (epoch {last})",
        ylabel="load (weighted nodes + edges + pairs)",
        title=f"{run['name']}: {method(run)}, {p} devices, padding efficiency {eff:.3f} in epoch {last}",
    )
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return True


def plot_epoch_times(runs: list[dict], path: Path) -> None:
    """Median epoch seconds per run (bars labelled by method), padding efficiency annotated."""
    plt = _plt()
    names = [label(r, runs) for r in runs]
    secs = [median_epoch_seconds(r) for r in runs]
    effs = [float(np.mean([m["padding_efficiency"] for m in r["metrics"]])) for r in runs]
    fig, ax = plt.subplots(figsize=(max(5, 1.4 * len(runs) + 2), 4))
    bars = ax.bar(names, secs, color="tab:blue")
    for bar, eff, run in zip(bars, effs, runs):
        ax.annotate(
            f"pad-eff {eff:.2f}" + ("" if clean_epoch_seconds(run) else "\n(every epoch compiled)"),
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set(ylabel="median epoch s (epochs that compiled nothing)", title="epoch time per scheduling method")
    ax.grid(axis="y", alpha=0.3)
    plt.setp(ax.get_xticklabels(), rotation=15, ha="right")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def report(run_dirs: list[str], out_dir: str | Path | None = None, log=None) -> dict:
    """Write the plots and ``summary.md`` of ``run_dirs`` to ``out_dir``; returns {name: path}."""
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    runs = [load_run(d) for d in run_dirs]  # every run is checked before anything is written
    out = Path(out_dir) if out_dir else Path(f"report-{time.strftime('%Y%m%d-%H%M%S')}")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {str(out)!r} is a file: choose a directory")
    with staged():  # every file or none (a full disk leaves no half report, nor its new folder)
        written = _write_report(runs, out)
    for path in written.values():
        log(f"wrote {path}")
    return written


def _write_report(runs: list[dict], out: Path) -> dict:
    make_dirs(out)
    written = {"curves": out / "curves.png"}
    plot_curves(runs, written["curves"])
    used = set()
    for run in runs:
        name = run["name"] if run["name"] not in used else f"{run['name']}-{len(used)}"
        used.add(name)
        path = out / f"loads-{name}.png"
        if plot_loads(run, path):
            written[f"loads-{name}"] = path
    if len(runs) > 1:
        written["epoch_time"] = out / "epoch_time.png"
        plot_epoch_times(runs, written["epoch_time"])
    written["summary"] = out / "summary.md"
    atomic_write_text(written["summary"], markdown([table_row(r) for r in runs]))
    return written
