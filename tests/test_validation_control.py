"""The per-row control of tools/validate_simulator.py (research/validation_control.py): which budget it
re-times and on which step, and how a row's error is split into model and regime."""

import collections
import statistics

import pytest

from dygnex_jax.research import validation_control as vc
from dygnex_jax.schedule.cost import alone_steps


def test_the_control_retimes_the_most_used_budget_on_a_step_of_its_own(monkeypatch):
    """After two epochs: the budget most of the steps timed beside the next step's packing ran in (an
    epoch's last step, alone, and compiled steps not counted), re-timed on one of the run's own steps
    in it as the profile times steps; the training figure is those steps' median, the prediction the
    trainer's own price of the budget beside the packing."""
    from dygnex_jax import profile
    from dygnex_jax.config import load_config
    from dygnex_jax.train import Trainer

    trainer = Trainer(load_config(None, ["parallel.devices=2", "train.batch_size=8"]))
    trainer.plan_budgets()
    trainer.compile_planned(lambda _: None)
    steps = []
    for e in (1, 2):
        trainer.train_epoch(e)
        steps += trainer.last_steps
    steps[0]["compiled"] = True  # a step that compiled is not a training figure
    packed = []

    def run(self, tr, pool, pack_next):
        packed.append(tuple(self.work))
        return 0.05 if pool is not None else 0.04  # beside the packing / alone

    monkeypatch.setattr(profile.TimedStep, "run", run)
    got = vc.control(trainer, steps, 3, lambda *_: None)

    beside = []
    for e in (1, 2):
        epoch = [s for s in steps if s["epoch"] == e]
        beside += [s for s, a in zip(epoch, alone_steps(len(epoch), 1)) if not a and not s["compiled"]]
    key, count = collections.Counter(tuple(s["budget"]) for s in beside).most_common(1)[0]
    budget = next(b for b in trainer.planned if b.as_tuple() == key)
    assert got["budget"] == list(key) and got["steps"] == count and got["rounds"] == 3 and not got["alone"]
    assert got["training_seconds"] == statistics.median(
        s["seconds"] for s in beside if tuple(s["budget"]) == key
    )
    assert got["control_seconds"] == 0.05 and got["control_alone_seconds"] == 0.04
    assert got["predicted_seconds"] == trainer.step_seconds(budget, False)
    assert set(packed) == {tuple(trainer.padded_work(budget))}  # the run's step, packed in that budget
    assert len(packed) == 1 + 2 * 3  # its first run, then 3 rounds beside and alone

    # epochs of one step each (run alone, with nothing to pack beside): the alone figures compared
    last = [s for s in steps if s["step"] == max(t["step"] for t in steps if t["epoch"] == s["epoch"])]
    got = vc.control(trainer, last, 3, lambda *_: None)
    key = collections.Counter(tuple(s["budget"]) for s in last).most_common(1)[0][0]
    assert got["alone"] and got["steps"] == sum(tuple(s["budget"]) == key for s in last)
    assert got["control_seconds"] == 0.04 and got["control_beside_seconds"] == 0.05
    budget = next(b for b in trainer.planned if b.as_tuple() == key)
    assert got["predicted_seconds"] == trainer.step_seconds(budget, True)

    for s in steps:
        s["compiled"] = True
    assert vc.control(trainer, steps, 3, lambda *_: None) is None  # nothing to compare with
    assert vc.control(trainer, steps[:1], 0, lambda *_: None) is None


def _control(predicted, control, training):
    return {
        "budget": [1000, 2000, 30000, 8],
        "steps": 9,
        "predicted_seconds": predicted,
        "control_seconds": control,
        "training_seconds": training,
    }


def test_a_rows_error_is_split_into_model_and_regime():
    """model = predicted / control - 1, regime = training / control - 1; the table shows them trial by
    trial and counts over every trial with a control (a row without controls is left out)."""
    c = _control(0.10, 0.08, 0.12)
    assert vc.split(c) == pytest.approx({"model": 0.25, "regime": 0.5})
    assert vc.split(None) is None
    rows = [
        {
            "run": "1 dev",
            "dataset": "a",
            "trials": {
                "error_vs_steps": [-0.2, 0.05, None],
                "control": [c, _control(0.10, 0.10, 0.095), None],
            },
        },
        {"run": "2 dev", "dataset": "b", "error_vs_steps": -0.1, "control": _control(0.09, 0.1, 0.1)},
        {"run": "4 dev", "dataset": "c", "error_vs_steps": 0.3, "control": None},
    ]
    text = vc.table(rows)
    assert (
        "| 1 dev | a | -20.0% / +5.0% / - | +25.0% / +0.0% / - | +50.0% / -5.0% / - | 1000, 2000, 30000 (9) |"
        in text
    )
    assert "| 2 dev | b | -10.0% | -10.0% | +0.0% |" in text and "| 4 dev |" not in text
    # three trials with a control: |errors| 20, 5, 10 %; model 25, 0, 10 %; regime 50, 5, 0 %
    assert "Over 3 trials: median |error| 10.0% (2 within 15%)" in text
    assert "the model against the control 10.0% (2 within)" in text
    assert "the training steps against the control 5.0%." in text
