"""Training loop invariants: determinism, schedule methods agree on the samples, adaptive re-fit."""

import functools

import jax
import numpy as np
from helpers import LOOP, make_trainer

make = functools.partial(make_trainer, base=LOOP)  # the toy graph, 2 devices


def test_same_seed_same_run():
    a, b = make("train.batch_size=4"), make("train.batch_size=4")
    ra, rb = a.train_epoch(1), b.train_epoch(1)
    assert ra["loss"] == rb["loss"]
    for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(b.params)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert a.evaluate("val") == b.evaluate("val")


def test_prefetch_changes_nothing_but_timing():
    """Packing steps ahead in a background thread (parallel.prefetch) gives the same steps: the same
    budgets in the same order, the same losses and bit-identical parameters after two epochs."""
    runs = [
        make("train.batch_size=2", "parallel.bucket_ratio=2.0", f"parallel.prefetch={k}") for k in (0, 1, 3)
    ]
    for r in runs:
        for epoch in (1, 2):
            r.train_epoch(epoch)
    ref = runs[0]
    assert len(ref.last_steps) > 3  # several steps, so that packing ran ahead
    for other in runs[1:]:
        assert [s["budget"] for s in other.last_steps] == [s["budget"] for s in ref.last_steps]
        assert [s["loss"] for s in other.last_steps] == [s["loss"] for s in ref.last_steps]
        for x, y in zip(jax.tree.leaves(ref.params), jax.tree.leaves(other.params)):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_ski_rental_rents_a_compiled_budget_until_a_compilation_would_have_been_cheaper():
    """A step whose bucket is not compiled runs on the cheapest compiled budget that holds it while the
    extra padded work summed over such steps stays within ``compile_steps`` steps of that budget; the
    step that would pass it compiles its own bucket, which every later step of the bucket then uses."""
    from dygnex_jax.graphs import Budget, padded_work

    small, big = Budget(64, 64, 64, 2), Budget(256, 256, 256, 2)

    def cost(tr, b):
        return float(padded_work(b, tr.windows.window) @ tr.weights)

    for steps in (0.0, 3.0, 10.0):
        tr = make("parallel.reuse_slack=0", f"parallel.compile_steps={steps}")
        tr.packer.compiled = {big, Budget(512, 512, 512, 3)}  # a larger window count never holds the step
        picks = [tr.packer.reuse_budget(small) for _ in range(200)]
        rented = picks.index(small)
        extra = cost(tr, big) - cost(tr, small)
        assert rented * extra <= steps * cost(tr, big) < (rented + 1) * extra  # rent up to the price
        assert all(p == big for p in picks[:rented]) and set(picks[rented:]) == {small}  # then compiled, kept
        assert rented == int(steps * cost(tr, big) // extra) and (rented > 0) == (steps > 0)
    assert make("parallel.reuse_slack=3").packer.reuse_budget(small) == small  # nothing compiled: compile it


def test_renting_compiles_less_and_trains_the_same():
    """Over several epochs, renting compiles no more shapes than the slack rule alone, and the losses
    agree (a step's result does not depend on its padding)."""
    runs = [
        make(
            "train.batch_size=2",
            "parallel.budgets=buckets",  # the grid, the scan layout and the composition this was measured on
            "parallel.layout=scan",
            "schedule.compose=strata",
            "parallel.bucket_ratio=1.1",
            f"parallel.compile_steps={k}",
        )
        for k in (0, 50)
    ]
    losses = [[r.train_epoch(e)["loss"] for e in (1, 2, 3)] for r in runs]
    assert len(runs[1].packer.compiled) < len(runs[0].packer.compiled)
    np.testing.assert_allclose(losses[1], losses[0], rtol=2e-5)


def test_full_batch_gradient_does_not_depend_on_the_schedule():
    """With B = all training windows there is one step: psg and dygnex_g must give the same update."""
    k = 8  # toy graph: 12 windows, 70% train -> 8
    runs = [make(f"train.batch_size={k}", f"schedule.method={m}") for m in ("psg", "dygnex_g", "dygnex_l")]
    losses = [r.train_epoch(1)["loss"] for r in runs]
    np.testing.assert_allclose(losses, losses[0], rtol=1e-6)
    for other in runs[1:]:
        for x, y in zip(jax.tree.leaves(runs[0].params), jax.tree.leaves(other.params)):
            np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-5)  # Adam step ~5e-3


def test_refit_sets_the_scheduler_weights():
    tr = make("train.batch_size=2", "parallel.bucket_ratio=2.0")
    for epoch in (1, 2, 3):
        tr.train_epoch(epoch)
    assert len(tr.step_log) >= 5, "steps that did not compile are timed"
    model = tr.refit_cost_model()
    assert model is not None and model.source == "refit"
    want = model.weights(4) if np.all(model.weights(4) > 0) else [1.0, 1.0, 1.0]  # a free column: config's
    np.testing.assert_allclose([tr.settings.alpha, tr.settings.beta, tr.settings.gamma], want)
    stats = tr.train_epoch(4)
    assert np.isfinite(stats["loss"]) and stats["predicted_epoch_seconds"] > 0


def test_step_log_marks_an_epochs_last_step_alone_and_the_refit_fits_both():
    """With prefetch every epoch's last step runs alone (nothing packed beside it) and is logged so;
    the refit prices the steps beside the packing and those alone with a fit each (exact on linear
    timings), keeps the old ``coef_alone`` with fewer than 5 alone steps, and without prefetch (every
    step alone) fits one model on all."""
    from dygnex_jax.schedule.cost import CostModel, window_features

    tr = make("train.batch_size=2", "parallel.bucket_ratio=2.0", "parallel.prefetch=1")
    want = []
    for epoch in (1, 2):
        tr.train_epoch(epoch)
        n = len(tr.last_steps)
        assert n >= 2
        want += [s["step"] == n - 1 for s in tr.last_steps if not s["compiled"]]
    assert [a for _, _, a in tr.step_log] == want and any(want) and not all(want)
    w = tr.windows.window
    rng = np.random.default_rng(0)
    work = rng.uniform(10, 1000, (12, 3))
    beside_coef = np.array([1e-4, 2e-4, 3e-5, 1e-3, 0.02, 0.0, 0.0])
    alone_coef = np.array([5e-5, 1e-4, 3e-5, 0.0, 0.01, 0.0, 0.0])
    secs = {a: window_features(work, w) @ (alone_coef if a else beside_coef) for a in (False, True)}
    tr.step_log = [(work[i], float(secs[i % 2 == 1][i]), i % 2 == 1) for i in range(12)]
    model = tr.refit_cost_model()
    np.testing.assert_allclose(model.predict_costs(work, w), secs[False], rtol=1e-6)
    np.testing.assert_allclose(model.predict_costs(work, w, alone=True), secs[True], rtol=1e-6)
    # 3 alone steps: not enough to fit, the old model's alone coefficients stay
    old = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 0.0, 0.0])
    tr.set_cost_model(CostModel(coef=model.coef, coef_alone=old, source="fit", compile_seconds=2.5))
    tr.step_log = [(work[i], float(secs[i >= 9][i]), i >= 9) for i in range(12)]
    model = tr.refit_cost_model()
    np.testing.assert_allclose(model.coef_alone, old)
    np.testing.assert_allclose(model.predict_costs(work, w), secs[False], rtol=1e-6)
    assert model.compile_seconds == 2.5, "the compile price carries over"
    # every step alone (no prefetch): one fit on all of them prices the alone steps
    tr.step_log = [(work[i], float(secs[True][i]), True) for i in range(12)]
    model = tr.refit_cost_model()
    assert model.coef_alone is None
    np.testing.assert_allclose(model.predict_costs(work, w, alone=True), secs[True], rtol=1e-6)


def test_long_evaluation_says_it_is_alive():
    """With a log and an interval of 0 s, every evaluation step but the last prints its progress and
    an estimate of the time left; the metrics do not change with logging."""
    tr = make("train.batch_size=4", "eval.batch_size=2")
    quiet = tr.evaluate("test")
    lines = []
    tr.eval_log, tr.eval_log_every = lines.append, 0.0
    assert tr.evaluate("test") == quiet
    n_steps = -(-len(tr.windows.splits["test"]) // tr.eval_per_step)
    assert n_steps > 1 and len(lines) == n_steps - 1
    assert all(line.startswith("evaluating test: step ") and line.endswith(" s left") for line in lines)
