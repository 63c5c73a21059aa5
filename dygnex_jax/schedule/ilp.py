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

Modules: this one keeps the method and the solver checks; ``ilp_search`` the re-partitions and the
iterated search (phases 1, 2, 4), ``ilp_model`` the MILP and the grouped bound, ``ilp_solvers`` the
highspy and cvxpy backends. Their names are re-exported here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import time

import numpy as np

from ..errors import UserError
from .base import Schedule, ScheduleSettings, register
from .greedy import checked_weights, greedy_schedule, split_by_device
from .ilp_model import GROUPED_BOUND_MAX_DIMS, StepModel, grouped_lower_bound  # noqa: F401  (re-exported)
from .ilp_search import (  # noqa: F401  (the search's names, re-exported)
    ALL_GROUPS_MAX_DEVICES,
    ILS_KICK,
    ILS_ROUNDS,
    ILS_ROUNDS_REPRODUCIBLE,
    ILS_SHARE,
    PAIR_MAX_WINDOWS,
    SEARCH_PARTNERS,
    SEARCH_WORK_STEP,
    TRIPLE_MAX_WINDOWS,
    _assignments,
    iterated_search,
    neighbourhood_search,
)
from .ilp_solvers import (  # noqa: F401  (the backends' names, re-exported)
    _cvxpy_options,
    _one_line,
    _solve_cvxpy,
    _solve_highspy,
    quiet_stdout,
)
from .objective import step_objective

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
    if solver == "HIGHS" and bool(settings.ilp_warm_start):
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


MIN_SOLVE_SECONDS = 0.01  # the MILP is not started with less of the step's time left
SOLVE_MARGIN_SECONDS = 0.03  # kept back from the MILP's time for building it and the last search


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
    solver = _checked_solver(settings)
    start_time = time.perf_counter()
    base, steps, devices = greedy_schedule(costs, n_devices, batch_size, settings, rng, name="dygnex_l")
    greedy_seconds = time.perf_counter() - start_time
    return _improved(
        costs, steps, devices, n_devices, batch_size, settings, solver, rng, base.info, greedy_seconds
    )


def improve_schedule(sched: Schedule, costs: np.ndarray, settings: ScheduleSettings, seed) -> Schedule:
    """DyGNeX-L's per-step MILP on the steps of ``sched`` (any method's: the same windows in every step,
    only their devices change), started from its placement, so never worse step by step."""
    solver = _checked_solver(settings)
    start = time.perf_counter()
    steps = [np.concatenate(step) for step in sched.steps]
    devices = [np.repeat(np.arange(sched.n_devices), [len(g) for g in step]) for step in sched.steps]
    rng = np.random.default_rng(seed)
    costs = np.asarray(costs, np.float64)
    w = checked_weights(settings, costs.shape[1])
    start_objective = sum(step_objective(costs[i], d, sched.n_devices, w) for i, d in zip(steps, devices))
    info = {"placed": sched.method, "objective": float(start_objective)}
    out = _improved(
        costs, steps, devices, sched.n_devices, sched.batch_size, settings, solver, rng, info, 0.0
    )
    return dataclasses.replace(out, seconds=time.perf_counter() - start, info={**sched.info, **out.info})


def _improved(costs, steps, devices, n_devices, batch_size, settings, solver, rng, info, greedy_seconds):
    """The placements ``devices[s]`` of every step's windows ``steps[s]`` improved by the MILP (``solver``:
    the caller's ``_checked_solver``) -> a ``Schedule``."""
    weights = checked_weights(settings, costs.shape[1])
    gap = float(settings.mip_gap)
    use_highspy = solver == "HIGHS" and bool(settings.ilp_warm_start)
    if use_highspy:  # no cvxpy import on this path (it costs about a second)
        not_installed = importlib.util.find_spec("highspy") is None
    else:
        not_installed = solver not in installed_milp_solvers()
    step_solver = _StepSolver(n_devices, weights, settings, solver, use_highspy)

    step_seeds = rng.integers(0, 2**63 - 1, size=len(steps))  # drawn after greedy's use of rng
    records = []
    final_devices = []
    for s, ids in enumerate(steps):
        step_start = time.perf_counter()
        c = costs[ids]
        dev_g = devices[s]
        f_greedy = step_objective(c, dev_g, n_devices, weights)
        lb, group_bounds = grouped_lower_bound(c, n_devices, weights)
        rec = _step_record(s, len(ids), f_greedy, lb)
        best, f_best = dev_g, f_greedy
        if n_devices == 1 or _within_gap(f_greedy, lb, gap):
            rec["status"] = "skipped"
            rec["message"] = "greedy within mip_gap of the lower bound"
        elif not_installed:  # a misconfigured solver: the plain greedy fallback, said once
            rec["status"] = "not_installed"
            rec["message"] = f"{solver} is not installed"
        else:
            step_rng = np.random.default_rng(step_seeds[s])
            best, f_best = step_solver.improve(
                c, dev_g, f_greedy, lb, group_bounds, step_rng, step_start, rec
            )
        if f_best < f_greedy * (1.0 - 1e-12):
            dev_g, rec["objective"], rec["improved"] = best, f_best, True
        rec["seconds"] = time.perf_counter() - step_start
        rec["lower_bound"] = min(rec["lower_bound"], rec["objective"])
        records.append(rec)
        final_devices.append(dev_g)

    return Schedule(
        "dygnex_l",
        [split_by_device(ids, d, n_devices) for ids, d in zip(steps, final_devices)],
        n_devices,
        batch_size,
        fallback=_fallback_line(records, solver, settings),
        info=_schedule_info(records, info, solver, use_highspy, settings, greedy_seconds),
    )


def _checked_solver(settings: ScheduleSettings) -> str:
    """``check_solver``, and a UserError for a time_limit, mip_gap or node_limit out of range."""
    solver = check_solver(settings.solver)
    if not settings.time_limit > 0:
        raise UserError(f"schedule.time_limit must be > 0 seconds, got {settings.time_limit}")
    if not settings.mip_gap >= 0:
        raise UserError(f"schedule.mip_gap must be >= 0, got {settings.mip_gap}")
    if int(settings.node_limit) < 0:
        raise UserError(f"schedule.node_limit must be >= 0 (0 = no cap), got {settings.node_limit}")
    return solver


def _step_record(step: int, windows: int, f_greedy: float, lb: float) -> dict:
    """A step's ``info["steps"]`` record before its search: the greedy placement's figures."""
    return {
        "step": step,
        "windows": windows,
        "greedy_objective": f_greedy,
        "search_objective": f_greedy,
        "objective": f_greedy,
        "lower_bound": lb,
        "seconds": 0.0,
        "search_seconds": 0.0,
        "milp_seconds": 0.0,
        "improved": False,
    }


@dataclasses.dataclass(frozen=True)
class _StepSolver:
    """Phases 1-4 of the module docstring for one step at a time, with what every step of a
    ``dygnex_l`` run shares (P, the objective weights, the settings and the MILP backend)."""

    n_devices: int
    weights: np.ndarray
    settings: ScheduleSettings
    solver: str
    use_highspy: bool

    def objective(self, c: np.ndarray, device: np.ndarray) -> float:
        return step_objective(c, device, self.n_devices, self.weights)

    def improve(
        self,
        c: np.ndarray,
        device: np.ndarray,
        f_device: float,
        lb: float,
        group_bounds: dict[tuple[int, ...], float],
        rng: np.random.Generator,
        step_start: float,
        rec: dict,
    ) -> tuple[np.ndarray, float]:
        """The best of the greedy placement ``device`` (objective ``f_device``) and those the search
        and the MILP find within the step's time, and its objective; sets rec's status, message,
        search and MILP figures. ``lb``, ``group_bounds``: ``grouped_lower_bound``."""
        gap = float(self.settings.mip_gap)
        deadline = step_start + float(self.settings.time_limit)
        best, f_best = device, f_device
        dev_s = self.search(c, device, lb, rng, step_start, deadline, rec)
        f_s = self.objective(c, dev_s)
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
            best, f_best = self.milp(c, best, f_best, lb, group_bounds, deadline, rec)
        return best, f_best

    def search(
        self,
        c: np.ndarray,
        device: np.ndarray,
        lb: float,
        rng: np.random.Generator,
        step_start: float,
        deadline: float,
        rec: dict,
    ) -> np.ndarray:
        """Phases 1 and 2 from ``device``: the best placement of the iterated search, polished by pair
        and triple re-partitions unless already within mip_gap of ``lb``."""
        settings, n_devices, weights = self.settings, self.n_devices, self.weights
        gap = float(settings.mip_gap)
        # 1. iterated pair re-partitions from the greedy placement (seeded per step; a round cap,
        #    and a share of the step's time unless node_limit asks for reproducible schedules)
        if int(settings.node_limit) > 0:
            rounds, until = ILS_ROUNDS_REPRODUCIBLE, deadline
        else:
            rounds, until = ILS_ROUNDS, step_start + ILS_SHARE * float(settings.time_limit)
        target = lb * (1.0 + gap)
        dev_s, rec["iterated"] = iterated_search(
            c, device, n_devices, weights, rng, rounds, min(until, deadline), target
        )
        # 2. the best of those, polished by pair and triple re-partitions (deterministic work cap)
        if not _within_gap(self.objective(c, dev_s), lb, gap):
            dev_s, rec["search"] = neighbourhood_search(c, dev_s, n_devices, weights, deadline=deadline)
        return dev_s

    def milp(
        self,
        c: np.ndarray,
        best: np.ndarray,
        f_best: float,
        lb: float,
        group_bounds: dict[tuple[int, ...], float],
        deadline: float,
        rec: dict,
    ) -> tuple[np.ndarray, float]:
        """Phases 3 and 4: the MILP started from ``best`` for the rest of the step's time, and the
        re-partitions of its incumbent when it is better. Returns the best placement and objective."""
        # 3. the MILP, started from the best placement so far, for the rest of the step's time
        t0 = time.perf_counter()
        model = StepModel(c, self.n_devices, self.weights, group_bounds)
        out = self.solve(model, best, deadline)
        rec["milp_seconds"] = time.perf_counter() - t0
        rec["status"] = out["status"]
        rec["message"] = out["message"]
        if np.isfinite(out["bound"]):
            rec["lower_bound"] = max(lb, float(out["bound"]))
        dev_ilp = model.decode(out["values"])
        if dev_ilp is not None:
            f_ilp = self.objective(c, dev_ilp)
            if f_ilp < f_best * (1.0 - 1e-12):
                best, f_best = dev_ilp, f_ilp
                # 4. the MILP's incumbent may not be a local optimum of the re-partitions
                dev_s, _ = neighbourhood_search(c, best, self.n_devices, self.weights, deadline=deadline)
                f_s = self.objective(c, dev_s)
                if f_s < f_best * (1.0 - 1e-12):
                    best, f_best = dev_s, f_s
        elif out["status"] == "solved":
            rec["status"] = "error"
            rec["message"] = "solver returned no valid assignment"
        return best, f_best

    def solve(self, model: StepModel, best: np.ndarray, deadline: float) -> dict:
        """The MILP by the run's backend, started from ``best`` (highspy only), ``SOLVE_MARGIN_SECONDS``
        before ``deadline``. Returns {status, values, bound, message}; any failure is an "error"."""
        try:
            if self.use_highspy:
                return _solve_highspy(
                    model, model.start(best), self.settings, deadline=deadline - SOLVE_MARGIN_SECONDS
                )
            left = deadline - SOLVE_MARGIN_SECONDS - time.perf_counter()
            return _solve_cvxpy(model, self.solver, self.settings, max(left, 1e-3))
        except Exception as e:  # noqa: BLE001 - any solver failure keeps the best so far
            return {"status": "error", "values": None, "bound": -np.inf, "message": _one_line(e)}


def _within_gap(objective: float, bound: float, gap: float) -> bool:
    return objective <= bound * (1.0 + gap) + 1e-12 * abs(bound)


def _schedule_info(
    records: list[dict],
    greedy_info: dict,
    solver: str,
    use_highspy: bool,
    settings: ScheduleSettings,
    greedy_seconds: float,
) -> dict:
    """``Schedule.info`` of a dygnex_l schedule: the summed objective and bound, per-step records."""
    objective = float(sum(r["objective"] for r in records))
    bound = float(sum(r["lower_bound"] for r in records))
    return {
        "solver": solver,
        "backend": "highspy (started from the search)" if use_highspy else "cvxpy",
        "time_limit_per_step": float(settings.time_limit),
        "mip_gap": float(settings.mip_gap),
        "objective": objective,
        "greedy_objective": float(greedy_info["objective"]),
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
        "greedy": greedy_info,
    }


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
        parts.append(f"hit node_limit={settings.node_limit} on {k}/{n} steps")
    if "error" in kinds:
        k = sum(r["status"] == "error" for r in bad)
        first = next(r for r in bad if r["status"] == "error")
        parts.append(f"failed on {k}/{n} steps ({first['message']})")
    return f"{solver} " + ", ".join(parts) + f"; {tail}"
