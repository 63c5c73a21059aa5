"""The run's plan: every planned epoch scheduled, and the candidate search that picks its composition,
fitting and repetition by the planned cost (padded work of every step on its planned budget + the
compilations). ``plan_run`` is what the trainer, the ``schedule`` command and the simulator call; the
budgets themselves are ``padding.plan_budgets``. No JAX.
"""

from __future__ import annotations

import collections
import dataclasses
import time

import numpy as np

from .config import Config
from .padding import (
    Budget,
    cheapest_holding,
    compile_rounds,
    device_need,
    layout_view,
    padded_cost,
    plan_budgets,
    step_need,
)
from .schedule import Schedule, cost_weights, schedule
from .schedule.base import repeated
from .schedule.greedy import FIXED_STEPS, SHRINK_WORK, balance_epoch
from .schedule.ilp import improve_schedule
from .step_cost import compile_parallelism, compile_prices


def scheduler_costs(ws, config: Config, layout: str) -> np.ndarray:
    """The cost vectors the scheduler balances: the columns the layout pays per device — (nodes,
    edges summed over offsets, pairs) for ``flat``; for ``scan`` the edges of every offset apart
    (``schedule.time_resolved``), as that layout pads every offset to one budget."""
    if layout != "scan":
        return layout_view(ws.costs("train", config.data.neg_mult), ws.edge_profile("train"), layout)[0]
    return ws.schedule_costs("train", config.data.neg_mult, config.schedule.time_resolved)


def window_slots(batch_size: int, n_devices: int) -> int:
    """The window-slot dimension every training budget has at least: ceil(B / P)."""
    return -(-batch_size // n_devices)


def step_needs(
    costs: np.ndarray, profile: np.ndarray, sched: Schedule, layout: str, slots: int = 0
) -> list[Budget]:
    """The exact budget every step of ``sched`` needs (``padding.step_need`` of its devices'
    ``padding.device_need``), from the windows' costs [K, 3] and edge profiles [K, W]; the devices'
    sums are taken in one pass per step (1,024 devices x 131k windows: no per-device Python)."""
    return [_step_need(costs, profile, step, layout, slots) for step in sched.steps]


def _step_need(costs: np.ndarray, profile: np.ndarray, step, layout: str, slots: int) -> Budget:
    """``step_need`` of the devices' ``device_need`` for one step (``step``: window ids per device);
    the same integers (the costs are counts, exact in float64 sums)."""
    sizes = np.array([len(ids) for ids in step], np.int64)
    n_dev = len(step)
    if sizes.sum() == 0:
        return step_need([device_need(0, np.zeros(profile.shape[1]), 0, 0, layout)] * max(n_dev, 1), slots)
    ids = np.concatenate([np.asarray(g, np.int64) for g in step])
    dev = np.repeat(np.arange(n_dev), sizes)
    nodes = np.bincount(dev, weights=costs[ids, 0], minlength=n_dev)
    pairs = np.bincount(dev, weights=costs[ids, 2], minlength=n_dev)
    if layout == "scan":  # the largest offset of each device's per-offset sums
        edges = np.max(
            [np.bincount(dev, weights=profile[ids, t], minlength=n_dev) for t in range(profile.shape[1])],
            axis=0,
        )
    else:
        edges = np.bincount(dev, weights=profile[ids].sum(axis=1), minlength=n_dev)
    return Budget(
        int(nodes.max()) + 1,
        max(int(edges.max()), 1),
        max(int(pairs.max()), 1),
        max(int(sizes.max()), slots, 1),
    )


# compose=auto under planned budgets: the compositions tried, in order of preference (more mixing
# first); a later candidate is chosen only if it is predicted faster by more than schedule.mix_margin.
COMPOSE_CANDIDATES = ("strata", "rows", "sorted")


@dataclasses.dataclass
class RunPlan:
    """What a run's training budgets were planned from.

    Fields:
      compose: the step composition used (``schedule.compose``, resolved when it was auto).
      schedules: epoch -> the ``Schedule`` of that epoch (the trainer trains these).
      needs: epoch -> the exact need of every step.
      budgets: the planned budgets (cheapest first); [] without planning.
      cost: Σ over the planned steps of the padded cost paid + the compile price x budgets.
      tried: candidate -> the figure the candidates were compared by (``score``), for the log.
      fitted: how the trained schedules were fitted (``fit_epochs``): "", "one budget" or "per budget".
      base: the schedule every epoch repeats in its own step order (``schedule.repeat_steps``), or None.
    """

    compose: str
    schedules: dict
    needs: dict
    budgets: list
    cost: float
    tried: dict
    fitted: str = ""
    base: Schedule | None = None
    seconds: float | None = None  # predicted seconds of the planned epochs (steps + compilations)
    score: str = "padded cost"  # what ``tried`` holds: "predicted seconds" or "padded cost"


@dataclasses.dataclass
class _Planner:
    """What ``plan_run``'s candidates share: the run's windows, costs, layout and settings."""

    ws: object
    config: Config
    devices: int
    layout: str
    settings: object
    epochs: list
    costs: np.ndarray
    profile: np.ndarray
    step_seconds: object = None  # Budget -> predicted seconds (the auto compile price), or None

    def __post_init__(self):
        self.sched_costs = scheduler_costs(self.ws, self.config, self.layout)
        self.weights = cost_weights(self.settings)
        self.batch = min(self.config.train.batch_size, len(self.sched_costs))  # a step holds <= K windows
        self.slots = window_slots(self.batch, self.devices)
        self.price = None  # a compilation's price in padded cost, set from the first candidate
        self.compile_s = None  # ... in predicted seconds (with step_seconds), set with it
        self.tried = {}  # candidate -> its score, in the order considered
        self.best = None  # the kept candidate: (compose, fit, scheds, needs, cost, budgets, base, score, s)

    def consider(self, name, compose, fit, scheds, needs, base=None) -> list:
        """Candidates come in order of preference (more mixing first): one is kept when it is predicted
        faster than the kept one by more than ``schedule.mix_margin`` (no step-time model: padded cost).
        -> its planned budgets."""
        budgets, total, seconds = self.planned_cost(needs)
        score = total if seconds is None else seconds
        self.tried[name] = score
        if self.best is None or _better(score, self.best[7], self.settings.mix_margin):
            self.best = (compose, fit, scheds, needs, total, budgets, base, score, seconds)
        return budgets

    def needs(self, scheds: dict) -> dict:
        return {
            e: step_needs(self.costs, self.profile, sc, self.layout, self.slots) for e, sc in scheds.items()
        }

    def attempt(self, method: str, compose: str) -> tuple[dict, dict]:
        """Every planned epoch scheduled by ``method`` with ``compose`` -> (schedules, step needs)."""
        st = dataclasses.replace(self.settings, method=method, compose=compose)
        seed = self.config.train.seed
        scheds = {
            e: schedule(self.sched_costs, self.devices, self.batch, st, seed=seed, epoch=e)
            for e in self.epochs
        }
        return scheds, self.needs(scheds)

    def cheapest_epoch(self, needs: dict) -> int:
        """The epoch whose steps need the least padded work on budgets of their own (exact needs)."""
        w, layout, weights = self.ws.window, self.layout, self.weights
        return min(needs, key=lambda e: sum(padded_cost(n, w, layout, weights) for n in needs[e]))

    def repeat(self, base: Schedule) -> tuple[dict, dict]:
        """Every planned epoch running ``base``'s steps in an order of its own (``repeated``)."""
        scheds = {e: repeated(base, self.config.train.seed, e) for e in self.epochs}
        return scheds, self.needs(scheds)

    def fitted(self, scheds: dict, needs: dict, budgets: list | None) -> tuple[dict, dict]:
        """``fit_epochs`` of ``scheds``: to one budget (``budgets`` None), or per planned budget."""
        classes = None
        if budgets is not None:
            w, layout = self.ws.window, self.layout
            classes = {
                e: [budgets.index(cheapest_holding(n, budgets, w, layout, self.weights)) for n in needs[e]]
                for e in scheds
            }
        weights = cost_weights(self.settings, self.sched_costs.shape[1])
        scheds = fit_epochs(scheds, self.sched_costs, weights, classes)
        return scheds, self.needs(scheds)

    def planned_cost(self, needs: dict) -> tuple[list, float, float | None]:
        """The budgets planned for ``needs``, their cost — every step's padded work on its budget plus
        the compilations at ``price`` — and their predicted seconds: every step on its budget by
        ``step_seconds`` plus the compilations at ``compile_s`` (None without ``step_seconds``)."""
        w, layout, weights, p = self.ws.window, self.layout, self.weights, self.config.parallel
        flat = [n for e in self.epochs for n in needs[e]]
        if self.price is None:  # one price for every candidate: the first one's average step
            self.price, self.compile_s = compile_prices(
                flat, self.config, w, layout, weights, self.step_seconds
            )
        workers, traced = compile_parallelism(self.step_seconds)
        budgets = plan_budgets(
            flat,
            w,
            layout,
            weights,
            compile_price=self.price,
            max_budgets=p.max_budgets,
            align=p.budget_align,
            workers=workers,
            traced=traced,
        )
        rounds = float(compile_rounds(len(budgets), workers, traced))
        paid = [cheapest_holding(n, budgets, w, layout, weights) for n in flat]
        cost = sum(padded_cost(b, w, layout, weights) for b in paid) + self.price * rounds
        if self.step_seconds is None:
            return budgets, cost, None
        steps = sum(count * self.step_seconds(b) for b, count in collections.Counter(paid).items())
        return budgets, cost, steps + self.compile_s * rounds


def plan_run(
    ws,
    config: Config,
    devices: int,
    layout: str,
    settings,
    epochs: list[int],
    costs=None,
    profile=None,
    step_seconds=None,
) -> RunPlan:
    """Schedule ``epochs`` with ``settings`` (the ``schedule`` section, maybe re-weighted by a cost
    model) and plan the run's budgets from their steps (``parallel.budgets: planned``; else no budgets).

    With a cost-ordered method the candidates are planned in order of mixing — with ``schedule.compose:
    auto`` every composition of ``COMPOSE_CANDIDATES`` (DyGNeX-L: its greedy twin's, which has the same
    steps), each as composed and fitted to one budget per epoch (``schedule.fit_epochs``); the kept one
    fitted per budget; then steps repeated every epoch (``schedule.repeat_steps``) — and a later one is
    kept only if it scores lower than the kept one by more than ``schedule.mix_margin``. The score is the
    predicted seconds of the planned epochs (every step on its budget by ``step_seconds``, plus the
    compilations), or without ``step_seconds`` the planned padded cost. Mixing first because less mixing
    cost converged accuracy (README, Does the schedule cost accuracy?). DyGNeX-L's placements are kept
    when their planned cost is at most greedy's, else greedy's with a fallback line. ``step_seconds``:
    ``Budget -> predicted seconds`` (also the auto compile price; without it and
    ``parallel.compile_steps`` -1: one step). Deterministic: every process and a resumed run alike."""
    costs = ws.costs("train", config.data.neg_mult) if costs is None else costs
    profile = ws.edge_profile("train") if profile is None else profile
    costs, profile = layout_view(costs, profile, layout)
    pl = _Planner(ws, config, devices, layout, settings, epochs, costs, profile, step_seconds)
    if config.parallel.budgets != "planned" or not epochs:
        scheds, needs = pl.attempt(settings.method, settings.compose) if epochs else ({}, {})
        return RunPlan(settings.compose, scheds, needs, [], 0.0, {})
    cost_ordered = settings.method in ("dygnex_g", "dygnex_l")
    composes = COMPOSE_CANDIDATES if cost_ordered and settings.compose == "auto" else (settings.compose,)
    # cost-ordered methods: compositions are compared on DyGNeX-G (DyGNeX-L has the same steps)
    method = "dygnex_g" if cost_ordered else settings.method
    movable = cost_ordered and settings.compose not in FIXED_STEPS
    consider = pl.consider
    # (1) every composition, then that composition fitted to one budget per epoch (fresh steps)
    plain = {}  # composition -> (schedules, needs, planned budgets)
    for compose in composes:
        scheds, needs = pl.attempt(method, compose)
        plain[compose] = (scheds, needs, consider(compose, compose, "", scheds, needs))
        if movable and settings.fit_epochs:
            consider(f"{compose} fitted", compose, "one budget", *pl.fitted(scheds, needs, None))
    if movable and settings.fit_epochs:
        # (2) the kept composition fitted per planned budget, each budget class apart
        chosen = pl.best[0]
        consider(f"{chosen} fitted per budget", chosen, "per budget", *pl.fitted(*plain[chosen]))
    if movable and settings.repeat_steps and len(epochs) > 1:
        # (3) the same steps every epoch (the least mixing): the cheapest epoch of the kept candidate and
        # of every plain composition, repeated in an order of each epoch's own
        for compose, fit, scheds, needs in [pl.best[:4], *((c, "", *plain[c][:2]) for c in composes)]:
            name = f"{compose}{' fitted' if fit else ''} repeated"
            if name not in pl.tried:  # the kept one may be a plain composition already listed
                e = pl.cheapest_epoch(needs)
                base = dataclasses.replace(scheds[e], info={**scheds[e].info, "base_epoch": e})
                consider(name, compose, fit, *pl.repeat(base), base)
    compose, fit, scheds, needs, total, budgets, base, _, seconds = pl.best
    if settings.method == "dygnex_l":
        scheds, needs, budgets, total, seconds, base = _dygnex_l_placements(
            pl, compose, fit, (scheds, needs, budgets, total, seconds, base)
        )
    score = "padded cost" if seconds is None else "predicted seconds"
    tried = pl.tried if len(pl.tried) > 1 else {}
    return RunPlan(compose, scheds, needs, budgets, total, tried, fit, base, seconds, score)


def _better(score: float, kept: float, margin: float) -> bool:
    """A later (less mixing) candidate replaces the kept one: lower by more than ``margin``."""
    return score < kept * (1.0 - margin)


def _dygnex_l_placements(pl: _Planner, compose, fit, greedy: tuple) -> tuple:
    """DyGNeX-L's placements of the chosen composition where they pay less on their planned budgets than
    greedy's (the run's budgets may fit greedy's steps better), else greedy's, marked as DyGNeX-L's
    fallback. ``greedy``: (schedules, needs, budgets, cost, predicted seconds, repeated base or None)."""
    scheds, needs, budgets, total, seconds, base = greedy
    l_base = None  # a repeated plan: the base's own steps re-placed by DyGNeX-L's MILP, in every epoch
    if base is not None:
        st = dataclasses.replace(pl.settings, method="dygnex_l")
        l_base = improve_schedule(base, pl.sched_costs, st, [pl.config.train.seed, base.info["base_epoch"]])
        l_scheds, l_needs = pl.repeat(l_base)
    else:
        l_scheds, l_needs = pl.attempt("dygnex_l", compose)
        if fit:
            l_budgets = pl.planned_cost(l_needs)[0] if fit == "per budget" else None
            l_scheds, l_needs = pl.fitted(l_scheds, l_needs, l_budgets)
    l_budgets, l_total, l_seconds = pl.planned_cost(l_needs)
    if l_total <= total:
        return l_scheds, l_needs, l_budgets, l_total, l_seconds, l_base
    why = f"greedy kept: its steps pay {total:.4g} on their planned budgets, DyGNeX-L's {l_total:.4g}"
    scheds = {e: dataclasses.replace(sc, method="dygnex_l", fallback=why) for e, sc in scheds.items()}
    base = dataclasses.replace(base, method="dygnex_l", fallback=why) if base is not None else None
    return scheds, needs, budgets, total, seconds, base


def fit_epochs(
    scheds: dict,
    sched_costs: np.ndarray,
    weights: np.ndarray,
    classes: dict | None = None,
    shrink_work: float = SHRINK_WORK,
) -> dict:
    """Every epoch's steps fitted to their budget (``schedule.fit_epochs``; ``greedy.balance_epoch``):
    with ``classes`` None all steps of an epoch as one budget; else ``classes[e]`` gives every step of
    epoch e a budget class (the planned budget it pays) and the steps of each class are fitted
    together, so a heavy class stays heavy. Epochs in order, each class's floor the per-column maxima
    of that class in the epochs before (a later epoch gains nothing below what an earlier one already
    pays). ``shrink_work``: ``balance_epoch``'s (0: the local search alone). The time it takes is
    added to each schedule's ``seconds``; deterministic."""
    out, floors = {}, {}
    for e in sorted(scheds):
        sc = scheds[e]
        start = time.perf_counter()
        steps = list(sc.steps)
        cls = classes[e] if classes is not None else [0] * len(steps)
        totals = {"iterations": 0, "moves": 0, "swaps": 0, "work": 0, "shrink_targets": 0}
        for c in sorted(set(cls)):
            idx = [i for i, x in enumerate(cls) if x == c]
            fitted, maxima, stats = balance_epoch(
                sched_costs, [steps[i] for i in idx], weights, floors.get(c), shrink_work=shrink_work
            )
            floors[c] = maxima if c not in floors else np.maximum(floors[c], maxima)
            for i, f in zip(idx, fitted):
                steps[i] = f
            totals = {k: totals[k] + stats.get(k, 0) for k in totals}
            totals["shrink_targets"] += stats.get("shrink", {}).get("targets", 0)
        out[e] = dataclasses.replace(
            sc,
            steps=steps,
            seconds=sc.seconds + time.perf_counter() - start,
            info={**sc.info, "fit_epochs": totals},
        )
    return out
