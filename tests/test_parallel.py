"""Exactness of the SPMD step: 8 devices == 1 device, jit == no jit, compile bound (padding invariance and
the background node, for every model: test_models.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import EXACT, make_trainer

from dygnex_jax import parallel
from dygnex_jax.graphs import bucket
from dygnex_jax.train import Trainer, make_loss_fn


def trainer(model: str, devices: int = 8, extra=(), graph=None) -> Trainer:
    return make_trainer(*extra, base=EXACT, model=model, devices=devices, graph=graph)


def assert_trees_close(a, b, tol=1e-5):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


# egcn_h and mpnn_lstm keep per-window state (pooled weights, batch statistics): the packing must not mix
# windows, whichever device they land on (slow: about 3x the others' compile time).
SLOW = pytest.mark.slow


def grads_on_eight_and_one(multi: Trainer, single: Trainer, loss_fn):
    """Training windows 0..7 as one step, one window per device on ``multi`` (8 devices) and all on
    ``single`` (1 device): ((loss sum, weight sum, gradient sums) of each, and the two host batches)."""
    ids = list(range(8))
    batch8, _, _ = multi.pack([[i] for i in ids], "train", epoch=1)
    batch1, _, _ = single.pack([ids], "train", epoch=1)
    out8 = parallel.make_grad_fn(loss_fn, multi.mesh)(multi.params, parallel.shard_batch(multi.mesh, batch8))
    out1 = parallel.make_grad_fn(loss_fn, single.mesh)(
        single.params, parallel.shard_batch(single.mesh, batch1)
    )
    return out8, out1, batch8, batch1


# gcrn_gru (scan layout; 10 s) is slow too: egcn_o here checks the link step, and
# test_node_reg.py::test_eight_devices_equal_one_device_node_reg checks gcrn_gru's sharded step (8 == 1).
@pytest.mark.parametrize(
    "model",
    [
        "egcn_o",
        pytest.param("gcrn_gru", marks=SLOW),
        pytest.param("egcn_h", marks=SLOW),
        pytest.param("mpnn_lstm", marks=SLOW),
    ],
)
def test_eight_devices_equal_one_device(model):
    multi = trainer(model, 8)
    single = trainer(model, 1)
    loss_fn = make_loss_fn(multi.model)
    (n8, d8, g8), (n1, d1, g1), batch8, batch1 = grads_on_eight_and_one(multi, single, loss_fn)
    assert float(d8) == pytest.approx(float(d1), rel=1e-6) and float(d1) > 0
    np.testing.assert_allclose(float(n8), float(n1), rtol=1e-5)
    assert_trees_close(jax.tree.map(lambda g: g / d8, g8), jax.tree.map(lambda g: g / d1, g1))
    # and the optimiser step built on it: same parameters afterwards
    s8 = multi.train_step(multi.params, multi.opt_state, parallel.shard_batch(multi.mesh, batch8))
    s1 = single.train_step(single.params, single.opt_state, parallel.shard_batch(single.mesh, batch1))
    np.testing.assert_allclose(float(s8[2]["loss"]), float(s1[2]["loss"]), rtol=1e-5)
    assert_trees_close(s8[0], s1[0])


@pytest.mark.parametrize("model", ["egcn_o", "gcrn_gru"])
def test_jit_equals_no_jit(model):
    tr = trainer(model, 1)
    batch, _, _ = tr.pack([[0, 1, 2, 3]], "train", epoch=1)
    local = {k: jnp.asarray(v[0]) for k, v in batch.items()}
    loss_fn = make_loss_fn(tr.model)
    params = jax.device_get(tr.params)
    with jax.disable_jit():
        eager = loss_fn(params, local)
    jitted = jax.jit(loss_fn)(params, local)
    np.testing.assert_allclose(np.asarray(eager), np.asarray(jitted), rtol=1e-5)


def exact_step_need(costs, profile, step, layout: str, slots: int) -> tuple[int, int, int, int]:
    """What a step needs, from the windows' costs [K, 3] and edge profiles [K, W] alone: the element-wise
    maximum over its devices of (nodes + 1 padding node, edges in ``layout``, pairs, window slots)."""
    per_device = []
    for ids in step:
        ids = np.asarray(ids, np.int64)
        e = profile[ids].sum(axis=0)  # [W] the device's edges at every time offset
        edges = {"scan": e.max(), "flat": e.sum(), "last": e[-1]}[layout]
        per_device.append((costs[ids, 0].sum() + 1, max(edges, 1), max(costs[ids, 2].sum(), 1), len(ids)))
    n, e, q, k = np.max(per_device, axis=0)
    return int(n), int(e), int(q), max(int(k), slots, 1)


def test_compilations_bounded_by_buckets():
    """parallel.budgets=buckets: a training step runs on its need rounded up to the bucket grid, or on a
    compiled larger budget (ski rental), so a run compiles at most one step per distinct bucket of its
    steps' needs. The bound is computed here from the window set's costs and the grid alone (never the
    packer), and checked against the compilations and the budgets the trainer recorded per step."""
    buckets = ["parallel.budgets=buckets", "parallel.bucket_ratio=2.0"]  # not the planned budgets (default)
    tr = trainer("egcn_o", 2, extra=["train.batch_size=2", "train.epochs=2", *buckets])
    p = tr.config.parallel
    costs = tr.windows.costs("train", tr.config.data.neg_mult)  # nodes (+ background), edges, pairs
    profile = tr.windows.edge_profile("train")
    slots = -(-tr.config.train.batch_size // tr.n_devices)
    needs, steps = [], []
    for epoch in (1, 2):
        sched = tr.epoch_schedule(epoch)
        stats = tr.train_epoch(epoch, sched=sched)
        assert np.isfinite(stats["loss"])
        needs += [exact_step_need(costs, profile, step, tr.layout, slots) for step in sched.steps]
        steps += tr.last_steps
    grid = {(*(bucket(x, p.bucket_ratio, p.min_bucket) for x in n[:3]), n[3]) for n in needs}
    assert len(steps) == len(needs) and len(grid) < len(set(needs))  # the grid merges steps' needs
    for step, need in zip(steps, needs):
        budget = tuple(step["budget"])
        assert all(b >= x for b, x in zip(budget, need)), (budget, need)  # the step fits its budget
        assert budget in grid, (budget, sorted(grid))  # and that is a bucket of some step's need
    compiled = [tuple(s["budget"]) for s in steps if s["compiled"]]
    assert len(compiled) == len(set(compiled)) == len(tr.train_step.traces)  # a new budget each time
    assert 1 <= len(tr.train_step.traces) <= len(grid)
