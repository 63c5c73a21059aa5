"""PyTorch Geometric Temporal's signal objects -> our data, and training on them (the ``torch`` extra).

``from_signal(signal)`` takes what a PyG-T loader's ``get_dataset()`` returns — a
``StaticGraphTemporalSignal`` (one ``edge_index`` / ``edge_weight``), a ``DynamicGraphTemporalSignal``
(``edge_indices`` / ``edge_weights`` per snapshot) or a ``DynamicGraphStaticSignal`` (one ``feature``) —
and returns a ``DynamicGraph`` (data/graph.py) with its edges, weights, ``signal`` and ``features``.
A PyG-T snapshot i is a sample: graph i, ``x_i`` [N, F] and ``y_i`` [N]. Two readings:

* **lags** (``lags="auto"`` finds them; PyG-T's own loaders for chickenpox, pedalme, wikimath,
  windmill, england_covid build them so): ``x_i`` is the L target values before ``y_i``
  (``x_{i+1} = [x_i[:, 1:], y_i]``). Then the series [L + n, N] is recovered (``x_0``, then every
  ``y_i``), the graph of step i is sample i's (PyG-T pairs a sample with its first lag day; the last L
  steps of a per-snapshot graph are empty, no window reads them) and ``info["lags"] = L``: train with
  ``data.lags=L`` (the same samples as PyG-T with ``data.window=1``).
* **given features** (anything else, or ``lags=0``): step i carries graph i, ``features[i] = x_i`` and
  ``signal[i] = y_i``; train with ``data.features=given data.lags=0`` (``info["lags"] = 0``).

``train(signal, config, out_dir)`` writes the converted data into ``out_dir`` as a pygt_json file
(``pygt_data.json.gz``, data/pygt_json.py), points ``config.data`` at it (``config_for``) and runs
``train.train_and_evaluate``: the same code path as the CLI, and the run's ``config.yaml`` names a file
the CLI can read (``train --resume OUT`` works). Bad input is a one-line ``UserError`` (pygt_json's
checks); a folder holding another run's data file is refused.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np

from ..config import Config, validate
from ..data import pygt_json
from ..data.graph import DynamicGraph
from ..errors import UserError

DATA_FILE = "pygt_data.json.gz"
WHERE = "PyG-T signal"


def _numpy(x) -> np.ndarray | None:
    if x is None:
        return None
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def _stack(arrays: list, what: str) -> np.ndarray | None:
    """T arrays [N] / [N, 1] (targets) or [N, F] (features) -> [T, N] / [T, N, F] float64."""
    if all(a is None for a in arrays):
        return None
    if any(a is None for a in arrays):
        raise UserError(f"{WHERE}: some {what} are None and others not: give every snapshot its {what}")
    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    arrays = [a.reshape(len(a), -1) if a.ndim else a for a in arrays]
    counts = [len(a) for a in arrays]
    bad = next((t for t, c in enumerate(counts) if c != counts[0]), None)
    if bad is not None:
        raise UserError(
            f"{WHERE}: the {what} have {counts[bad]} nodes at snapshot {bad} but {counts[0]} at snapshot 0: "
            "every snapshot needs the same N nodes"
        )
    if len({a.shape for a in arrays}) > 1 or arrays[0].ndim != 2:
        raise UserError(
            f"{WHERE}: the {what} must be [N] or [N, F] arrays of one shape, got {arrays[0].shape}"
        )
    stacked = np.stack(arrays)
    return stacked[:, :, 0] if what == "targets" and stacked.shape[2] == 1 else stacked


def _parts(signal):
    """(kind, [pairs [E, 2]], [weights], features [T, N, F] or None, targets [T, N])."""
    kind = type(signal).__name__
    if hasattr(signal, "edge_indices"):
        pairs = [_numpy(e) for e in signal.edge_indices]
        raw = signal.edge_weights if signal.edge_weights is not None else [None] * len(pairs)
        weights = [_numpy(w) for w in raw]
    elif hasattr(signal, "edge_index"):
        pairs, weights = [_numpy(signal.edge_index)], [_numpy(signal.edge_weight)]
    else:
        raise UserError(
            f"from_signal takes a PyG-Temporal StaticGraphTemporalSignal, DynamicGraphTemporalSignal or "
            f"DynamicGraphStaticSignal, not {kind}"
        )
    # PyG's edge_index is [2, E]: as [E, 2] pairs (also when E = 2)
    pairs = [None if p is None else (p.T if p.ndim == 2 and p.shape[0] == 2 else p) for p in pairs]
    targets = _stack([_numpy(y) for y in signal.targets], "targets")
    if targets is None or targets.ndim != 2:
        raise UserError(f"{WHERE}: the targets must be one number per node and snapshot ([N] arrays)")
    raw = signal.features if hasattr(signal, "features") else [signal.feature] * len(targets)
    features = _stack([_numpy(x) for x in raw], "features")
    return kind, pairs, weights, features, targets


def _lag_width(features: np.ndarray | None, targets: np.ndarray) -> int:
    """L when every ``x_{i+1}`` is ``[x_i[:, 1:], y_i]`` (features are the L values before the target),
    else 0."""
    if features is None or len(targets) < 2:
        return 0
    shifted = np.array_equal(features[1:, :, :-1], features[:-1, :, 1:])
    return features.shape[2] if shifted and np.array_equal(features[1:, :, -1], targets[:-1]) else 0


def from_signal(signal, name: str = "pygt", lags: int | str = "auto") -> DynamicGraph:
    """A PyG-T signal object -> ``DynamicGraph`` (see module docstring). ``lags``: "auto" (detect lag
    features), an int L (they must be the L lags) or 0 (keep the features as given)."""
    kind, pairs, weights, features, targets = _parts(signal)
    width = _lag_width(features, targets) if lags != 0 else 0
    if lags not in ("auto", 0) and width != lags:
        raise UserError(
            f"{WHERE}: the features are not the {lags} target values before each target (found "
            f"{width or 'no'} lags): use lags='auto' or lags=0 (the features as given)"
        )
    info = {"source": kind, "lags": width, "features": 0 if features is None else features.shape[2]}
    if width:
        series = np.concatenate([features[0].T, targets])  # [L + n, N]
        if len(pairs) > 1:  # steps n .. n + L - 1 are only targets: no graph
            pairs = pairs + [np.zeros((0, 2))] * width
            weights = weights + [None] * width
        info["features"] = 0
        return pygt_json.assemble(WHERE, name, pairs, weights, series, None, info)
    return pygt_json.assemble(WHERE, name, pairs, weights, targets, features, info)


def config_for(graph: DynamicGraph, path: str | Path, config: Config | None = None) -> Config:
    """``config`` (default: the embedded default) with ``data`` reading the pygt_json file ``path`` of
    ``graph`` as node regression: ``data.lags`` = the detected lags, else ``data.features=given`` with
    ``data.lags=0``."""
    config = config or Config()
    lags = int(graph.info.get("lags", 0))
    given = {"features": "given", "lags": 0} if not lags else {"lags": lags}
    if lags and config.data.features == "given":
        given["features"] = "degree"
    data = dataclasses.replace(
        config.data,
        dataset="pygt_json",
        path=str(path),
        task="node_reg",
        target_key="y",
        feature_key="X" if not lags else "",
        **given,
    )
    return dataclasses.replace(config, data=data)


def train(signal, config: Config | None = None, out_dir: str | Path = "runs/pygt", **kw) -> dict:
    """Train on a PyG-T signal object: its data is written to ``out_dir/pygt_data.json.gz`` and
    ``config_for`` points the config at it; ``kw`` goes to ``from_signal`` (``name``, ``lags``) and to
    ``train_and_evaluate`` (``stream``). Returns the run's summary. On a ``UserError`` the data file (and
    ``out_dir`` when this call made it) is removed again."""
    from ..train import train_and_evaluate  # JAX only when training

    graph = from_signal(signal, **{k: kw.pop(k) for k in ("name", "lags") if k in kw})
    out = Path(out_dir)
    made = not out.exists()
    path = out.absolute() / DATA_FILE  # config.yaml names it from any working directory
    config = config_for(graph, path, config)
    validate(config)
    payload = pygt_json.dumps(graph, gz=True)
    wrote = not path.exists()
    if not wrote and path.read_bytes() != payload:
        raise UserError(
            f"{str(out)!r} holds another {DATA_FILE} (another run's data): choose another out_dir"
        )
    if wrote:
        out.mkdir(parents=True, exist_ok=True)
        path.write_bytes(payload)
    try:
        return train_and_evaluate(config, out, **kw)
    except UserError:
        if made:
            shutil.rmtree(out, ignore_errors=True)
        elif wrote:
            path.unlink(missing_ok=True)
        raise
