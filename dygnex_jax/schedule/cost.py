"""Cost model: analytic features of a window (or a padded step) x fitted coefficients = seconds.

numpy/scipy only. The features of a load ``(nodes, edges, pairs)`` run for a window of W snapshots:

    node_steps = nodes · W    the recurrence (GRU / weight evolution) and the dense layers run per
                              node and snapshot (``nodes`` are the packed nodes of one snapshot)
    edges                     message passing: the edges summed over the W snapshots
    pairs                     the scored target pairs (positives and negatives)
    snapshots  = W            sequential per-snapshot overhead (one scan step, kernel launches)
    constant   = 1            per-step overhead (optimizer, all-reduce, dispatch)
    edges_span = edges · φ    message passing and pair scoring gather and scatter rows of one window's
    pairs_span = pairs · φ    nodes: the wider a window (``span``, its mean node count in the run), the
                              more of those accesses miss the cache. φ = log2(max(span, 256) / 256),
                              the doublings beyond 256 nodes (``locality``); measured on the 2-core CPU,
                              the head's gather/scatter pass over the same pairs costs 1.31x at a
                              1,024-node span, 2.65x at 50,000 what it costs at 128
                              (``tools/bench_locality.py``); on one compiled budget synthetic's step
                              (454-node windows) ran 0.63-0.70x AS-733's (5,959). A fit ties
                              them to edges and pairs: their coefficients are a x those of edges
                              and pairs, one slope a in [0, 0.25] per doubling (``_nnls``).

``predict`` is linear in these features. Under SPMD a step costs what its largest device needs,
per dimension (DESIGN §2): ``predict_step_seconds`` evaluates the model on the per-step padded
load (the max over devices of each column, or the shape budget actually used). ``fit`` is a
non-negative least-squares fit (``scipy.optimize.nnls``) on measured step times, with its error
(mean absolute percentage error) out of sample, each row predicted by a fit on the other folds. ``weights`` turns
a model into the scheduler's (alpha, beta, gamma).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path

import numpy as np
from scipy.optimize import nnls

from ..errors import UserError
from ..files import atomic_write_text

FEATURES = ("node_steps", "edges", "pairs", "snapshots", "constant", "edges_span", "pairs_span")
BASE_FEATURES = 5  # the features of version <= 3 files (no locality): their coefficients read as 0 there
_FORMAT = "dygnex_cost_model"
# 2 added devices, compile_seconds, load_average, datasets; 3 coef_alone; 4 edges_span, pairs_span and
# span (older files read as before, their locality coefficients 0)
_VERSION = 4
LOCALITY_FLOOR = 256  # nodes: a window this narrow or narrower pays no locality term
# the largest growth of an edge's and a pair's cost per doubling of the span a fit may give (the step's
# per-pair cost grows no faster than its most span-bound kernel: the head's gather/scatter pass, 0.10-0.19
# per doubling on the 2-core CPU, tools/bench_locality.py), and the slopes a fit tries
LOCALITY_SLOPE_MAX = 0.25
LOCALITY_SLOPES = np.linspace(0.0, LOCALITY_SLOPE_MAX, 51)


def locality(span) -> np.ndarray:
    """φ of a window's node span: log2(max(span, 256) / 256), 0 for an unknown span (0)."""
    span = np.asarray(span, dtype=np.float64)
    return np.where(span > 0, np.log2(np.maximum(span, LOCALITY_FLOOR) / LOCALITY_FLOOR), 0.0)


HOLDOUT_EVERY = 5  # folds of the fit error: row i is predicted by a fit on the rows outside fold i % 5


def mean_span(costs: np.ndarray) -> float:
    """The ``span`` a run's steps are priced at: the mean node count of its windows [K, >= 1] (their
    costs, nodes first); 0 for none."""
    costs = np.asarray(costs, dtype=np.float64)
    return float(costs[:, 0].mean()) if len(costs) else 0.0


def window_features(costs: np.ndarray, window: int, span=0.0) -> np.ndarray:
    """[K, F] features of K loads.

    Args:
      costs: [K, 3] (nodes, edges, pairs) of windows, or of per-step padded device loads.
      window: W, snapshots per window.
      span: the mean node count of the run's windows (a number, or [K] one per load); 0 = unknown (no
        locality term).
    """
    costs = np.asarray(costs, dtype=np.float64)
    if costs.ndim != 2 or costs.shape[1] != 3:
        raise ValueError(f"costs must be [K, 3] (nodes, edges, pairs), got {costs.shape}")
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    k = len(costs)
    phi = np.broadcast_to(locality(span), (k,))
    return np.column_stack(
        [
            costs[:, 0] * window,
            costs[:, 1],
            costs[:, 2],
            np.full(k, float(window)),
            np.ones(k),
            costs[:, 1] * phi,
            costs[:, 2] * phi,
        ]
    )


@dataclasses.dataclass
class CostModel:
    """Seconds = features · coef (see ``FEATURES``).

    Fields:
      coef: [F] non-negative seconds per unit of each feature.
      window: W used when a caller does not pass one (the profiling run's window).
      span: the mean node count of a window of the run it prices (``locality``; 0 = unknown): set per
        run, as ``window`` is.
      mape: mean absolute percentage error (0.05 = 5 %) on held-out rows; None for analytic models.
      n_samples: rows the model was fitted on (0 = analytic).
      source: "analytic" or "fit" (or a caller's note, e.g. the profiling config).
      devices: devices that shared this machine's cores while it was profiled (the fake CPU devices
        of one process, or processes x devices on one host); 0 = not measured (analytic). A profile
        taken at the run's own device count already holds the devices' contention.
      compile_seconds: the median seconds one training-step compilation took while profiling
        (lowering + XLA, measured apart from the step times); None = not measured.
      load_average: the load average (1 min) before and after the profile; None = not measured.
      datasets: the datasets whose steps it was fitted on.
      profiled_max: the largest (nodes, edges, pairs) of a profiled step; None = not measured. A linear
        fit says little far above it (``beyond_profile``).
      coef_alone: [F] the same fit on the steps timed *alone*, with no next step packed beside them
        (``coef`` is of steps run beside the packing, as training's prefetch runs all but an epoch's
        last step); None = not measured (``coef`` stands in).
    """

    coef: np.ndarray
    window: int = 10
    span: float = 0.0
    mape: float | None = None
    n_samples: int = 0
    source: str = "analytic"
    devices: int = 0
    compile_seconds: float | None = None
    load_average: list | None = None
    datasets: list = dataclasses.field(default_factory=list)
    profiled_max: list | None = None
    coef_alone: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.coef = _all_features(self.coef)
        if self.coef_alone is not None:
            self.coef_alone = _all_features(self.coef_alone, "coef_alone")

    def coefficients(self, alone: bool = False) -> np.ndarray:
        """[F] the coefficients of a step run beside the next step's packing, or ``alone`` without it
        (``coef`` where the profile did not time steps alone)."""
        return self.coef_alone if alone and self.coef_alone is not None else self.coef

    def predict(self, features: np.ndarray, alone: bool = False) -> np.ndarray:
        """[N] seconds for [N, F] features (``alone``: steps with nothing packed beside them)."""
        return np.asarray(features, dtype=np.float64) @ self.coefficients(alone)

    def predict_costs(self, costs: np.ndarray, window: int | None = None, alone: bool = False) -> np.ndarray:
        """[K] seconds of K loads (nodes, edges, pairs) run for a window of W snapshots (the model's
        ``span``)."""
        return self.predict(
            window_features(costs, self.window if window is None else window, self.span), alone
        )

    def unit_costs(self, window: int | None = None, alone: bool = False) -> tuple[float, np.ndarray]:
        """(seconds of a step whatever its size, [3] seconds per node, per edge, per pair of padded
        work): the model at W = ``window`` and its ``span`` (an edge and a pair with their locality
        term), for a step beside the next step's packing or ``alone``: ``predict_costs`` in parts."""
        w = self.window if window is None else window
        c, phi = self.coefficients(alone), float(locality(self.span))
        return float(c[3] * w + c[4]), np.array([c[0] * w, c[1] + c[5] * phi, c[2] + c[6] * phi])

    def weights(self, window: int | None = None) -> np.ndarray:
        """[3] the scheduler's (alpha, beta, gamma): seconds per node, per edge, per pair (``unit_costs``
        beside the packing)."""
        return self.unit_costs(window)[1]

    def to_dict(self) -> dict:
        return {
            "format": _FORMAT,
            "version": _VERSION,
            "features": list(FEATURES),
            "coef": [float(x) for x in self.coef],
            "window": int(self.window),
            "span": float(self.span),
            "mape": None if self.mape is None else float(self.mape),
            "n_samples": int(self.n_samples),
            "source": self.source,
            "devices": int(self.devices),
            "compile_seconds": None if self.compile_seconds is None else float(self.compile_seconds),
            "load_average": None if self.load_average is None else [float(x) for x in self.load_average],
            "datasets": [str(x) for x in self.datasets],
            "profiled_max": None if self.profiled_max is None else [float(x) for x in self.profiled_max],
            "coef_alone": None if self.coef_alone is None else [float(x) for x in self.coef_alone],
        }

    def save(self, path: str | os.PathLike) -> None:
        """Write the model as JSON, replaced whole (creates parent folders)."""
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> CostModel:
        """Read a model written by ``save``; a one-line UserError for a missing or malformed file."""
        p = Path(path)
        if not p.is_file():
            raise UserError(
                f"cost model file {str(p)!r} does not exist: run the profiler or pass an existing file"
            )
        try:
            data = json.loads(p.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise UserError(
                f"cost model file {str(p)!r} is not valid JSON ({type(e).__name__}): re-create it"
            ) from None
        problem = _check(data)
        if problem:
            raise UserError(f"cost model file {str(p)!r} is malformed: {problem}")
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: dict) -> CostModel:
        """The model of ``to_dict``'s output (checked by ``_check``; fields a version-1 file lacks take
        their defaults)."""
        compile_s, load = data.get("compile_seconds"), data.get("load_average")
        return cls(
            coef=data["coef"],
            window=int(data.get("window", 10)),
            span=float(data.get("span", 0.0)),
            mape=None if data.get("mape") is None else float(data["mape"]),
            n_samples=int(data.get("n_samples", 0)),
            source=str(data.get("source", "fit")),
            devices=int(data.get("devices", 0)),
            compile_seconds=None if compile_s is None else float(compile_s),
            load_average=None if load is None else [float(x) for x in load],
            datasets=[str(x) for x in data.get("datasets", [])],
            profiled_max=None
            if data.get("profiled_max") is None
            else [float(x) for x in data["profiled_max"]],
            coef_alone=data.get("coef_alone"),
        )


def _all_features(coef, what: str = "coef") -> np.ndarray:
    """[F] coefficients: ``FEATURES``' own, or the first ``BASE_FEATURES`` (a model without locality
    terms, as version <= 3 files hold) with 0 for the rest."""
    coef = np.asarray(coef, dtype=np.float64).reshape(-1)
    if len(coef) == BASE_FEATURES:
        coef = np.concatenate([coef, np.zeros(len(FEATURES) - BASE_FEATURES)])
    if coef.shape != (len(FEATURES),):
        raise ValueError(f"{what} must have {len(FEATURES)} entries {FEATURES}, got {coef.shape}")
    return coef


def _check(data) -> str | None:
    """What is wrong with a loaded JSON object, or None."""
    if not isinstance(data, dict):
        return "the top level must be an object"
    if data.get("format") != _FORMAT:
        return f"'format' must be {_FORMAT!r}"
    names = data.get("features")
    if names not in (list(FEATURES), list(FEATURES[:BASE_FEATURES])):
        return f"'features' must be {list(FEATURES)}"
    n = len(names)
    coef = data.get("coef")
    if not isinstance(coef, list) or len(coef) != n:
        return f"'coef' must be a list of {n} numbers"
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in coef):
        return "'coef' must hold numbers only"
    if not all(math.isfinite(x) and x >= 0 for x in coef):
        return "'coef' must be finite and >= 0"
    alone = data.get("coef_alone")
    if alone is not None and not (
        isinstance(alone, list) and len(alone) == n and all(_number(x) for x in alone)
    ):
        return f"'coef_alone' must be null or a list of {n} numbers >= 0"
    window = data.get("window", 10)
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        return "'window' must be a positive integer"
    if not _number(data.get("span", 0.0)):
        return "'span' must be a number >= 0"
    mape = data.get("mape")
    if mape is not None and (not isinstance(mape, (int, float)) or isinstance(mape, bool) or mape < 0):
        return "'mape' must be null or a number >= 0"
    devices = data.get("devices", 0)
    if not isinstance(devices, int) or isinstance(devices, bool) or devices < 0:
        return "'devices' must be an integer >= 0"
    compile_s = data.get("compile_seconds")
    if compile_s is not None and not _number(compile_s, positive=True):
        return "'compile_seconds' must be null or a number > 0"
    load = data.get("load_average")
    if load is not None and not (isinstance(load, list) and all(_number(x) for x in load)):
        return "'load_average' must be null or a list of numbers"
    top = data.get("profiled_max")
    if top is not None and not (isinstance(top, list) and len(top) == 3 and all(_number(x) for x in top)):
        return "'profiled_max' must be null or 3 numbers (nodes, edges, pairs)"
    datasets = data.get("datasets", [])
    if not isinstance(datasets, list) or not all(isinstance(x, str) for x in datasets):
        return "'datasets' must be a list of names"
    return None


def _number(x, positive: bool = False) -> bool:
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    return ok and (x > 0 if positive else x >= 0)


def default_cost_model(window: int = 10, layout: str = "scan") -> CostModel:
    """Analytic defaults, the order of magnitude of a 2-layer GCN + GRU (hidden 64) on 2 CPU cores:

    2 µs per node and snapshot a layer runs on, 0.5 µs per edge, 0.2 µs per scored pair, 0.1 ms per
    snapshot, 1 ms per step (10k nodes and 100k edges per snapshot: about 70 ms, STACK-NOTES). In the
    ``last`` layout (EvolveGCN-O: its weights evolve without the graph) the layers run on the last
    snapshot's nodes only, so a node costs its 2 µs once, not once per snapshot: the feature
    ``node_steps`` (nodes · W) is charged 2 µs / W. Measured: a 1-device profile of EvolveGCN-O here fits
    0.24 µs per node-snapshot at W = 10 (docs/bench_cost_model_2026-12-06.json); priced at 2 µs, its
    1-device steps were predicted 3.7–7.3x too slow, now within 20 % (median; ..._analytic.json).
    """
    per_node = 2e-6 / window if layout == "last" else 2e-6
    coef = np.array([per_node, 5e-7, 2e-7, 1e-4, 1e-3, 0.0, 0.0])  # no locality term
    return CostModel(coef=coef, window=window, source="analytic")


def mape(predicted: np.ndarray, seconds: np.ndarray) -> float:
    """Mean absolute percentage error (a fraction), over rows with seconds > 0."""
    predicted, seconds = np.asarray(predicted, np.float64), np.asarray(seconds, np.float64)
    ok = seconds > 0
    if not ok.any():
        return float("nan")
    return float(np.mean(np.abs(predicted[ok] - seconds[ok]) / seconds[ok]))


def _scaled_nnls(features: np.ndarray, seconds: np.ndarray) -> tuple[np.ndarray, float]:
    """Non-negative least squares with column scaling (features span many orders of magnitude) ->
    (coefficients, residual norm)."""
    scale = np.linalg.norm(features, axis=0)
    scale[scale == 0] = 1.0
    coef, residual = nnls(features / scale, seconds)
    return coef / scale, float(residual)


def _nnls(features: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """Non-negative least squares, the locality features tied: an edge costs c_e (1 + a φ), a pair
    c_p (1 + a φ), one slope a on ``LOCALITY_SLOPES`` chosen by the residual (ties: the smaller); free,
    the fits of few spans priced pairs by pairs · φ alone (free at 256 nodes). One span (``one_span``):
    a = 0, a dataset's own steps say nothing of other spans."""
    features = np.asarray(features, dtype=np.float64)
    slopes = (0.0,) if one_span(features) else LOCALITY_SLOPES
    best = None
    for a in slopes:
        base = features[:, :BASE_FEATURES].copy()
        base[:, 1] += a * features[:, 5]
        base[:, 2] += a * features[:, 6]
        coef, residual = _scaled_nnls(base, seconds)
        if best is None or residual < best[0] * (1 - 1e-9):
            best = (residual, a, coef)
    _, a, coef = best
    return np.concatenate([coef, [a * coef[1], a * coef[2]]])


def one_span(features: np.ndarray) -> bool:
    """Whether the rows of [N, F] ``window_features`` share one locality factor φ (one span, or none)."""
    base, local = features[:, 1:3], features[:, BASE_FEATURES:]
    held = base > 0
    phi = local[held] / base[held]
    return phi.size == 0 or bool(np.ptp(phi) <= 1e-9 * max(1.0, float(np.abs(phi).max())))


def fit(
    features: np.ndarray, seconds: np.ndarray, *, window: int = 10, source: str = "fit", span: float = 0.0
) -> CostModel:
    """Fit seconds ≈ features · coef, coef >= 0 (``scipy.optimize.nnls``).

    The error is measured out of sample: ``mape`` is the mean of ``held_out_errors`` (every row predicted
    by a fit on the other folds; with fewer than ``HOLDOUT_EVERY`` rows, the in-sample error). The
    returned coefficients are fitted on all rows.

    Args:
      features: [N, F] from ``window_features`` (of measured steps' padded loads).
      seconds: [N] measured step times.
      window: stored as the model's default W.
      span: stored as the model's window span (``locality``).
    """
    features = np.asarray(features, dtype=np.float64)
    seconds = np.asarray(seconds, dtype=np.float64).reshape(-1)
    if features.ndim != 2 or features.shape[1] != len(FEATURES):
        raise ValueError(f"features must be [N, {len(FEATURES)}], got {features.shape}")
    if len(features) != len(seconds):
        raise ValueError(f"{len(features)} feature rows but {len(seconds)} timings")
    if len(seconds) == 0:
        raise UserError("no timings to fit the cost model on: profile at least one step")
    if not (np.all(np.isfinite(features)) and np.all(np.isfinite(seconds))):
        raise ValueError("features and seconds must be finite")
    error = float(np.mean(held_out_errors(features, seconds)))
    coef = _nnls(features, seconds)
    return CostModel(coef=coef, window=window, span=span, mape=error, n_samples=len(seconds), source=source)


def refit(step_log: list, window: int, old: CostModel) -> CostModel | None:
    """A run's model refitted on its timed steps (``Trainer.step_log``: (padded work [3], seconds,
    alone)): ``coef`` on the steps run beside the next step's packing and ``coef_alone`` on those run
    alone (an epoch's last), each given at least 5 steps; with fewer alone steps ``old``'s
    ``coef_alone`` stays; with fewer beside steps (no prefetch: every step alone) one fit on all of
    them prices every step. ``old``'s compile seconds and datasets carry over. None below 5 steps."""
    if len(step_log) < 5:
        return None
    work = np.array([w for w, _, _ in step_log], dtype=np.float64)
    seconds = np.array([s for _, s, _ in step_log], dtype=np.float64)
    alone = np.array([a for _, _, a in step_log], bool)

    def on(rows):
        features = window_features(work[rows], window, old.span)
        return fit(features, seconds[rows], window=window, source="refit", span=old.span)

    if (~alone).sum() >= 5:
        model = on(~alone)
        model.coef_alone = on(alone).coef if alone.sum() >= 5 else old.coef_alone
    else:
        model = on(np.ones_like(alone))
    model.compile_seconds, model.datasets = old.compile_seconds, list(old.datasets)
    return model


# a step whose nodes, edges or pairs pass this multiple of the largest profiled step is beyond the profile
BEYOND_PROFILE = 2.0


def beyond_profile(model: CostModel, work: np.ndarray) -> str:
    """A line when padded work [N, 3] (nodes, edges, pairs) reaches above ``BEYOND_PROFILE`` x the largest
    profiled step in some column ("" when within, or the model has no profiled range)."""
    if model.profiled_max is None or len(work) == 0:
        return ""
    top, most = np.asarray(model.profiled_max, np.float64), np.asarray(work, np.float64).max(axis=0)
    over = [
        f"{name} {most[i]:.0f} (profiled up to {top[i]:.0f})"
        for i, name in enumerate(("nodes", "edges", "pairs"))
        if most[i] > BEYOND_PROFILE * max(top[i], 1.0)
    ]
    if not over:
        return ""
    return (
        f"note: this run's steps reach {', '.join(over)}: its cost model extrapolates there; profile this "
        "dataset (`python -m dygnex_jax profile` with this run's config) for step times that hold"
    )


def held_out_errors(features: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """|predicted / measured - 1| of every row under a fit on the rows outside its fold (row i in fold
    ``i % HOLDOUT_EVERY``: each row held out once, ``HOLDOUT_EVERY``-fold), in row order; with fewer than
    ``HOLDOUT_EVERY`` rows, every row in sample. Rows with seconds <= 0 are skipped. (Until 2026-12-07
    only the last fold was held out: two rows of a 12-step profile, whose error moved by several points
    from one profile to the next.)"""
    features = np.asarray(features, np.float64)
    seconds = np.asarray(seconds, np.float64).reshape(-1)
    fold = np.arange(len(seconds)) % HOLDOUT_EVERY
    predicted = np.empty(len(seconds))
    if len(seconds) < HOLDOUT_EVERY:
        predicted[:] = features @ _nnls(features, seconds)
    else:
        for k in range(HOLDOUT_EVERY):
            held = fold == k
            predicted[held] = features[held] @ _nnls(features[~held], seconds[~held])
    ok = seconds > 0
    return np.abs(predicted[ok] - seconds[ok]) / seconds[ok]


def padded_loads(loads: np.ndarray) -> np.ndarray:
    """[S, 3] the per-step padded load: the max over devices of each column of loads [S, P, 3]."""
    loads = np.asarray(loads, dtype=np.float64)
    if loads.ndim != 3 or loads.shape[2] != 3:
        raise ValueError(f"loads must be [S, P, 3], got {loads.shape}")
    return loads.max(axis=1) if loads.shape[1] else np.zeros((loads.shape[0], 3))


def alone_steps(steps: int, prefetch: int) -> np.ndarray:
    """[steps] which steps of an epoch run with no next step packed beside them: training's prefetch
    (``parallel.prefetch`` > 0) packs step i + 1 while step i runs, so the last one; every one without it."""
    alone = np.full(steps, prefetch <= 0)
    alone[-1:] = True
    return alone


def predict_step_seconds(
    loads: np.ndarray,
    model: CostModel,
    window: int | None = None,
    padded: np.ndarray | None = None,
    alone: np.ndarray | None = None,
) -> np.ndarray:
    """[S] predicted SPMD step seconds: the model on the padded load of each step (``alone`` [S]: the
    steps run with nothing packed beside them, ``alone_steps``; None: none).

    Args:
      loads: [S, P, 3] real per-device loads (``metrics.step_loads``).
      model: the cost model.
      window: W (default: ``model.window``).
      padded: [S, 3] the budgets the devices really ran with (e.g. after shape-bucket rounding);
        default: the per-step max over devices.
    """
    budget = padded_loads(loads) if padded is None else np.asarray(padded, dtype=np.float64)
    features = window_features(budget, model.window if window is None else window, model.span)
    beside = model.predict(features)
    return beside if alone is None else np.where(alone, model.predict(features, alone=True), beside)
