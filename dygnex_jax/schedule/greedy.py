"""DyGNeX-G: cross-time-window greedy scheduling (DESIGN §4).

1. **Step composition.** Every window gets a scalar cost ``c_k = w · costs_k`` (w = alpha, beta,
   gamma). Windows are ordered by ``c_k · exp(jitter · z_k)``, z_k ~ N(0, 1) from the seeded rng,
   heaviest first (``jitter = 0``: the pure cost order). ``schedule.compose`` then forms the steps
   (``auto``, the default: ``sorted`` while B/P <= 4, else ``strata``; ``AUTO_SORTED_MAX_PER_DEVICE``):
   - ``strata``: K mod B windows drawn at random form the short last step; the rest of the
     order is cut into B strata of consecutive windows and each stratum is dealt at random, one
     window to every full step. A step is a stratified random mini-batch (one window of every cost
     level), so its gradient is as unbiased a sample as PSG's, and all steps weigh about the same.
   - ``rows``: the order is cut into rows of P windows of about equal cost; the rows are shuffled and
     a step takes B/P of them, so every device can get one window of each row (better balance; but
     with sliding windows equal cost mostly means neighbouring, overlapping windows, so a step holds
     only B/P distinct time ranges); a short row (K mod P) goes to the short step.
   - ``sorted``: the order itself is cut into steps of B (heavy with heavy; the best balance, the
     least mixing), presented in a random order, the short step cut at a random place and run last.
   - ``chrono``: no cost order: steps of B consecutive windows in time order, the same every epoch
     (EvolveGCN's protocol: the epoch ends on the windows nearest the validation period), the short
     step last, as ``psg`` with ``shuffle: false``; only the placement balances. Never chosen by
     ``auto`` and never fitted across steps (``schedule.fit_epochs`` would break the time order).
2. **Placement.** Each step's windows go onto the P devices by LPT on the multi-dimensional padded
   objective: windows in decreasing scalar cost, each to the device that minimises the resulting
   ``w · max_p load_p`` (ties to the lower scalar load); the first P go one per device. All steps
   of equal size advance together (one numpy pass per window rank). With P > ``LPT_POOL`` x
   (weighted dimensions + 1) a window's candidates are the ``LPT_POOL`` lightest devices in every
   weighted dimension and in the scalar load, refreshed every ``LPT_REFRESH`` ranks.
3. **Local search** (``local_search.py``). Moves (one window to another device), and swaps (two
   windows between two devices) when no move improves, from the devices that attain a per-dimension
   maximum, best improvement first, until nothing lowers the objective. Moves that keep the
   objective and lower the sum of squared scalar loads are also taken while several devices tie at
   a maximum (so ties get resolved); both quantities only decrease, so the search terminates. It is
   bounded by iteration and work counts (never by wall time: the same seed gives the same schedule
   on any machine), see ``LOCAL_WORK_EPOCH``. Partner devices are all devices when P <= 32, else the
   ``SWAP_PARTNERS`` lightest in every weighted dimension and in the scalar load.

At 100,000 windows x 1,024 devices (B = 4,096 or 8,192) the whole method takes well under a second
of CPU; there the work cap binds and the local search closes only part of LPT's gap to the lower
bound (``info``: ``lpt_objective``, ``objective``, ``lower_bound``, ``local_search``).
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from .base import Schedule, ScheduleSettings, cost_weights, register, step_batches
from .local_search import (  # noqa: F401  (balance_epoch, improve: re-exported)
    LOCAL_ITERS_MIN,
    LOCAL_ITERS_PER_WINDOW,
    LOCAL_WORK_EPOCH,
    SHRINK_WORK,
    balance_epoch,
    improve,
)
from .objective import (  # noqa: F401  (device_loads, dimension_lower_bounds: re-exported)
    device_loads,
    dimension_lower_bounds,
    step_lower_bound,
    step_objective,
)

# LPT candidate devices per weighted dimension (and by scalar load) when P is larger than
# LPT_POOL * (dimensions + 1).
LPT_POOL = 32
LPT_REFRESH = 32  # window ranks between candidate refreshes
_TIE_EPS = 1e-9  # LPT ties: prefer the lower scalar load (a relative nudge)
COMPOSE = ("auto", "strata", "rows", "sorted", "chrono")  # schedule.compose: how windows form steps
# compositions that keep every step a fixed set of windows: plan_run never moves windows across them
FIXED_STEPS = ("chrono",)
# compose=auto: "sorted" while a device gets at most this many windows per step (B / P), else
# "strata". With few windows per device only similar windows balance (measured at P = 8: strata
# reaches .35-.75 of the flat padded optimum at B/P = 1-2 and .88-.94 at B/P = 4, sorted .66-.96);
# with many, a stratified mini-batch balances by itself and mixes best.
AUTO_SORTED_MAX_PER_DEVICE = 4


def resolve_compose(compose: str, batch_size: int, n_devices: int) -> str:
    """The composition ``compose`` means for B = ``batch_size`` windows over ``n_devices`` devices."""
    if compose != "auto":
        return compose
    return "sorted" if batch_size <= AUTO_SORTED_MAX_PER_DEVICE * max(1, n_devices) else "strata"


def checked_weights(settings: ScheduleSettings, n_columns: int = 3) -> np.ndarray:
    """[D] objective weights (``base.cost_weights``); a UserError unless all are >= 0 and one is > 0."""
    w = cost_weights(settings, n_columns)
    if not np.all(np.isfinite(w)) or np.any(w < 0) or not np.any(w > 0):
        raise UserError(
            f"schedule.alpha/beta/gamma must be >= 0 with at least one > 0, got {(settings.alpha, settings.beta, settings.gamma)}"
        )
    return w


def order_steps(
    costs: np.ndarray,
    batch_size: int,
    weights: np.ndarray,
    jitter: float,
    rng: np.random.Generator,
    n_devices: int = 1,
    compose: str = "rows",
) -> list[np.ndarray]:
    """The greedy step composition (``compose``: strata, rows, sorted or chrono; see the module
    docstring): window ids per step, in the (randomised) order of the epoch, the short step last."""
    if not jitter >= 0:
        raise UserError(f"schedule.jitter must be >= 0 (0 = pure cost order), got {jitter}")
    if compose not in COMPOSE:
        raise UserError(f"schedule.compose must be one of {', '.join(COMPOSE)}, got {compose!r}")
    compose = resolve_compose(compose, batch_size, n_devices)
    k = len(costs)
    if compose == "chrono":  # time order (window ids are in time order), no randomness
        return step_batches(np.arange(k, dtype=np.int64), batch_size)
    scalar = costs @ weights
    noise = rng.standard_normal(k)
    key = scalar * np.exp(float(jitter) * noise) if jitter > 0 else scalar
    order = np.argsort(-key, kind="stable").astype(np.int64)
    n_full, rem = divmod(k, batch_size)
    if compose == "strata":
        # The short step: rem windows drawn uniformly; the rest, in cost order, cut into B strata of
        # n_full windows, each stratum dealt at random one window per full step.
        short_pos = np.sort(rng.choice(k, size=rem, replace=False)) if rem else np.zeros(0, np.int64)
        keep = np.ones(k, bool)
        keep[short_pos] = False
        strata = order[keep].reshape(batch_size, n_full) if n_full else np.zeros((batch_size, 0), np.int64)
        dealt = np.take_along_axis(
            strata, rng.permuted(np.tile(np.arange(n_full), (batch_size, 1)), axis=1), 1
        )
        steps = [dealt[:, j].copy() for j in range(n_full)]
        if rem:
            steps.append(order[short_pos])
        return steps
    if compose == "rows":
        rows = step_batches(order, max(1, n_devices))
        tail = [rows.pop()] if len(rows[-1]) < n_devices else []  # a short row goes to the short step
        sequence = np.concatenate([rows[i] for i in rng.permutation(len(rows))] + tail)
        return step_batches(sequence, batch_size)
    # The short step (k % B windows) is cut at a random place of the cost order, not always from its
    # light tail: it runs last in every epoch, and a fixed group there biases the end-of-epoch model.
    cut = int(rng.integers(0, n_full + 1)) * batch_size if rem else k
    short = order[cut : cut + rem]
    rest = np.concatenate([order[:cut], order[cut + rem :]])
    batches = step_batches(rest, batch_size)
    steps = [batches[i] for i in rng.permutation(n_full)]
    if rem:
        steps.append(short)
    return steps


# ------------------------------------------------------------------------------------------- LPT


def lpt(c: np.ndarray, n_devices: int, weights: np.ndarray) -> np.ndarray:
    """LPT on the padded objective for S equal-size steps at once. c [S, n, 3]; returns device [S, n].

    Windows of every step in decreasing scalar cost; each goes to the device that minimises
    ``w · max(curmax, load_p + c_k)`` (curmax: the step's current per-dimension maximum), ties to
    the lower scalar load. The first P windows of a step therefore go one per device. The steps
    advance together (one numpy pass per window rank). When P > ``LPT_POOL * (D + 1)`` (D weighted
    dimensions) a window's candidates are the ``LPT_POOL`` lightest devices in every weighted
    dimension and in the scalar load (refreshed every ``LPT_REFRESH`` ranks, padded with the next
    lightest to a fixed count): LPT's pick is among them in practice, and it keeps 100,000 windows
    × 1,024 devices fast.
    """
    n_steps, n, _ = c.shape
    active = np.flatnonzero(weights > 0)
    w = weights[active]
    n_dims = len(active)
    scalar = c @ weights  # [S, n]
    order = np.argsort(-scalar, axis=1, kind="stable")
    rows = np.arange(n_steps)
    cs = np.take_along_axis(c[:, :, active], order[:, :, None], axis=1)  # [S, n, D] sorted
    ss = np.take_along_axis(scalar, order, axis=1)  # [S, n] sorted scalar costs
    device = np.empty((n_steps, n), dtype=np.int64)
    first = min(n, n_devices)  # one window per (empty) device
    device[rows[:, None], order[:, :first]] = np.arange(first)
    if first == n:
        return device
    loads = np.zeros((n_dims, n_steps, n_devices))  # [D, S, P]
    loads[:, :, :first] = cs[:, :first].transpose(2, 0, 1)
    sload = np.zeros((n_steps, n_devices))
    sload[:, :first] = ss[:, :first]
    curmax = loads.max(axis=2, keepdims=True)  # [D, S, 1]
    n_cand = min(n_devices, LPT_POOL * (n_dims + 1))
    restricted = n_cand < n_devices
    cand = np.broadcast_to(np.arange(n_devices), (n_steps, n_devices))
    cl, cload = loads, sload  # candidate-local loads [D, S, M] and scalar loads [S, M]
    t = np.empty((n_dims, n_steps, n_cand))
    cs_by_rank = np.ascontiguousarray(cs.transpose(1, 2, 0))  # [n, D, S]
    ss_by_rank = np.ascontiguousarray(ss.T)  # [n, S]
    chosen = np.empty((n, n_steps), dtype=np.int64)  # device of the rank-j window of each step
    for j in range(first, n):
        if restricted and (j - first) % LPT_REFRESH == 0:
            if j > first:
                loads[:, rows[:, None], cand] = cl
                sload[rows[:, None], cand] = cload
            mark = np.ones((n_steps, n_devices))
            for key in (sload, *loads):
                mark[rows[:, None], np.argpartition(key, LPT_POOL - 1, axis=1)[:, :LPT_POOL]] = 0.0
            # the marked devices, then the lightest others, to a fixed count n_cand
            key = mark + 1e-3 * sload / (sload.max() + 1e-300)
            cand = np.argpartition(key, n_cand - 1, axis=1)[:, :n_cand]
            cl = loads[:, rows[:, None], cand]
            cload = sload[rows[:, None], cand]
        cj = cs_by_rank[j]  # [D, S]
        np.add(cl, cj[:, :, None], out=t)
        np.maximum(t, curmax, out=t)
        g = (w @ t.reshape(n_dims, -1)).reshape(n_steps, -1)  # [S, M]
        g += _TIE_EPS * cload
        q = np.argmin(g, axis=1)
        new = cl[:, rows, q] + cj  # [D, S]
        cl[:, rows, q] = new
        cload[rows, q] += ss_by_rank[j]
        np.maximum(curmax[:, :, 0], new, out=curmax[:, :, 0])
        chosen[j] = cand[rows, q]
    device[rows[:, None], order[:, first:]] = chosen[first:].T
    return device


# --------------------------------------------------------------------------------------- method


def place_steps(
    costs: np.ndarray, steps: list[np.ndarray], n_devices: int, weights: np.ndarray
) -> tuple[list[np.ndarray], dict]:
    """Place every step's windows on devices (LPT + local search). Returns (device per step, info)."""
    devices: list[np.ndarray] = [np.zeros(0, np.int64)] * len(steps)
    sizes = np.array([len(ids) for ids in steps])
    for size in np.unique(sizes):
        same = np.flatnonzero(sizes == size)
        placed = lpt(np.stack([costs[steps[s]] for s in same]), n_devices, weights)
        for i, s in enumerate(same):
            devices[s] = placed[i]
    lpt_objective = sum(
        step_objective(costs[ids], dev, n_devices, weights) for ids, dev in zip(steps, devices)
    )
    budget = float(LOCAL_WORK_EPOCH)
    totals = {"iterations": 0, "moves": 0, "swaps": 0, "work": 0}
    capped = 0
    for s, ids in enumerate(steps):
        # an even share of what is left of the epoch's work budget (unused work carries over)
        cap = LOCAL_ITERS_PER_WINDOW * len(ids) + LOCAL_ITERS_MIN
        share = budget / (len(steps) - s)
        devices[s], stats = improve(costs[ids], devices[s], n_devices, weights, cap, share)
        budget -= stats["work"]
        capped += stats["iterations"] >= cap or stats["work"] >= share
        for key in totals:
            totals[key] += stats[key]
    info = {
        "lpt_candidates": min(n_devices, LPT_POOL * (int(np.sum(weights > 0)) + 1)),
        "lpt_objective": lpt_objective,
        "local_search": totals,
        "local_search_capped_steps": int(capped),
    }
    return devices, info


def split_by_device(ids: np.ndarray, device: np.ndarray, n_devices: int) -> list[np.ndarray]:
    """Window ids of one step grouped by device (each group in the step's order)."""
    order = np.argsort(device, kind="stable")
    counts = np.bincount(device, minlength=n_devices)
    return [np.asarray(g, dtype=np.int64) for g in np.split(ids[order], np.cumsum(counts)[:-1])]


def greedy_schedule(
    costs: np.ndarray,
    n_devices: int,
    batch_size: int,
    settings: ScheduleSettings,
    rng: np.random.Generator,
    name: str = "dygnex_g",
) -> tuple[Schedule, list[np.ndarray], list[np.ndarray]]:
    """The greedy schedule plus its step composition and per-step device arrays (for dygnex_l)."""
    weights = checked_weights(settings, costs.shape[1])
    steps = order_steps(costs, batch_size, weights, settings.jitter, rng, n_devices, settings.compose)
    devices, info = place_steps(costs, steps, n_devices, weights)
    objectives = [step_objective(costs[i], d, n_devices, weights) for i, d in zip(steps, devices)]
    bounds = [step_lower_bound(costs[i], n_devices, weights) for i in steps]
    info["objective"] = float(sum(objectives))
    info["lower_bound"] = float(sum(bounds))
    result = Schedule(
        name,
        [split_by_device(i, d, n_devices) for i, d in zip(steps, devices)],
        n_devices,
        batch_size,
        info=info,
    )
    return result, steps, devices


@register("dygnex_g")
def dygnex_g(
    costs: np.ndarray,
    n_devices: int,
    batch_size: int,
    settings: ScheduleSettings,
    rng: np.random.Generator,
) -> Schedule:
    """Cross-time-window greedy (see the module docstring)."""
    return greedy_schedule(costs, n_devices, batch_size, settings, rng)[0]
