"""Profiling: time real SPMD train steps over a spread of packed sizes and fit the cost model.

``python -m dygnex_jax profile --config X [--out DIR] [--steps N] [--design D]`` times N train steps,
each budget run once to compile it and then timed in ``repeats`` rounds of every step (median), and fits ``seconds ≈ coef ·
features(padded budget)`` by non-negative least squares (``schedule/cost.py``). Which budgets
(``--design``): ``bands`` — steps of 1, 2, ... windows per device drawn from bands of similar training
windows, small to large, each on its own bucket: nodes, edges and pairs rise together (correlation
~0.98), so the fit cannot tell a node's price from a pair's; ``designed`` — budgets whose nodes, edges
and pairs are drawn apart (a Latin hypercube over the log of each one's range, the least correlated of
several draws), each filled with as many real training windows as it holds (a step's time depends on
its budget, not its fill, to ~8 %: ``tools/bench_fill.py``); ``mixed`` — the two alternately;
``random`` — steps of random training windows at several windows per device, each on its exact need, as
training draws its steps (measured: ``designed`` separates the prices but predicts training steps
worse, and ``random`` predicts them no better than ``bands``; README, The cost model against the steps,
and Simulated vs measured). The mean absolute % error is measured on held-out steps. The model is
saved as JSON (``schedule.cost_model=PATH`` uses it) and, unless ``--no-cache``, added to this
machine's cost-model cache (``cost_cache.py``), which training uses by default
(``schedule.cost_model: auto``): the scheduler's alpha/beta/gamma become seconds per node, edge and
pair, and the compile price uses the measured compilation seconds. Re-fitted during training with
``schedule.reschedule_every``.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jax
import numpy as np

from . import cost_cache, distributed, parallel
from .config import Config
from .errors import UserError
from .files import atomic_write_text, json_text
from .graphs import Budget
from .padding import aligned, bucketed, edge_need, layout_view
from .schedule.cost import CostModel, fit, held_out_errors, mean_span, window_features
from .train import Trainer

DESIGNS = cost_cache.PROFILE_DESIGNS


def random_step(trainer: Trainer, rng: np.random.Generator, batch_size: int) -> list[list[int]]:
    """``batch_size`` distinct random training windows (all of them if fewer), split over the devices in
    ``np.array_split``'s contiguous parts: a step as a random batch of training would draw it."""
    n = len(trainer.train_costs)
    ids = rng.choice(n, size=min(batch_size, n), replace=False)
    return split_over(ids, trainer.n_devices)


def split_over(ids: np.ndarray, devices: int) -> list[list[int]]:
    """Windows ``ids`` over ``devices`` in ``np.array_split``'s contiguous parts, as a training step holds them."""
    return [list(map(int, part)) for part in np.array_split(ids, devices)]


def beside_step(trainer: Trainer, seed: int) -> tuple[list, Budget]:
    """A full training step (B random training windows over the P devices) and its bucket: what the
    profile packs beside each timed run, as training's prefetch packs the next full step whatever the
    size of the step running (packing the timed step itself, a designed budget's few windows or a small
    band step, made the beside-packing lighter than training's)."""
    step = random_step(trainer, np.random.default_rng(seed + 7), trainer.config.train.batch_size)
    p = trainer.config.parallel
    return step, bucketed(trainer.packer.step_need(step, "train", 0)[1], p.bucket_ratio, p.min_bucket)


def next_packer(trainer: Trainer, next_step: tuple[list, Budget]):
    """A function that packs and places ``next_step`` (``beside_step``'s) on the devices, as training's
    prefetch does with the next step: what a timed run has beside it."""

    def pack_next():
        return parallel.shard_batch(
            trainer.mesh, trainer.pack(next_step[0], "train", epoch=0, budget=next_step[1])[0]
        )

    return pack_next


class TimedStep:
    """One profiled step: its packed batch and padded work, and its times (``run`` adds one)."""

    def __init__(self, trainer: Trainer, step: list):
        self.batch, _, budget = trainer.pack(step, "train", epoch=0)
        self.work = trainer.padded_work(budget)
        self.first = 0.0
        self.beside: list[float] = []
        self.alone: list[float] = []

    def run(self, trainer: Trainer, pool, pack_next) -> float:
        """One train step on this batch -> its seconds; ``pool``: the next step is packed beside it."""
        sharded = parallel.shard_batch(trainer.mesh, self.batch)
        packing = pool.submit(pack_next) if pool is not None else None
        start = time.perf_counter()
        trainer.params, trainer.opt_state, stats = trainer.train_step(
            trainer.params, trainer.opt_state, sharded
        )
        float(stats["loss"])
        seconds = time.perf_counter() - start
        if packing is not None:
            packing.result()
        return seconds


def profile_steps(trainer: Trainer, n_steps: int, seed: int) -> list[list]:
    """A spread of steps: device p gets m windows, windows drawn over the size range. m cycles through
    up to 6 counts spread geometrically over 1 .. slots (1, 2, 3, 4 at 4 slots; 1, 2, 4, 8, 16, 32 at
    32), so that the run's own step — ceil(B / P) windows a device — is among the sizes timed, not
    extrapolated to (at B = 32 on one device the counts 1 .. 12 of 12 steps stopped at 38 % of it)."""
    rng = np.random.default_rng(seed)
    ids = np.arange(len(trainer.train_costs))
    order = ids[np.argsort(trainer.train_costs @ np.array([1.0, 1.0, 1.0]))]
    counts = _window_counts(trainer)
    steps = []
    for i in range(n_steps):
        m = int(counts[i % len(counts)])
        # a band of similar windows, moving from the lightest to the heaviest
        lo = int(len(order) * (i / max(n_steps - 1, 1)) * 0.9)
        band = order[lo : lo + max(m * trainer.n_devices * 2, 1)]
        pick = rng.choice(band, size=min(len(band), m * trainer.n_devices), replace=False)
        steps.append(split_over(pick, trainer.n_devices))
    return steps


def _window_counts(trainer: Trainer) -> np.ndarray:
    """Windows a device in a profile step: up to 6 counts spread geometrically over 1 .. ceil(B / P)
    (at least 1 .. 4)."""
    slots = max(4, -(-trainer.config.train.batch_size // trainer.n_devices))
    return np.unique(np.round(np.geomspace(1, slots, min(slots, 6))).astype(int))


def random_steps(trainer: Trainer, n_steps: int, seed: int) -> list[tuple[list, Budget]]:
    """``n_steps`` (step, budget) pairs drawn as training draws its steps: m random training windows a
    device (``random_step``), m cycling through ``_window_counts`` — the run's own ceil(B / P) among
    them — each on its exact need aligned to 8 (so no two draws collapse into one bucket). Unlike a
    band, a random step mixes light and heavy windows, and its budget takes each column's largest device
    apart: the ratios of nodes to edges to pairs of the budgets training runs."""
    rng = np.random.default_rng(seed)
    counts = _window_counts(trainer)
    steps = []
    for i in range(n_steps):
        step = random_step(trainer, rng, int(counts[i % len(counts)]) * trainer.n_devices)
        steps.append((step, aligned(trainer.packer.step_need(step, "train", 0)[1], 8)))
    return steps


def _design_points(lo: np.ndarray, hi: np.ndarray, n: int, seed: int) -> np.ndarray:
    """[n, 3] points of a Latin hypercube over [lo, hi] in the log of each column: of 16 draws, the
    one whose columns (the values, as the fit sees them) correlate least (the largest |r| smallest)."""
    from scipy.stats import qmc

    best, best_r = None, np.inf
    span = np.log(np.maximum(hi, lo + 1.0)) - np.log(lo)
    for k in range(16):
        unit = qmc.LatinHypercube(d=3, seed=seed + k).random(n)
        pts = np.exp(np.log(lo) + unit * span)
        r = np.abs(np.corrcoef(pts.T)[np.triu_indices(3, 1)]).max() if n > 2 else 0.0
        if r < best_r:
            best, best_r = pts, r
    return best


def _fill(target: np.ndarray, costs: np.ndarray, profile: np.ndarray, order, slots: int, layout: str) -> list:
    """A device's windows: those of ``order`` that, added in turn, keep its need (nodes + 1, edges as
    the layout counts them, pairs) within ``target``, at most ``slots``; the first window of ``order``
    when none fits."""
    chosen, nodes, pairs, edges = [], 1.0, 0.0, np.zeros(profile.shape[1])
    for i in order:
        e = edges + profile[i]
        need = np.array([nodes + costs[i, 0], edge_need(e, layout), pairs + costs[i, 2]])
        if np.all(need <= target):
            chosen.append(int(i))
            nodes, edges, pairs = need[0], e, need[2]
            if len(chosen) == slots:
                break
    return chosen or [int(order[0])]


def designed_steps(trainer: Trainer, n_steps: int, seed: int) -> list[tuple[list, Budget]]:
    """``n_steps`` (step, budget) pairs: budgets whose nodes, edges and pairs vary apart over the range
    a step of this run can need — from the lightest window's (per column) to the sum of the ``slots``
    heaviest windows' (slots = ceil(B / P)), log-spaced (``_design_points``) — each filled with the
    training windows it holds (every device its own random order, ``_fill``) and raised, where a
    device's first window alone is larger, to hold the step (aligned to 8, as planned budgets are)."""
    rng = np.random.default_rng(seed)
    p = trainer.n_devices
    costs = trainer.train_costs
    profile = layout_view(costs, trainer.windows.edge_profile("train"), trainer.layout)[1]
    slots = -(-min(trainer.config.train.batch_size, len(costs)) // p)
    top = np.sort(costs, axis=0)[::-1][:slots].sum(axis=0)
    lo = np.maximum(costs.min(axis=0), 1.0) + [1.0, 0.0, 0.0]
    hi = np.maximum(top + [1.0, 0.0, 0.0], lo)
    steps = []
    for point in _design_points(lo, hi, n_steps, seed):
        step = [
            _fill(point, costs, profile, rng.permutation(len(costs)), slots, trainer.layout) for _ in range(p)
        ]
        need = trainer.packer.step_need(step, "train", 0)[1]
        want = Budget(*np.ceil(point).astype(int).tolist(), slots)
        steps.append((step, aligned(Budget(*np.maximum(want.as_tuple(), need.as_tuple()).tolist()), 8)))
    return steps


def design(trainer: Trainer, kind: str, n_steps: int, seed: int) -> list[tuple[list, Budget | None]]:
    """The (step, budget) pairs a profile of ``kind`` (``DESIGNS``) times: a band step's budget is its
    bucket (None), a designed or random step's its own."""
    if kind not in DESIGNS:
        raise UserError(f"profile --design {kind!r}: use one of {', '.join(DESIGNS)}")
    if kind == "bands":
        return [(s, None) for s in profile_steps(trainer, n_steps, seed)]
    if kind == "designed":
        return designed_steps(trainer, n_steps, seed)
    if kind == "random":
        return random_steps(trainer, n_steps, seed)
    bands = [(s, None) for s in profile_steps(trainer, (n_steps + 1) // 2, seed)]
    made = designed_steps(trainer, n_steps // 2, seed)
    return [bands[i // 2] if i % 2 == 0 else made[i // 2] for i in range(n_steps)]


def time_steps(trainer: Trainer, steps: list, repeats: int, log) -> dict:
    """Every distinct budget among ``steps`` ((step, budget) pairs; a budget of None: the step's
    bucket): {"rows": padded work, "seconds": median seconds (beside the next step's packing),
    "seconds_alone": median seconds alone, "compiles": compile seconds}.

    Each step's first run compiles it (its time less the step's median is the compilation's); then
    ``repeats`` rounds each run every step once beside the packing of a full training step
    (``beside_step``, as training's prefetch packs the next step: on a 2-core machine that contention
    is part of what a training step costs — Bitcoin-Alpha at 1 device, 0.252 s steps without
    prefetch, 0.321 s with it) and once alone (an epoch's last step has no next step to pack; without
    prefetch every run is alone and the two medians are one). Rounds, not one step's repeats back to
    back: this machine's speed wanders by ±10 % over ~10 s (``tools/bench_drift.py``: one step's median
    of 8 runs, every ~5 s for 2 minutes, 134–224 ms), so a step timed in one burst carries that moment's
    speed into the fit as if it were the step's own; in rounds every step's median spans the profile."""
    beside = trainer.config.parallel.prefetch > 0
    pack_next = next_packer(trainer, beside_step(trainer, trainer.config.train.seed))
    timed: list[TimedStep] = []
    seen: set[tuple] = set()
    with ThreadPoolExecutor(1, thread_name_prefix="dygnex-profile-pack") as pool:
        pool = pool if beside else None
        for i, (step, budget) in enumerate(steps):
            trainer.planned = None if budget is None else [budget]
            t = TimedStep(trainer, step)
            if tuple(t.work) in seen:  # two steps on one budget: the first stands for it
                continue
            seen.add(tuple(t.work))
            t.first = t.run(trainer, pool, pack_next)
            timed.append(t)
            log(f"profile step {i + 1}/{len(steps)}: compiled and ran in {t.first:.2f} s")
        for _ in range(repeats):
            for t in timed:
                t.beside.append(t.run(trainer, pool, pack_next))
                if beside:
                    t.alone.append(t.run(trainer, None, pack_next))
    got = {"rows": [], "seconds": [], "seconds_alone": [], "compiles": []}
    for t in timed:
        sec = statistics.median(t.beside)
        alone = statistics.median(t.alone) if t.alone else sec
        comp = max(t.first - sec, 0.0)
        log(
            f"profile budget: nodes {t.work[0]:.0f} edges {t.work[1]:.0f} pairs {t.work[2]:.0f}  "
            f"{sec * 1e3:.1f} ms, alone {alone * 1e3:.1f} ms (compiled in {comp:.2f} s; {repeats} rounds)"
        )
        for key, value in zip(got, (t.work, sec, alone, comp)):
            got[key].append(value)
    return got


def add_to_cache(trainer: Trainer, summary: dict, compiles: list, log) -> dict:
    """Add the profile's steps to this machine's entry of the run's signature (``cost_cache.record``);
    the pooled model, its path and each dataset's left-out error, for ``profile.json``."""
    config, devices = trainer.config, trainer.host_devices
    sig = cost_cache.signature(
        config,
        num_features=trainer.windows.num_features,
        layout=trainer.layout,
        devices=devices,
        processes=trainer.host_processes,
        platform=jax.default_backend(),
    )
    pooled, path, transfer = cost_cache.record(
        sig,
        trainer.graph.name,
        summary["rows"],
        summary["seconds"],
        summary["window"],
        compiles,
        summary["load"],
        log,
        seconds_alone=summary["seconds_alone"],
        span=summary["span"],
    )
    others = ", ".join(f"{k} {100 * v:.0f}%" for k, v in sorted(transfer.items()))
    log(
        f"this machine's {config.model.name} model at {devices} device(s): fitted on {', '.join(pooled.datasets)}"
        + (f"; each dataset's median error when left out of the fit: {others}" if transfer else "")
        + f" -> {path} (schedule.cost_model: auto uses it)"
    )
    return {"cache": str(path), "pooled": pooled.to_dict(), "transfer": transfer}


def _load_flag(load: list) -> str:
    """The profile's flag when the machine was busy before it began ("" when not)."""
    if load[0] <= cost_cache.LOAD_FLAG:
        return ""
    return (
        f"; the load average was {load[0]:.1f} before it began (> {cost_cache.LOAD_FLAG:g}): other work shared "
        "the CPU and was timed too; profile again when the machine is quieter"
    )


def _fitted(trainer: Trainer, features: np.ndarray, timed: dict, load: list, span: float) -> CostModel:
    """The profile's model: the fit on the steps beside the packing, ``coef_alone`` on the same alone;
    ``span``: the run's window span (``mean_span``), as the features were built with."""
    w, rows = trainer.windows.window, np.array(timed["rows"])
    source = f"profile:{trainer.config.name}:{trainer.n_devices}dev"
    model = fit(features, np.array(timed["seconds"]), window=w, source=source, span=span)
    return dataclasses.replace(
        model,
        coef_alone=fit(features, np.array(timed["seconds_alone"]), window=w).coef,
        devices=trainer.host_devices,
        compile_seconds=float(statistics.median(timed["compiles"])),
        load_average=load,
        datasets=[trainer.graph.name],
        profiled_max=[float(v) for v in rows.max(axis=0)],
    )


def _refuse_busy(load: float, max_load: float) -> None:
    if max_load > 0 and load > max_load:
        raise UserError(
            f"load average {load:.1f} is above --max-load {max_load:g}: other work shares the CPU and "
            "would be timed too; profile when the machine is quieter (or raise --max-load)"
        )


def run_profile(
    config: Config,
    out_dir: str | Path,
    n_steps: int = 24,
    repeats: int = 3,
    log=print,
    cache: bool = True,
    max_load: float = 0.0,
    design_kind: str = "bands",
) -> CostModel:
    """Time ``n_steps`` steps, fit the model on them (``OUT/cost_model.json``, ``OUT/profile.json``) and,
    with ``cache``, add them to this machine's entry for the run's signature (``cost_cache.record``: the
    model ``schedule.cost_model: auto`` then uses, pooled over the datasets profiled). The load average
    is recorded before and after (the "after" includes the profile's own threads: XLA's thread pools
    count in the load of a small machine); a profile that began above ``cost_cache.LOAD_FLAG`` is
    flagged, one that would begin above ``max_load`` (> 0) refused."""
    # a multi-process profile (the run's processes each time their part of every step, all-reduce
    # included): every process runs the steps, process 0 alone writes and prints; all refuse together
    main = distributed.is_main_process()
    log = log if main else (lambda *_: None)
    if cache and main:
        cost_cache.check_writable()
    # no JAX call before the Trainer: it sets the host allocator (host_memory) before XLA's threads
    # exist; a backend started first (jax.process_count()) left the steps 1.5x slower
    load_before = os.getloadavg()[0]
    if distributed.process_count() == 1:
        _refuse_busy(load_before, max_load)
    # every step on its own bucket (re-using a larger compiled budget would blur the spread of sizes);
    # compilations timed cold (a persistent cache's hit, ~1 s against ~4 s at 8 fake devices, would price
    # later runs' budgets too low); the analytic weights (the steps must not depend on an earlier profile)
    exact = dataclasses.replace(
        config.parallel, budgets="buckets", reuse_slack=0.0, compile_steps=0.0, compile_cache="off"
    )
    config = dataclasses.replace(
        config, parallel=exact, schedule=dataclasses.replace(config.schedule, cost_model="analytic")
    )
    trainer = Trainer(config)
    if distributed.process_count() > 1:  # all processes refuse together: the busiest one's load
        _refuse_busy(load_before := parallel.max_over_processes(load_before), max_load)
    out = Path(out_dir)
    timed = time_steps(trainer, design(trainer, design_kind, n_steps, config.train.seed), repeats, log)
    rows, seconds, compiles = timed["rows"], timed["seconds"], timed["compiles"]
    load = [load_before, parallel.max_over_processes(os.getloadavg()[0])]  # the trainer started JAX
    if len(rows) < 5:
        raise UserError(
            f"only {len(rows)} distinct step sizes to fit the cost model on: use more --steps, a smaller "
            "parallel.bucket_ratio, or a dataset with more windows"
        )
    w, span = trainer.windows.window, mean_span(trainer.train_costs)
    features = window_features(np.array(rows), w, span)
    model = _fitted(trainer, features, timed, load, span)
    held = held_out_errors(features, np.array(seconds))
    if not main:
        return model
    out.mkdir(parents=True, exist_ok=True)
    model.save(out / "cost_model.json")
    summary = {
        "rows": [list(map(float, r)) for r in rows],
        "seconds": seconds,
        "seconds_alone": timed["seconds_alone"],
        "compile_seconds": compiles,
        "devices": trainer.n_devices,
        "window": w,
        "span": span,
        "dataset": trainer.graph.name,
        "design": design_kind,
        "mape": model.mape,
        "held_out_median_error": float(np.median(held)),
        "load": load,
        "alone_ratio_median": float(np.median(np.array(timed["seconds_alone"]) / np.array(seconds))),
    }
    log(
        f"fitted {len(rows)} distinct step budgets: held-out error median {100 * summary['held_out_median_error']:.1f}% "
        f"(mean {100 * model.mape:.1f}%), a compilation {model.compile_seconds:.2f} s, a step alone (as an epoch's "
        f"last runs) {summary['alone_ratio_median']:.2f}x its time beside the next step's packing -> {out / 'cost_model.json'}{_load_flag(load)}"
    )
    if cache:
        summary.update(add_to_cache(trainer, summary, compiles, log))
    atomic_write_text(out / "profile.json", json_text(summary, indent=2) + "\n")
    return model
