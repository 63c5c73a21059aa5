"""DyGNeX-G's local search: moves and swaps off the devices at a per-dimension maximum (``improve``),
per step or over all (step, device) slots of an epoch (``balance_epoch``); see ``greedy``'s docstring,
step 3. Re-exported from ``greedy``.
"""

from __future__ import annotations

import numpy as np

from .objective import device_loads

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
# ``shrink`` (after balance_epoch's local search): at most this many evaluated moves and swaps per
# epoch and budget class (~0.2 s of numpy on the dev machine), a repair at most SHRINK_REPAIR_ITERS
# changes, and the descent tries these fractions of a column's gap to its lower bound in turn.
SHRINK_WORK = 20_000_000
SHRINK_REPAIR_ITERS = 400
SHRINK_MAX_SLOTS = 1024  # above this many (step, device) slots in a class (simulations) it is skipped
SHRINK_FRACTIONS = (1.0, 0.5, 0.25, 0.1, 0.03)


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
    for _ in range(max_iters):
        if stats["work"] >= max_work:
            break
        change = _best_change(c, scalar, w, device, loads, sload, real_devices, groups, stats)
        if change is None:
            break
        stats["iterations"] += 1
        _apply_change(change, c, scalar, device, loads, sload, stats)
    return device, stats


def _best_change(
    c: np.ndarray,
    scalar: np.ndarray,
    w: np.ndarray,
    device: np.ndarray,
    loads: np.ndarray,
    sload: np.ndarray,
    real_devices: int,
    groups: np.ndarray | None,
    stats: dict,
) -> tuple[str, int, int] | None:
    """One iteration of ``improve``'s search (c, w: the weighted columns; loads [P, D] and sload [P]
    with ``improve``'s phantom floor device, if any, last): the best improving move, or the best swap
    when no move lowers the objective. Returns ("move", window, to device), ("swap", window, window)
    or None when nothing improves; adds the work spent to ``stats``."""
    n_devices = len(loads)
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
    if real_devices <= ALL_PARTNERS_MAX_DEVICES:
        pb = np.arange(real_devices)
    else:  # the k lightest devices in every weighted dimension and in the scalar load
        k_part = min(SWAP_PARTNERS, real_devices)
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
            i, j = np.unravel_index(swap[2], fs.shape)
            return "swap", int(ka[i]), int(kb[j])
    if best is None:
        return None
    i, j = np.unravel_index(best[2], fm.shape)
    return "move", int(ka[i]), int(pb[j])


def _apply_change(
    change: tuple[str, int, int],
    c: np.ndarray,
    scalar: np.ndarray,
    device: np.ndarray,
    loads: np.ndarray,
    sload: np.ndarray,
    stats: dict,
) -> None:
    """Apply a move or swap of ``_best_change`` to device, loads and sload (in place)."""
    kind, i, j = change
    if kind == "move":
        p_from, p_to = int(device[i]), j
        device[i] = p_to
        loads[p_from] -= c[i]
        loads[p_to] += c[i]
        sload[p_from] -= scalar[i]
        sload[p_to] += scalar[i]
        stats["moves"] += 1
    else:
        p_i, p_j = int(device[i]), int(device[j])
        device[i], device[j] = p_j, p_i
        d = c[i] - c[j]
        loads[p_i] -= d
        loads[p_j] += d
        sload[p_i] -= scalar[i] - scalar[j]
        sload[p_j] += scalar[i] - scalar[j]
        stats["swaps"] += 1


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


def shrink(
    c: np.ndarray,
    slot: np.ndarray,
    n_slots: int,
    weights: np.ndarray,
    groups: np.ndarray,
    floor: np.ndarray | None = None,
    max_work: float = SHRINK_WORK,
) -> tuple[np.ndarray, dict]:
    """Lower the per-column maxima over the slots towards their lower bounds (target descent).

    The local search minimises ``w · max`` directly, and stops where every single move or swap
    raises some column's maximum. Here a column's target is lowered (straight to its lower bound,
    then by a half, a quarter, ... of the gap: ``SHRINK_FRACTIONS``) and the windows are *repaired*
    to it: the slot with the most weighted overflow ``Σ_k w_k max(0, load_k - target_k)`` gives the
    move (within its group) or swap (with any window on another slot) that lowers the total overflow
    most, until none is left (the target is kept and the maxima set to the new loads) or no change
    lowers it (the target is dropped). The overflow of a change involves its two slots only, so a
    repair climbs a smooth surface where ``w · max`` is flat. Lower bounds: per column the largest
    window, the mean load over the slots, and ``floor`` (below an already paid maximum nothing is
    gained). Never raises the objective; deterministic; at most ``max_work`` evaluated changes.

    Args/returns: as ``improve`` (c [n, D], slot [n] in 0..n_slots-1, groups [n_slots]); stats
    {"targets": kept targets, "repairs": tried, "work": evaluated changes}.
    """
    slot = slot.copy()
    stats = {"targets": 0, "repairs": 0, "work": 0}
    n = len(c)
    if n < 2 or n_slots < 2:
        return slot, stats
    active = np.flatnonzero(weights > 0)
    w = np.asarray(weights, np.float64)[active]
    c = np.asarray(c, np.float64)[:, active]
    loads = device_loads(c, slot, n_slots)
    target = loads.max(axis=0)
    lower = np.maximum(c.max(axis=0), c.sum(axis=0) / n_slots)
    if floor is not None:
        lower = np.maximum(lower, np.asarray(floor, np.float64)[active])
    while stats["work"] < max_work:
        kept = False
        for k in np.argsort(-(target * w), kind="stable"):
            gap = target[k] - lower[k]
            if gap <= _REL_TOL * max(target[k], 1e-300):
                continue
            for frac in SHRINK_FRACTIONS:
                want = target.copy()
                want[k] = target[k] - frac * gap
                stats["repairs"] += 1
                got, got_loads, ok = _repair(c, slot, loads, want, groups, w, stats, max_work)
                if ok:
                    slot, loads, kept = got, got_loads, True
                    target = loads.max(axis=0)
                    stats["targets"] += 1
                    break
                if stats["work"] >= max_work:
                    break
            if kept or stats["work"] >= max_work:
                break
        if not kept:
            break
    return slot, stats


def _repair(
    c: np.ndarray,
    slot: np.ndarray,
    loads: np.ndarray,
    target: np.ndarray,
    groups: np.ndarray,
    w: np.ndarray,
    stats: dict,
    max_work: float,
) -> tuple[np.ndarray, np.ndarray, bool]:
    """``shrink``'s repair of ``slot`` (loads ``loads``) to ``target``: (the repaired slots, their loads,
    True), or (_, _, False) where it fails; the inputs are not modified."""
    slot, loads = slot.copy(), loads.copy()
    for _ in range(SHRINK_REPAIR_ITERS):
        over = np.maximum(loads - target, 0.0) @ w  # [S]
        a = int(np.argmax(over))
        if over[a] <= _REL_TOL * float(target @ w):
            return slot, loads, True
        if stats["work"] >= max_work:
            return slot, loads, False
        ia = np.flatnonzero(slot == a)
        best, change = -_REL_TOL * over[a], None
        partners = np.flatnonzero(groups == groups[a])
        partners = partners[partners != a]
        if len(partners):  # moves of a window of a within its group
            da = np.maximum(loads[a] - c[ia] - target, 0.0) @ w - over[a]  # [ia]
            db = np.maximum(loads[partners][None] + c[ia][:, None] - target, 0.0) @ w - over[partners]
            delta = da[:, None] + db
            i, j = np.unravel_index(int(np.argmin(delta)), delta.shape)
            stats["work"] += delta.size
            if delta[i, j] < best:
                best, change = delta[i, j], ("move", int(ia[i]), int(partners[j]))
        jb = np.flatnonzero(slot != a)  # swaps with a window on any other slot
        if len(jb):
            d = c[ia][:, None, :] - c[jb][None, :, :]  # what leaves a
            sb = slot[jb]
            delta = (np.maximum(loads[a] - d - target, 0.0) @ w - over[a]) + (
                np.maximum(loads[sb][None] + d - target, 0.0) @ w - over[sb][None]
            )
            i, j = np.unravel_index(int(np.argmin(delta)), delta.shape)
            stats["work"] += delta.size
            if delta[i, j] < best:
                best, change = delta[i, j], ("swap", int(ia[i]), int(jb[j]))
        if change is None:
            return slot, loads, False
        kind, i, j = change
        if kind == "move":
            loads[a] -= c[i]
            loads[j] += c[i]
            slot[i] = j
        else:
            b = int(slot[j])
            loads[a] -= c[i] - c[j]
            loads[b] += c[i] - c[j]
            slot[i], slot[j] = b, a
    return slot, loads, False


def balance_epoch(
    costs: np.ndarray,
    steps: list[list[np.ndarray]],
    weights: np.ndarray,
    floor: np.ndarray | None = None,
    max_work: float = LOCAL_WORK_EPOCH,
    shrink_work: float = SHRINK_WORK,
) -> tuple[list[list[np.ndarray]], np.ndarray, dict]:
    """One epoch's steps fitted to one budget: the local search of ``improve`` over all (step, device)
    slots of the epoch at once, on ``w · max(floor, max over slots of load)``, with swaps across steps
    and moves within a step (every step keeps its windows' count, every device its share of it).

    Under planned budgets a step pays the cheapest budget holding its need, so what an epoch pays is
    set by its largest slots, not by each step's own balance: a heavy step swaps its heaviest windows
    for lighter ones of a light step. ``floor``: the per-column maxima already paid (earlier epochs'),
    below which nothing is gained. Then ``shrink`` (``shrink_work`` > 0, at most ``SHRINK_MAX_SLOTS``
    slots) lowers the maxima further by target descent. Deterministic (work-bounded).

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
    if shrink_work > 0 and n_slots <= SHRINK_MAX_SLOTS:
        slot, stats["shrink"] = shrink(costs[ids], slot, n_slots, weights, groups, floor, shrink_work)
    by_slot = np.argsort(slot, kind="stable")  # each slot's windows in their order in ids
    cut = np.searchsorted(slot[by_slot], np.arange(n_slots + 1))
    out = [
        [ids[by_slot[cut[s * n_devices + p] : cut[s * n_devices + p + 1]]] for p in range(n_devices)]
        for s in range(len(steps))
    ]
    maxima = device_loads(costs[ids], slot, n_slots).max(axis=0)
    return out, maxima, stats
