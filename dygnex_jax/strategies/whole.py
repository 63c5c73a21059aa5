"""Whole windows per device (psg, dygnex_g, dygnex_l): the scheduler gives every device its own windows
of a step; each device packs them into one padded batch under the step's budget (the same on every
device: the run's planned budget holding the step, or its shape bucket) and runs the model on them
alone. The only collectives are the gradient all-reduces."""

from __future__ import annotations

from ..graphs import real_work
from ..tasks import make_loss_fn
from .base import Strategy


class WholeWindows(Strategy):
    def step_loss(self, model, loss, n_devices):
        return make_loss_fn(model, loss)

    def pack_train(self, trainer, step, epoch):
        batch, work, budget = trainer.packer.pack(step, "train", epoch)
        loads = [float(real_work(d, trainer.layout) @ trainer.weights) for d in work]
        return batch, budget, loads, trainer.n_devices * trainer.padded_cost(budget)

    def comm_key(self, batch):
        # parameter-sized all-reduces only: the same bytes whatever the batch shape
        return ("whole windows",)
