"""The analytic models of the communication-bound baselines: ``snapshot`` (time partition, pipelined)
and ``vertex`` (node partition); their assumptions are in ``simulate``'s docstring, which re-exports
these names.
"""

from __future__ import annotations

import numpy as np

from .schedule.base import check_sizes
from .simulate_comm import ring_allgather_seconds, ring_allreduce_seconds, state_bytes
from .simulate_instance import Instance
from .simulate_setup import Setup, _figures

MICRO_PER_STAGE = 4  # snapshot model: a replica's windows form up to 4 x stages micro-batches


def simulate_snapshot(inst: Instance, p: int, setup: Setup) -> dict:
    """ESDG-style time partition, pipelined (module docstring); steps of B windows in time order."""
    b = setup.batch(p)
    check_sizes(len(inst.costs), p, b)
    w = inst.window
    stages = min(p, w)
    replicas = p // stages
    bounds = np.linspace(0, w, stages + 1).round().astype(int)
    c = setup.model.coef
    per_node, per_edge, per_pair = setup.model.unit_costs(1)[1]  # an edge and a pair with their locality
    fixed = float(c[4])
    link = setup.link
    state = state_bytes(setup.model_cfg, setup.num_features, inst.costs[:, 0])
    slow = setup.device_slowdown(p)
    allreduce = ring_allreduce_seconds(setup.param_bytes, p, link)
    # [K, S] size-dependent seconds of every window on every stage; [S] per-snapshot constants
    per_stage = np.zeros((len(inst.costs), stages))
    for s in range(stages):
        lo, hi = bounds[s], bounds[s + 1]
        per_stage[:, s] = (
            per_node * inst.costs[:, 0] * (hi - lo)
            + per_edge * inst.profile[:, lo:hi].sum(axis=1)
            + (per_pair * inst.costs[:, 2] if s == stages - 1 else 0.0)
        )
    stage_const = c[3] * np.diff(bounds)
    egcn = setup.model_cfg.name == "egcn_o"  # one evolved-weights state per micro-batch, else per window
    fixed_unit = setup.model.unit_costs(w)
    compute, ideal = [], []
    for lo in range(0, len(inst.costs), b):
        ids = np.arange(lo, min(lo + b, len(inst.costs)))
        times = []
        for part in np.array_split(ids, replicas):
            if not len(part):
                continue
            groups = np.array_split(part, min(len(part), MICRO_PER_STAGE * stages))
            micro = []
            for g in groups:  # a micro-batch: its windows packed, as the trainer packs a device's
                work = slow * (per_stage[g].sum(axis=0) + stage_const).max()
                moved = state[g[0]] if egcn else state[g].sum()
                micro.append(work + (2 * (link.alpha + moved / link.bandwidth) if stages > 1 else 0.0))
            times.append(sum(micro) + (stages - 1) * float(np.mean(micro)))
        compute.append(slow * fixed + max(times))
        whole = np.array(
            [inst.costs[ids, 0].sum(), w * inst.profile[ids].sum(axis=0).max(), inst.costs[ids, 2].sum()]
        )
        ideal.append(slow * (fixed_unit[0] + whole @ fixed_unit[1] / p))
    row = _figures("snapshot", p, b, np.array(compute), np.array(ideal), allreduce, 0.0, None)
    return {**row, **_analytic_labels()}


def simulate_vertex(inst: Instance, p: int, setup: Setup) -> dict:
    """Node partition with per-layer all-gathers of sender embeddings (module docstring)."""
    b = setup.batch(p)
    check_sizes(len(inst.costs), p, b)
    w = inst.window
    fixed, unit = setup.model.unit_costs(w)
    slow = setup.device_slowdown(p)
    allreduce = ring_allreduce_seconds(setup.param_bytes, p, setup.link)
    layers, hidden = setup.model_cfg.layers, setup.model_cfg.hidden
    compute, ideal = [], []
    for lo in range(0, len(inst.costs), b):
        ids = np.arange(lo, min(lo + b, len(inst.costs)))
        whole = np.array(
            [inst.costs[ids, 0].sum(), w * inst.profile[ids].sum(axis=0).max(), inst.costs[ids, 2].sum()]
        )
        work = slow * (fixed + whole @ unit / p)
        gather = ring_allgather_seconds(4.0 * whole[0] * hidden, p, setup.link)
        compute.append(work + 2 * w * layers * gather)
        ideal.append(work)
    row = _figures("vertex", p, b, np.array(compute), np.array(ideal), allreduce, 0.0, None)
    return {**row, **_analytic_labels()}


def _analytic_labels() -> dict:
    """snapshot / vertex rows: their own analytic models, in the scan layout, charged no budgets."""
    label = "analytic (unpadded partition model)"
    return {"shapes": "analytic", "budget_policy": "analytic", "shapes_label": label, "layout": "scan"}


# the partitioned strategies (strategies.STRATEGIES, not whole windows) and their analytic step models
ANALYTIC_SIMULATORS = {"snapshot": simulate_snapshot, "vertex": simulate_vertex}
