"""A run's training steps fitted to the memory budget, before epoch 1 (memory.py has the model and the
rules; this module measures them on the run's compiled steps).

``Trainer.compile_planned`` compiles the planned budgets, then calls ``fit_to_memory``: the bytes one
device holds while running each compiled step are XLA's own buffer assignment (``parallel.step_bytes``),
so the check costs no compilation a run would not do anyway. When the largest planned step needs more
than the device budget, ``StepMemory`` is fitted to a few compiled probe budgets around it (the bytes
per padded node, edge, pair and window slot of this model, widths, layout and W), the fewest
micro-steps per update whose planned budgets it predicts to fit are chosen, and those budgets are
compiled and measured in turn (a prediction that was short tries the next count). A run resumed from a
checkpoint keeps the count it was planned with.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor

import jax
import numpy as np

from . import memory, memstats, parallel
from .graphs import DeviceWork
from .memory import StepMemory, gib
from .padding import Budget, cheapest_holding

MARGIN = 0.95  # a micro-step count is tried when its predicted bytes are within this share of the budget


def _empty_batch(trainer, budget: Budget) -> dict:
    """A host batch of ``budget`` holding no work (this process's devices): the shapes a step compiles."""
    return trainer.packer.pack_budget([DeviceWork([], [], []) for _ in trainer.local_rows], budget)


def _host_batch_bytes(trainer, budget: Budget) -> float:
    """Bytes of one host batch of ``budget`` (this process's devices)."""
    return float(sum(v.nbytes for v in _empty_batch(trainer, budget).values()))


def set_accumulate(trainer, k: int) -> None:
    """Run every update as ``k`` micro-steps: the plan, schedules and compiled budgets start over."""
    trainer.accumulate = k
    trainer.packer.config = trainer.step_config
    trainer.planned, trainer.compose = None, ""
    trainer.schedules.clear()
    trainer.plan_needs = {}
    trainer._executables.clear()
    trainer.step_bytes.clear()
    trainer.packer.forget()


def compile_budget(trainer, budget: Budget):
    """The train step (``accumulate`` > 1: its micro-step) compiled for ``budget``; its bytes per device
    recorded in ``trainer.step_bytes``."""
    return record_bytes(trainer, budget, lower_budget(trainer, budget).compile())


def lower_budget(trainer, budget: Budget):
    """``compile_budget`` up to XLA: the lowered step (``record_bytes`` of its ``.compile()`` finishes it)."""
    t = trainer
    host = _empty_batch(t, budget)
    if t.accumulate > 1:
        sums = parallel.zero_sums(t.mesh, t.params)
        return parallel.lower_step(t.train_step.accumulate, t.params, sums, t.mesh, host)
    return parallel.lower_step(t.train_step, t.params, t.opt_state, t.mesh, host)


def compiled(lowered: list, workers: int):
    """The executables of ``lowered`` steps, in order: compiled here one after another (1 worker), else
    by XLA on up to ``workers`` threads at once (its compilation runs outside Python's lock)."""
    if workers <= 1 or len(lowered) <= 1:
        yield from (low.compile() for low in lowered)
        return
    with ThreadPoolExecutor(min(workers, len(lowered)), "dygnex-compile") as pool:
        yield from pool.map(lambda low: low.compile(), lowered)


def record_bytes(trainer, budget: Budget, executable):
    """``executable`` (``budget``'s compiled step), its bytes per device recorded in ``trainer.step_bytes``."""
    trainer.step_bytes[budget] = parallel.step_bytes(executable) or 0.0
    return executable


def packing_bytes(trainer) -> float:
    """Peak bytes the host allocates packing the training step of most pairs and nodes (its sampled
    pairs, window arrays and the batch; measured with tracemalloc, which numpy reports to), per byte
    of the host batch it makes. Packing is a pure function of the step and epoch: measuring it
    changes nothing the run trains."""
    import tracemalloc

    epoch, sched = next(iter(sorted(trainer.schedules.items())), (1, None))
    sched = sched if sched is not None else trainer.epoch_schedule(epoch)
    costs = trainer.train_costs[:, [0, -1]].sum(axis=1)  # nodes + pairs per window
    step = max(
        sched.steps, key=lambda st: max((costs[np.asarray(ids, np.int64)].sum() for ids in st), default=0)
    )
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    batch = trainer.pack_train(step, epoch)[0]
    peak = tracemalloc.get_traced_memory()[1] - base
    if started:
        tracemalloc.stop()
    return float(peak) / max(sum(v.nbytes for v in batch.values()), 1)


def _steps_peak(trainer, cpu: int, pack_ratio: float) -> float:
    """The most host memory the training steps hold at once beyond what is resident before epoch 1:
    over consecutive planned steps i, i + 1 of the planned epochs, step i's buffers on every CPU device
    and its host batch while the packing of step i + 1 runs (``parallel.prefetch``). Without the
    plan's needs (a resumed run), the largest step with the largest packing."""
    c = trainer.config
    batch_bytes: dict[Budget, float] = {}

    def batch(b: Budget) -> float:
        if b not in batch_bytes:
            batch_bytes[b] = _host_batch_bytes(trainer, b)
        return batch_bytes[b]

    largest = _largest(trainer)[0]
    w, layout, weights = trainer.windows.window, trainer.layout, trainer.weights
    # every planned epoch's steps in order (the next epoch's first step is packed ahead too)
    seq = [
        cheapest_holding(n, trainer.planned, w, layout, weights) or largest
        for _, needs in sorted(trainer.plan_needs.items())
        for n in needs
    ] or [largest, largest]
    ahead = max(c.parallel.prefetch, 1)
    return max(
        cpu * trainer.step_bytes.get(b, 0.0) + batch(b) + ahead * pack_ratio * batch(nxt)
        for b, nxt in zip(seq, seq[1:] + seq[-1:])
    )


def _largest(trainer) -> tuple[Budget, float]:
    budget = max(trainer.planned, key=lambda b: trainer.step_bytes.get(b, 0.0))
    return budget, trainer.step_bytes.get(budget, 0.0)


def probe_model(trainer, largest: Budget, log) -> StepMemory:
    """``StepMemory`` fitted to the compiled probes around ``largest`` (whole steps, ``accumulate`` 1)."""
    budgets = memory.probe_budgets(largest)
    measured = []
    for b in budgets:
        if b not in trainer.step_bytes:
            compile_budget(trainer, b)
        measured.append(trainer.step_bytes[b])
    model = StepMemory.fit(budgets, measured)
    if log:
        log(f"memory model (fitted on {len(budgets)} compiled steps): {model.describe()}")
    return model


def fit_to_memory(trainer, log=None) -> dict:
    """Check the planned steps against the device budget, split them into micro-steps if they need
    more (``set_accumulate``), and record the run's memory figures in ``trainer.memory``
    (summary.json). Raises ``memory.too_large`` when one window per device cannot fit."""
    if trainer.memory or not trainer.planned:
        return trainer.memory
    c = trainer.config
    cpu = trainer.cpu_rows
    limit, source = memory.device_budget(c.parallel.memory_gb, memstats.device_limit(), max(cpu, 1))
    limit = parallel.min_over_processes(limit)  # every process plans alike
    largest, need = _largest(trainer)
    whole = need
    model = None
    if not trainer.memory_fixed and need > limit and math.isfinite(limit):
        model = probe_model(trainer, largest, log)
        counts = memory.accumulation_counts(c.train.batch_size, trainer.n_devices)
        for k in counts:
            set_accumulate(trainer, k)
            trainer.plan_budgets()
            need = max(model.predict(b) for b in trainer.planned)
            if need > MARGIN * limit and k != counts[-1]:
                continue  # the smallest micro-step is measured even when predicted not to fit
            trainer.compile_todo(log)
            largest, need = _largest(trainer)
            if need <= limit:
                break
        else:
            raise memory.too_large(need, limit, source, trainer.windows.window)
    trainer.memory_fixed = True
    rss = memstats.resident_bytes()
    pack_ratio = packing_bytes(trainer)
    peak = rss + getattr(trainer.windows, "cache_growth", float)() + _steps_peak(trainer, cpu, pack_ratio)
    trainer.memory = {
        "device_budget_bytes": limit if math.isfinite(limit) else None,
        "device_budget_source": source,
        "step_bytes": need,
        "whole_step_bytes": whole,
        "accumulate": trainer.accumulate,
        "estimated_peak_rss_bytes": peak if cpu else None,
        "packing_per_batch_byte": pack_ratio,
        "model": model.to_dict() if model is not None else None,
    }
    if log:
        split = (
            f"; a step of {c.train.batch_size} windows needs {gib(whole)}: every update runs as "
            f"{trainer.accumulate} micro-steps of {c.train.batch_size // trainer.accumulate} windows "
            "(gradients summed, one update)"
            if trainer.accumulate > 1
            else ""
        )
        resident = f"; estimated peak resident memory {gib(peak)}" if cpu else ""
        log(
            f"memory: the largest training step holds {gib(need)} per device (compiled), device budget "
            f"{gib(limit)} ({source}){split}{resident}"
        )
    return trainer.memory


def accumulated_gradient(trainer, micro_steps: list, epoch: int = 1):
    """(loss sum, weight sum, gradient sums) of ``micro_steps`` (steps of window positions per device)
    accumulated as the trainer runs them: for tests and the exactness check."""
    sums = parallel.zero_sums(trainer.mesh, trainer.params)
    for step in micro_steps:
        batch = trainer.packer.pack(step, "train", epoch)[0]
        sums = trainer.train_step.accumulate(trainer.params, sums, parallel.shard_batch(trainer.mesh, batch))
    return jax.tree.map(np.asarray, parallel.to_host(sums))


def run_micro_step(trainer, placed, budget: Budget, first: bool, last: bool):
    """``epoch_loop.run_step`` of one micro-step (``accumulate`` > 1): its gradient sums are added to the
    update's (``first``: from zero); the ``last`` one applies the update and returns its stats (else
    None). Returns (stats, seconds, CPU seconds, compiled now)."""
    t = trainer
    traces = len(t.train_step.traces)
    step_fn = t._executables.get(budget, t.train_step.accumulate)
    start, cpu = time.perf_counter(), time.process_time()
    if first:
        t.sums = parallel.zero_sums(t.mesh, t.params)
    t.sums = jax.block_until_ready(step_fn(t.params, t.sums, placed))
    stats = None
    if last:
        t.params, t.opt_state, stats = t.train_step.apply(t.params, t.opt_state, t.sums)
        stats, t.sums = {k: float(v) for k, v in stats.items()}, None
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return stats, seconds, cpu, t.account_step(traces, seconds)
