"""One training epoch of a ``Trainer`` (``train_epoch``): the epoch's steps packed ahead on a background
thread (``prepared_steps``), each run on the mesh (``run_step``; micro-steps: ``memory_plan``), timed
apart from compilation, checked for non-finite values, and accounted — every step's seconds, the cost
model's prediction of it, its padding and its collective bytes — into the epoch's row (``epoch_row``)
and the trainer's per-step figures (``last_steps``, ``step_log``).
"""

from __future__ import annotations

import collections
import itertools
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np

from . import memory_plan, parallel
from .errors import UserError
from .graphs import Budget
from .schedule.cost import alone_steps
from .schedule.metrics import summarize

if TYPE_CHECKING:
    from .trainer import Trainer


class NonFiniteStep(UserError):
    """A train step whose loss, gradient or update is not finite (``train.on_nonfinite: stop``)."""


def prepared_steps(trainer: Trainer, sched, epoch: int):
    """Every step of ``sched`` in order as (host batch, batch on the mesh, budget, loads, padded
    load). With ``parallel.prefetch`` = k > 0 a background thread packs and places the next k steps
    while the current one runs (the main thread waits on the devices with the GIL released), so host
    packing overlaps device work; steps are packed one after another either way, so the batches,
    and the budgets ``Packer.reuse_budget`` picks, are the same."""

    def prepare(step):
        batch, budget, loads, padded = trainer.pack_train(step, epoch)
        return batch, parallel.shard_batch(trainer.mesh, batch), budget, loads, padded

    ahead = trainer.config.parallel.prefetch
    if ahead <= 0:
        yield from map(prepare, sched.steps)
        return
    steps = iter(sched.steps)
    with ThreadPoolExecutor(1, thread_name_prefix="dygnex-pack") as pool:
        pending = collections.deque(pool.submit(prepare, s) for s in itertools.islice(steps, ahead))
        while pending:
            ready = pending.popleft().result()
            nxt = next(steps, None)
            if nxt is not None:
                pending.append(pool.submit(prepare, nxt))
            yield ready


def run_step(trainer: Trainer, placed, budget: Budget) -> tuple[dict, float, float, bool]:
    """One training step on the mesh -> (stats, seconds, CPU seconds of this process, compiled now).
    Time spent compiling is counted as compilation, never as step time."""
    traces = len(trainer.train_step.traces)
    step_fn = trainer._executables.get(budget, trainer.train_step)  # compiled ahead, or jit on demand
    start, cpu = time.perf_counter(), time.process_time()
    trainer.params, trainer.opt_state, stats = step_fn(trainer.params, trainer.opt_state, placed)
    stats = {k: float(v) for k, v in stats.items()}  # waits for the step
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return stats, seconds, cpu, trainer.account_step(traces, seconds)


def train_epoch(trainer: Trainer, epoch: int, progress=None, sched=None) -> dict:
    """One training epoch; ``sched``: ``epoch_schedule(epoch)`` when the caller already has it."""
    trainer.plan_budgets()
    sched = sched if sched is not None else trainer.epoch_schedule(epoch)
    start, start_cpu = time.perf_counter(), time.process_time()
    acc = collections.Counter()
    budgets = set()
    trainer.last_steps = []
    alone = alone_steps(sched.num_steps, trainer.config.parallel.prefetch)  # nothing packed beside them
    for i, (step, (batch, placed, budget, loads, padded)) in enumerate(
        zip(sched.steps, prepared_steps(trainer, sched, epoch))
    ):
        budgets.add(budget.as_tuple())
        comm = trainer.comm_bytes(batch)
        pw = trainer.padded_work(budget)
        micro = trainer.accumulate
        if micro == 1:
            stats, seconds, cpu, compiled = run_step(trainer, placed, budget)
        else:  # micro-steps i, i + 1, ... of one update (memory_plan.py)
            last = i % micro == micro - 1 or i == sched.num_steps - 1
            stats, seconds, cpu, compiled = memory_plan.run_micro_step(
                trainer, placed, budget, i % micro == 0, last
            )
        predicted = trainer.step_seconds(budget, bool(alone[i]))
        acc.update(predicted=predicted, real=sum(loads), padded=padded)
        if not compiled:  # the cost model's prediction against steps that compiled nothing
            acc.update(steps_timed=seconds, steps_predicted=predicted)
            trainer.step_log.append((pw, seconds, bool(alone[i])))
        acc.update({f"comm_{k}": v for k, v in comm.items()})
        finite = True
        if stats is not None:
            check_finite(trainer, stats, step, epoch, i)
            finite = bool(stats["finite"])  # if not, the step left params and optimiser state alone
            acc.update(
                skipped=not finite,
                loss=stats["loss"] * stats["weight"] if finite else 0.0,
                weight=stats["weight"] if finite else 0.0,
            )
        trainer.last_steps.append(
            {
                "epoch": epoch,
                "step": i,
                "seconds": seconds,
                "cpu_seconds": cpu,
                "compiled": compiled,
                "predicted_seconds": predicted,
                "budget": list(budget.as_tuple()),
                "device_loads": loads,
                "padding_efficiency": sum(loads) / padded,
                "imbalance": max(loads) / max(np.mean(loads), 1e-12) - 1.0,
                "comm_bytes": comm["total"],
                "loss": stats["loss"] if stats is not None else None,  # micro-steps: the update's
                "finite": finite,
            }
        )
        if progress:
            progress(i + 1, sched.num_steps)
    seconds = time.perf_counter() - start
    # CPU seconds of this epoch's training in all processes (every thread of each)
    cpu_seconds = parallel.sum_over_processes(time.process_time() - start_cpu)
    return epoch_row(trainer, acc, sched, seconds, cpu_seconds, len(budgets))


def check_finite(trainer: Trainer, stats: dict, step: list, epoch: int, i: int) -> None:
    if not stats["finite"] and trainer.config.train.on_nonfinite == "stop":
        split_ids = trainer.windows.splits["train"]
        wins = sorted(int(split_ids[k]) for ids in step for k in ids)
        raise NonFiniteStep(
            f"non-finite loss or gradient (loss {stats['loss']}, gradient norm {stats['grad_norm']}) "
            f"at epoch {epoch} step {i} (windows {', '.join(map(str, wins))})"
        )


def epoch_row(
    trainer: Trainer, acc: collections.Counter, sched, seconds: float, cpu: float, budgets: int
) -> dict:
    sched_stats = summarize(trainer.train_costs, sched, trainer.weights)
    comm = {k: float(acc[f"comm_{k}"]) for k in ("gradients", "states", "features", "total")}
    return {
        "loss": acc["loss"] / acc["weight"] if acc["weight"] else float("nan"),
        "skipped_steps": int(acc["skipped"]),
        "epoch_seconds": seconds,
        "epoch_cpu_seconds": cpu,
        "predicted_epoch_seconds": float(acc["predicted"]),
        # the steps that compiled nothing: their seconds, and the cost model's prediction of them
        "step_seconds": float(acc["steps_timed"]),
        "predicted_step_seconds": float(acc["steps_predicted"]),
        "padding_efficiency": acc["real"] / acc["padded"] if acc["padded"] else 1.0,
        "schedule_padding_efficiency": sched_stats["padding_efficiency"],
        "imbalance": sched_stats["imbalance"],
        "scheduler_seconds": sched.seconds,
        "schedule_fallback": sched.fallback,
        "steps": sched.num_steps,
        "budgets": budgets,
        **{f"comm_bytes_{k}" if k != "total" else "comm_bytes": v for k, v in comm.items()},
        **trainer.strategy.epoch_metrics(trainer),
    }
