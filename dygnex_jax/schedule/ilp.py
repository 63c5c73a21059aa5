"""DyGNeX-L: per step, exact re-partitions, iterated search and a MILP, never worse than DyGNeX-G.

The steps are the greedy's (same ordering, same jitter, same rng: ``dygnex_l`` and ``dygnex_g`` with
one seed and epoch have identical step compositions); dygnex_l re-places the windows of one step at
a time on the P identical devices, minimising the padded step cost ``sum_d w_d max_p load_p[d]``
(with flat costs [K, 3], d = nodes, edges summed over time, pairs). Per step, within ``time_limit``
seconds for the whole step:

1. **Iterated pair re-partitions** (``iterated_search``). From the greedy placement, steepest descent
   over *exact* re-partitions of device pairs: for every pair, every split of its windows between
   its two devices is evaluated (2^(m-1) splits for m windows, all pairs at once in numpy), the most
   improving one applied (``neighbourhood_search``; a move or swap of the greedy's local search is
   one of these splits). Then rounds of 3 random moves + descent, walking plateaus (iterated local
   search), at most ``ILS_ROUNDS`` rounds within ``ILS_SHARE`` of the step's time.
2. **Triple re-partitions**: the best placement also gets the exact re-partitions of every triple of
   devices holding a per-dimension maximum (about 88,000 assignments at 12 windows), pairs again
   after each improving triple, until none improves. With P <= 3 this alone is exact.
3. **MILP** for the rest of the step's time, started from the best placement (the formulation below),
   for its dual bound and, on small steps, a proof of optimality; its incumbent, if better, gets step 2.

    minimise    sum_d w_d M_d
    subject to  sum_p x[k, p] = 1                      every window k of the step exactly once
                sum_k c[k, d] x[k, p] <= M_d            every device p, every weighted dimension d
                M_d >= LB_d                             (valid bounds: ``greedy.dimension_lower_bounds``)
                sum_{d in g} w_d M_d >= LB_g            every group g of >= 2 dimensions (``grouped_lower_bound``)
                x[k, p] in {0, 1}

Devices are identical, so any relabelling of a solution is a solution. Symmetry breaking: windows
are numbered by decreasing scalar cost and window k may only use devices 0..k (x[k, p] = 0 for
p > k: device p's first window has index >= p after relabelling devices by first window), which
also fixes the heaviest window on device 0. (Measured at 32-64 windows x 8 devices against no
breaking, left to HiGHS's own symmetry detection, and a full first-window ordering of the devices:
this one was best or equal.)

The lower bound of a step is the best of ``grouped_lower_bound`` (per-column bounds, summed over
any grouping of the columns) and the MILP's dual bound. A step whose greedy objective is already
within ``mip_gap`` of it is not searched ("skipped"), and any phase that gets there ends the step
("solved"). ``solver = "HIGHS"`` (default) solves with highspy directly, started from the best
placement (cvxpy's ``warm_start`` does not pass a user start to HiGHS, and an unstarted HiGHS is far
worse than greedy on large steps); ``ilp_warm_start = false`` or any other MILP solver builds the
same model in cvxpy and solves it without a start. ``time_limit`` (seconds) bounds *each* step's
search + MILP, so an epoch can take up to ``steps x time_limit``. ``node_limit`` caps
branch-and-bound nodes per solve (HIGHS, SCIPY) and makes the search use a fixed round count
(``ILS_ROUNDS_REPRODUCIBLE``) instead of a share of the time, so that, as long as ``time_limit``
does not bind, the schedule is the same on any machine. The search is seeded from the schedule's
rng (one seed per step).

What it buys, and what it cannot (P = 8, B = 32, flat costs [K, 3] of as733 / bitcoin_otc /
uci_collegemsg, compose strata / rows / sorted, epochs 1-3; ``tools/bench_ilp.py``, 2-core machine
at load 2-7): with ``time_limit`` = 2 s the summed objective is 0.12-2.5 % below dygnex_g's on every
dataset and composition (1.17 % on average; 0.5 s: 1.12 %; 0.1 s: 0.90 %; the MILP alone, started
from greedy: 0.24 %), never above it on any of 210 steps, at most 1.98 s per step. 28 of 63 steps
are proven within 1 % of their bound. The rest of the gap is the bound's: the placements of 2 s
equal those of 60 s on 20 of the 21 epoch-1 steps, while 60 s of branching lifts the MILP's bound to
within 1 % on 18 of them. Each column alone balances to within about 0.5 % of its own bound, but on
the worst step (bitcoin_otc, sorted, the short step) the best placement is 6.9 % above the sum of
the per-column optima, so no bound built from the columns separately comes within 1 %, and the LP
relaxation (fractional windows balance every column at once) is weaker still; only branching
through the device symmetry closes it.

Per step the best of the searched, MILP and greedy placements is kept, so dygnex_l <= dygnex_g
step by step. When a solve stops on a limit, fails, or the solver is not installed, the schedule
says so in ``Schedule.fallback`` (one line) and ``info`` holds per-step statuses, the objective and
the best lower bound (``info["objective"]``, ``info["lower_bound"]``, ``info["gap"]``). An unknown
solver name is a ``UserError``; a known but missing one keeps the greedy placement of every step.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
import itertools
import os
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp

from ..errors import UserError
from .base import Schedule, ScheduleSettings, register
from .greedy import (
    checked_weights,
    device_loads,
    dimension_lower_bounds,
    greedy_schedule,
    split_by_device,
    step_objective,
)

# Every MILP-capable solver name cvxpy knows (installed or not), for the unknown-name check.
KNOWN_MILP_SOLVERS = (
    "HIGHS",
    "SCIPY",
    "SCIP",
    "CBC",
    "GLPK_MI",
    "GUROBI",
    "CPLEX",
    "MOSEK",
    "XPRESS",
    "COPT",
    "CUOPT",
    "KNITRO",
    "ECOS_BB",
)

# Statuses of a step's solve: "solved" (optimal or within mip_gap), "skipped" (greedy already within
# mip_gap of the lower bound), and "time_limit", "node_limit", "error", "not_installed", which make
# the schedule a fallback.


def installed_milp_solvers() -> list[str]:
    """The MILP-capable cvxpy solvers installed here (e.g. ["HIGHS", "SCIPY"])."""
    try:
        import cvxpy as cp
    except ImportError:  # pragma: no cover - cvxpy is a dependency
        return []
    try:
        from cvxpy.reductions.solvers.defines import MI_SOLVERS
    except ImportError:  # pragma: no cover - older/newer cvxpy layouts
        MI_SOLVERS = KNOWN_MILP_SOLVERS
    return [s for s in cp.installed_solvers() if s in MI_SOLVERS]


def check_solver(name: str) -> str:
    """The upper-case solver name; a UserError unless cvxpy knows it as a MILP solver."""
    solver = str(name).strip().upper()
    if solver in KNOWN_MILP_SOLVERS:
        return solver
    known: set[str] = set()
    with contextlib.suppress(ImportError):  # a solver newer than this list (imports cvxpy: ~1 s)
        from cvxpy.reductions.solvers.defines import MI_SOLVERS

        known = set(MI_SOLVERS)
    if solver not in known:
        installed = installed_milp_solvers()
        raise UserError(
            f"unknown schedule.solver {name!r}: the installed MILP solvers are "
            f"{', '.join(installed) or 'none (pip install highspy)'}"
        )
    return solver


_PACKAGES = {"GLPK_MI": "cvxopt", "SCIP": "pyscipopt", "CBC": "cylp", "GUROBI": "gurobipy", "COPT": "coptpy"}


def require_installed(settings: ScheduleSettings) -> str:
    """``check_solver``, and a UserError when that solver is not installed here.

    The command line calls this before a run (a missing solver is bad environment); the scheduler
    itself keeps its fallback to greedy for library callers.
    """
    solver = check_solver(settings.solver)
    if solver == "HIGHS" and bool(getattr(settings, "ilp_warm_start", True)):
        ok = importlib.util.find_spec("highspy") is not None
    else:
        ok = solver in installed_milp_solvers()
    if not ok:
        package = _PACKAGES.get(solver, solver.lower())
        raise UserError(
            f"schedule.solver={solver} is not installed here (installed MILP solvers: "
            f"{', '.join(installed_milp_solvers()) or 'none'}): pip install {package}, or choose an installed one"
        )
    return solver


@contextlib.contextmanager
def quiet_stdout():
    """Silence file descriptor 1 (C-level prints such as the HiGHS banner) inside the block."""
    try:
        sys.stdout.flush()
        fd = 1
        saved = os.dup(fd)
    except (OSError, ValueError, AttributeError):  # no usable stdout: nothing to silence
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
        yield
    finally:
        with contextlib.suppress(Exception):
            ctypes.CDLL(None).fflush(None)  # C stdio buffers go to /dev/null, not later to stdout
        os.dup2(saved, fd)
        os.close(saved)
        os.close(devnull)


# ------------------------------------------------------------------------------------------ model


# Dimension groupings tried by ``grouped_lower_bound``: every set partition of the weighted columns
# up to this many (Bell(4) = 15), else only "each column alone" and "all columns together".
GROUPED_BOUND_MAX_DIMS = 4


def _dimension_partitions(n_dims: int) -> list[list[tuple[int, ...]]]:
    """Set partitions of range(n_dims) (all of them up to ``GROUPED_BOUND_MAX_DIMS``)."""
    if n_dims > GROUPED_BOUND_MAX_DIMS:
        return [[(d,) for d in range(n_dims)], [tuple(range(n_dims))]]
    codes, _ = _assignments(n_dims, n_dims)
    return [[tuple(np.flatnonzero(code == b).tolist()) for b in range(code.max() + 1)] for code in codes]


def grouped_lower_bound(
    c: np.ndarray, n_devices: int, weights: np.ndarray
) -> tuple[float, dict[tuple[int, ...], float]]:
    """A lower bound on ``w · max_p load_p`` of one step that sees some coupling between columns.

    For a group g of weighted columns, ``sum_{d in g} w_d max_p load_pd >= max_p sum_{d in g} w_d
    load_pd``, which is at least the one-column bound (``greedy.dimension_lower_bounds``) of the
    windows' g-scalar costs ``sum_{d in g} w_d c_kd``; summing over the groups of any partition of
    the columns bounds the objective. All columns alone is ``greedy.step_lower_bound``; all together
    is the scalar bound; on the real costs the best partition is up to 2 % above the first.
    Returns (the best partition's bound, {group (indices into the weighted columns): its bound}
    for every group of two or more columns).
    """
    active = np.flatnonzero(weights > 0)
    cw = c[:, active] * weights[active]
    cache: dict[tuple[int, ...], float] = {}

    def group_bound(g: tuple[int, ...]) -> float:
        if g not in cache:
            cache[g] = float(dimension_lower_bounds(cw[:, list(g)].sum(axis=1, keepdims=True), n_devices)[0])
        return cache[g]

    best = max(sum(group_bound(g) for g in part) for part in _dimension_partitions(len(active)))
    return best, {g: v for g, v in cache.items() if len(g) > 1}


class StepModel:
    """The MILP of one step in solver-neutral form (columns: allowed x[i, p], then M_d).

    Windows are renumbered by decreasing scalar cost (``perm``); column ``j < n_x`` is
    x[xi[j], xp[j]]; dimension costs are scaled per dimension to O(1) (``scale``) and the objective
    coefficients carry the scale back, so objective values are in the caller's units.
    """

    def __init__(
        self,
        c: np.ndarray,
        n_devices: int,
        weights: np.ndarray,
        group_bounds: dict[tuple[int, ...], float] | None = None,
    ):
        self.active = np.flatnonzero(weights > 0)
        n, n_dims = len(c), len(self.active)
        self.n, self.n_devices, self.n_dims = n, n_devices, n_dims
        scalar = c @ weights
        self.perm = np.argsort(-scalar, kind="stable")
        cs = c[self.perm][:, self.active]
        self.scale = np.maximum(cs.sum(axis=0) / n_devices, 1e-300)
        cs = cs / self.scale
        # symmetry breaking: window i only on devices 0..min(i, P-1)
        xi, xp = np.nonzero(np.arange(n_devices)[None, :] <= np.arange(n)[:, None])
        self.xi, self.xp = xi, xp
        self.n_x = len(xi)
        self.n_col = self.n_x + n_dims
        # rows: n assignment rows, then P * D capacity rows (p major)
        self.n_row = n + n_devices * n_dims
        rows_assign = xi
        vals_assign = np.ones(self.n_x)
        rows_cap = n + xp[:, None] * n_dims + np.arange(n_dims)[None, :]  # [n_x, D]
        vals_cap = cs[xi]  # [n_x, D]
        keep = vals_cap != 0
        m_rows = n + np.arange(n_devices)[:, None] * n_dims + np.arange(n_dims)[None, :]  # [P, D]
        rows = np.concatenate([rows_assign, rows_cap[keep], m_rows.ravel()])
        cols_x = np.concatenate([np.arange(self.n_x), np.nonzero(keep)[0]])
        cols_m = self.n_x + np.broadcast_to(np.arange(n_dims), (n_devices, n_dims)).ravel()
        cols = np.concatenate([cols_x, cols_m])
        vals = np.concatenate([vals_assign, vals_cap[keep], -np.ones(n_devices * n_dims)])
        row_lower = [np.ones(n), np.full(n_devices * n_dims, -np.inf)]
        row_upper = [np.ones(n), np.zeros(n_devices * n_dims)]
        # valid cuts sum_{d in g} w_d M_d >= bound_g (``grouped_lower_bound``), scaled to O(1)
        wm = weights[self.active] * self.scale  # objective coefficients of M
        for g, bound in (group_bounds or {}).items():
            if bound > 0:
                g = list(g)
                rows = np.concatenate([rows, np.full(len(g), self.n_row)])
                cols = np.concatenate([cols, self.n_x + np.asarray(g)])
                vals = np.concatenate([vals, wm[g] / bound])
                row_lower.append(np.ones(1))
                row_upper.append(np.full(1, np.inf))
                self.n_row += 1
        self.a = sp.csc_matrix((vals, (rows, cols)), shape=(self.n_row, self.n_col))
        self.a.sort_indices()
        self.row_lower = np.concatenate(row_lower)
        self.row_upper = np.concatenate(row_upper)
        lb = dimension_lower_bounds(cs, n_devices)  # valid lower bounds on M (scaled)
        self.col_lower = np.concatenate([np.zeros(self.n_x), lb])
        self.col_upper = np.concatenate([np.ones(self.n_x), np.full(n_dims, np.inf)])
        self.cost = np.concatenate([np.zeros(self.n_x), weights[self.active] * self.scale])
        self.cs = cs

    def start(self, device: np.ndarray) -> np.ndarray:
        """Column values of a placement (device [n] in the caller's window order), relabelled so
        devices are numbered by their first window (the symmetry-breaking rule holds)."""
        dev = device[self.perm]
        first = {}
        for p in dev:
            first.setdefault(int(p), len(first))
        label = np.array([first.get(p, 0) for p in range(self.n_devices)])
        dev = label[dev]
        x = np.zeros((self.n, self.n_devices))
        x[np.arange(self.n), dev] = 1.0
        loads = np.zeros((self.n_devices, self.n_dims))
        np.add.at(loads, dev, self.cs)
        m = np.maximum(loads.max(axis=0), self.col_lower[self.n_x :])
        return np.concatenate([x[self.xi, self.xp], m])

    def decode(self, values: np.ndarray) -> np.ndarray | None:
        """device [n] in the caller's window order from column values; None unless every window
        is on exactly one device."""
        if values is None or len(values) < self.n_x or not np.all(np.isfinite(values[: self.n_x])):
            return None
        x = np.zeros((self.n, self.n_devices))
        x[self.xi, self.xp] = values[: self.n_x]
        chosen = x > 0.5
        if not np.all(chosen.sum(axis=1) == 1):
            return None
        device = np.empty(self.n, dtype=np.int64)
        device[self.perm] = np.argmax(chosen, axis=1)
        return device


# ------------------------------------------------------------------- exact neighbourhood search

# Re-partition neighbourhoods: the windows of k devices are re-assigned among those k devices in the
# best of *all* possible ways (every assignment up to relabelling the k devices), the other devices
# fixed. k = 2 for groups of at most PAIR_MAX_WINDOWS windows, k = 3 for at most TRIPLE_MAX_WINDOWS
# (about 88,000 assignments at 12 windows). A move or swap of greedy.improve is one of these.
PAIR_MAX_WINDOWS = 16
TRIPLE_MAX_WINDOWS = 12
# Work cap of one descent (evaluated assignments): a deterministic stand-in for time. A descent with
# triples at 32 windows x 8 devices takes 1-7 million (0.1-0.4 s on the 2-core dev machine).
SEARCH_WORK_STEP = 20_000_000
SEARCH_WORK_GROUP = 2_000  # work charged per evaluated group on top of its assignments
PAIR_BATCH = 1 << 18  # assignments (pairs x splits) evaluated in one numpy batch
# Above ALL_GROUPS_MAX_DEVICES devices, pairs and triples are drawn from the SEARCH_PARTNERS heaviest
# and lightest devices of every weighted dimension (and by scalar load), as in greedy's local search.
ALL_GROUPS_MAX_DEVICES = 16
SEARCH_PARTNERS = 4
MIN_SOLVE_SECONDS = 0.01  # the MILP is not started with less of the step's time left
SOLVE_MARGIN_SECONDS = 0.03  # kept back from the MILP's time for building it and the last search
# Iterated local search after the first local optimum: at most ILS_ROUNDS rounds of ILS_KICK random
# moves + pair re-partitions, within ILS_SHARE of the step's time_limit. With node_limit > 0, which
# asks for reproducible schedules, ILS_ROUNDS_REPRODUCIBLE rounds and no time share (the step's
# deadline still applies). A round takes about 10 ms at 32 windows x 8 devices (2-core dev machine).
ILS_ROUNDS = 256
ILS_ROUNDS_REPRODUCIBLE = 32
ILS_KICK = 3
ILS_SHARE = 0.5  # of the step's time_limit, for the iterated search (the rest: triples and the MILP)


@functools.lru_cache(maxsize=64)
def _assignments(m: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Every assignment of m windows to k unlabelled devices, as restricted growth strings.

    Returns (codes [N, m] int8: window i goes to device codes[:, i], first windows in label order;
    onehot [k - 1, m, N] float32: onehot[j] = (codes == j).T, the last label is the complement).
    """
    if m <= 1:  # nothing to choose: the window (if any) on the first device
        codes = np.zeros((1, m), np.int8)
    elif k == 2:
        rest = ((np.arange(2 ** (m - 1))[:, None] >> np.arange(m - 1)[None, :]) & 1).astype(np.int8)
        codes = np.hstack([np.zeros((len(rest), 1), np.int8), rest])
    else:
        rest = np.indices((k,) * (m - 1), dtype=np.int8).reshape(m - 1, -1).T
        codes = np.hstack([np.zeros((len(rest), 1), np.int8), rest])
    if k > 2 and m > 1:
        run = np.maximum.accumulate(codes, axis=1)
        codes = codes[np.all(codes[:, 1:] <= run[:, :-1] + 1, axis=1)]
    codes = np.ascontiguousarray(codes)
    onehot = np.zeros((k - 1, m, len(codes)), np.float32)
    for j in range(k - 1):
        onehot[j] = (codes == j).T
    return codes, onehot


def _best_reassignment(
    cs: np.ndarray, other_max: np.ndarray, w: np.ndarray, norm: np.ndarray, k: int, cutoff: float
) -> tuple[np.ndarray | None, int]:
    """The best assignment of windows cs [m, D] (costs scaled to O(1)) to k devices, given the max
    loads of the other devices: by objective ``w · max(other_max, loads)``, then by the sum of
    squared normalised loads. Screens all assignments in float32, then ranks the near-best in float64.
    Returns (codes[best] or None when no objective is <= cutoff, number of assignments screened).
    """
    codes, onehot = _assignments(len(cs), k)
    ct = np.ascontiguousarray(cs.T, dtype=np.float32)  # [D, m]
    loads = [ct @ onehot[j] for j in range(k - 1)]  # [D, N] each
    top = ct.sum(axis=1, keepdims=True) - sum(loads)  # the last device
    np.maximum(top, other_max.astype(np.float32)[:, None], out=top)
    for lj in loads:
        np.maximum(top, lj, out=top)
    f = w.astype(np.float32) @ top
    fmin = float(f.min())
    slack = 1e-5 * max(abs(fmin), 1e-30)  # float32 screening error, then exact ranking
    if fmin > cutoff + slack:
        return None, len(codes)
    near = np.flatnonzero(f <= fmin + slack)
    if len(near) > 4096:  # plateaus of exact ties: rank a deterministic subset
        near = near[:4096]
    oh = (codes[near][:, :, None] == np.arange(k)[None, None, :]).astype(np.float64)  # [t, m, k]
    exact = np.einsum("tmk,md->tkd", oh, cs)  # [t, k, D]
    fe = np.maximum(exact.max(axis=1), other_max) @ w
    sec = np.einsum("tkd,d->t", exact * exact, norm)
    best = int(np.lexsort((sec, fe))[0])
    if fe[best] > cutoff:
        return None, len(codes)
    return codes[near[best]], len(codes)


def _other_max_of_pairs(loads: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[G, D]: per dimension the max load over the devices other than a[g] and b[g]."""
    n_devices, n_dims = loads.shape
    top = min(3, n_devices)
    idx = np.argsort(-loads, axis=0, kind="stable")[:top]  # [top, D]
    vals = np.take_along_axis(loads, idx, axis=0)
    if top < 3:  # a phantom empty device (loads are >= 0)
        idx = np.vstack([idx, np.full((3 - top, n_dims), -1)])
        vals = np.vstack([vals, np.zeros((3 - top, n_dims))])
    a, b = a[:, None], b[:, None]
    out0 = (idx[0] == a) | (idx[0] == b)
    out1 = (idx[1] == a) | (idx[1] == b)
    return np.where(out0, np.where(out1, vals[2], vals[1]), vals[0])


def _best_pair_move(
    c: np.ndarray,
    device: np.ndarray,
    loads: np.ndarray,
    counts: np.ndarray,
    w: np.ndarray,
    norm: np.ndarray,
    pairs: np.ndarray,
    deadline: float = np.inf,
) -> tuple[tuple | None, int]:
    """The most improving exact re-partition of any device pair, all pairs evaluated in batches.

    Pairs of equal window count m (2 <= m <= ``PAIR_MAX_WINDOWS``) are evaluated together on every
    one of their 2^(m - 1) splits. Improving: a lower objective, or the same and a lower sum of
    squared normalised loads of the pair; the best is the lowest (objective, change of that sum).
    Stops between batches once past ``deadline``, with the best move seen so far.
    Returns ((a, b, idx, code) or None, assignments evaluated).
    """
    f_now = float(loads.max(axis=0) @ w)
    tol = 1e-9 * max(f_now, 1e-300)
    m_pair = counts[pairs].sum(axis=1)
    order = np.argsort(device, kind="stable")  # windows grouped by device
    starts = np.concatenate([[0], np.cumsum(counts)])
    best, best_key, work = None, (f_now + tol, 0.0), 0
    for m in np.unique(m_pair):
        if m < 2 or m > PAIR_MAX_WINDOWS:
            continue
        codes, onehot = _assignments(int(m), 2)
        same = pairs[m_pair == m]
        chunk = max(1, PAIR_BATCH // len(codes))  # pairs per batch: bounded memory at any P
        for lo in range(0, len(same), chunk):
            if work and time.perf_counter() > deadline:  # out of time: the best move seen so far
                return best, work
            sel = same[lo : lo + chunk]
            # window ids of each pair: device a's then device b's, in window order
            idx = np.stack(
                [
                    np.concatenate([order[starts[p] : starts[p + 1]], order[starts[q] : starts[q + 1]]])
                    for p, q in sel
                ]
            )  # [G, m]
            found, key, n_work = _pair_batch(c, idx, sel, loads, w, norm, onehot[0], f_now, tol)
            work += n_work
            if found is not None and (best is None or key < best_key):
                g, n_ = found
                best_key, best = key, (int(sel[g, 0]), int(sel[g, 1]), idx[g], codes[n_])
    return best, work


def _pair_batch(
    c: np.ndarray,
    idx: np.ndarray,
    sel: np.ndarray,
    loads: np.ndarray,
    w: np.ndarray,
    norm: np.ndarray,
    onehot0: np.ndarray,
    f_now: float,
    tol: float,
) -> tuple[tuple[int, int] | None, tuple[float, float] | None, int]:
    """One batch of ``_best_pair_move``: pairs ``sel`` [G, 2] with windows ``idx`` [G, m] each.
    Returns ((pair row, split) of the best improvement or None, its key, assignments evaluated)."""
    a, b = sel[:, 0], sel[:, 1]
    cs = c[idx]  # [G, m, D]
    load_a = np.einsum("gmd,mn->gdn", cs, onehot0.astype(np.float64))  # label 0
    load_b = cs.sum(axis=1)[:, :, None] - load_a
    om = _other_max_of_pairs(loads, a, b)  # [G, D]
    f = np.einsum("gdn,d->gn", np.maximum(np.maximum(load_a, load_b), om[:, :, None]), w)
    sec = np.einsum("gdn,d->gn", load_a * load_a + load_b * load_b, norm)
    sec_now = ((loads[a] ** 2 + loads[b] ** 2) @ norm)[:, None]
    # lexicographic (objective, change of the pair's squared loads); only strict improvements
    f_key = np.where(f < f_now - tol, f, np.where(f <= f_now + tol, f_now, np.inf))
    d_sec = sec - sec_now
    ok = (f < f_now - tol) | ((f <= f_now + tol) & (d_sec < -1e-9 * np.maximum(sec_now, 1e-300)))
    if not ok.any():
        return None, None, f.size
    f_key = np.where(ok, f_key, np.inf)
    g, n_ = np.unravel_index(np.lexsort((d_sec.ravel(), f_key.ravel()))[0], f.shape)
    return (int(g), int(n_)), (float(f_key[g, n_]), float(d_sec[g, n_])), f.size


def neighbourhood_search(
    c: np.ndarray,
    device: np.ndarray,
    n_devices: int,
    weights: np.ndarray,
    max_work: float = SEARCH_WORK_STEP,
    deadline: float = np.inf,
    triples: bool = True,
) -> tuple[np.ndarray, dict]:
    """Exact re-partitions of device pairs, then triples, until none improves (a local optimum).

    Pairs: every pair of devices (at most ``PAIR_MAX_WINDOWS`` windows between them) is evaluated on
    every re-assignment of its windows between its two devices (all pairs at once), and the most
    improving one is applied (steepest descent). When no pair improves, every triple that holds a
    device at a per-dimension maximum (at most ``TRIPLE_MAX_WINDOWS`` windows) is tried the same
    way, the first improving one applied, and the pairs start again (``triples=False``: pairs only).
    Above ``ALL_GROUPS_MAX_DEVICES`` devices, pairs and triples are formed from the
    ``SEARCH_PARTNERS`` heaviest and lightest devices of every dimension (and by scalar load) only.
    Improving means a lower step objective, or the same objective and a lower sum of squared loads
    (normalised per dimension: flattening ties so that later moves can lower a maximum); both only
    decrease, so it terminates. Bounded by ``max_work`` evaluated assignments (deterministic) and by
    the ``deadline`` (``time.perf_counter``).

    Returns (device [n], stats {"pair_moves", "triple_moves", "work", "stopped"}).
    """
    device = np.asarray(device, dtype=np.int64).copy()
    stats = {"pair_moves": 0, "triple_moves": 0, "work": 0, "stopped": ""}
    n = len(c)
    if n_devices < 2 or n < 2:
        return device, stats
    active = np.flatnonzero(weights > 0)
    c, w = c[:, active], weights[active]
    scale = np.maximum(c.sum(axis=0) / n_devices, 1e-300)  # O(1) loads, objective weights w * scale
    c, w = c / scale, w * scale
    norm = w / n_devices
    loads = device_loads(c, device, n_devices)
    counts = np.bincount(device, minlength=n_devices)
    few = n_devices <= ALL_GROUPS_MAX_DEVICES
    all_pairs = np.array(list(itertools.combinations(range(n_devices), 2)), dtype=np.int64).reshape(-1, 2)
    all_triples = None
    if few:
        all_triples = np.array(list(itertools.combinations(range(n_devices), 3)), dtype=np.int64).reshape(
            -1, 3
        )
    version = np.zeros(n_devices, np.int64)  # bumped when a device's windows change
    settled: dict[tuple, tuple] = {}  # triple -> (versions, other_max) of its last non-improving look

    def out_of_budget() -> bool:
        if stats["work"] >= max_work or time.perf_counter() > deadline:
            stats["stopped"] = "work" if stats["work"] >= max_work else "time"
            return True
        return False

    def apply(group: np.ndarray, idx: np.ndarray, code: np.ndarray) -> None:
        device[idx] = group[code]
        loads[group] = 0.0
        np.add.at(loads, device[idx], c[idx])
        counts[group] = np.bincount(code, minlength=len(group))
        version[group] += 1

    def try_triple(group: np.ndarray) -> bool:
        m = int(counts[group].sum())
        if m < 2 or m > TRIPLE_MAX_WINDOWS:
            return False
        rest = np.ones(n_devices, bool)
        rest[group] = False
        other_max = loads[rest].max(axis=0) if rest.any() else np.zeros(len(w))
        key = tuple(group.tolist())
        state = (tuple(version[group].tolist()), other_max.tobytes())
        if settled.get(key) == state:  # same windows, same other maxima: the same (no) answer
            return False
        if out_of_budget():
            return False
        idx = np.flatnonzero((device == group[0]) | (device == group[1]) | (device == group[2]))
        cur_f = float(np.maximum(loads[group].max(axis=0), other_max) @ w)
        cur_sec = float(((loads[group] ** 2) @ norm).sum())
        tol = 1e-9 * max(cur_f, 1e-300)
        code, work = _best_reassignment(c[idx], other_max, w, norm, 3, cur_f + tol)
        stats["work"] += work + SEARCH_WORK_GROUP
        if code is not None:
            new = np.zeros((3, len(w)))
            np.add.at(new, code, c[idx])
            f = float(np.maximum(new.max(axis=0), other_max) @ w)
            sec = float(((new**2) @ norm).sum())
            if f < cur_f - tol or (f <= cur_f + tol and sec < cur_sec - 1e-9 * max(cur_sec, 1e-300)):
                apply(group, idx, code)
                return True
        settled[key] = state
        return False

    def partners() -> np.ndarray:
        """The heaviest and lightest devices of every weighted dimension and by scalar load."""
        keys = np.column_stack([loads, loads @ w])
        k = min(SEARCH_PARTNERS, n_devices)
        return np.union1d(
            np.argsort(-keys, axis=0, kind="stable")[:k], np.argsort(keys, axis=0, kind="stable")[:k]
        )

    while not out_of_budget():
        if few:
            pairs = all_pairs
        else:
            cand = partners()
            pairs = np.array(list(itertools.combinations(cand.tolist(), 2)), dtype=np.int64).reshape(-1, 2)
        move, work = _best_pair_move(c, device, loads, counts, w, norm, pairs, deadline)
        stats["work"] += work + SEARCH_WORK_GROUP
        if move is not None:
            a, b, idx, code = move
            apply(np.array([a, b]), idx, code)
            stats["pair_moves"] += 1
            continue
        if not triples:
            break
        top = loads.max(axis=0)
        critical = np.flatnonzero(np.any(loads >= top * (1 - 1e-9), axis=1))
        if few:
            triple_groups = all_triples[np.isin(all_triples, critical).any(axis=1)]
        else:
            cand = np.union1d(partners(), critical).tolist()
            triple_groups = np.array(
                [g for g in itertools.combinations(cand, 3) if np.isin(g, critical).any()], dtype=np.int64
            ).reshape(-1, 3)
        moved = False
        for g in triple_groups:
            if try_triple(g):
                stats["triple_moves"] += 1
                moved = True
                break
        if not moved:
            break
    return device, stats


def iterated_search(
    c: np.ndarray,
    device: np.ndarray,
    n_devices: int,
    weights: np.ndarray,
    rng: np.random.Generator,
    rounds: int = ILS_ROUNDS,
    deadline: float = np.inf,
    target: float = -np.inf,
) -> tuple[np.ndarray, dict]:
    """Iterated local search over pair re-partitions (``neighbourhood_search`` with pairs only).

    Descends from ``device`` first. A round then moves ``ILS_KICK`` random windows to random
    devices, descends again and accepts the result unless it is worse than the current placement
    (so it walks plateaus). At most ``rounds`` rounds (deterministic for a seeded ``rng``), none
    started after ``deadline`` or once the best objective is <= ``target``. Returns (the best device
    [n], stats {"rounds", "improvements", "pair_moves"}; pair_moves: of the first descent).
    """
    best, first = neighbourhood_search(c, device, n_devices, weights, deadline=deadline, triples=False)
    stats = {"rounds": 0, "improvements": 0, "pair_moves": first["pair_moves"]}
    n = len(c)
    if n_devices < 2 or n < 2:
        return best, stats
    f_best = step_objective(c, best, n_devices, weights)
    current, f_cur = best.copy(), f_best
    kick = min(ILS_KICK, n)
    for _ in range(rounds):
        if f_best <= target or time.perf_counter() > deadline:
            break
        stats["rounds"] += 1
        x = current.copy()
        x[rng.choice(n, kick, replace=False)] = rng.integers(0, n_devices, kick)
        x, _ = neighbourhood_search(c, x, n_devices, weights, deadline=deadline, triples=False)
        f = step_objective(c, x, n_devices, weights)
        if f < f_best * (1.0 - 1e-12):
            best, f_best = x.copy(), f
            stats["improvements"] += 1
        if f <= f_cur * (1.0 + 1e-12):
            current, f_cur = x, f
    return best, stats


# ---------------------------------------------------------------------------------------- solvers


def _solve_highspy(
    model: StepModel,
    start: np.ndarray,
    settings: ScheduleSettings,
    time_limit: float | None = None,
    deadline: float | None = None,
) -> dict:
    """Solve with highspy, started from ``start``, for ``time_limit`` seconds (default
    ``settings.time_limit``), and not past ``deadline`` (``time.perf_counter``; counted after the
    model is passed). Returns {status, values, bound, message}."""
    import highspy

    with quiet_stdout():
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("log_to_console", False)
        tl = float(settings.time_limit if time_limit is None else time_limit)
        h.setOptionValue("time_limit", tl)
        h.setOptionValue("mip_rel_gap", float(settings.mip_gap))
        h.setOptionValue("random_seed", 0)
        node_limit = int(getattr(settings, "node_limit", 0) or 0)
        if node_limit > 0:
            h.setOptionValue("mip_max_nodes", node_limit)
        lp = highspy.HighsLp()
        lp.num_col_ = model.n_col
        lp.num_row_ = model.n_row
        lp.col_cost_ = model.cost
        lp.col_lower_ = model.col_lower
        lp.col_upper_ = np.where(np.isinf(model.col_upper), highspy.kHighsInf, model.col_upper)
        lp.row_lower_ = np.where(np.isinf(model.row_lower), -highspy.kHighsInf, model.row_lower)
        lp.row_upper_ = np.where(np.isinf(model.row_upper), highspy.kHighsInf, model.row_upper)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = model.a.indptr.astype(np.int32)
        lp.a_matrix_.index_ = model.a.indices.astype(np.int32)
        lp.a_matrix_.value_ = model.a.data
        lp.integrality_ = [highspy.HighsVarType.kInteger] * model.n_x + [
            highspy.HighsVarType.kContinuous
        ] * model.n_dims
        h.passModel(lp)
        sol = highspy.HighsSolution()
        sol.col_value = list(start)
        sol.value_valid = True
        h.setSolution(sol)
        if deadline is not None:
            h.setOptionValue("time_limit", max(min(tl, deadline - time.perf_counter()), 1e-3))
        h.run()
        status = h.getModelStatus()
        info = h.getInfo()
        values = None
        if info.primal_solution_status >= 2:  # kSolutionStatusFeasible
            values = np.asarray(h.getSolution().col_value)
        bound = float(info.mip_dual_bound)
        text = h.modelStatusToString(status)
    ms = highspy.HighsModelStatus
    if status == ms.kOptimal:
        kind = "solved"
    elif status == ms.kTimeLimit:
        kind = "time_limit"
    elif status in (ms.kSolutionLimit, ms.kIterationLimit) or "node" in text.lower():
        kind = "node_limit"
    else:
        kind = "error"
    return {"status": kind, "values": values, "bound": bound, "message": text}


def _cvxpy_options(
    solver: str, settings: ScheduleSettings, time_limit: float | None = None
) -> tuple[dict, bool]:
    """Solver keyword arguments for the time limit / gap / node cap; (options, limits passed)."""
    tl = float(settings.time_limit if time_limit is None else time_limit)
    gap = float(settings.mip_gap)
    nodes = int(getattr(settings, "node_limit", 0) or 0)
    if solver == "HIGHS":
        opts = {"time_limit": tl, "mip_rel_gap": gap}
        if nodes > 0:
            opts["mip_max_nodes"] = nodes
        return opts, True
    if solver == "SCIPY":
        opts = {"time_limit": tl, "mip_rel_gap": gap}
        if nodes > 0:
            opts["node_limit"] = nodes
        return {"scipy_options": opts}, True
    if solver == "SCIP":
        params = {"limits/time": tl, "limits/gap": gap}
        if nodes > 0:
            params["limits/nodes"] = nodes
        return {"scip_params": params}, True
    if solver == "CBC":
        return {"maximumSeconds": tl, "allowableFractionGap": gap}, True
    if solver == "GUROBI":
        return {"TimeLimit": tl, "MIPGap": gap}, True
    if solver == "CPLEX":
        return {"cplex_params": {"timelimit": tl, "mip.tolerances.mipgap": gap}}, True
    return {}, False


def _solve_cvxpy(
    model: StepModel, solver: str, settings: ScheduleSettings, time_limit: float | None = None
) -> dict:
    """Solve the same model through cvxpy (no user start). Returns {status, values, bound, message}."""
    import cvxpy as cp

    x = cp.Variable(model.n_x, boolean=True)
    m = cp.Variable(model.n_dims)
    a = model.a.tocsr()
    ax, am = a[:, : model.n_x], a[:, model.n_x :]
    lo, hi = model.row_lower, model.row_upper
    eq = lo == hi
    le = ~eq & np.isfinite(hi)
    ge = ~eq & np.isfinite(lo)
    constraints = [m >= model.col_lower[model.n_x :]]
    for rows, sense in ((eq, "eq"), (le, "le"), (ge, "ge")):
        if rows.any():
            lhs = ax[rows] @ x + am[rows] @ m
            rhs = (lo if sense != "le" else hi)[rows]
            constraints.append(lhs == rhs if sense == "eq" else (lhs <= rhs if sense == "le" else lhs >= rhs))
    problem = cp.Problem(cp.Minimize(model.cost[model.n_x :] @ m), constraints)
    opts, limited = _cvxpy_options(solver, settings, time_limit)
    try:
        with quiet_stdout(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "solution may be inaccurate" after a time limit
            problem.solve(solver=solver, **opts)
    except (cp.error.SolverError, ValueError, ArithmeticError) as e:  # solver failed
        return {"status": "error", "values": None, "bound": -np.inf, "message": _one_line(e)}
    status = problem.status
    values = None
    if x.value is not None and m.value is not None:
        values = np.concatenate([np.asarray(x.value).ravel(), np.asarray(m.value).ravel()])
    bound = -np.inf
    extra = getattr(problem.solver_stats, "extra_stats", None)
    if isinstance(extra, dict) and extra.get("mip_dual_bound") is not None:
        bound = float(extra["mip_dual_bound"])
    elif extra is not None and hasattr(extra, "mip_dual_bound"):
        bound = float(extra.mip_dual_bound)
    if status == cp.OPTIMAL:
        kind = "solved"
        if not np.isfinite(bound) and problem.value is not None:
            bound = float(problem.value) * (1.0 - float(settings.mip_gap))
    elif status in (cp.USER_LIMIT, cp.OPTIMAL_INACCURATE):
        kind = "time_limit"
    else:
        kind = "error"
    message = str(status) + ("" if limited else f" (time_limit/mip_gap not passed to {solver})")
    return {"status": kind, "values": values, "bound": bound, "message": message}


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:200]}"


# ---------------------------------------------------------------------------------------- method


@register("dygnex_l")
def dygnex_l(
    costs: np.ndarray,
    n_devices: int,
    batch_size: int,
    settings: ScheduleSettings,
    rng: np.random.Generator,
) -> Schedule:
    """Per-step MILP from the greedy placement; never worse than dygnex_g (see module docstring)."""
    solver = check_solver(settings.solver)
    if not settings.time_limit > 0:
        raise UserError(f"schedule.time_limit must be > 0 seconds, got {settings.time_limit}")
    if not settings.mip_gap >= 0:
        raise UserError(f"schedule.mip_gap must be >= 0, got {settings.mip_gap}")
    if int(getattr(settings, "node_limit", 0) or 0) < 0:
        raise UserError(f"schedule.node_limit must be >= 0 (0 = no cap), got {settings.node_limit}")
    start_time = time.perf_counter()
    base, steps, devices = greedy_schedule(costs, n_devices, batch_size, settings, rng, name="dygnex_l")
    greedy_seconds = time.perf_counter() - start_time
    weights = checked_weights(settings, costs.shape[1])
    gap = float(settings.mip_gap)
    use_highspy = solver == "HIGHS" and bool(getattr(settings, "ilp_warm_start", True))
    if use_highspy:  # no cvxpy import on this path (it costs about a second)
        not_installed = importlib.util.find_spec("highspy") is None
    else:
        not_installed = solver not in installed_milp_solvers()

    node_limit = int(getattr(settings, "node_limit", 0) or 0)
    step_seeds = rng.integers(0, 2**63 - 1, size=len(steps))  # drawn after greedy's use of rng
    records = []
    final_devices = []
    for s, ids in enumerate(steps):
        step_start = time.perf_counter()
        deadline = step_start + float(settings.time_limit)
        c = costs[ids]
        dev_g = devices[s]
        f_greedy = step_objective(c, dev_g, n_devices, weights)
        lb, group_bounds = grouped_lower_bound(c, n_devices, weights)
        rec = {
            "step": s,
            "windows": len(ids),
            "greedy_objective": f_greedy,
            "search_objective": f_greedy,
            "objective": f_greedy,
            "lower_bound": lb,
            "seconds": 0.0,
            "search_seconds": 0.0,
            "milp_seconds": 0.0,
            "improved": False,
        }
        best, f_best = dev_g, f_greedy
        if n_devices == 1 or _within_gap(f_greedy, lb, gap):
            rec["status"] = "skipped"
            rec["message"] = "greedy within mip_gap of the lower bound"
        elif not_installed:  # a misconfigured solver: the plain greedy fallback, said once
            rec["status"] = "not_installed"
            rec["message"] = f"{solver} is not installed"
        else:
            # 1. iterated pair re-partitions from the greedy placement (seeded per step; a round cap,
            #    and a share of the step's time unless node_limit asks for reproducible schedules)
            if node_limit > 0:
                rounds, until = ILS_ROUNDS_REPRODUCIBLE, deadline
            else:
                rounds, until = ILS_ROUNDS, step_start + ILS_SHARE * float(settings.time_limit)
            target = lb * (1.0 + gap)
            step_rng = np.random.default_rng(step_seeds[s])
            dev_s, rec["iterated"] = iterated_search(
                c, dev_g, n_devices, weights, step_rng, rounds, min(until, deadline), target
            )
            # 2. the best of those, polished by pair and triple re-partitions (deterministic work cap)
            if not _within_gap(step_objective(c, dev_s, n_devices, weights), lb, gap):
                dev_s, rec["search"] = neighbourhood_search(c, dev_s, n_devices, weights, deadline=deadline)
            f_s = step_objective(c, dev_s, n_devices, weights)
            if f_s < f_best * (1.0 - 1e-12):
                best, f_best = dev_s, f_s
            rec["search_objective"] = f_best
            rec["search_seconds"] = time.perf_counter() - step_start
            remaining = deadline - time.perf_counter()
            if _within_gap(f_best, lb, gap):
                rec["status"] = "solved"
                rec["message"] = "neighbourhood search within mip_gap of the lower bound"
            elif remaining - SOLVE_MARGIN_SECONDS < MIN_SOLVE_SECONDS:
                rec["status"] = "time_limit"
                rec["message"] = "time_limit spent before the MILP"
            else:
                # 3. the MILP, started from the best placement so far, for the rest of the step's time
                t0 = time.perf_counter()
                model = StepModel(c, n_devices, weights, group_bounds)
                try:
                    if use_highspy:
                        out = _solve_highspy(
                            model, model.start(best), settings, deadline=deadline - SOLVE_MARGIN_SECONDS
                        )
                    else:
                        left = deadline - SOLVE_MARGIN_SECONDS - time.perf_counter()
                        out = _solve_cvxpy(model, solver, settings, max(left, 1e-3))
                except Exception as e:  # noqa: BLE001 - any solver failure keeps the best so far
                    out = {"status": "error", "values": None, "bound": -np.inf, "message": _one_line(e)}
                rec["milp_seconds"] = time.perf_counter() - t0
                rec["status"] = out["status"]
                rec["message"] = out["message"]
                if np.isfinite(out["bound"]):
                    rec["lower_bound"] = max(lb, float(out["bound"]))
                dev_ilp = model.decode(out["values"])
                if dev_ilp is not None:
                    f_ilp = step_objective(c, dev_ilp, n_devices, weights)
                    if f_ilp < f_best * (1.0 - 1e-12):
                        best, f_best = dev_ilp, f_ilp
                        # 4. the MILP's incumbent may not be a local optimum of the re-partitions
                        dev_s, _ = neighbourhood_search(c, best, n_devices, weights, deadline=deadline)
                        f_s = step_objective(c, dev_s, n_devices, weights)
                        if f_s < f_best * (1.0 - 1e-12):
                            best, f_best = dev_s, f_s
                elif out["status"] == "solved":
                    rec["status"] = "error"
                    rec["message"] = "solver returned no valid assignment"
        if f_best < f_greedy * (1.0 - 1e-12):
            dev_g, rec["objective"], rec["improved"] = best, f_best, True
        rec["seconds"] = time.perf_counter() - step_start
        rec["lower_bound"] = min(rec["lower_bound"], rec["objective"])
        records.append(rec)
        final_devices.append(dev_g)

    objective = float(sum(r["objective"] for r in records))
    bound = float(sum(r["lower_bound"] for r in records))
    info = {
        "solver": solver,
        "backend": "highspy (started from the search)" if use_highspy else "cvxpy",
        "time_limit_per_step": float(settings.time_limit),
        "mip_gap": gap,
        "objective": objective,
        "greedy_objective": float(base.info["objective"]),
        "lower_bound": bound,
        "gap": (objective - bound) / objective if objective > 0 else 0.0,
        "greedy_seconds": greedy_seconds,
        "improved_steps": int(sum(r["improved"] for r in records)),
        "search_objective": float(sum(r["search_objective"] for r in records)),
        "seconds_per_step": float(np.mean([r["seconds"] for r in records])) if records else 0.0,
        "statuses": {
            k: sum(r["status"] == k for r in records) for k in sorted({r["status"] for r in records})
        },
        "steps": records,
        "greedy": base.info,
    }
    return Schedule(
        "dygnex_l",
        [split_by_device(ids, d, n_devices) for ids, d in zip(steps, final_devices)],
        n_devices,
        batch_size,
        fallback=_fallback_line(records, solver, settings),
        info=info,
    )


def _within_gap(objective: float, bound: float, gap: float) -> bool:
    return objective <= bound * (1.0 + gap) + 1e-12 * abs(bound)


def _fallback_line(records: list[dict], solver: str, settings: ScheduleSettings) -> str | None:
    """One line on why some steps kept a non-proven answer, or None when every solve finished."""
    bad = [r for r in records if r["status"] not in ("solved", "skipped")]
    if not bad:
        return None
    n = len(records)
    kept = sum(not r["improved"] for r in bad)
    worst = max(bad, key=lambda r: (r["objective"] - r["lower_bound"]) / max(r["objective"], 1e-300))
    worst_gap = (worst["objective"] - worst["lower_bound"]) / max(worst["objective"], 1e-300)
    tail = f"kept greedy on {kept} of them" if kept else "kept the best ILP answer found"
    tail += f"; worst gap {100 * worst_gap:.1f}% to the lower bound"
    kinds = {r["status"] for r in bad}
    if "not_installed" in kinds:
        installed = installed_milp_solvers()
        return (
            f"MILP solver {solver} is not installed (installed: {', '.join(installed) or 'none'}); "
            f"kept greedy on all {n} steps"
        )
    parts = []
    if "time_limit" in kinds:
        k = sum(r["status"] == "time_limit" for r in bad)
        parts.append(f"hit time_limit={settings.time_limit:g}s on {k}/{n} steps")
    if "node_limit" in kinds:
        k = sum(r["status"] == "node_limit" for r in bad)
        parts.append(f"hit node_limit={getattr(settings, 'node_limit', 0)} on {k}/{n} steps")
    if "error" in kinds:
        k = sum(r["status"] == "error" for r in bad)
        first = next(r for r in bad if r["status"] == "error")
        parts.append(f"failed on {k}/{n} steps ({first['message']})")
    return f"{solver} " + ", ".join(parts) + f"; {tail}"
