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
2. **Placement.** Each step's windows go onto the P devices by LPT on the multi-dimensional padded
   objective: windows in decreasing scalar cost, each to the device that minimises the resulting
   ``w · max_p load_p`` (ties to the lower scalar load); the first P go one per device. All steps
   of equal size advance together (one numpy pass per window rank). With P > ``LPT_POOL`` x
   (weighted dimensions + 1) a window's candidates are the ``LPT_POOL`` lightest devices in every
   weighted dimension and in the scalar load, refreshed every ``LPT_REFRESH`` ranks.
3. **Local search.** Moves (one window to another device), and swaps (two windows between two
   devices) when no move improves, from the devices that attain a per-dimension maximum, best
   improvement first, until nothing lowers the objective. Moves that keep the objective and lower
   the sum of squared scalar loads are also taken while several devices tie at a maximum (so ties
   get resolved); both quantities only decrease, so the search terminates. It is bounded by
   iteration and work counts (never by wall time: the same seed gives the same schedule on any
   machine), see ``LOCAL_WORK_EPOCH``. Partner devices are all devices when P <= 32, else the
   ``SWAP_PARTNERS`` lightest in every weighted dimension and in the scalar load.

At 100,000 windows x 1,024 devices (B = 4,096 or 8,192) the whole method takes well under a second
of CPU; there the work cap binds and the local search closes only part of LPT's gap to the lower
bound (``info``: ``lpt_objective``, ``objective``, ``lower_bound``, ``local_search``).
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from .base import Schedule, ScheduleSettings, cost_weights, register, step_batches

# LPT candidate devices per weighted dimension (and by scalar load) when P is larger than
# LPT_POOL * (dimensions + 1).
LPT_POOL = 32
LPT_REFRESH = 32  # window ranks between candidate refreshes
# Local search: at most LOCAL_ITERS_PER_WINDOW * n + LOCAL_ITERS_MIN moves/swaps in a step of n
# windows, and at most LOCAL_WORK_EPOCH units of work in the epoch, shared evenly by the steps
# (unused work carries over). An iteration costs LOCAL_WORK_ITERATION units plus one per evaluated
# (window, device) move and (window, window) swap: a deterministic stand-in for time that keeps
# 100,000 windows x 1,024 devices under a second (about 70 ns per unit on the 2-core dev machine).
LOCAL_ITERS_PER_WINDOW = 2
LOCAL_ITERS_MIN = 64
LOCAL_WORK_EPOCH = 3_000_000
LOCAL_WORK_ITERATION = 3_000
# Swap partners per weighted dimension (and by scalar load) when P > ALL_PARTNERS_MAX_DEVICES.
SWAP_PARTNERS = 8
ALL_PARTNERS_MAX_DEVICES = 32
_REL_TOL = 1e-9
_TIE_EPS = 1e-9  # LPT ties: prefer the lower scalar load (a relative nudge)
COMPOSE = ("auto", "strata", "rows", "sorted")  # schedule.compose: how windows are grouped into steps
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
    """The greedy step composition (``compose``: strata, rows or sorted; see the module docstring):
    window ids per step, in the (randomised) order of the epoch, the short step last."""
    if not jitter >= 0:
        raise UserError(f"schedule.jitter must be >= 0 (0 = pure cost order), got {jitter}")
    if compose not in COMPOSE:
        raise UserError(f"schedule.compose must be one of {', '.join(COMPOSE)}, got {compose!r}")
    compose = resolve_compose(compose, batch_size, n_devices)
    k = len(costs)
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


def dimension_lower_bounds(c: np.ndarray, n_devices: int) -> np.ndarray:
    """[D] lower bounds on ``max_p load_p[d]`` of one step whose windows have costs c [n, D].

    Per dimension the largest of: the mean load per device; the largest window; and, for every
    r >= 1 with r·P < n, the sum of the r + 1 smallest of the r·P + 1 largest windows (some device
    holds r + 1 of them).
    """
    if len(c) == 0:
        return np.zeros(c.shape[1])
    bound = np.maximum(c.sum(axis=0) / n_devices, c.max(axis=0))
    n = len(c)
    if n > n_devices:
        top = -np.sort(-c, axis=0)  # [n, D] decreasing
        csum = np.vstack([np.zeros((1, c.shape[1])), np.cumsum(top, axis=0)])
        for r in range(1, (n - 1) // n_devices + 1):
            hi = r * n_devices + 1  # the r·P + 1 largest: top[:hi]; the r + 1 smallest of them
            bound = np.maximum(bound, csum[hi] - csum[hi - r - 1])
    return bound


def step_lower_bound(c: np.ndarray, n_devices: int, weights: np.ndarray) -> float:
    """A lower bound on ``w · max_p load_p`` of one step (see ``dimension_lower_bounds``)."""
    return float(dimension_lower_bounds(c, n_devices) @ weights)


def step_objective(c: np.ndarray, device: np.ndarray, n_devices: int, weights: np.ndarray) -> float:
    """``w · max_p load_p`` of one step: c [n, 3] window costs, device [n] their devices."""
    return float(device_loads(c, device, n_devices).max(axis=0) @ weights)


def device_loads(c: np.ndarray, device: np.ndarray, n_devices: int) -> np.ndarray:
    """[P, 3] column sums of c over each device's windows."""
    loads = np.zeros((n_devices, c.shape[1]))
    for d in range(c.shape[1]):
        loads[:, d] = np.bincount(device, weights=c[:, d], minlength=n_devices)
    return loads


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


# ---------------------------------------------------------------------------------- local search


def _top3(loads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per dimension the three largest loads, largest first: (values [3, D], devices [3, D]).

    Fewer than 3 devices are padded with value 0 on device -1 (loads are >= 0, so a phantom
    device with no load never changes a maximum).
    """
    n_devices, n_dims = loads.shape
    cols = np.arange(n_dims)
    if n_devices > 3:
        idx = np.argpartition(-loads, 2, axis=0)[:3]
    else:
        idx = np.broadcast_to(np.arange(n_devices)[:, None], (n_devices, n_dims))
    vals = loads[idx, cols]
    o = np.argsort(-vals, axis=0, kind="stable")
    idx, vals = np.take_along_axis(idx, o, 0), np.take_along_axis(vals, o, 0)
    if n_devices < 3:
        pad = 3 - n_devices
        idx = np.vstack([idx, np.full((pad, n_dims), -1)])
        vals = np.vstack([vals, np.zeros((pad, n_dims))])
    return vals, idx


def _other_max(vals: np.ndarray, idx: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[na, nb, D]: per dimension the max load over the devices other than a[i] and b[j]."""
    a = a[:, None, None]
    b = b[None, :, None]
    out0 = (idx[0] == a) | (idx[0] == b)
    out1 = (idx[1] == a) | (idx[1] == b)
    return np.where(out0, np.where(out1, vals[2], vals[1]), vals[0])


def improve(
    c: np.ndarray,
    device: np.ndarray,
    n_devices: int,
    weights: np.ndarray,
    max_iters: int,
    max_work: float = np.inf,
    groups: np.ndarray | None = None,
    floor: np.ndarray | None = None,
) -> tuple[np.ndarray, dict]:
    """Moves, then swaps, off the devices at a per-dimension maximum, best improvement first.

    Args:
      c: [n, 3] window costs of one step. device: [n] initial devices (not modified).
      max_iters: at most this many moves/swaps.
      max_work: stop once this much work (see ``LOCAL_WORK_ITERATION``) is spent.
      groups: [P] a group per device (``balance_epoch``: the step of a (step, device) slot); a move
        stays within its group (window counts per group are kept), a swap may cross groups.
      floor: [3] per-dimension loads the objective never goes below (``w · max(floor, max_p load_p)``):
        a budget already paid for, so lowering a maximum under it gains nothing.
    Returns:
      (device [n], stats {"iterations", "moves", "swaps", "work"}).
    """
    device = device.copy()
    stats = {"iterations": 0, "moves": 0, "swaps": 0, "work": 0}
    n = len(c)
    if n_devices < 2 or n < 2:
        return device, stats
    active = np.flatnonzero(weights > 0)
    w = weights[active]
    c = c[:, active]
    scalar = c @ w
    real_devices = n_devices
    if floor is not None:  # a phantom device holding the floor, no window, no partner
        n_devices += 1
        groups = np.concatenate([groups if groups is not None else np.zeros(real_devices, np.int64), [-1]])
    loads = device_loads(c, device, n_devices)
    if floor is not None:
        loads[real_devices] = np.asarray(floor, np.float64)[active]
    sload = loads @ w
    all_partners = real_devices <= ALL_PARTNERS_MAX_DEVICES
    k_part = min(SWAP_PARTNERS, real_devices)
    for _ in range(max_iters):
        if stats["work"] >= max_work:
            break
        vals, idx = _top3(loads)
        f = float(vals[0] @ w)
        tol = _REL_TOL * max(f, 1e-300)
        # plateau moves (objective unchanged, squared loads down) only to break ties at a maximum
        plateau = bool(np.any(vals[1] >= vals[0] - tol))
        src = np.unique(idx[0])  # the devices at a per-dimension maximum
        pos = np.full(n_devices, -1)
        pos[src] = np.arange(len(src))
        ka = np.flatnonzero(pos[device] >= 0)  # the windows on them
        a = device[ka]
        a_pos = pos[a]
        ca, sa = c[ka], scalar[ka]
        if all_partners:
            pb = np.arange(real_devices)
        else:  # the k lightest devices in every weighted dimension and in the scalar load
            keys = np.column_stack([loads[:real_devices], sload[:real_devices]])
            pb = np.unique(np.argpartition(keys, k_part - 1, axis=0)[:k_part])
        load_b, sload_b = loads[pb], sload[pb]
        om = _other_max(vals, idx, src, pb)  # [ns, nb, D] max over devices not in {src, pb}
        # moves: window ka[i] from a[i] to partner device pb[j]
        new_a = loads[a] - ca  # [na, D]
        fm = np.maximum(np.maximum(om[a_pos], new_a[:, None, :]), load_b[None] + ca[:, None, :]) @ w
        fm[a[:, None] == pb[None, :]] = np.inf
        if groups is not None:
            fm[groups[a][:, None] != groups[pb][None, :]] = np.inf
        sq = 2.0 * sa[:, None] * (sload_b[None, :] - sload[a][:, None] + sa[:, None])
        best = _pick(fm - f, sq, tol, tol * f, plateau)
        kind = "move"
        stats["work"] += LOCAL_WORK_ITERATION + fm.size
        if best is None or best[0] >= -tol:
            # swaps: window ka[i] (on a[i]) with window kb[j] on a partner device
            pos_b = np.full(n_devices, -1)
            pos_b[pb] = np.arange(len(pb))
            kb = np.flatnonzero(pos_b[device] >= 0)
            db = device[kb]
            db_pos = pos_b[db]
            delta = ca[:, None, :] - c[kb][None, :, :]  # [na, nb, D]
            other = om[a_pos[:, None], db_pos[None, :]]
            fs = np.maximum(np.maximum(other, loads[a][:, None, :] - delta), load_b[db_pos][None] + delta) @ w
            fs[a[:, None] == db[None, :]] = np.inf
            ds = sa[:, None] - scalar[kb][None, :]
            sq = 2.0 * ds * (sload_b[db_pos][None, :] - sload[a][:, None] + ds)
            swap = _pick(fs - f, sq, tol, tol * f, plateau)
            stats["work"] += fs.size
            if swap is not None and (best is None or swap[:2] < best[:2]):
                best, kind = swap, "swap"
        if best is None:
            break
        stats["iterations"] += 1
        if kind == "move":
            i, j = np.unravel_index(best[2], fm.shape)
            i, p_from, p_to = int(ka[i]), int(a[i]), int(pb[j])
            device[i] = p_to
            loads[p_from] -= c[i]
            loads[p_to] += c[i]
            sload[p_from] -= scalar[i]
            sload[p_to] += scalar[i]
            stats["moves"] += 1
        else:
            i, j = np.unravel_index(best[2], fs.shape)
            i, j = int(ka[i]), int(kb[j])
            p_i, p_j = int(device[i]), int(device[j])
            device[i], device[j] = p_j, p_i
            d = c[i] - c[j]
            loads[p_i] -= d
            loads[p_j] += d
            sload[p_i] -= scalar[i] - scalar[j]
            sload[p_j] += scalar[i] - scalar[j]
            stats["swaps"] += 1
    return device, stats


def _pick(
    df: np.ndarray, dsq: np.ndarray, tol: float, tol_sq: float, plateau: bool
) -> tuple[float, float, int] | None:
    """Best candidate by (objective change, then squared-load change); None unless it improves.

    Improving means the objective drops by more than tol, or it does not rise and the sum of
    squared scalar loads drops by more than a relative tolerance.
    """
    flat_f = df.ravel()
    if flat_f.size == 0:
        return None
    i = int(np.argmin(flat_f))
    if flat_f[i] < -tol:
        return float(flat_f[i]), float(dsq.ravel()[i]), i
    if not plateau:
        return None
    flat_sq = np.where(flat_f <= tol, dsq.ravel(), np.inf)
    i = int(np.argmin(flat_sq))
    if flat_sq[i] < -tol_sq:
        return 0.0, float(flat_sq[i]), i
    return None


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


def balance_epoch(
    costs: np.ndarray,
    steps: list[list[np.ndarray]],
    weights: np.ndarray,
    floor: np.ndarray | None = None,
    max_work: float = LOCAL_WORK_EPOCH,
) -> tuple[list[list[np.ndarray]], np.ndarray, dict]:
    """One epoch's steps fitted to one budget: the local search of ``improve`` over all (step, device)
    slots of the epoch at once, on ``w · max(floor, max over slots of load)``, with swaps across steps
    and moves within a step (every step keeps its windows' count, every device its share of it).

    Under planned budgets a step pays the cheapest budget holding its need, so what an epoch pays is
    set by its largest slots, not by each step's own balance: a heavy step swaps its heaviest windows
    for lighter ones of a light step. ``floor``: the per-column maxima already paid (earlier epochs'),
    below which nothing is gained. Deterministic (work-bounded like ``improve``).

    Returns (steps [s][p] window ids, [D] the per-column maxima over the slots, stats).
    """
    n_devices = len(steps[0]) if steps else 0
    parts = [(g, s * n_devices + p) for s, st in enumerate(steps) for p, g in enumerate(st)]
    if not parts:
        return steps, np.zeros(costs.shape[1]), {"iterations": 0, "moves": 0, "swaps": 0, "work": 0}
    ids = np.concatenate([np.asarray(g, np.int64) for g, _ in parts])
    slot = np.concatenate([np.full(len(g), k, np.int64) for g, k in parts])
    n_slots = len(steps) * n_devices
    groups = np.repeat(np.arange(len(steps)), n_devices)
    cap = LOCAL_ITERS_PER_WINDOW * len(ids) + LOCAL_ITERS_MIN
    slot, stats = improve(costs[ids], slot, n_slots, weights, cap, max_work, groups=groups, floor=floor)
    out = [[ids[slot == s * n_devices + p] for p in range(n_devices)] for s in range(len(steps))]
    maxima = device_loads(costs[ids], slot, n_slots).max(axis=0)
    return out, maxima, stats


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
