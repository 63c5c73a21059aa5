"""Snapshot partition (ESDG-style pipeline over time): a step's windows in M micro-batches; every device
holds a contiguous range of the W time offsets of each and passes its recurrent state to the next
device (``partition.pipeline_batch``, ``parallel.pipeline_loss``). Its padded load counts the M + P - 1
ticks of T offsets every device runs (bubble and padded offsets included)."""

from __future__ import annotations

import numpy as np

from .. import parallel, partition
from ..errors import UserError
from ..graphs import real_work
from .base import Strategy


class SnapshotPipeline(Strategy):
    whole_windows = False

    def micro_batches(self, config, n_devices: int) -> int:
        return config.parallel.micro_batches or n_devices

    def check(self, config, n_devices):
        m = self.micro_batches(config, n_devices)
        if m > config.train.batch_size:
            raise UserError(
                f"parallel.micro_batches={m} exceeds train.batch_size={config.train.batch_size}: "
                "use fewer micro-batches"
            )

    def step_loss(self, model, loss, n_devices):
        return parallel.pipeline_loss(model, loss, n_devices)

    def pack_train(self, trainer, step, epoch):
        p, w = trainer.n_devices, trainer.windows.window
        m = self.micro_batches(trainer.config, p)
        groups = [list(g) for g in np.array_split(np.concatenate(step), m)]
        micro, work, budget = trainer.packer.pack(groups, "train", epoch, rows=list(range(m)), groups=m)
        batch = partition.pipeline_batch(micro, w, p)  # every process builds all P devices' rows
        t = batch["feat"].shape[2]
        padded = p * (m + p - 1) * trainer.padded_cost(budget) * t / w
        real = [float(real_work(d, trainer.layout) @ trainer.weights) for d in work]
        loads = [sum(real) / p] * p  # every device works on every window
        return trainer.local_batch(batch), budget, loads, padded

    def epoch_metrics(self, trainer):
        m = self.micro_batches(trainer.config, trainer.n_devices)
        return {"bubble_fraction": partition.bubble_fraction(m, trainer.n_devices, trainer.windows.window)}
