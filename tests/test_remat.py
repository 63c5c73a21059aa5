"""``model.remat``: rematerialising the time scan's body changes neither the parameter tree nor the loss
and gradients of any model in any edge layout it takes, and it lowers what the backward pass keeps
(XLA's temp bytes of the compiled gradient)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_parallel import trainer

from dygnex_jax.config import FLAT_LAYOUT_MODELS, LAST_OFFSET_MODELS, ModelConfig
from dygnex_jax.data.windows import LocalWindow
from dygnex_jax.graphs import DeviceWork, exact_need, pack_device
from dygnex_jax.models import ENCODERS, create_model
from dygnex_jax.tasks import make_loss_fn

# (model, layout): every model scans; the flat and last layouts for the models that take them
CASES = [
    (name, layout)
    for name in sorted(ENCODERS)
    for layout in ("scan", "flat", "last")
    if layout == "scan"
    or (layout == "flat" and name in FLAT_LAYOUT_MODELS)
    or (layout == "last" and name in LAST_OFFSET_MODELS)
]


def _remat(model_cfg: ModelConfig, remat: str) -> ModelConfig:
    return dataclasses.replace(model_cfg, remat=remat)


def packed_batch(tr, layout: str) -> dict:
    """The first three training windows of ``tr`` packed for one device in ``layout``, exactly (no padding
    budget beyond their need)."""
    work = tr.device_work(tr.windows.splits["train"][:3], "train", epoch=1)
    need = exact_need([work], layout=layout)
    packed = pack_device(work, need, tr.windows.window, tr.config.train.class_weights, layout)
    return {k: jnp.asarray(v) for k, v in packed.items()}


def _grad_fn(model):
    """jit'd ``(params, batch) -> (loss sum, gradients)`` of the link-prediction loss of ``model``."""
    loss_fn = make_loss_fn(model)
    return jax.jit(jax.value_and_grad(lambda p, b: loss_fn(p, b)[0]))


# egcn_h and gconv_lstm (17 s each on 2 cores) run with -m slow; the other Chebyshev models stay
SLOW = {("egcn_h", "scan"), ("gconv_lstm", "scan")}


@pytest.mark.parametrize(
    "name,layout",
    [pytest.param(n, lay, marks=[pytest.mark.slow] if (n, lay) in SLOW else []) for n, lay in CASES],
    ids=[f"{n}-{lay}" for n, lay in CASES],
)
def test_remat_gives_the_same_loss_gradients_and_parameters(name, layout):
    tr = trainer(name, 1)
    assert tr.config.model.remat == "none"  # the default
    batch = packed_batch(tr, layout)
    params = jax.device_get(tr.params)
    remat = create_model(_remat(tr.config.model, "scan"), tr.windows.num_features)

    # the same parameter tree, initialised to the same values: checkpoints are interchangeable
    init = lambda m: jax.jit(m.init)(jax.random.key(0), batch)  # noqa: E731
    plain_init, remat_init = init(tr.model), init(remat)
    assert jax.tree.structure(remat_init) == jax.tree.structure(plain_init) == jax.tree.structure(params)
    for a, b in zip(jax.tree.leaves(plain_init), jax.tree.leaves(remat_init)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

    want_loss, want_grad = _grad_fn(tr.model)(params, batch)
    got_loss, got_grad = _grad_fn(remat)(params, batch)
    assert sum(float(jnp.abs(g).sum()) for g in jax.tree.leaves(want_grad)) > 0  # not zeros against zeros
    np.testing.assert_allclose(float(got_loss), float(want_loss), rtol=1e-5, atol=1e-6)
    assert jax.tree.structure(got_grad) == jax.tree.structure(want_grad)
    for (path, g), w in zip(jax.tree_util.tree_leaves_with_path(got_grad), jax.tree.leaves(want_grad)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6, err_msg=str(path))


def _many_node_batch(nodes: int, window: int, edges: int, pairs: int, features: int, seed: int = 0):
    """One packed scan-layout batch of a single window: ``nodes`` active nodes, ``edges`` random edges
    per time offset, ``pairs`` random target pairs (half of them positive)."""
    rng = np.random.default_rng(seed)
    a = nodes - 1  # local id a is the background node
    win = LocalWindow(
        index=0,
        target=window,
        nodes=np.arange(a),
        edges=[rng.integers(0, a, (edges, 2)).astype(np.int32) for _ in range(window)],
        feat=rng.integers(0, features, (window, nodes)).astype(np.int32),
        positives=np.zeros((0, 2), np.int32),
        positive_codes=np.zeros(0, np.int64),
    )
    work = DeviceWork([win], [rng.integers(0, a, (pairs, 2)).astype(np.int32)], [np.arange(pairs) % 2])
    packed = pack_device(work, exact_need([work]), window)
    return {k: jnp.asarray(v) for k, v in packed.items()}


def test_remat_scan_lowers_the_backward_memory():
    """GCRN-GRU, W = 10, 4,000 nodes: XLA's temp bytes of the compiled gradient with ``model.remat=scan``
    are less than half of those without (measured: 86 -> 19 MB; per offset the backward pass keeps the
    states, not every Chebyshev term and gate)."""
    features = 16
    batch = _many_node_batch(nodes=4000, window=10, edges=8000, pairs=2000, features=features)
    cfg = ModelConfig(name="gcrn_gru", hidden=32, layers=1, head_hidden=32)
    temp = {}
    for remat in ("none", "scan"):
        model = create_model(_remat(cfg, remat), features)
        params = jax.jit(model.init)(jax.random.key(0), batch)
        loss_fn = make_loss_fn(model)
        grad = jax.jit(jax.grad(lambda p, b: loss_fn(p, b)[0]))  # noqa: B023 (used in this iteration)
        temp[remat] = grad.lower(params, batch).compile().memory_analysis().temp_size_in_bytes
    assert 0 < temp["scan"] < temp["none"] / 2, temp
