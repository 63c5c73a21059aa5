"""PSG: whole windows per device, an even split by *count* (what window-level DDP does).

Also the step composition of the communication-bound baselines ``snapshot`` and ``vertex``
(``strategies.STRATEGIES``: their scheduler is psg): the same steps, so the same mini-batches as psg,
each split across the devices by their strategy.
"""

from __future__ import annotations

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
