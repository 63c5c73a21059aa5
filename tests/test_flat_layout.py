"""The flat edge layout (one edge list over the W*N node-time rows) against the scan layout ([W, E] edges
per time offset): for every model of FLAT_LAYOUT_MODELS, same parameters -> same outputs and gradients,
whatever the flat padding and edge order; the same parameter tree from either layout; model_layout."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_node_reg import trainer as node_trainer
from test_parallel import trainer

from dygnex_jax.errors import UserError
from dygnex_jax.graphs import Budget, pack_device, pack_node_device, step_budget
from dygnex_jax.models import ENCODERS, FLAT_LAYOUT_MODELS, LinkPredictor, create_model, model_layout
from dygnex_jax.train import node_loss, pair_loss

# (registry name, extra config overrides): egcn_o with both of its weight GRUs
FLAT_CASES = [
    (name, extra)
    for name in sorted(FLAT_LAYOUT_MODELS)
    for extra in ((["model.egcn_gru=rows"], ["model.egcn_gru=matrix"]) if name == "egcn_o" else ([],))
] + [  # EvolveGCN's activation (model.activation=rrelu_mean) in the models that take it
    ("egcn_o", ["model.egcn_gru=matrix", "model.activation=rrelu_mean"]),
    ("gcn_gru", ["model.activation=rrelu_mean"]),
]
CASE_IDS = [name + "".join("-" + e.split("=")[1] for e in extra) for name, extra in FLAT_CASES]


def to_flat(batch: dict, e_total: int | None = None, order=None) -> dict:
    """A scan-layout batch ([W, E] edges per offset, local ids) -> the flat layout: its real edges (mask
    != 0) as one list of node-time ids ``tau * N + node``, padded to ``e_total`` (default: no padding)
    with ``W*N - 1 -> W*N - 1`` edges of mask 0. ``order``: a permutation of the real edges. Every other
    key is kept as it is."""
    s, r, m = (np.asarray(batch[k]) for k in ("senders", "receivers", "edge_mask"))
    w_len, e = s.shape
    n = np.asarray(batch["node_window"]).shape[0]
    real = m != 0
    base = np.broadcast_to(np.arange(w_len)[:, None] * n, (w_len, e))
    fs, fr, fm = (s + base)[real], (r + base)[real], m[real]
    if order is not None:
        fs, fr, fm = fs[order], fr[order], fm[order]
    e_total = len(fs) if e_total is None else e_total
    assert e_total >= len(fs)
    pad = w_len * n - 1
    out = dict(batch)
    out["senders"] = np.full(e_total, pad, np.int32)
    out["receivers"] = np.full(e_total, pad, np.int32)
    out["edge_mask"] = np.zeros(e_total, np.float32)
    out["senders"][: len(fs)], out["receivers"][: len(fr)], out["edge_mask"][: len(fm)] = fs, fr, fm
    return {k: jnp.asarray(v) for k, v in out.items()}


def flat_variants(scan: dict) -> dict:
    """Flat versions of ``scan``: tight (real edges only), loosely padded, and with the edges shuffled."""
    real = int((np.asarray(scan["edge_mask"]) != 0).sum())
    order = np.random.default_rng(0).permutation(real)
    return {
        "tight": to_flat(scan),
        "loose": to_flat(scan, 2 * real + 37),
        "shuffled": to_flat(scan, real + 5, order),
    }


def link_batch(tr) -> dict:
    work = tr.device_work(tr.windows.splits["train"][:3], "train", epoch=1)
    budget = step_budget([work], 1.3, 8)
    budget = Budget(budget.nodes + 3, budget.edges + 11, budget.pairs, budget.windows + 1)  # slack: padding
    scan = pack_device(work, budget, tr.windows.window, tr.config.train.class_weights)
    return {k: jnp.asarray(v) for k, v in scan.items()}


def node_batch(tr) -> dict:
    work = tr.device_work(tr.windows.splits["train"][[0, 2, 5]], "train", epoch=1)
    budget = step_budget([work], 1.3, 8)
    budget = Budget(budget.nodes + 3, budget.edges + 11, budget.pairs, budget.windows + 1)
    scan = pack_node_device(work, budget, tr.windows.window, tr.windows.num_features)
    return {k: jnp.asarray(v) for k, v in scan.items()}


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def trees_close(a, b, tol=1e-5):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol, err_msg=str(path))


def check_flat_equals_scan(model, params, scan: dict, loss):
    """Outputs, embeddings, loss and gradients of the loss on every flat variant equal the scan layout's."""
    assert scan["senders"].ndim == 2

    def run(p, b):
        out = model.apply(p, b)
        return loss(out, b)[0], (out, model.apply(p, b, method=type(model).embed))

    run = jax.jit(jax.value_and_grad(run, has_aux=True))
    (want_loss, (want_out, want_emb)), want_grad = run(params, scan)
    assert float(jnp.abs(want_emb).max()) > 0  # the comparison is not between zeros
    assert sum(float(jnp.abs(g).sum()) for g in jax.tree.leaves(want_grad)) > 0
    for name, flat in flat_variants(scan).items():
        assert flat["senders"].ndim == 1, name
        (got_loss, (got_out, got_emb)), got_grad = run(params, flat)
        close(got_out, want_out)
        close(got_emb, want_emb)
        close(got_loss, want_loss)
        trees_close(got_grad, want_grad)


# slow (75 s for the five cases on the shared 2-core machine): test_flat_equals_scan_node_reg checks the
# same flat == scan equality (outputs, embeddings, loss, gradients; tight, loose and shuffled flat
# padding) for every one of these models on weighted edges, and test_the_packer_layouts_give_the_scan_outputs
# checks it on link batches the packer lays out flat (egcn_o, tgcn).
@pytest.mark.slow
@pytest.mark.parametrize("name,extra", FLAT_CASES, ids=CASE_IDS)
def test_flat_equals_scan_link(name, extra):
    tr = trainer(name, 1, extra=extra)
    scan = link_batch(tr)
    w_len, e = scan["senders"].shape
    counts = (np.asarray(scan["edge_mask"]) != 0).sum(1)
    assert w_len > 1 and len(set(counts.tolist())) > 1, "the offsets must differ in edge count"
    assert counts.sum() < w_len * e  # the flat layout holds fewer edges
    check_flat_equals_scan(tr.model, jax.device_get(tr.params), scan, pair_loss)


@pytest.mark.parametrize("name,extra", FLAT_CASES, ids=CASE_IDS)
def test_flat_equals_scan_node_reg(name, extra):
    """Real-valued inputs ``x`` [W, N, F] and weighted edges (self-loops included)."""
    tr = node_trainer(name, 1, extra=extra)
    scan = node_batch(tr)
    mask = np.asarray(scan["edge_mask"])
    assert np.unique(mask[mask != 0]).size > 1, "edge weights, not just 1"
    check_flat_equals_scan(tr.model, jax.device_get(tr.params), scan, node_loss)


def test_egcn_o_flat_honours_invalid_offsets():
    """A batch with ``valid`` (padded time offsets keep the carry): the flat path returns the embeddings
    of the last valid offset, zeros when none is, as the scan path does."""
    tr = trainer("egcn_o", 1)
    scan = link_batch(tr)
    flat = to_flat(scan, None)
    params = jax.device_get(tr.params)
    emb = jax.jit(lambda p, b: tr.model.apply(p, b, method=LinkPredictor.embed))
    w_len = scan["senders"].shape[0]
    seen = []
    for valid in ([True] * (w_len - 2) + [False] * 2, [False, True] + [False] * (w_len - 2), [False] * w_len):
        v = jnp.asarray(valid)
        want = emb(params, {**scan, "valid": v})
        close(emb(params, {**flat, "valid": v}), want)
        seen.append(np.asarray(want))
    assert not np.allclose(seen[0], seen[1]) and np.all(seen[2] == 0)


@pytest.mark.parametrize("name,extra", FLAT_CASES, ids=CASE_IDS)
def test_init_gives_the_same_params_from_either_layout(name, extra):
    """Same tree, shapes and even values (the same key): a run may initialise with either layout."""
    tr = trainer(name, 1, extra=extra)
    scan = link_batch(tr)
    key = jax.random.key(3)
    from_scan = tr.model.init(key, scan)
    from_flat = tr.model.init(key, to_flat(scan))
    assert jax.tree.structure(from_scan) == jax.tree.structure(jax.device_get(tr.params))
    assert jax.tree.structure(from_scan) == jax.tree.structure(from_flat)
    for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(from_scan), jax.tree.leaves(from_flat)):
        assert a.shape == b.shape and np.array_equal(a, b), path


def test_model_layout_of_every_model():
    assert FLAT_LAYOUT_MODELS == {"egcn_o", "tgcn", "gcn_gru", "mpnn_lstm"}
    for name in ENCODERS:
        assert model_layout(name) == ("flat" if name in FLAT_LAYOUT_MODELS else "scan")
    for name in ("egcn_h", "gcrn_gru", "gconv_lstm", "gc_lstm"):  # convolutions of the hidden state
        assert model_layout(name) == "scan"
    from dygnex_jax.config import ModelConfig

    with pytest.raises(UserError) as layout_err:
        model_layout("nope")
    with pytest.raises(UserError) as create_err:
        create_model(ModelConfig(name="nope"), 3)
    assert str(layout_err.value) == str(create_err.value)


@pytest.mark.parametrize(
    "name,extra", [("egcn_o", []), ("egcn_o", ["model.activation=rrelu_mean"]), ("tgcn", [])]
)
def test_the_packer_layouts_give_the_scan_outputs(name, extra):
    """graphs.pack_device itself in every layout the model allows (flat; last for egcn_o, whose output
    reads the last offset's graph alone): the same logits and gradients as the scan batch, and the
    budget each layout needs (padding.py) holds exactly what it packs."""
    from dygnex_jax.config import LAST_OFFSET_MODELS
    from dygnex_jax.graphs import exact_need, real_work
    from dygnex_jax.padding import padded_work

    tr = trainer(name, 1, extra=extra)
    work = tr.device_work(tr.windows.splits["train"][:3], "train", epoch=1)
    w_len = tr.windows.window
    per_tau = work.real_edges_per_tau()
    assert len(set(per_tau.tolist())) > 1

    def pack(layout):
        need = exact_need([work], layout=layout)
        batch = pack_device(work, need, w_len, tr.config.train.class_weights, layout)
        real = int((batch["edge_mask"] != 0).sum())
        assert real == int(real_work(work, layout)[1])  # the layout's real work is what it packs
        assert real == (need.edges if layout != "scan" else int(per_tau.sum()))  # flat, last: no padding
        return {k: jnp.asarray(v) for k, v in batch.items()}, need

    scan, scan_need = pack("scan")
    assert (
        scan_need.edges == per_tau.max() and padded_work(scan_need, w_len, "scan")[1] == w_len * per_tau.max()
    )
    layouts = ["flat"] + (["last"] if name in LAST_OFFSET_MODELS else [])
    params = jax.device_get(tr.params)

    def run(p, b):
        out = tr.model.apply(p, b)
        return pair_loss(out, b)[0], out

    run = jax.jit(jax.value_and_grad(run, has_aux=True))
    (want_loss, want_out), want_grad = run(params, scan)
    for layout in layouts:
        batch, need = pack(layout)
        assert need.edges == (per_tau.sum() if layout == "flat" else per_tau[-1])
        (got_loss, got_out), got_grad = run(params, batch)
        close(got_out, want_out)
        close(got_loss, want_loss)
        trees_close(got_grad, want_grad)
    if name not in LAST_OFFSET_MODELS:  # a model that reads every offset cannot run the last one alone
        last = pack_device(
            work, exact_need([work], layout="last"), w_len, tr.config.train.class_weights, "last"
        )
        assert last["senders"].shape[0] == 1  # the last offset's row alone
        with pytest.raises(ValueError, match="leading axis"):
            tr.model.apply(params, {k: jnp.asarray(v) for k, v in last.items()})
