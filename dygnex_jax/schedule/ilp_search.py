"""DyGNeX-L's exact neighbourhood search: re-partitions of device pairs and triples, steepest
descent (``neighbourhood_search``) and iterated local search (``iterated_search``); phases 1, 2 and 4
of a step in ``ilp``'s docstring, which re-exports these names.
"""

from __future__ import annotations

import functools
import itertools
import time

import numpy as np

from .objective import device_loads, step_objective

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
    if n_devices < 2 or len(c) < 2:
        return device, {"pair_moves": 0, "triple_moves": 0, "work": 0, "stopped": ""}
    search = _Repartitions(c, device, n_devices, weights, max_work, deadline)
    while not search.out_of_budget():
        if search.pair_move():
            continue
        if not triples or not search.triple_move():
            break
    return search.device, search.stats


class _Repartitions:
    """The state of one ``neighbourhood_search``: the placement, its loads (costs scaled to O(1) per
    weighted column, objective weights ``w * scale``), window counts per device, and the budget."""

    def __init__(
        self,
        c: np.ndarray,
        device: np.ndarray,
        n_devices: int,
        weights: np.ndarray,
        max_work: float,
        deadline: float,
    ):
        self.device, self.n_devices = device, n_devices
        self.max_work, self.deadline = max_work, deadline
        self.stats = {"pair_moves": 0, "triple_moves": 0, "work": 0, "stopped": ""}
        active = np.flatnonzero(weights > 0)
        c, w = c[:, active], weights[active]
        scale = np.maximum(c.sum(axis=0) / n_devices, 1e-300)  # O(1) loads, objective weights w * scale
        self.c, self.w = c / scale, w * scale
        self.norm = self.w / n_devices
        self.loads = device_loads(self.c, device, n_devices)
        self.counts = np.bincount(device, minlength=n_devices)
        self.few = n_devices <= ALL_GROUPS_MAX_DEVICES
        pairs = itertools.combinations(range(n_devices), 2)
        self.all_pairs = np.array(list(pairs), dtype=np.int64).reshape(-1, 2)
        self.all_triples = None
        if self.few:
            triples = itertools.combinations(range(n_devices), 3)
            self.all_triples = np.array(list(triples), dtype=np.int64).reshape(-1, 3)
        self.version = np.zeros(n_devices, np.int64)  # bumped when a device's windows change
        # triple -> (versions, other_max) of its last non-improving look
        self.settled: dict[tuple, tuple] = {}

    def out_of_budget(self) -> bool:
        stats = self.stats
        if stats["work"] >= self.max_work or time.perf_counter() > self.deadline:
            stats["stopped"] = "work" if stats["work"] >= self.max_work else "time"
            return True
        return False

    def apply(self, group: np.ndarray, idx: np.ndarray, code: np.ndarray) -> None:
        """Re-assign windows ``idx`` to the devices ``group[code]``."""
        self.device[idx] = group[code]
        self.loads[group] = 0.0
        np.add.at(self.loads, self.device[idx], self.c[idx])
        self.counts[group] = np.bincount(code, minlength=len(group))
        self.version[group] += 1

    def partners(self) -> np.ndarray:
        """The heaviest and lightest devices of every weighted dimension and by scalar load."""
        keys = np.column_stack([self.loads, self.loads @ self.w])
        k = min(SEARCH_PARTNERS, self.n_devices)
        return np.union1d(
            np.argsort(-keys, axis=0, kind="stable")[:k], np.argsort(keys, axis=0, kind="stable")[:k]
        )

    def pair_move(self) -> bool:
        """Apply the most improving pair re-partition; False when none improves."""
        if self.few:
            pairs = self.all_pairs
        else:
            cand = self.partners()
            pairs = np.array(list(itertools.combinations(cand.tolist(), 2)), dtype=np.int64).reshape(-1, 2)
        move, work = _best_pair_move(
            self.c, self.device, self.loads, self.counts, self.w, self.norm, pairs, self.deadline
        )
        self.stats["work"] += work + SEARCH_WORK_GROUP
        if move is None:
            return False
        a, b, idx, code = move
        self.apply(np.array([a, b]), idx, code)
        self.stats["pair_moves"] += 1
        return True

    def triple_move(self) -> bool:
        """Apply the first improving re-partition of a triple holding a per-dimension maximum; False
        when none improves."""
        loads = self.loads
        top = loads.max(axis=0)
        critical = np.flatnonzero(np.any(loads >= top * (1 - 1e-9), axis=1))
        if self.few:
            triple_groups = self.all_triples[np.isin(self.all_triples, critical).any(axis=1)]
        else:
            cand = np.union1d(self.partners(), critical).tolist()
            triple_groups = np.array(
                [g for g in itertools.combinations(cand, 3) if np.isin(g, critical).any()], dtype=np.int64
            ).reshape(-1, 3)
        for g in triple_groups:
            if self.try_triple(g):
                self.stats["triple_moves"] += 1
                return True
        return False

    def try_triple(self, group: np.ndarray) -> bool:
        """Apply the best re-partition of the windows of the three devices ``group`` if it improves."""
        c, w, norm, loads = self.c, self.w, self.norm, self.loads
        m = int(self.counts[group].sum())
        if m < 2 or m > TRIPLE_MAX_WINDOWS:
            return False
        rest = np.ones(self.n_devices, bool)
        rest[group] = False
        other_max = loads[rest].max(axis=0) if rest.any() else np.zeros(len(w))
        key = tuple(group.tolist())
        state = (tuple(self.version[group].tolist()), other_max.tobytes())
        if self.settled.get(key) == state:  # same windows, same other maxima: the same (no) answer
            return False
        if self.out_of_budget():
            return False
        device = self.device
        idx = np.flatnonzero((device == group[0]) | (device == group[1]) | (device == group[2]))
        cur_f = float(np.maximum(loads[group].max(axis=0), other_max) @ w)
        cur_sec = float(((loads[group] ** 2) @ norm).sum())
        tol = 1e-9 * max(cur_f, 1e-300)
        code, work = _best_reassignment(c[idx], other_max, w, norm, 3, cur_f + tol)
        self.stats["work"] += work + SEARCH_WORK_GROUP
        if code is not None:
            new = np.zeros((3, len(w)))
            np.add.at(new, code, c[idx])
            f = float(np.maximum(new.max(axis=0), other_max) @ w)
            sec = float(((new**2) @ norm).sum())
            if f < cur_f - tol or (f <= cur_f + tol and sec < cur_sec - 1e-9 * max(cur_sec, 1e-300)):
                self.apply(group, idx, code)
                return True
        self.settled[key] = state
        return False


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
