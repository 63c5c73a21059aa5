"""The simulator's windows: ``Instance`` (cost vectors and edge profiles), loaded from a config's
dataset (``instance_from_config``, ``cached_instance``) or scaled up by resampling (``scale_up``).
Re-exported from ``simulate``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from . import plan as planning
from .config import Config
from .errors import UserError
from .files import atomic_write


@dataclasses.dataclass
class Instance:
    """Windows to schedule.

    Fields:
      name: where they come from.
      costs: [K, 3] (nodes, edges summed over the window, training pairs).
      profile: [K, W] edges at every time offset.
      num_features: the model's input features (data.max_degree, or the uncapped degree width); 0 when
        unknown (an instance saved before it was recorded).
    """

    name: str
    costs: np.ndarray
    profile: np.ndarray
    num_features: int = 0

    def features(self, config: Config) -> int:
        """The model's input width for this instance under ``config``."""
        if self.num_features:
            return self.num_features
        if config.data.features != "degree":
            return 1
        if config.data.max_degree == 0:
            raise UserError(
                f"the instance {self.name!r} does not record its uncapped degree width "
                "(data.max_degree=0): delete the --instance file to rebuild it, or set data.max_degree"
            )
        return config.data.max_degree

    @property
    def window(self) -> int:
        return self.profile.shape[1]

    def schedule_costs(self, time_resolved: bool = True) -> np.ndarray:
        """[K, W + 2] (nodes, edges at every offset, pairs), or ``costs`` when not ``time_resolved``."""
        if not time_resolved:
            return self.costs
        return np.column_stack([self.costs[:, :1], self.profile, self.costs[:, 2:]])

    def scheduler_costs(self, config: Config, layout: str) -> np.ndarray:
        """What the trainer's scheduler balances in ``layout`` (``plan.scheduler_costs`` itself)."""
        return planning.scheduler_costs(_TrainWindows(self), config, layout)


class _TrainWindows:
    """The part of a ``WindowSet`` that ``plan.scheduler_costs`` reads, over an ``Instance`` (its windows
    are a training split whose pair column already counts the negatives)."""

    def __init__(self, inst: Instance):
        self._inst = inst

    def costs(self, split: str, neg_mult: int | None = None) -> np.ndarray:
        return self._inst.costs

    def schedule_costs(self, split: str, neg_mult: int | None, time_resolved: bool) -> np.ndarray:
        return self._inst.schedule_costs(time_resolved)

    def edge_profile(self, split: str) -> np.ndarray:
        return self._inst.profile

    @property
    def window(self) -> int:
        return self._inst.window


def instance_from_config(config: Config) -> Instance:
    """The training windows of a config's dataset (loads the data; no JAX)."""
    from .data import datasets
    from .data.node_windows import task_windows

    ws = task_windows(datasets.load_dataset(config.data), config.data)
    costs = ws.costs("train", config.data.neg_mult)
    return Instance(ws.graph.name, costs, ws.edge_profile("train"), ws.num_features)


def cached_instance(config: Config, path: str | Path | None) -> Instance:
    """``instance_from_config``, saved to / loaded from ``path`` (.npz) when given: loading a large
    dataset (AS-733's 733 snapshots) takes longer than simulating it. Written whole, at ``path`` exactly
    (numpy would add ``.npz`` to a name without it, and the next run would not find it)."""
    if path and Path(path).is_dir():
        raise UserError(f"--instance {str(path)!r} is a folder: give a file name (e.g. as733.npz)")
    if path and Path(path).is_file():
        try:
            with np.load(path, allow_pickle=False) as z:
                features = int(z["num_features"]) if "num_features" in z.files else 0
                return Instance(str(z["name"]), z["costs"], z["profile"], features)
        except (OSError, KeyError, ValueError) as e:
            raise UserError(
                f"--instance {str(path)!r} is not a saved instance ({type(e).__name__}): delete it"
            ) from None
    inst = instance_from_config(config)
    if path:
        arrays = {
            "name": inst.name,
            "costs": inst.costs,
            "profile": inst.profile,
            "num_features": inst.num_features,
        }
        atomic_write(path, lambda fh: np.savez(fh, **arrays))
    return inst


def scale_up(inst: Instance, n_windows: int, seed: int = 0) -> Instance:
    """``n_windows`` windows drawn with replacement from ``inst``'s (cost, edge profile) rows: the same
    size distribution (and the same joint distribution of nodes, edges per offset and pairs) at any K."""
    rng = np.random.default_rng([seed, 6])
    rows = rng.integers(0, len(inst.costs), size=n_windows)
    name, costs, profile = f"{inst.name} x{n_windows}", inst.costs[rows].copy(), inst.profile[rows].copy()
    return dataclasses.replace(inst, name=name, costs=costs, profile=profile)
