"""PSG: whole windows per device, an even split by *count* (what window-level DDP does).

Also the step composition of the communication-bound baselines ``snapshot`` and ``vertex``: the same
steps (so the same mini-batches as psg), run by the trainer with their partitioned step.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .base import Schedule, ScheduleSettings, register, step_batches


@register("psg")
def psg(
    costs: np.ndarray,
    n_devices: int,
    batch_size: int,
    settings: ScheduleSettings,
    rng: np.random.Generator,
) -> Schedule:
    """Steps in time order (or a per-epoch shuffle); each step's windows split into P equal chunks."""
    order = rng.permutation(len(costs)) if settings.shuffle else np.arange(len(costs))
    steps = [
        [np.asarray(chunk, dtype=np.int64) for chunk in np.array_split(batch, n_devices)]
        for batch in step_batches(order, batch_size)
    ]
    return Schedule("psg", steps, n_devices, batch_size)


@register("snapshot")
def snapshot(costs, n_devices, batch_size, settings, rng) -> Schedule:
    """Snapshot partition (ESDG): psg's steps; the trainer splits each step's windows into the
    micro-batches of its time pipeline (every device runs a time range of every window)."""
    return dataclasses.replace(psg(costs, n_devices, batch_size, settings, rng), method="snapshot")


@register("vertex")
def vertex(costs, n_devices, batch_size, settings, rng) -> Schedule:
    """Vertex partition: psg's steps; the trainer packs each step's windows as one graph and splits
    its nodes over the devices."""
    return dataclasses.replace(psg(costs, n_devices, batch_size, settings, rng), method="vertex")
