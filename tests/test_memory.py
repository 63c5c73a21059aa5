"""Steps fitted to the memory budget (memory.py, memory_plan.py): micro-steps give the update of the
whole step, the linear model is fitted and predicts XLA's bytes, the accumulation count respects its
rules, a run under a small budget splits its steps and stays within it, a window that cannot fit is one
error line (tests/test_errors.py, step-does-not-fit), and a resumed run keeps its micro-steps."""

import json

import jax
import numpy as np
import pytest
from helpers import EXACT, LOOP, make_trainer, run_cli

from dygnex_jax import memory, memory_plan, parallel
from dygnex_jax.config import load_config
from dygnex_jax.memory import StepMemory
from dygnex_jax.padding import Budget
from dygnex_jax.trainer import Trainer


def close(a, b, tol=2e-5):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


@pytest.mark.parametrize("devices", [1, 4])
def test_micro_steps_give_the_whole_steps_update(devices):
    """Windows 0..7 as one step, and as two micro-steps of 4 (each device's windows split in two): the
    same sums, and the same parameters and optimiser state after the update."""
    whole, split = (make_trainer(base=EXACT, devices=devices) for _ in range(2))
    per = 8 // devices
    step = [list(range(p * per, (p + 1) * per)) for p in range(devices)]
    halves = [[ids[: per // 2] for ids in step], [ids[per // 2 :] for ids in step]]
    if devices == 4:  # two windows a device: one each in both micro-steps
        assert all(len(ids) == 1 for h in halves for ids in h)
    batch = whole.pack(step, "train", epoch=1)[0]
    n, d, g = jax.tree.map(
        np.asarray,
        parallel.to_host(whole.train_step.grad_fn(whole.params, parallel.shard_batch(whole.mesh, batch))),
    )
    sums = memory_plan.accumulated_gradient(split, halves)
    assert float(d) > 0 and float(sums[1]) == pytest.approx(float(d), rel=1e-6)
    np.testing.assert_allclose(float(sums[0]), float(n), rtol=1e-5)
    close(jax.tree.map(lambda x: x / d, sums[2]), jax.tree.map(lambda x: x / d, g))
    # the update built on them
    p1, o1, s1 = whole.train_step(whole.params, whole.opt_state, parallel.shard_batch(whole.mesh, batch))
    acc = parallel.zero_sums(split.mesh, split.params)
    for h in halves:
        b = parallel.shard_batch(split.mesh, split.pack(h, "train", epoch=1)[0])
        acc = split.train_step.accumulate(split.params, acc, b)
    p2, o2, s2 = split.train_step.apply(split.params, split.opt_state, acc)
    np.testing.assert_allclose(float(s2["loss"]), float(s1["loss"]), rtol=1e-5)
    close(p1, p2)
    close(o1, o2)


def test_fit_recovers_a_linear_model():
    truth = StepMemory(1e6, 3000.0, 40.0, 600.0, 2e4)
    budgets = memory.probe_budgets(Budget(4096, 20000, 90000, 8))
    fitted = StepMemory.fit(budgets, [truth.predict(b) for b in budgets])
    np.testing.assert_allclose(fitted.coefficients, truth.coefficients, rtol=1e-6)
    # a dimension that never varies is left to the constant
    same = [Budget(100 * i, 50, 7, 2) for i in range(1, 5)]
    f = StepMemory.fit(same, [5.0 + 2.0 * b.nodes for b in same])
    assert f.per_edge == f.per_pair == f.per_window == 0.0
    assert f.predict(Budget(1000, 50, 7, 2)) == pytest.approx(2005.0)


def test_accumulation_counts_divide_the_batch_and_keep_a_window_per_device():
    assert memory.divisors(12) == [1, 2, 3, 4, 6, 12]
    assert memory.accumulation_counts(12, 2) == [2, 3, 4, 6]  # 12 / 6 = 2 windows, one per device
    assert memory.accumulation_counts(12, 4) == [2, 3]  # 12 / 4 = 3 < 4 devices
    assert memory.accumulation_counts(8, 8) == []  # one window per device already


def test_the_model_predicts_xla_bytes_of_a_held_out_step():
    """Fitted on the probes around the largest planned step, the model predicts the compiled bytes of a
    smaller step (the micro-steps it is used for) within 20 %."""
    t = make_trainer(*LOOP[3:], "train.batch_size=8", "model.head_chunk=256", base=EXACT, devices=1)
    largest = t.plan_budgets()[-1]
    model = memory_plan.probe_model(t, largest, None)
    n, e, q, k = largest.as_tuple()
    held_out = Budget(max(n // 3, 2), max(e // 3, 1), max(q // 3, 1), max(k // 2, 1))
    memory_plan.compile_budget(t, held_out)
    measured = t.step_bytes[held_out]
    assert measured > 0
    assert abs(model.predict(held_out) - measured) <= 0.2 * measured


def test_a_run_under_a_small_budget_splits_its_steps_and_resumes_with_them(tmp_path):
    """The embedded default graph (600 nodes, one device): a budget under the whole step's bytes."""
    args = ["model.head_chunk=4096", "train.epochs=1", "parallel.devices=1"]
    out = tmp_path / "run"
    probe = Trainer(load_config(None, args))
    probe.compile_planned()
    whole = probe.memory["step_bytes"]
    assert probe.memory["accumulate"] == 1 and whole > 0
    budget = 0.85 * whole / 2**30
    proc = run_cli("train", *args, f"parallel.memory_gb={budget:.6f}", "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert "micro-steps of" in proc.stdout + proc.stderr
    first = json.loads((out / "summary.json").read_text())["memory"]
    assert first["accumulate"] > 1
    assert first["step_bytes"] <= first["device_budget_bytes"] < first["whole_step_bytes"]
    meta = json.loads(next((out / "checkpoints").glob("epoch_*/meta.json")).read_text())
    assert meta["plan"]["accumulate"] == first["accumulate"]
    # resumed for one more epoch (the config's memory budget is the run's): the same micro-steps
    proc = run_cli("train", "train.epochs=2", "--resume", out)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "summary.json").read_text())["memory"]["accumulate"] == first["accumulate"]
