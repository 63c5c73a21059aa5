"""This machine's profiled cost models: profile once, reuse (``schedule.cost_model: auto``). No JAX.

``python -m dygnex_jax profile`` stores the steps it timed here (``record``), under the *signature* of
what makes a step cost what it costs on this machine (``signature``): the model section, the task, the
input width, the packed layout, the devices and processes sharing the machine, the JAX platform, the
CPU and the host allocator (``parallel.host_malloc``). The profiles of several datasets under one
signature are pooled: one model is fitted on all of their steps, and each dataset's error when its own
steps are left out of the fit is kept beside it
(``transfer``: what the model is worth on a dataset it has not seen). A run with
``schedule.cost_model: auto`` (the default) uses the entry of its signature (``resolve``); without one,
the analytic model, with a line saying how to profile.

Folder: ``$DYGNEX_COST_MODELS``, else ``$XDG_CACHE_HOME/dygnex_jax/cost_models``, else
``~/.cache/dygnex_jax/cost_models``. An entry is one JSON file, replaced atomically.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform as _platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from .errors import UserError
from .files import atomic_write_text
from .schedule.cost import CostModel, default_cost_model, fit, window_features

ENV = "DYGNEX_COST_MODELS"
FORMAT = "dygnex_cost_profiles"
VERSION = 1
SETTINGS = ("auto", "analytic")  # schedule.cost_model besides a file path ("" reads as analytic)
LOAD_FLAG = 2.0  # a profile begun above this 1-minute load average is flagged (others' work is timed too)
# what `profile --design` builds (profile.design); named here, in a module without JAX, for the tools' parsers
PROFILE_DESIGNS = ("bands", "designed", "mixed", "random")


def folder() -> Path:
    if os.environ.get(ENV):
        return Path(os.environ[ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(base).expanduser() / "dygnex_jax" / "cost_models"


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity where the OS tells it)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def machine() -> dict:
    """This machine as the cache tells machines apart: the CPU model and the cores this process has."""
    cpu = _platform.processor() or _platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": available_cores()}


# The version of the step's program: raised when a change to the models or the step moves their time
# per unit of work, so the profiles measured before it are not reused (2: degree one-hot inputs read as
# codes, a row gather instead of a matmul by one-hot rows; 3: the link head's output layer as
# matrix-vector products, EGCN-H's padding nodes without weights, the Chebyshev models' fused gates).
STEP_PROGRAM = 3


def signature(config, *, num_features: int, layout: str, devices: int, processes: int, platform: str) -> dict:
    """What a step's time depends on besides its padded sizes (those are the model's features)."""
    return {
        "model": dataclasses.asdict(config.model),
        "task": config.data.task,
        "features": int(num_features),
        "layout": layout,
        "devices": int(devices),
        "processes": int(processes),
        "platform": platform,
        "machine": machine(),
        # the host allocator moves CPU step times (0.7-1.3x): profiles under the other setting do not apply
        "host_malloc": config.parallel.host_malloc,
        "program": STEP_PROGRAM,
    }


def entry_path(sig: dict) -> Path:
    digest = hashlib.sha256(json.dumps(sig, sort_keys=True).encode()).hexdigest()[:16]
    return folder() / f"{sig['model']['name']}-{sig['layout']}-{sig['devices']}dev-{digest}.json"


def _read(path: Path) -> dict | None:
    """An entry's JSON, None when absent; ValueError when it is not one."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{type(e).__name__}") from None
    _check_entry(data)
    return data


def _check_entry(data) -> None:
    """ValueError unless ``data`` (parsed JSON) is a well-formed entry."""
    if (
        not isinstance(data, dict)
        or data.get("format") != FORMAT
        or not isinstance(data.get("datasets"), dict)
    ):
        raise ValueError("not a cost-model cache entry")
    for d in data["datasets"].values():
        try:
            rows, secs = np.asarray(d.get("rows"), float), np.asarray(d.get("seconds"), float)
            window = int(d.get("window", 0))
        except (AttributeError, TypeError, ValueError):
            raise ValueError("a dataset's rows are malformed") from None
        if rows.ndim != 2 or rows.shape[1:] != (3,) or secs.shape != rows.shape[:1] or window < 1:
            raise ValueError("a dataset's rows are malformed")
        if d.get("seconds_alone") is not None:
            try:
                alone = np.asarray(d["seconds_alone"], float)
            except (TypeError, ValueError):
                raise ValueError("a dataset's seconds_alone are malformed") from None
            if alone.shape != secs.shape:
                raise ValueError("a dataset's seconds_alone are malformed")


# a run's pooled fit weighs each profiled step by its relative error, times a log-normal kernel around
# the run's own step size: a pooled least-squares fit over a 50x range of sizes is set by the largest
# steps and missed small ones by 30 % (Bitcoin-Alpha at 4 devices beside AS-733's 1M-pair steps); one
# standard deviation of the kernel is a factor e (2.7x) in pairs
SCALE_SIGMA = 1.0


def step_scale(pairs, batch_size: int, devices: int) -> float:
    """The pairs a device's step of a run carries on average: ceil(B / P) windows of ``pairs`` [K]
    (the training windows' pair counts) — where ``fit_pooled`` centres its weights."""
    pairs = np.asarray(pairs, float)
    return float(-(-batch_size // max(devices, 1)) * pairs.mean()) if pairs.size else 0.0


def scale_weights(rows: np.ndarray, seconds: np.ndarray, scale: float) -> np.ndarray:
    """[N] row weights of a fit centred on steps of ``scale`` pairs (``SCALE_SIGMA``)."""
    distance = np.log(np.maximum(rows[:, 2], 1.0) / max(scale, 1.0))
    return np.exp(-(distance**2) / (2 * SCALE_SIGMA**2)) / np.maximum(seconds, 1e-9)


def fit_pooled(
    datasets: dict, source: str, devices: int, scale: float = 0.0, with_transfer: bool = True
) -> tuple[CostModel, dict]:
    """One model on the steps of every dataset (each with its own W) -> (model, transfer): transfer
    maps a dataset to the median absolute error on its steps of a model fitted without them (only
    with two datasets or more, and ``with_transfer``). ``scale`` > 0: the fit is weighted toward steps of
    that many pairs (``scale_weights``); 0: plain least squares in seconds."""
    names = sorted(datasets)
    feats = {
        n: window_features(
            np.asarray(datasets[n]["rows"], float),
            int(datasets[n]["window"]),
            float(datasets[n].get("span", 0.0)),
        )
        for n in names
    }
    secs = {n: np.asarray(datasets[n]["seconds"], float) for n in names}
    x = np.concatenate([feats[n] for n in names])
    y = np.concatenate([secs[n] for n in names])
    rows = np.concatenate([np.asarray(datasets[n]["rows"], float) for n in names])
    window = int(datasets[names[0]]["window"])
    model = _weighted_fit(x, y, rows, scale, window, source)
    # steps timed alone too (profiles since seconds_alone): the same fit on those times
    alone = None
    if all(datasets[n].get("seconds_alone") is not None for n in names):
        y_alone = np.concatenate([np.asarray(datasets[n]["seconds_alone"], float) for n in names])
        alone = _weighted_fit(x, y_alone, rows, scale, window, source).coef
    transfer = {}
    if len(names) > 1 and with_transfer:
        for n in names:
            others = [m for m in names if m != n]
            held = fit(np.concatenate([feats[m] for m in others]), np.concatenate([secs[m] for m in others]))
            pred = held.predict(feats[n])
            transfer[n] = float(np.median(np.abs(pred - secs[n]) / secs[n]))
    compiles = [c for n in names for c in datasets[n].get("compile_seconds", [])]
    loads = [datasets[n]["load"] for n in names if datasets[n].get("load")]
    model = dataclasses.replace(
        model,
        devices=devices,
        compile_seconds=float(statistics.median(compiles)) if compiles else None,
        load_average=[max(lo[0] for lo in loads), max(lo[-1] for lo in loads)] if loads else None,
        datasets=names,
        profiled_max=[float(v) for v in rows.max(axis=0)],
        coef_alone=alone,
    )
    return model, transfer


def _weighted_fit(x, y, rows, scale: float, window: int, source: str) -> CostModel:
    """``fit`` of seconds y on features x, weighted toward steps of ``scale`` pairs when > 0."""
    if scale > 0:
        w = scale_weights(rows, y, scale)
        return fit(x * w[:, None], y * w, window=window, source=source)
    return fit(x, y, window=window, source=source)


def _unwritable(where: Path, e: OSError) -> UserError:
    return UserError(
        f"cannot write the cost-model cache {str(where)!r} ({e.strerror or e}): set {ENV} to a writable "
        "folder, or profile with --no-cache"
    )


def check_writable() -> None:
    """A UserError now, before any step is timed, when the cache folder cannot be made or written."""
    where = folder()
    try:
        where.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=where, suffix=".probe"):
            pass
    except OSError as e:
        raise _unwritable(where, e) from None


def record(
    sig: dict,
    dataset: str,
    work,
    seconds,
    window: int,
    compile_seconds,
    load,
    log=print,
    seconds_alone=None,
    span: float = 0.0,
) -> tuple[CostModel, Path, dict]:
    """Add (or replace) ``dataset``'s timed steps in the entry of ``sig`` and refit on all its
    datasets -> (model, entry path, transfer errors). ``seconds_alone``: the same steps timed with
    nothing packed beside them (None: not timed); ``span``: the mean node count of the dataset's
    training windows (``schedule.cost.locality``; 0: not known). Written atomically; an unreadable entry is
    replaced (with a line)."""
    path = entry_path(sig)
    try:
        data = _read(path)
    except ValueError as e:
        log(f"note: the cost-model cache entry {path} is unreadable ({e}); starting it anew")
        data = None
    if data is None:
        data = {"format": FORMAT, "version": VERSION, "signature": sig, "datasets": {}}
    data["datasets"][dataset] = {
        "rows": [[float(v) for v in r] for r in work],
        "seconds": [float(s) for s in seconds],
        "seconds_alone": None if seconds_alone is None else [float(s) for s in seconds_alone],
        "window": int(window),
        "span": float(span),
        "compile_seconds": [float(c) for c in compile_seconds],
        "load": [float(x) for x in load],
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    source = f"profile:{sig['model']['name']}:{sig['devices']}dev:{'+'.join(sorted(data['datasets']))}"
    model, transfer = fit_pooled(data["datasets"], source, int(sig["devices"]))
    data["model"], data["transfer"] = model.to_dict(), transfer
    try:
        atomic_write_text(path, json.dumps(data, indent=1) + "\n")
    except OSError as e:
        raise _unwritable(path.parent, e) from None
    return model, path, transfer


def read_entry(path) -> dict | None:
    """A cost-model cache entry's JSON when ``path`` is one (``format`` = ``FORMAT``), else None; a
    UserError when it claims to be one and is malformed."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    try:
        _check_entry(data)
        return data
    except ValueError as e:
        raise UserError(f"cost-model cache entry {str(path)!r} is malformed ({e}): re-run profile") from None


def entry_model(data: dict, scale: float) -> CostModel:
    """The model of an entry (``read_entry``) refitted around steps of ``scale`` pairs (0: its pooled
    fit), as a run of that size on the profiled machine would use it."""
    model = CostModel.from_dict(data["model"])
    if scale <= 0:
        return model
    return fit_pooled(data["datasets"], model.source, model.devices, scale, with_transfer=False)[0]


def lookup(sig: dict, scale: float = 0.0) -> tuple[CostModel | None, str]:
    """The cached model of ``sig`` and a line on it (or None and why not); ``scale`` > 0: refitted on the
    entry's steps weighted toward a run whose steps carry that many pairs (``fit_pooled``)."""
    path = entry_path(sig)
    try:
        data = _read(path)
    except ValueError as e:
        return None, f"the cost-model cache entry {path} is unreadable ({e}): re-run profile"
    if data is None or not data["datasets"]:
        return None, ""
    try:
        model = CostModel.from_dict(data["model"])
    except (KeyError, TypeError, ValueError):
        return None, f"the cost-model cache entry {path} is unreadable (its model): re-run profile"
    centred = ""
    if scale > 0:
        model = entry_model(data, scale)
        centred = f", fitted around steps of {scale:.0f} pairs"
    err = "" if model.mape is None else f", held-out error {100 * model.mape:.0f}%"
    return model, (
        f"cost model: profiled on this machine ({', '.join(model.datasets)}{err}{centred}) from {path}"
    )


def resolve(
    config,
    *,
    window: int,
    num_features: int,
    layout: str,
    devices: int,
    processes: int,
    platform: str,
    scale: float = 0.0,
    span: float = 0.0,
) -> tuple[CostModel, str]:
    """The run's cost model for ``schedule.cost_model`` and a line for the log ("" when nothing to say):
    a file; ``analytic`` (or ""); ``auto``: this machine's profile of the run's signature (fitted
    around ``scale`` pairs per step when > 0, ``step_scale``), else the analytic model with the
    command that profiles it. ``span``: the mean node count of the run's windows, set on the model
    (``schedule.cost.locality``)."""
    setting = config.schedule.cost_model
    if setting in ("", "analytic"):
        return default_cost_model(window, layout), ""
    if setting != "auto":
        return dataclasses.replace(CostModel.load(setting), span=span), f"cost model: {setting}"
    sig = signature(
        config,
        num_features=num_features,
        layout=layout,
        devices=devices,
        processes=processes,
        platform=platform,
    )
    model, note = lookup(sig, scale)
    if model is not None:
        return dataclasses.replace(model, window=window, span=span), note
    why = note or f"no profile of {config.model.name} at {devices} device(s) on this machine"
    return default_cost_model(window, layout), (
        f"cost model: analytic ({why}): `python -m dygnex_jax profile` with this run's config and "
        "options, once, makes later runs use a measured one"
    )
