"""The note before epoch 1 when an evaluation is estimated to cost more than a training epoch."""

import numpy as np
import pytest
from helpers import make_trainer

from dygnex_jax import eval_estimate
from dygnex_jax.graphs import bucket


@pytest.mark.parametrize("mode", ["all", "sampled"])
def test_the_note_counts_the_candidate_pairs_and_compares_with_training(mode, monkeypatch):
    tr = make_trainer(f"eval.candidates={mode}", "eval.neg_per_source=7", devices=2)
    ws, p = tr.windows, tr.config.parallel
    costs = np.concatenate([ws.costs(s, 0) for s in ("val", "test")])
    if mode == "all":  # every pair of each window's local nodes, padded to the scoring shape
        want = sum(bucket(int(n), p.bucket_ratio, p.min_bucket) ** 2 for n in costs[:, 0])
    else:  # neg_per_source candidates per source of a true edge (sources <= target edges)
        want = float(costs[:, 2].sum()) * 7
    seconds, pairs = eval_estimate.scoring_seconds(tr, costs[:, 0], costs[:, 2])
    assert pairs == want and np.isfinite(seconds) and seconds > 0

    monkeypatch.setattr(eval_estimate, "training_epoch_seconds", lambda trainer: 0.0)
    assert eval_estimate.evaluation_note(tr) is None  # a toy graph: well under QUIET_BELOW
    monkeypatch.setattr(eval_estimate, "QUIET_BELOW", 0.0)
    note = eval_estimate.evaluation_note(tr)
    assert note is not None and f"{int(want):,} candidate pairs, {mode})" in note
    assert "eval.every=N" in note and (("eval.candidates=sampled" in note) == (mode == "all"))
    monkeypatch.setattr(eval_estimate, "training_epoch_seconds", lambda trainer: 1e9)
    assert eval_estimate.evaluation_note(tr) is None


def test_training_epoch_prediction_is_the_planned_steps(monkeypatch):
    tr = make_trainer(devices=2)
    tr.plan_budgets()
    assert tr.planned
    steps = tr.epoch_schedule(1).num_steps
    want = steps * np.mean([tr.step_seconds(b) for b in tr.planned])
    assert eval_estimate.training_epoch_seconds(tr) == pytest.approx(want)
    assert want > 0


def test_no_note_for_tasks_that_evaluate_forward_passes_only():
    from types import SimpleNamespace

    for task in ("node_reg", "edge_cls"):  # never reaches the windows: their evaluation is forward passes
        assert eval_estimate.evaluation_note(SimpleNamespace(task=task)) is None
