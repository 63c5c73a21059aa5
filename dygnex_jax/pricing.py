"""The trainer's cost model: which one a run uses, and how much slower than it the devices run here.

``resolve``: ``schedule.cost_model`` through ``cost_cache.resolve`` (with ``auto``, this machine's
profile of the run's signature: model, task, input width, layout, the devices and processes on this
host, the JAX platform); every process must end on the same model (their schedules must agree), else
all take the analytic one. ``slowdown``: fake CPU devices share the host's cores, so a device runs
``shared_cores`` times slower than a model measured for a device of its own predicts; a model profiled
with D devices sharing the cores already holds D's contention, so only the ratio to the run's counts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

import jax

from . import cost_cache, parallel
from . import plan as planning
from .schedule.cost import CostModel, default_cost_model, mean_span


def resolve(trainer, kept: str | None = None) -> tuple[CostModel, str]:
    """(the run's cost model, a line on it for the log, "" when there is nothing to say). ``kept``: the
    model file a resumed run started with (``train.COST_MODEL_FILE``), used instead of ``auto``."""
    window = trainer.windows.window
    span = mean_span(trainer.train_costs)
    if kept is not None:
        model = dataclasses.replace(CostModel.load(kept), window=window, span=span)
        return model, f"cost model: the run's own, {kept}"
    model, note = cost_cache.resolve(
        trainer.config,
        window=window,
        num_features=trainer.windows.num_features,
        layout=trainer.layout,
        devices=trainer.host_devices,
        processes=trainer.host_processes,
        platform=jax.default_backend(),
        scale=cost_cache.step_scale(
            trainer.train_costs[:, 2], trainer.config.train.batch_size, trainer.n_devices
        ),
        span=span,
    )
    digest = hashlib.sha256(json.dumps(model.to_dict(), sort_keys=True).encode()).hexdigest()
    if not parallel.same_on_all_processes(digest):
        return default_cost_model(
            window, trainer.layout
        ), "cost model: analytic (the processes found different profiled models)"
    return model, note


def slowdown(model: CostModel, host_devices: int) -> float:
    """How many times slower a device runs than ``model`` predicts (``plan.model_slowdown`` with the
    devices of this host: its processes share its cores, as the devices of one process do), averaged
    over the processes so that every process prices steps alike (their schedules must agree)."""
    local = planning.model_slowdown(model, host_devices, planning.available_cores(), jax.default_backend())
    return parallel.sum_over_processes(local) / jax.process_count()
