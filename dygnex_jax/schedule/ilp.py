"""DyGNeX-L: a mixed-integer program per step, started from (and never worse than) DyGNeX-G.

The steps are the greedy's (same ordering, same jitter, same rng: ``dygnex_l`` and ``dygnex_g`` with
one seed and epoch have identical step compositions); the MILP re-places the windows of one step
at a time on the P devices:

    minimise    sum_d w_d M_d
    subject to  sum_p x[k, p] = 1                      every window k of the step exactly once
                sum_k c[k, d] x[k, p] <= M_d            every device p, every weighted dimension d
                M_d >= LB_d                             (valid bounds: ``greedy.dimension_lower_bounds``)
                x[k, p] in {0, 1}

Devices are identical, so any relabelling of a solution is a solution. Symmetry breaking: windows
are numbered by decreasing scalar cost and window k may only use devices 0..k (x[k, p] = 0 for
p > k: device p's first window has index >= p after relabelling devices by first window), which
also fixes the heaviest window on device 0. (Measured at 32-64 windows x 8 devices against no
breaking, left to HiGHS's own symmetry detection, and a full first-window ordering of the devices:
this one was best or equal.)

The greedy answer is always computed first. A step whose greedy objective is already within
``mip_gap`` of the lower bound is not solved. ``solver = "HIGHS"`` (default) solves with highspy
directly, started from the greedy placement (cvxpy's ``warm_start`` does not pass a user start to
HiGHS, and an unstarted HiGHS is far worse than greedy on large steps); ``ilp_warm_start = false``
or any other MILP solver builds the same model in cvxpy and solves it without a start.
``time_limit`` (seconds) and ``mip_gap`` (relative) apply to *each* step's solve, so an epoch can
take up to ``steps x time_limit``; ``node_limit`` caps branch-and-bound nodes per solve (HIGHS,
SCIPY), which, unlike a binding time limit, gives the same schedule on any machine.

Per step the better of the MILP's incumbent and the greedy placement is kept, so dygnex_l <=
dygnex_g step by step. When a solve stops on a limit, fails, or the solver is not installed, the
schedule says so in ``Schedule.fallback`` (one line) and ``info`` holds per-step statuses, the
objective and the best lower bound (``info["objective"]``, ``info["lower_bound"]``,
``info["gap"]``). An unknown solver name is a ``UserError``.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
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
    dimension_lower_bounds,
    greedy_schedule,
    split_by_device,
    step_lower_bound,
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


class StepModel:
    """The MILP of one step in solver-neutral form (columns: allowed x[i, p], then M_d).

    Windows are renumbered by decreasing scalar cost (``perm``); column ``j < n_x`` is
    x[xi[j], xp[j]]; dimension costs are scaled per dimension to O(1) (``scale``) and the objective
    coefficients carry the scale back, so objective values are in the caller's units.
    """

    def __init__(self, c: np.ndarray, n_devices: int, weights: np.ndarray):
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


# ---------------------------------------------------------------------------------------- solvers


def _solve_highspy(model: StepModel, start: np.ndarray, settings: ScheduleSettings) -> dict:
    """Solve with highspy, started from ``start``. Returns {status, values, bound, message}."""
    import highspy

    with quiet_stdout():
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("log_to_console", False)
        h.setOptionValue("time_limit", float(settings.time_limit))
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
        lp.row_upper_ = model.row_upper
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


def _cvxpy_options(solver: str, settings: ScheduleSettings) -> tuple[dict, bool]:
    """Solver keyword arguments for the time limit / gap / node cap; (options, limits passed)."""
    tl, gap = float(settings.time_limit), float(settings.mip_gap)
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


def _solve_cvxpy(model: StepModel, solver: str, settings: ScheduleSettings) -> dict:
    """Solve the same model through cvxpy (no user start). Returns {status, values, bound, message}."""
    import cvxpy as cp

    x = cp.Variable(model.n_x, boolean=True)
    m = cp.Variable(model.n_dims)
    a = model.a.tocsr()
    ax, am = a[:, : model.n_x], a[:, model.n_x :]
    n = model.n
    constraints = [
        ax[:n] @ x == 1,
        ax[n:] @ x + am[n:] @ m <= 0,
        m >= model.col_lower[model.n_x :],
    ]
    problem = cp.Problem(cp.Minimize(model.cost[model.n_x :] @ m), constraints)
    opts, limited = _cvxpy_options(solver, settings)
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

    records = []
    final_devices = []
    for s, ids in enumerate(steps):
        c = costs[ids]
        dev_g = devices[s]
        f_greedy = step_objective(c, dev_g, n_devices, weights)
        lb = step_lower_bound(c, n_devices, weights)
        rec = {
            "step": s,
            "windows": len(ids),
            "greedy_objective": f_greedy,
            "objective": f_greedy,
            "lower_bound": lb,
            "seconds": 0.0,
            "improved": False,
        }
        if n_devices == 1 or f_greedy <= lb * (1.0 + gap) + 1e-12 * abs(lb):
            rec["status"] = "skipped"
            rec["message"] = "greedy within mip_gap of the lower bound"
        elif not_installed:
            rec["status"] = "not_installed"
            rec["message"] = f"{solver} is not installed"
        else:
            t0 = time.perf_counter()
            model = StepModel(c, n_devices, weights)
            try:
                if use_highspy:
                    out = _solve_highspy(model, model.start(dev_g), settings)
                else:
                    out = _solve_cvxpy(model, solver, settings)
            except Exception as e:  # noqa: BLE001 - any solver failure falls back to greedy
                out = {"status": "error", "values": None, "bound": -np.inf, "message": _one_line(e)}
            rec["seconds"] = time.perf_counter() - t0
            rec["status"] = out["status"]
            rec["message"] = out["message"]
            if np.isfinite(out["bound"]):
                rec["lower_bound"] = max(lb, float(out["bound"]))
            dev_ilp = model.decode(out["values"])
            if dev_ilp is not None:
                f_ilp = step_objective(c, dev_ilp, n_devices, weights)
                if f_ilp < f_greedy * (1.0 - 1e-12):
                    dev_g, rec["objective"], rec["improved"] = dev_ilp, f_ilp, True
            elif out["status"] == "solved":
                rec["status"] = "error"
                rec["message"] = "solver returned no valid assignment"
        rec["lower_bound"] = min(rec["lower_bound"], rec["objective"])
        records.append(rec)
        final_devices.append(dev_g)

    objective = float(sum(r["objective"] for r in records))
    bound = float(sum(r["lower_bound"] for r in records))
    info = {
        "solver": solver,
        "backend": "highspy (greedy start)" if use_highspy else "cvxpy",
        "time_limit_per_step": float(settings.time_limit),
        "mip_gap": gap,
        "objective": objective,
        "greedy_objective": float(base.info["objective"]),
        "lower_bound": bound,
        "gap": (objective - bound) / objective if objective > 0 else 0.0,
        "greedy_seconds": greedy_seconds,
        "improved_steps": int(sum(r["improved"] for r in records)),
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
