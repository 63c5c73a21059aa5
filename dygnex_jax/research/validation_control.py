"""The per-row control of ``tools/validate_simulator.py --control R``: a row's error split into model and regime.

A validation row compares the simulated epoch (the cost model's prices) with the trained one. Its error
mixes two things: how well the model prices a step *as the profile times it* (the model's fit and the
machine's drift since the profile), and how a step runs *inside training* against the profile's
regime (another step's packing beside it, the budgets before it, the machine at that moment). The
control separates them: right after a run's training, in the same process, the run's most used budget
is re-timed as ``profile`` times a step (``profile.time_steps``: R rounds, beside the packing of a
full step, medians) on one of the run's own steps in it. Then

    model error  = predicted / control - 1   (the price against the profile's regime, now)
    regime error = training / control - 1   (the training steps in that budget against it)

and (1 + row error) ~ (1 + model error) / (1 + regime error) for a row whose epoch is mostly that
budget. ``control`` runs in the worker (JAX); ``split`` and ``table`` read the rows (no JAX).
"""

from __future__ import annotations

import collections
import statistics
import time

import numpy as np

from ..schedule.cost import alone_steps


def alone_flags(steps: list[dict], prefetch: int = 1) -> list[bool]:
    """[len(steps)] whether each of a run's steps (in the order it ran them, epoch by epoch) ran with no
    next step packed beside it (``cost.alone_steps`` of its epoch: its last one with prefetch)."""
    counts = collections.Counter(s["epoch"] for s in steps)
    flags = {e: iter(alone_steps(n, prefetch)) for e, n in counts.items()}
    return [bool(next(flags[s["epoch"]])) for s in steps]


def _timed_steps(steps: list[dict], prefetch: int) -> tuple[list[dict], bool]:
    """The steps that compiled nothing and ran beside the next step's packing, and False; where none did
    (an epoch of one step runs it alone), those that ran alone, and True."""
    beside, alone = [], []
    for s, a in zip(steps, alone_flags(steps, prefetch)):
        if not s["compiled"]:
            (alone if a else beside).append(s)
    return (beside, False) if beside else (alone, True)


def control(trainer, steps: list[dict], rounds: int, log) -> dict | None:
    """Re-time the most used budget of ``steps`` (the worker's steps, every epoch) on one of its own
    steps, ``rounds`` rounds as ``profile`` times a step; None when every step compiled or the budget
    was not planned. The training figure: the median of its steps in that budget that ran beside the
    next step's packing (or alone, where every step did: the control's alone figure and price then)."""
    from .. import profile

    if rounds < 1:
        return None
    timed, alone = _timed_steps(steps, trainer.config.parallel.prefetch)
    if not timed:
        return None
    key, count = collections.Counter(tuple(s["budget"]) for s in timed).most_common(1)[0]
    budget = next((b for b in trainer.planned or [] if tuple(b.as_tuple()) == key), None)
    if budget is None:
        return None
    last = max((s for s in timed if tuple(s["budget"]) == key), key=lambda s: (s["epoch"], s["step"]))
    windows = trainer.epoch_schedule(last["epoch"]).steps[last["step"]]
    got = profile.time_steps(trainer, [(windows, budget)], rounds, log)
    return {
        "budget": list(key),
        "steps": count,
        "alone": alone,
        "rounds": rounds,
        "training_seconds": statistics.median(s["seconds"] for s in timed if tuple(s["budget"]) == key),
        "control_seconds": got["seconds_alone" if alone else "seconds"][0],
        "control_beside_seconds": got["seconds"][0],
        "control_alone_seconds": got["seconds_alone"][0],
        "predicted_seconds": trainer.step_seconds(budget, alone),
        "compile_seconds": got["compiles"][0],
        "at_unix": time.time(),
    }


def split(c: dict | None) -> dict | None:
    """A control's {"model": predicted / control - 1, "regime": training / control - 1}."""
    if not c:
        return None
    return {
        "model": c["predicted_seconds"] / c["control_seconds"] - 1,
        "regime": c["training_seconds"] / c["control_seconds"] - 1,
    }


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def table(rows: list[dict], within: float = 0.15) -> str:
    """Every row's trials with their controls: the row's error, the model's error against the control
    and the training steps' against it, trial by trial; then the medians of each over all trials."""
    lines = [
        "| run | dataset | error per trial | model vs control per trial | training vs control per trial "
        "| control budget (steps in it) |",
        "|---|---|---|---|---|---|",
    ]
    errors: dict[str, list[float]] = {"row": [], "model": [], "regime": []}
    for r in rows:
        t = r.get("trials") or {k: [r.get(k)] for k in ("error_vs_steps", "control")}
        parts = [split(c) for c in t.get("control") or []]
        if not any(parts):
            continue
        for e, p in zip(t["error_vs_steps"], parts):
            if p:
                errors["row"].append(abs(e))
                errors["model"].append(abs(p["model"]))
                errors["regime"].append(abs(p["regime"]))
        c = next(c for c in t["control"] if c)
        lines.append(
            f"| {r['run']} | {r['dataset']} | {' / '.join(_pct(e) for e in t['error_vs_steps'])} | "
            f"{' / '.join(_pct(p and p['model']) for p in parts)} | "
            f"{' / '.join(_pct(p and p['regime']) for p in parts)} | "
            f"{', '.join(f'{x:.0f}' for x in c['budget'][:3])} ({c['steps']}) |"
        )
    if errors["row"]:
        n = len(errors["row"])
        lines += [
            "",
            f"Over {n} trials: median |error| {100 * np.median(errors['row']):.1f}% "
            f"({sum(e <= within for e in errors['row'])} within {100 * within:.0f}%); the model against "
            f"the control {100 * np.median(errors['model']):.1f}% "
            f"({sum(e <= within for e in errors['model'])} within); the training steps against the "
            f"control {100 * np.median(errors['regime']):.1f}%.",
        ]
    return "\n".join(lines) + "\n"
