"""What a training step costs in seconds: the run's cost model and settings under it, the devices'
slowdown against it, predicted step seconds of a budget, and a compilation's price (numpy only, no JAX;
``plan.py`` re-exports these for its callers)."""

from __future__ import annotations

import dataclasses

import numpy as np

from . import cost_cache
from .config import Config
from .padding import Budget, aligned, padded_cost, padded_work
from .schedule.cost import CostModel


def load_cost_model(
    config: Config,
    window: int,
    *,
    num_features: int,
    layout: str,
    devices: int,
    processes: int = 1,
    platform: str = "cpu",
    scale: float = 0.0,
    span: float = 0.0,
) -> CostModel:
    """The run's cost model (``cost_cache.resolve``): a file, the analytic default, or with ``auto``
    this machine's profile of the run's signature (fitted around ``scale`` pairs per step; ``span``:
    the mean node count of the run's windows)."""
    return cost_cache.resolve(
        config,
        window=window,
        num_features=num_features,
        layout=layout,
        devices=devices,
        processes=processes,
        platform=platform,
        scale=scale,
        span=span,
    )[0]


def run_settings(schedule_cfg, model: CostModel, window: int):
    """The scheduler's settings under ``model``: alpha, beta, gamma = its seconds per node, edge and
    pair, unless it is the analytic default or charges nothing for one of them: then the config's
    weights stay. A least-squares fit over steps whose nodes, edges and pairs grow together often puts
    one column's time into the others (a zero coefficient); a scheduler told an edge is free stops
    balancing edges, and the step pays for it (measured: a pooled profile with a zero pair
    coefficient doubled Bitcoin-OTC's pair budget at 8 devices, 0.45 -> 0.8 s steps)."""
    if model.source == "analytic":
        return schedule_cfg
    alpha, beta, gamma = (float(x) for x in model.weights(window))
    if min(alpha, beta, gamma) <= 0:
        return schedule_cfg
    return dataclasses.replace(schedule_cfg, alpha=alpha, beta=beta, gamma=gamma)


# compile_steps auto without a way to predict step seconds: one step (the former default)
AUTO_FALLBACK_STEPS = 1.0
# parallel.compile_seconds auto without a profiled measurement: one compilation of a training step,
# lowering included, on the 2-core CPU (EvolveGCN-O 1.4 s, T-GCN 1.8 s, GCRN-GRU 2.1 s)
DEFAULT_COMPILE_SECONDS = 1.5


# The share of a training-step compilation that is tracing and lowering (Python, one budget after
# another); the rest, XLA's, runs on parallel.compile_workers threads at once. Measured by
# tools/bench_compile.py: EvolveGCN-O at 8 fake devices on the 2-core CPU, 14 %.
TRACE_SHARE = 0.15


def shared_cores(devices: int, cores: int | None, backend: str = "cpu") -> float:
    """How many times slower each device runs than the cost model predicts for a device that has the
    host to itself: ``devices`` fake CPU devices sharing the host's ``cores`` (known: > 0) each run P times
    slower, because one XLA CPU device already spreads its operations over the cores (its intra-op
    thread pool); 1 for accelerators. Measured on the 2-core machine (EvolveGCN-O, B = 32, the steps of
    docs/bench_cost_model_2026-12-06.json against the analytic model and a 1-device profile): the steps
    at 2 / 4 / 8 devices took 1.5-2.1x / 2.7-4.9x / 6.1-12.3x the 1-device prediction of their padded
    work; the former P / C (1 / 2 / 4) was half that. On a host with many more cores than one device keeps
    busy, P overstates the slowdown (not measured)."""
    if backend != "cpu" or not cores:
        return 1.0
    return float(max(1, devices))


def model_slowdown(model: CostModel, devices: int, cores: int, backend: str) -> float:
    """How many times slower than ``model`` predicts a device runs when ``devices`` devices share this
    machine's ``cores``: ``shared_cores`` for the analytic model (a device of its own); for one profiled
    with D devices sharing them, the ratio to D's (1 at the device count it was profiled at; a re-fit
    on the run's own steps: 1)."""
    if model.source == "analytic":
        return shared_cores(devices, cores, backend)
    if not model.devices:
        return 1.0
    return shared_cores(devices, cores, backend) / shared_cores(model.devices, cores, backend)


@dataclasses.dataclass(frozen=True)
class StepSeconds:
    """``Budget -> predicted seconds`` of a training step on that budget: the cost model's prediction
    of the padded work one device runs, x ``slowdown`` (``shared_cores``); ``compile_seconds``: what a
    compilation takes by the model's own measurement (None: not measured)."""

    model: CostModel
    window: int
    layout: str
    slowdown: float = 1.0
    compile_workers: int = 1  # XLA compilations at once (parallel.compile_workers)

    def __call__(self, budget: Budget, alone: bool = False) -> float:
        """Predicted seconds of a step on ``budget`` (``alone``: no next step packed beside it)."""
        work = padded_work(budget, self.window, self.layout)[None]
        return self.slowdown * float(self.model.predict_costs(work, self.window, alone)[0])

    @property
    def compile_seconds(self) -> float | None:
        return self.model.compile_seconds


class LivePricer:
    """A ``StepSeconds`` read at call time from ``source()``: a re-fitted cost model changes it."""

    def __init__(self, source):
        self.source = source

    def __call__(self, budget: Budget, alone: bool = False) -> float:
        return self.source()(budget, alone)

    @property
    def compile_seconds(self) -> float | None:
        return self.source().compile_seconds

    @property
    def compile_workers(self) -> int:
        return self.source().compile_workers


def step_seconds_fn(
    model: CostModel, window: int, layout: str, slowdown: float = 1.0, workers: int = 1
) -> StepSeconds:
    return StepSeconds(model, window, layout, slowdown, workers)


def compile_parallelism(step_seconds=None) -> tuple[int, float]:
    """(workers, traced share) compilations are priced with (``padding.compile_rounds``): the pricer's
    ``compile_workers``, one at a time without a pricer; ``TRACE_SHARE`` of each runs one at a time."""
    workers = int(getattr(step_seconds, "compile_workers", 1) or 1)
    return workers, TRACE_SHARE if workers > 1 else 0.0


def compile_seconds(config: Config, step_seconds=None) -> float:
    """Seconds of one training-step compilation: ``parallel.compile_seconds``, or with 0 (auto) the
    profiled cost model's measurement, else ``DEFAULT_COMPILE_SECONDS``."""
    if config.parallel.compile_seconds > 0:
        return config.parallel.compile_seconds
    measured = getattr(step_seconds, "compile_seconds", None)
    return measured if measured else DEFAULT_COMPILE_SECONDS


def compile_steps(config: Config, mean_step_seconds: float | None, step_seconds=None) -> float:
    """A compilation's price in average steps: ``parallel.compile_steps``, or with -1 (auto)
    ``compile_seconds`` / the predicted seconds of an average step."""
    steps = config.parallel.compile_steps
    if steps >= 0:
        return steps
    if not mean_step_seconds or mean_step_seconds <= 0:
        return AUTO_FALLBACK_STEPS
    return compile_seconds(config, step_seconds) / mean_step_seconds


def compile_price(
    needs: list[Budget], config: Config, window: int, layout: str, weights, step_seconds=None
) -> float:
    """A compilation's price in padded-work units: ``compile_steps`` average steps (``step_seconds``:
    ``Budget -> predicted seconds``, for the auto price; the average over ``needs``, aligned)."""
    return compile_prices(needs, config, window, layout, weights, step_seconds)[0]


def compile_prices(
    needs: list[Budget], config: Config, window: int, layout: str, weights, step_seconds=None
) -> tuple[float, float | None]:
    """``compile_price`` and the same ``compile_steps`` average steps in predicted seconds (None without
    ``step_seconds``)."""
    a = config.parallel.budget_align
    needs = [aligned(b, a) for b in needs]
    mean = float(np.mean([padded_cost(b, window, layout, weights) for b in needs]))
    secs = float(np.mean([step_seconds(b) for b in needs])) if step_seconds else None
    steps = compile_steps(config, secs, step_seconds)
    return steps * mean, None if secs is None else steps * secs
