"""Degree one-hot inputs read as codes (layers.node_inputs(codes=True), CodeDense, rows_times): the models
that take them (EGCN-H, EGCN-O, GCN-GRU, T-GCN, GC-LSTM) give, from the categories ``feat``, the embeddings of the same
batch whose inputs are the one-hot rows themselves (``x``) — bit for bit where the one-hot rows are plain
(a one-hot row times a matrix is one product and exact zeros), within float32 rounding for EGCN-H's pooled
rows scaled by their scores (the compiler may fuse the scale and the bias add into one rounding) — and the
same loss gradients up to summation order, in every layout."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_flat_layout import link_batch, to_flat, trees_close
from test_parallel import trainer

from dygnex_jax.models import LinkPredictor, layers
from dygnex_jax.models.layers import CodeDense, rows_times
from dygnex_jax.train import pair_loss

CASES = [
    ("egcn_h", [], "scan"),
    ("egcn_h", ["model.activation=rrelu_mean"], "scan"),
    ("egcn_o", ["model.egcn_gru=rows"], "scan"),
    ("egcn_o", ["model.egcn_gru=matrix"], "flat"),
    ("egcn_o", ["model.egcn_gru=rows"], "last"),
    ("gcn_gru", [], "scan"),
    ("gcn_gru", [], "flat"),
    ("tgcn", [], "scan"),
    ("tgcn", ["model.layers=2"], "flat"),
    ("gc_lstm", ["model.layers=2"], "scan"),
]


def layout(scan: dict, kind: str) -> dict:
    if kind == "flat":
        return to_flat(scan)
    if kind == "last":  # the last offset's edges alone, every offset's node inputs
        return {**scan, **{k: scan[k][-1:] for k in ("senders", "receivers", "edge_mask")}}
    return scan


def as_one_hot(batch: dict, width: int) -> dict:
    """The same batch with its node inputs as feature rows: ``x`` = one-hot of ``feat`` (and no ``feat``)."""
    out = {k: v for k, v in batch.items() if k != "feat"}
    out["x"] = jax.nn.one_hot(batch["feat"], width, dtype=jnp.float32)
    return out


@pytest.mark.parametrize("name,extra,kind", CASES, ids=[f"{n}-{k}{''.join(e)[-9:]}" for n, e, k in CASES])
def test_codes_give_the_one_hot_models_values(name, extra, kind, monkeypatch):
    tr = trainer(name, 1, extra=extra)
    width = tr.windows.num_features
    batch = layout(link_batch(tr), kind)
    feat = np.asarray(batch["feat"])
    assert len(np.unique(feat)) > 2 and feat.max() < width  # several categories, all within the one-hot
    dense = as_one_hot(batch, width)
    params = jax.device_get(tr.params)

    def run(p, b):
        out = tr.model.apply(p, b)
        return pair_loss(out, b)[0], tr.model.apply(p, b, method=LinkPredictor.embed)

    run = jax.jit(jax.value_and_grad(run, has_aux=True))
    (loss_d, emb_d), grad_d = run(params, dense)
    with monkeypatch.context() as m:  # the codes are read as codes: no one-hot is built on the way
        m.setattr(layers.jax.nn, "one_hot", lambda *a, **k: pytest.fail("one-hot built from codes"))
        (loss_c, emb_c), grad_c = run(params, batch)
    assert float(jnp.abs(emb_d).max()) > 0
    if name == "egcn_h":
        trees_close((emb_c, loss_c), (emb_d, loss_d), tol=1e-6)
    else:
        assert np.array_equal(np.asarray(emb_c), np.asarray(emb_d))
        assert np.array_equal(np.asarray(loss_c), np.asarray(loss_d))
    assert sum(float(jnp.abs(g).sum()) for g in jax.tree.leaves(grad_d)) > 0
    trees_close(grad_c, grad_d)


def test_code_dense_is_the_dense_layer_of_one_hot_rows():
    """CodeDense on codes (with and without a row scale, zero scales included) against nn.Dense on the
    scaled one-hot rows: the same parameters from one init, the same values; and rows_times likewise."""
    width, codes = 7, jnp.array([[0, 3, 6], [3, 3, 1]], jnp.int32)
    scale = jnp.array([[0.5, -2.0, 0.0], [1.0, 0.25, 3.0]], jnp.float32)
    layer = CodeDense(5, in_features=width)
    rows = jax.nn.one_hot(codes, width)
    params = layer.init(jax.random.key(0), codes)
    assert jax.tree.map(jnp.shape, params) == jax.tree.map(jnp.shape, layer.init(jax.random.key(0), rows))
    assert np.array_equal(layer.apply(params, codes), layer.apply(params, rows))
    assert np.array_equal(layer.apply(params, codes, scale), layer.apply(params, rows * scale[..., None]))
    w = jax.random.normal(jax.random.key(1), (width, 4))
    assert np.array_equal(rows_times(codes, w), rows @ w)
    with pytest.raises(ValueError, match="in_features"):
        CodeDense(5).init(jax.random.key(0), codes)
