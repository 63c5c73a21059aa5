"""Measured epoch times of the schedulers (part 1 of ``tools/bench_schedulers.py``): real SPMD training.

Measurement protocol. The three methods' ``Trainer``s are built first and then run interleaved epoch
by epoch (psg, dygnex_g, dygnex_l for epoch 1, then for epoch 2, ...), so that load from other users of
a shared machine hits all methods alike. An epoch is run with ``train_epoch(e)``; if it compiled a new
shape bucket (the train step's trace count grew) it was a warm-up and is run again with the same epoch
number — the same schedule (cached by ``ScheduleTap``, so even dygnex_l under a time limit gives the
same one), the same negatives, the same buckets, no compilation — and that second run is timed
(``--warmup always`` warms up before every timed run). The figure is the median over ``--epochs``
epochs of the timed runs; speed-up = psg's median / the method's median (the rows also hold every
run, the minimum — robust when other processes only ever slow a run down — and the speed-up on minima
and the median of per-epoch ratios). Where B = P, dygnex_l's schedule is dygnex_g's (one window per
device leaves nothing to solve), so the difference between their times there is the measurement noise
of the machine. A persistent compilation cache shared by the three trainers (a temporary folder) lets
a bucket compiled for one method load for the next. Epochs larger than a dataset's window cap
(``Suite.measure_windows``, or ``--measure-windows``) run a stratified sample of their steps
(``sample_steps``): the steps are ordered by predicted padded cost, cut into n strata of equal count,
one random step per stratum is run, and the epoch time is the stratum-size weighted sum of those
steps' measured times (under SPMD a step's time is set by its padded shapes, which is what the strata
group). The expensive AS-733 cases also train a smaller model (``Suite.measure_overrides``); the
schedule figures do not depend on the model.

JAX is imported by the functions that train, never at import time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import statistics
import tempfile
import time

import numpy as np

from ..schedule.cost import default_cost_model
from .schedulers import Suite, point_config, resolve_batch


class ScheduleTap:
    """The trainers' ``scheduler`` while measuring (wraps ``dygnex_jax.schedule.schedule``).

    Caches every (costs, P, B, settings, seed, epoch) schedule, so a warm-up and its timed rerun use
    the same one (dygnex_l under a time limit need not be reproducible) and the scheduler runs once.
    With ``choose`` set (``schedule -> (step ids, stratum sizes)`` or ``(None, None)``), hands
    ``train_epoch`` only the chosen steps. Keeps what it handed out last (``full``, ``subset``,
    ``weights``) and when it returned (the epoch's clock in ``train_epoch`` starts right after), for
    per-step times. It sees exactly the arguments ``train_epoch`` passes, whatever they are.
    """

    def __init__(self, fn):
        self.fn = fn
        self.cache: dict = {}
        self.choose = None
        self.full = None
        self.subset: list[int] | None = None
        self.weights: np.ndarray | None = None
        self.returned_at = 0.0

    def __call__(self, costs, n_devices, batch_size, settings, *, seed, epoch=0):
        costs = np.ascontiguousarray(costs, dtype=np.float64)
        key = (
            hashlib.sha1(costs.tobytes()).hexdigest(),
            costs.shape,
            n_devices,
            batch_size,
            repr(settings),
            seed,
            epoch,
        )
        if key not in self.cache:
            self.cache[key] = self.fn(costs, n_devices, batch_size, settings, seed=seed, epoch=epoch)
        sched = self.full = self.cache[key]
        self.subset, self.weights = self.choose(sched) if self.choose is not None else (None, None)
        if self.subset is not None:
            sched = dataclasses.replace(sched, steps=[sched.steps[i] for i in self.subset])
        self.returned_at = time.perf_counter()
        return sched


def sample_steps(trainer, sched, max_windows: int, rng: np.random.Generator):
    """Stratified sample of an epoch's steps: (step ids in run order, stratum sizes), or (None, None)
    when the whole epoch fits in ``max_windows`` windows."""
    from .. import plan

    n_steps = sched.num_steps
    n = max(1, max_windows // sched.batch_size) if max_windows > 0 else n_steps
    if n >= n_steps:
        return None, None
    c = trainer.config
    slots = plan.window_slots(c.train.batch_size, trainer.n_devices)
    needs = plan.step_needs(
        trainer.train_costs, trainer.windows.edge_profile("train"), sched, trainer.layout, slots
    )
    w, weights = trainer.windows.window, trainer.weights
    budgets = np.array(
        [
            trainer.padded_work(plan.paid_budget(n, trainer.planned or [], c, w, trainer.layout, weights))
            for n in needs
        ]
    )
    model = getattr(trainer, "cost_model", None) or default_cost_model(trainer.windows.window, trainer.layout)
    predicted = model.predict_costs(budgets, trainer.windows.window)
    strata = np.array_split(np.argsort(predicted, kind="stable"), n)
    picks = sorted((int(rng.choice(s)), len(s)) for s in strata)
    return [i for i, _ in picks], np.array([w for _, w in picks], dtype=np.float64)


def run_epoch(trainer, epoch: int, tap: ScheduleTap, choose):
    """One ``train_epoch`` (of the chosen steps, if any): (result, per-step seconds, compilations).
    The tap's ``full``, ``subset`` and ``weights`` then describe what ran."""
    stamps: list[float] = []
    tap.choose = choose
    before = len(trainer.train_step.traces)
    try:
        result = trainer.train_epoch(epoch, progress=lambda done, total: stamps.append(time.perf_counter()))
    finally:
        tap.choose = None
    steps = np.diff([tap.returned_at, *stamps])
    return result, steps, len(trainer.train_step.traces) - before


def timed_epoch(tr, e: int, what: str, choose, args, clock, tap: ScheduleTap, state: dict) -> None:
    """Epoch ``e`` of one method, warmed up when it compiled (or always, ``--warmup always``), timed;
    its seconds and measured padding efficiency appended to the method's ``state``."""
    print(f"[{clock():7.1f} s] {what}: run", flush=True)
    result, steps, compiled = run_epoch(tr, e, tap, choose)
    if compiled or args.warmup == "always":
        state["warmups"] += 1
        print(
            f"[{clock():7.1f} s] {what}: warm-up {result['epoch_seconds']:.2f} s, "
            f"{compiled} new bucket(s) compiled; timing a second run",
            flush=True,
        )
        result, steps, compiled = run_epoch(tr, e, tap, choose)
        if compiled:  # cannot happen: the same steps have the same shapes
            state["dirty"] += 1
    n_steps = tap.full.num_steps
    if tap.subset is None:
        seconds, note = result["epoch_seconds"], f"{n_steps}/{n_steps} steps"
        state["sampled"].append(None)
    else:
        seconds = float(tap.weights @ steps)
        note = f"estimated from {len(tap.subset)}/{n_steps} steps"
        state["sampled"].append([len(tap.subset), n_steps])
    state["seconds"].append(seconds)
    state["pad"].append(result["padding_efficiency"])
    print(
        f"[{clock():7.1f} s] {what}: {seconds:.2f} s ({note}), "
        f"measured pad-eff {result['padding_efficiency']:.3f}",
        flush=True,
    )


def case_rows(suite: Suite, p: int, b: int, token: str, args, trainers: dict, state: dict) -> list[dict]:
    """One row per method of a measured case, with its speed-ups over psg (when psg was measured)."""
    model = trainers[args.methods[0]].config.model
    rows = []
    psg = state.get("psg")
    for m, s in state.items():
        med = statistics.median(s["seconds"])
        row = {
            "dataset": suite.name,
            "label": suite.label,
            "devices": p,
            "batch_size": b,
            "batch_token": token,
            "method": m,
            "epochs": args.epochs,
            "epoch_seconds": med,
            "epoch_seconds_all": s["seconds"],
            "epoch_seconds_min": min(s["seconds"]),
            "measured_padding_efficiency": statistics.median(s["pad"]),
            "sampled_steps": s["sampled"],
            "warmups": s["warmups"],
            "compilations": len(trainers[m].train_step.traces),
            "compiled_in_timed_run": s["dirty"],
            "model": {"name": model.name, "hidden": model.hidden, "head_hidden": model.head_hidden},
            "measure_overrides": list(suite.measure_overrides),
            "speedup_vs_psg": None,
            "speedup_vs_psg_paired": None,
            "speedup_vs_psg_min": None,
        }
        if psg is not None:
            row["speedup_vs_psg"] = statistics.median(psg["seconds"]) / med
            row["speedup_vs_psg_min"] = min(psg["seconds"]) / min(s["seconds"])
            row["speedup_vs_psg_paired"] = statistics.median(
                [a / x for a, x in zip(psg["seconds"], s["seconds"])]
            )
        rows.append(row)
    return rows


def measure_case(suite: Suite, graph, p: int, token: str, args, clock, tap) -> list[dict]:
    """Measured epoch time of every method on one (dataset, P, B), methods interleaved by epoch."""
    from .. import parallel
    from ..train import Trainer

    b = resolve_batch(token, p)
    cap = args.measure_windows if args.measure_windows >= 0 else suite.measure_windows
    mesh = parallel.make_mesh(p)
    trainers = {}
    for m in args.methods:
        cfg = point_config(suite, m, p, b, args, measure=True)
        trainers[m] = Trainer(cfg, graph=graph, mesh=mesh, scheduler=tap)  # the tap composes its epochs
    model = trainers[args.methods[0]].config.model
    state = {m: {"seconds": [], "pad": [], "warmups": 0, "dirty": 0, "sampled": []} for m in args.methods}
    tag = f"{suite.label} P={p} B={b}"
    print(
        f"[{clock():7.1f} s] {tag}: measuring {', '.join(args.methods)} over {args.epochs} epoch(s), "
        f"model {model.name} hidden {model.hidden} head {model.head_hidden}"
        + (f", at most {cap} windows per epoch" if cap else ""),
        flush=True,
    )
    for e in range(1, args.epochs + 1):
        for m, tr in trainers.items():
            # the same seed for a warm-up and its rerun: the same steps (the schedule is cached)
            seed = [args.seed, e, b]

            def choose(sched, tr=tr, seed=seed):
                return sample_steps(tr, sched, cap, np.random.default_rng(seed))

            what = f"{tag} epoch {e}/{args.epochs} {m}"
            timed_epoch(tr, e, what, choose, args, clock, tap, state[m])
    rows = case_rows(suite, p, b, token, args, trainers, state)
    del trainers
    gc.collect()
    return rows


def measure_cases(cases: list[tuple], args, clock, meta: dict, on_rows) -> None:
    """Measure every (suite, graph, P, B token) case in turn; ``on_rows(rows)`` after each. Records the
    JAX version and device count in ``meta``. Every trainer composes its epochs through one
    ``ScheduleTap`` (its ``scheduler``); unless ``args.no_compile_cache``, under a temporary persistent
    compilation cache."""
    import jax

    from ..schedule import schedule

    meta["jax"] = jax.__version__
    meta["jax_devices"] = len(jax.devices())
    print(f"\nmeasuring {len(cases)} case(s) on {len(jax.devices())} {jax.devices()[0].platform} devices")
    with contextlib.ExitStack() as stack:
        if not args.no_compile_cache:
            cache_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench_xla_cache_"))
            jax.config.update("jax_compilation_cache_dir", cache_dir)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        tap = ScheduleTap(schedule)
        for suite, graph, p, token in cases:
            on_rows(measure_case(suite, graph, p, token, args, clock, tap))
        if not args.no_compile_cache:
            jax.config.update("jax_compilation_cache_dir", None)
