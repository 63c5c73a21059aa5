"""Ways of running a training step on the mesh ("strategies"), one module each, one table line each.

A strategy owns what differs between ``schedule.method`` values once the scheduler has composed the
steps: the per-device loss of its step (``step_loss``; the shard_map around it is parallel.py's), how a
step's windows become the host batch of every device (``pack_train``), the real and padded loads that
give its padding efficiency, and its extra per-epoch figures. ``STRATEGIES`` maps each method name to
(module, class, the scheduler method that composes its steps): the whole-window methods schedule with
their own name; the partitioned baselines take psg's steps (B windows in arrival order) and split each
step across devices by time or by nodes.

This table is data (no JAX is imported until a strategy is built): the config validates
``schedule.method`` against ``METHODS`` and the schedule command / simulator read ``scheduler_of``.

Adding a strategy: a module here with a ``Strategy`` subclass, one line in ``STRATEGIES``.
"""

from __future__ import annotations

import dataclasses
import importlib

# method -> (module in this package, class, scheduler method composing its steps, packs whole windows)
STRATEGIES: dict[str, tuple[str, str, str, bool]] = {
    "psg": ("whole", "WholeWindows", "psg", True),
    "dygnex_g": ("whole", "WholeWindows", "dygnex_g", True),
    "dygnex_l": ("whole", "WholeWindows", "dygnex_l", True),
    "snapshot": ("snapshot", "SnapshotPipeline", "psg", False),
    "vertex": ("vertex", "VertexPartition", "psg", False),
}
METHODS = tuple(STRATEGIES)
WINDOW_METHODS = tuple(m for m, row in STRATEGIES.items() if row[3])


def scheduler_of(method: str) -> str:
    """The scheduler method that composes ``method``'s steps (itself for the whole-window methods)."""
    return STRATEGIES[method][2] if method in STRATEGIES else method


def scheduler_settings(settings):
    """``settings`` (the schedule section) with ``method`` replaced by the scheduler that composes its
    steps (``scheduler_of``); the same object when they agree."""
    scheduler = scheduler_of(settings.method)
    return settings if scheduler == settings.method else dataclasses.replace(settings, method=scheduler)


def create(method: str):
    """The strategy object of ``method`` (imports its module, and with it JAX)."""
    if method not in STRATEGIES:
        from ..errors import UserError

        raise UserError(f"unknown schedule.method {method!r}: choose one of {', '.join(METHODS)}")
    module, cls, _, _ = STRATEGIES[method]
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)(method)
