"""The one-budget ceiling (research/budget_bound.py): the MILP's optimum is the brute-force optimum on
small instances, its ceiling is never below what it or the planner reaches on one budget, and the
per-column bound is never below either."""

import itertools

import numpy as np
import pytest
from helpers import SMALL, make_trainer

from dygnex_jax import plan
from dygnex_jax.padding import layout_view
from dygnex_jax.research.budget_bound import one_budget_milp, per_column_bound


def brute_force(costs, weights, devices, batch) -> float:
    """The least padded cost of one budget over every placement (slots x w · per-column max)."""
    k = len(costs)
    steps = -(-k // batch)
    slots = steps * devices
    best = np.inf
    for assign in itertools.product(range(slots), repeat=k):
        a = np.array(assign)
        if np.bincount(a // devices, minlength=steps).max() > batch:
            continue
        loads = np.zeros((slots, costs.shape[1]))
        np.add.at(loads, a, costs)
        best = min(best, slots * float(loads.max(axis=0) @ weights))
    return best


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_milp_finds_the_brute_force_optimum(seed):
    rng = np.random.default_rng(seed)
    costs = np.round(np.exp(rng.normal(size=(6, 3))) * [50, 200, 400]) + 1
    weights = np.array([1.0, 0.5, 2.0])
    got = one_budget_milp(costs, weights, devices=2, batch=3, time_limit=60)
    optimum = float((costs @ weights).sum()) / brute_force(costs, weights, 2, 3)
    assert got["optimal"] and got["efficiency"] == pytest.approx(optimum, rel=1e-6)
    assert got["ceiling"] >= got["efficiency"] - 1e-9
    assert per_column_bound(costs, weights, got["slots"]) >= optimum - 1e-12
    steps = np.array(got["assignment"]) // 2
    assert np.bincount(steps).max() <= 3 and len(got["assignment"]) == 6


def test_no_one_budget_plan_beats_the_ceiling():
    """The planner on one budget (max_budgets 1): epoch 1's packed efficiency — padding node and
    alignment included — is at most the MILP's ceiling for those windows."""
    tr = make_trainer(
        *SMALL, "data.neg_mult=2", "train.epochs=2", "train.batch_size=4", "parallel.max_budgets=1", devices=2
    )
    got = plan.plan(tr.config, tr.n_devices, ws=tr.windows)
    costs = layout_view(tr.windows.costs("train", 2), tr.windows.edge_profile("train"), tr.layout)[0]
    weights = plan.cost_weights(plan.run_settings(tr.config.schedule, tr.cost_model, tr.windows.window))
    bound = one_budget_milp(costs, weights, 2, 4, time_limit=60)
    assert len(got["budgets"]) == 1
    assert got["packed_padding_efficiency"] <= bound["ceiling"] + 1e-9
    assert bound["efficiency"] <= bound["ceiling"] + 1e-9
