"""DyGNeX-L's MILP backends: highspy started from a placement (``_solve_highspy``) and cvxpy with any
installed MILP solver, unstarted (``_solve_cvxpy``), both returning {status, values, bound, message};
and ``quiet_stdout`` for the solvers' C-level prints.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import time
import warnings

import numpy as np

from .base import ScheduleSettings
from .ilp_model import StepModel


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
        node_limit = int(settings.node_limit)
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
    nodes = int(settings.node_limit)
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
