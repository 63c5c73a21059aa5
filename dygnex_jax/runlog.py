"""What a run writes and prints besides the model: progress lines, the output folder, the summary.

``Progress`` is the terminal / log output of a run; ``prepare_out_dir`` checks and creates the run's
folder before anything is written (``claim_out_dir`` then decides whether it may hold this
run); ``summarize_run`` builds ``summary.json`` from the epochs' rows and the trainer's counters.
"""

from __future__ import annotations

import math
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from . import checkpoint, compile_cache, host_memory, memstats
from .config import TASK_METRICS, Config, changed_keys, load_config, selection_metric, to_dict
from .data.timerange import empty_snapshots, sparsity_warning
from .errors import UserError


class Progress:
    """A one-line progress bar on a terminal; otherwise (a log file, a pipe) a line every ``every``
    seconds within a long epoch, so that a log shows a long run is alive. Per-epoch lines always.
    Silent when ``quiet`` (the processes other than 0 of a multi-process run)."""

    def __init__(self, stream=None, every: float = 60.0, quiet: bool = False):
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.live = self.stream.isatty() and not quiet
        self.every = every

    def bar(self, epoch: int, epochs: int):
        if not self.live:
            start = last = time.monotonic()

            def lines(done, total):
                nonlocal last
                now = time.monotonic()
                if done < total and now - last >= self.every:
                    last = now
                    self.line(f"epoch {epoch}/{epochs}: step {done}/{total} after {now - start:.0f} s")

            return lines

        def update(done, total):
            width = 30
            fill = int(width * done / total)
            self.stream.write(f"\repoch {epoch}/{epochs} [{'#' * fill}{'.' * (width - fill)}] {done}/{total}")
            self.stream.flush()
            if done == total:
                self.stream.write("\r" + " " * 60 + "\r")

        return update

    def line(self, text: str):
        if not self.quiet:
            print(text, file=self.stream, flush=True)


def default_out_dir(config: Config) -> Path:
    return Path("runs") / f"{config.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_out_path(out_dir: Path) -> None:
    """A UserError when ``--out`` is a file or lies under one; touches nothing (every command checks its
    ``--out`` before its work, so a bad path costs nothing)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {str(out_dir)!r} is a file: choose a directory")
    above = next((p for p in out_dir.parents if p.exists()), None)
    if above is not None and not above.is_dir():
        raise UserError(f"--out {str(out_dir)!r} lies under {str(above)!r}, a file: choose a directory")


def prepare_out_dir(out_dir: Path) -> None:
    """Make the run's folder (``--out``); a UserError if it is a file, lies under a file, or cannot be
    made or written (a read-only place)."""
    check_out_path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(
            f"--out {str(out_dir)!r} cannot be made ({e.strerror}): choose a directory you can write"
        ) from None
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise UserError(f"--out {str(out_dir)!r} is not writable: choose a directory you can write")


# The names a run writes in its folder: one folder, the rest files.
RUN_FILES = ("config.yaml", "metrics.jsonl", "steps.jsonl", "summary.json", "cost_model.json")


def check_run_names(out: Path) -> None:
    """A UserError, before any epoch runs, when a name the run will write is taken by the wrong kind of
    entry (``checkpoints`` a file, ``summary.json`` a folder, ...): found at the first checkpoint or at
    the end, it would cost the epochs trained until then."""
    wrong = (
        [out / checkpoint.FOLDER]
        if (out / checkpoint.FOLDER).exists() and not (out / checkpoint.FOLDER).is_dir()
        else []
    )
    wrong += [out / n for n in RUN_FILES if (out / n).exists() and not (out / n).is_file()]
    if wrong:
        kinds = ", ".join(
            f"{p.name} ({'not a folder' if p.name == checkpoint.FOLDER else 'not a file'})" for p in wrong
        )
        raise UserError(
            f"run directory {str(out)!r} holds {kinds} where the run writes its own: move it away (or "
            "choose another --out)"
        )


def claim_out_dir(out: Path, config: Config, note) -> None:
    """Check that ``train --out`` may write to folder ``out`` (made, and locked by the caller). A folder
    that holds a run interrupted before its first checkpoint, with this config (but for the keys a resume
    may change), is started over: its rows and leftovers are removed, with a note. A folder of another
    run (finished, with a checkpoint, or of another config) is a UserError; other files are left alone."""
    if (out / "summary.json").exists() or checkpoint.candidates(out):
        raise UserError(
            f"--out {str(out)!r} already holds a run: choose another directory "
            f"(or continue it with --resume {str(out)!r})"
        )
    rows = [out / n for n in ("metrics.jsonl", "steps.jsonl") if (out / n).exists()]
    if not (out / "config.yaml").exists():
        if rows:  # a run's rows but not its config: not one we can tell is ours
            raise UserError(f"--out {str(out)!r} already holds a run: choose another directory")
        return
    try:
        differ = changed_keys(config, to_dict(load_config(out / "config.yaml")))
    except UserError as e:
        raise UserError(
            f"--out {str(out)!r} holds a config.yaml that is not this run's ({e}): choose another directory"
        ) from None
    differ = [k for k in differ if k not in checkpoint.RESUMABLE_CHANGES]
    if differ:
        raise UserError(
            f"--out {str(out)!r} holds a run of another config ({', '.join(differ[:5])} differ) that has no "
            f"checkpoint: choose another directory, or start that run over with --resume {str(out)!r}"
        )
    epochs = logged_rows(out)
    note(
        f"{out} holds this run, interrupted before its first checkpoint ({epochs} epoch row(s)): "
        "starting it over"
    )
    for path in rows:
        path.unlink()
    shutil.rmtree(out / checkpoint.FOLDER, ignore_errors=True)  # only leftovers of unfinished saves are there


def logged_rows(out: Path) -> int:
    """The epoch rows in ``out``'s metrics.jsonl (0 without the file)."""
    metrics = out / "metrics.jsonl"
    if not metrics.is_file():
        return 0
    return sum(1 for line in metrics.read_text(errors="replace").splitlines() if line.strip())


def _prediction_error(history: list[dict]) -> float | None:
    ratios = [r["predicted_step_seconds"] / r["step_seconds"] - 1 for r in history if r.get("step_seconds")]
    return float(statistics.median(ratios)) if ratios else None


def header_line(graph, windows, n_devices: int, config: Config, candidates: str) -> str:
    """The line a run (and the ``schedule`` command) starts with: the data (with its empty snapshots),
    its windows, the setup; then, when most snapshots are empty, a warning line with the fix."""
    w = windows.splits
    empty = empty_snapshots(graph)
    warning = sparsity_warning(graph)
    growing = "cumulative " if graph.info.get("cumulative") else ""
    targets = ", targets new" if getattr(windows, "targets_mode", "all") == "new" else ""
    return (
        f"{graph.name}: {graph.num_nodes} nodes, {graph.num_snapshots} {growing}snapshots"
        f"{f' ({empty} empty)' if empty else ''}, "
        f"windows train/val/test {len(w['train'])}/{len(w['val'])}/{len(w['test'])}, "
        f"{n_devices} devices, model {config.model.name}, schedule {config.schedule.method}, "
        f"task {config.data.task}{targets}, eval candidates {candidates}"
        + (f"\n{warning}" if warning else "")
    )


def epoch_line(row: dict, epochs: int, task: str) -> str:
    """The one line printed after every epoch: loss, the evaluated metrics, seconds, padding efficiency."""
    names = TASK_METRICS[task][0]
    evals = "".join(
        f"  {s}" + "".join(f" {k.upper()} {row[f'{s}_{k}']:.4f}" for k in names)
        for s in ("val", "test")
        if f"{s}_{names[0]}" in row
    )
    skipped = f"  skipped {row['skipped_steps']} non-finite step(s)" if row["skipped_steps"] else ""
    return (
        f"epoch {row['epoch']}/{epochs}  loss {row['loss']:.4f}{evals}  {row['epoch_seconds']:.2f}s  "
        f"pad-eff {row['padding_efficiency']:.3f}{skipped}"
    )


def _evaluated(task: str, history: list[dict]) -> tuple[str, list[dict], int | None]:
    """(val key of the task's selection metric, the rows that evaluated it (not NaN), the index among
    those of the best — the first of equals, as EvolveGCN keeps a best until a strictly better one)."""
    name, better = selection_metric(task)
    key = f"val_{name}"
    rows = [r for r in history if key in r and not math.isnan(r[key])]
    if not rows:
        return key, rows, None
    target = better(r[key] for r in rows)
    return key, rows, next(i for i, r in enumerate(rows) if r[key] == target)


def best_epoch(task: str, history: list[dict]) -> int | None:
    """The epoch of the best val metric in ``history`` (the first of equals), or None before one."""
    _, rows, best = _evaluated(task, history)
    return None if best is None else int(rows[best]["epoch"])


def is_new_best(task: str, history: list[dict], value: float) -> bool:
    """Whether a val metric ``value`` beats every one in ``history`` (strictly; the first one does)."""
    key, rows, best = _evaluated(task, history)
    if math.isnan(value):
        return False
    if best is None:
        return True
    _, better = selection_metric(task)
    old = rows[best][key]
    return value != old and better(value, old) == value


def early_stop_note(config: Config, history: list[dict]) -> str | None:
    """With ``train.patience`` k > 0: the line that ends the run once more than k evaluations in a row
    have not improved the best validation metric (EvolveGCN's early stopping); else None."""
    patience = config.train.patience
    key, rows, best = _evaluated(config.data.task, history)
    if not patience or best is None or len(rows) - 1 - best <= patience:
        return None
    top = rows[best]
    return (
        f"early stop after epoch {history[-1]['epoch']}: {key} has not improved for "
        f"{len(rows) - 1 - best} evaluations (train.patience={patience}); best {top[key]:.4f} at epoch "
        f"{top['epoch']}"
    )


def ended_early(config: Config, history: list[dict]) -> str | None:
    """``early_stop_note`` of a run that stopped before its last configured epoch (``train.epochs``);
    None when the rule never fired or fired on the last epoch itself (the run ran all its epochs)."""
    note = early_stop_note(config, history)
    return note if note is not None and history[-1]["epoch"] < config.train.epochs else None


def summarize_run(config: Config, trainer, history: list[dict]) -> dict:
    names = TASK_METRICS[config.data.task][0]
    key, evaluated, at = _evaluated(config.data.task, history)
    best = evaluated[at] if at is not None else history[-1]
    timed = [r["epoch_seconds"] for r in history[1:]] or [history[0]["epoch_seconds"]]
    pick = ("loss", *(f"{s}_{k}" for s in ("val", "test") for k in names))
    return {
        "name": config.name,
        "task": config.data.task,
        "dataset": trainer.graph.name,
        "model": config.model.name,
        "schedule": config.schedule.method,
        "devices": trainer.n_devices,
        "windows": {s: int(len(v)) for s, v in trainer.windows.splits.items()},
        "eval_candidates": trainer.candidate_mode,
        "epochs": len(history),
        # train.patience: the line that ended the run before train.epochs (None: it ran them all)
        "early_stop": ended_early(config, history),
        "final": {k: history[-1].get(k) for k in pick},
        "best": {"epoch": best["epoch"], **{k: best.get(k) for k in pick}},
        "median_epoch_seconds": statistics.median(timed),
        "first_epoch_seconds": history[0]["epoch_seconds"],
        "mean_padding_efficiency": float(np.mean([r["padding_efficiency"] for r in history])),
        # bytes sent by collectives per training epoch (gradients, states, features), see comm.py
        "comm_bytes_per_epoch": {
            k: float(np.mean([r[f"comm_bytes_{k}"] for r in history]))
            for k in ("gradients", "states", "features")
        }
        | {"total": float(np.mean([r["comm_bytes"] for r in history]))},
        "compilations": len(trainer.train_step.traces),
        # training budgets: the layout, the policy, the planned budgets (compiled before epoch 1), the
        # steps no planned budget held, and the seconds spent compiling training steps (not step time)
        "layout": trainer.layout,
        "budget_policy": config.parallel.budgets if trainer.plans_budgets else "buckets",
        "planned_budgets": [list(b.as_tuple()) for b in trainer.planned or []],
        "overflow_steps": trainer.overflow_steps,
        "compile_seconds": trainer.compile_seconds,
        "compile_seconds_ahead": trainer.compile_seconds_ahead,
        "plan_seconds": trainer.plan_seconds,  # the schedules of the planned epochs and their budgets
        # the persistent compilation cache: folder, hits and misses of this process, bytes it holds
        "host_malloc": host_memory.state(),  # parallel.host_malloc as it holds in this process
        "host_arenas": host_memory.arenas(),  # glibc's heaps: 1 when retain came before every thread
        "host_heap": host_memory.heap(),  # what glibc's malloc holds at the end: spanned, in use, mapped
        "compile_cache": compile_cache.stats()
        | {"bytes": compile_cache.size_bytes(compile_cache.stats()["dir"])},
        # peak host RSS and device bytes (None where JAX reports none) of the whole run, this process's
        **memstats.run_peak(history),
        # the memory budget per device, the largest step's bytes (XLA, compiled), micro-steps per
        # update and the estimate of the peak before epoch 1 (memory_plan.py); {} when not planned
        "memory": trainer.memory,
        # the cost model the run used (schedule.cost_model), and how well it predicted the steps that
        # compiled nothing: median over epochs of predicted / measured - 1
        "cost_model": trainer.cost_model.to_dict()
        | {"note": trainer.cost_note, "prediction_error": _prediction_error(history)},
        "config": to_dict(config),
    }
