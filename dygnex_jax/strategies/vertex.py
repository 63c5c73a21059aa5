"""Vertex partition: a step's windows packed as one graph per time offset, its nodes split into P
ranges (``parallel.vertex_balance``); every device runs the model on its own nodes, gathering the
others' rows each layer (``partition.vertex_step``, ``parallel.vertex_loss``)."""

from __future__ import annotations

import numpy as np

from .. import parallel, partition
from .base import Strategy


class VertexPartition(Strategy):
    whole_windows = False

    def step_loss(self, model, loss, n_devices):
        return parallel.vertex_loss(model, loss)

    def pack_train(self, trainer, step, epoch):
        c = trainer.config
        ids = trainer.windows.splits["train"][np.concatenate(step).astype(np.int64)]
        work = trainer.packer.device_work(ids, "train", epoch)
        batch, budget, real = partition.vertex_step(
            work,
            trainer.n_devices,
            c.parallel,
            trainer.windows.window,
            c.train.batch_size,
            c.train.class_weights,
        )
        loads = [float(r @ trainer.weights) for r in real]
        return trainer.local_batch(batch), budget, loads, trainer.n_devices * trainer.padded_cost(budget)
