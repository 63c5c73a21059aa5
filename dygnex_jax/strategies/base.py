"""What every strategy provides (see the package doc); the defaults are those of whole windows."""

from __future__ import annotations

from . import scheduler_of


class Strategy:
    """One way of running a training step; built once per run by ``strategies.create``.

    ``pack_train(trainer, step, epoch)`` returns (host batch [L, ...] of this process's L devices,
    budget, real loads [P] of the devices, padded load of the whole step), loads weighted by the
    trainer's cost weights; the step's padding efficiency is sum(loads) / padded load.
    """

    whole_windows = True  # each device trains on whole windows (budgets can be planned per run)

    def __init__(self, method: str):
        self.method = method
        self.scheduler = scheduler_of(method)

    def check(self, config, n_devices: int) -> None:
        """Raise a ``UserError`` for a config this strategy cannot run (beyond config.validate)."""

    def step_loss(self, model, loss, n_devices: int):
        """The per-device ``(params, local batch) -> (loss sum, weight sum)`` of a step."""
        raise NotImplementedError

    def pack_train(self, trainer, step: list, epoch: int):
        raise NotImplementedError

    def comm_key(self, batch: dict) -> tuple:
        """Steps with equal keys move the same collective bytes (traced once per key)."""
        return tuple((k, v.shape) for k, v in sorted(batch.items()))

    def epoch_metrics(self, trainer) -> dict:
        """Figures this strategy adds to every epoch's row of metrics.jsonl."""
        return {}
