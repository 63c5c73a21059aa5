"""What a step pays: the one padded-cost function of the packer, the planner, the simulator and the
metrics (numpy only, no JAX; the scheduler may import it).

A device's packed batch has a *budget* (nodes, edges, pairs, windows): the array sizes every device
of a step is padded to. Its edge dimension depends on the model's *layout*:

* ``scan``: edges per time offset, arrays [W, E]; the recurrence scans over the W offsets, so the
  device pays W x E edges and a step needs E = the largest offset's edge count over its devices.
* ``flat``: the edges of all W offsets in one list [E] over the [W x N] node-time grid (models whose
  graph operators do not read the recurrent state, ``config.FLAT_LAYOUT_MODELS``); the device pays E
  edges and a step needs E = the largest per-device sum over offsets.
* ``last``: the last offset's edges alone, arrays [1, E] (models whose output reads no other offset's
  graph, ``config.LAST_OFFSET_MODELS``: EvolveGCN-O, whose GCNs then run on that offset's N node rows
  alone). Its real work counts those edges only:
  ``layout_view`` gives the windows' costs and edge profiles as this layout sees them (the other
  offsets empty), and every function below then treats it as ``flat``.

Work is measured in one unit on both sides: the vector (nodes, edges summed over offsets, pairs),
weighted by the cost weights (alpha, beta, gamma). **Padding efficiency** =
Σ_steps Σ_devices w · real work / Σ_steps P x w · padded work (``efficiency``): 1.0 means every
device ran only real work. A budget holds one padding node beyond the real ones (padding edges and
pairs point at it), which counts as padded work.

Budgets of a run are planned before its first step (``plan_budgets``): the steps' exact needs are
grouped so that a few budgets, each the element-wise maximum of its group (aligned to ``align``),
cover them all at the least padded work plus ``compile_price`` per budget (a compilation's price in
work units). Training then compiles exactly these budgets: the compilations of a run are fixed
before epoch 1.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

LAYOUTS = ("scan", "flat", "last")


@dataclasses.dataclass(frozen=True, order=True)
class Budget:
    """Padded sizes of one device's packed batch (the same on every device in a step)."""

    nodes: int  # N, always > the real node count (the last node is a padding node)
    edges: int  # E: per time offset (scan layout) or over all offsets (flat layout)
    pairs: int  # Q
    windows: int  # K

    def as_tuple(self) -> tuple[int, int, int, int]:
        return (self.nodes, self.edges, self.pairs, self.windows)

    def holds(self, need: Budget) -> bool:
        """Every dimension at least ``need``'s."""
        return all(a >= b for a, b in zip(self.as_tuple(), need.as_tuple()))


def check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


def layout_view(costs: np.ndarray, profile: np.ndarray, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """The windows' costs [K, 3] and edge profiles [K, W] as ``layout`` runs them: unchanged, except for
    ``last``, where only the last offset's edges are work (the others are never packed)."""
    check_layout(layout)
    if layout != "last":
        return costs, profile
    prof = np.zeros_like(profile)
    prof[:, -1] = profile[:, -1]
    c = np.array(costs, dtype=np.float64, copy=True)
    c[:, 1] = profile[:, -1]
    return c, prof


def edge_need(edges_per_offset: np.ndarray, layout: str) -> int:
    """Edge budget one device's windows need: [W] (or [..., W]) edges per offset -> the largest offset
    (scan) or the sum (flat)."""
    check_layout(layout)
    e = np.asarray(edges_per_offset)
    if e.size == 0:
        return 0
    return int(e.max()) if layout == "scan" else int(e.sum())


def device_need(nodes: int, edges_per_offset: np.ndarray, pairs: int, windows: int, layout: str) -> Budget:
    """The exact budget one device's work needs (+1 padding node; at least one edge and pair slot)."""
    return Budget(
        int(nodes) + 1, max(edge_need(edges_per_offset, layout), 1), max(int(pairs), 1), max(int(windows), 1)
    )


def step_need(needs: list[Budget], window_slots: int = 0) -> Budget:
    """The element-wise maximum of the devices' needs (``window_slots``: a minimum window count)."""
    t = np.max([b.as_tuple() for b in needs], axis=0)
    return Budget(int(t[0]), int(t[1]), int(t[2]), max(int(t[3]), window_slots, 1))


def padded_work(budget: Budget, window: int, layout: str) -> np.ndarray:
    """[3] (nodes, edges summed over offsets, pairs) one device runs under ``budget``."""
    check_layout(layout)
    edges = budget.edges * window if layout == "scan" else budget.edges
    return np.array([budget.nodes, edges, budget.pairs], np.float64)


def padded_cost(budget: Budget, window: int, layout: str, weights: np.ndarray) -> float:
    """w · padded work of one device under ``budget``."""
    return float(padded_work(budget, window, layout) @ np.asarray(weights, np.float64))


def efficiency(real: np.ndarray, padded: np.ndarray, weights: np.ndarray) -> float:
    """Padding efficiency: Σ w · real work / Σ w · padded work.

    Args:
      real: [..., D] real work of every device of every step (nodes, edges summed over offsets, pairs;
        or any D cost columns with D weights).
      padded: [..., D] padded work of every device of every step (a step's budget counted once per
        device: every device runs it).
      weights: [D] the cost weights, the same on both sides.
    """
    w = np.asarray(weights, np.float64)
    num = float(np.sum(np.asarray(real, np.float64).reshape(-1, len(w)) @ w))
    den = float(np.sum(np.asarray(padded, np.float64).reshape(-1, len(w)) @ w))
    return num / den if den > 0 else 1.0


def align_up(n: int, multiple: int) -> int:
    return int(-(-int(n) // multiple) * multiple) if multiple > 1 else int(n)


def aligned(need: Budget, multiple: int) -> Budget:
    """``need`` with nodes, edges and pairs rounded up to a multiple of ``multiple`` (windows kept)."""
    return Budget(
        align_up(need.nodes, multiple),
        align_up(need.edges, multiple),
        align_up(need.pairs, multiple),
        need.windows,
    )


def cheapest_holding(need: Budget, budgets, window: int, layout: str, weights: np.ndarray) -> Budget | None:
    """The budget of ``budgets`` with the least padded cost that holds ``need`` (None if none does);
    ties go to the smaller tuple, so every process picks alike."""
    fits = [b for b in budgets if b.holds(need)]
    if not fits:
        return None
    return min(fits, key=lambda b: (padded_cost(b, window, layout, weights), b.as_tuple()))


# The DP below is quadratic in the number of distinct step needs; beyond this many they are merged
# into consecutive bins (each bin's need is the element-wise maximum of its members: conservative).
_PLAN_MAX_NEEDS = 1500


def compile_rounds(k, workers: int = 1, traced: float = 0.0):
    """What compiling ``k`` budgets costs, in compilations: XLA compiles ``workers`` at once, the
    ``traced`` share of each (tracing and lowering, Python) runs one after another:
    ``traced * k + (1 - traced) * ceil(k / workers)`` (``k`` with one worker)."""
    k = np.asarray(k, np.float64)
    return traced * k + (1.0 - traced) * np.ceil(k / max(int(workers), 1))


def plan_budgets(
    needs: list[Budget],
    window: int,
    layout: str,
    weights: np.ndarray,
    *,
    compile_price: float,
    max_budgets: int,
    align: int = 8,
    workers: int = 1,
    traced: float = 0.0,
) -> list[Budget]:
    """A few budgets that hold every step need, chosen to minimise padded work + ``compile_price`` x
    ``compile_rounds`` of the number of budgets (``workers``, ``traced``: see there).

    The needs (aligned, with one window count: the largest) are sorted by padded cost; a budget serves a
    run of consecutive needs in that order and is their element-wise maximum. The partition into at
    most ``max_budgets`` runs is optimal for that order (dynamic programming over run ends); the
    number of runs is the one that minimises Σ_steps cost(its budget) + compile_price x rounds(runs).
    Deterministic: the same needs give the same budgets on every process.

    Returns the budgets sorted by cost (cheapest first); [] for no needs.
    """
    if not needs:
        return []
    w = np.asarray(weights, np.float64)
    slots = max(b.windows for b in needs)
    keyed: dict[tuple, int] = {}
    for b in needs:
        a = aligned(b, align)
        t = (a.nodes, a.edges, a.pairs)
        keyed[t] = keyed.get(t, 0) + 1
    rows = np.array(sorted(keyed), np.int64)  # [n, 3] distinct aligned needs
    counts = np.array([keyed[tuple(r)] for r in rows], np.float64)
    unit = np.array([1.0, window if layout == "scan" else 1.0, 1.0]) * w
    order = np.lexsort((rows[:, 2], rows[:, 1], rows[:, 0], rows @ unit))
    rows, counts = rows[order], counts[order]
    if len(rows) > _PLAN_MAX_NEEDS:  # merge neighbours into bins (conservative maxima)
        edges = np.linspace(0, len(rows), _PLAN_MAX_NEEDS + 1).astype(int)
        rows = np.array([rows[a:b].max(axis=0) for a, b in zip(edges[:-1], edges[1:])])
        counts = np.array([counts[a:b].sum() for a, b in zip(edges[:-1], edges[1:])])
    n = len(rows)
    g_max = max(1, min(int(max_budgets), n))
    csum = np.concatenate([[0.0], np.cumsum(counts)])
    # group_cost[i, j] (i <= j): the run i..j served by the maximum of its needs
    group_cost = np.full((n, n), np.inf)
    for j in range(n):
        run_max = np.maximum.accumulate(rows[j::-1], axis=0)[::-1]  # [j+1, 3]: max of rows[i..j]
        group_cost[: j + 1, j] = (run_max @ unit) * (csum[j + 1] - csum[: j + 1])
    best = np.full((g_max + 1, n + 1), np.inf)  # best[g, j]: first j needs in g runs
    back = np.zeros((g_max + 1, n + 1), np.int64)
    best[0, 0] = 0.0
    for g in range(1, g_max + 1):
        for j in range(1, n + 1):
            cand = best[g - 1, :j] + group_cost[:j, j - 1]
            i = int(np.argmin(cand))
            best[g, j], back[g, j] = cand[i], i
    totals = best[1:, n] + compile_price * compile_rounds(np.arange(1, g_max + 1), workers, traced)
    g = int(np.argmin(totals)) + 1
    budgets, j = [], n
    while g > 0:
        i = int(back[g, j])
        m = rows[i:j].max(axis=0)
        budgets.append(Budget(int(m[0]), int(m[1]), int(m[2]), slots))
        j, g = i, g - 1
    return sorted(budgets, key=lambda b: (padded_cost(b, window, layout, w), b.as_tuple()))


def bucket(n: int, ratio: float, minimum: int) -> int:
    """Round n up to the geometric grid ``ceil(minimum * ratio**i)`` (i = 0, 1, ...): the shape buckets
    of evaluation, the partitioned baselines and ``parallel.budgets: buckets``."""
    size = float(minimum)
    while math.ceil(size) < n:
        size *= ratio
    return int(math.ceil(size))


def bucketed(need: Budget, ratio: float, minimum: int) -> Budget:
    """``need`` rounded up to the bucket grid in nodes, edges and pairs (windows kept)."""
    return Budget(
        bucket(need.nodes, ratio, minimum),
        bucket(need.edges, ratio, minimum),
        bucket(need.pairs, ratio, minimum),
        need.windows,
    )
