"""Snapshot and vertex partition: same loss and gradient as one device; bytes moved by collectives
equal hand-computed values; a short training run of each method."""

import json
import math

import jax
import numpy as np
import pytest
from conftest import make_toy_graph
from helpers import EXACT, make_trainer

from dygnex_jax import parallel, partition
from dygnex_jax.config import load_config
from dygnex_jax.train import make_loss_fn, train_and_evaluate


def trainer(model, devices, method="psg", extra=(), graph=None):
    """A trainer of the exactness tests' config (helpers.EXACT) on a smaller toy graph (60 nodes, 20
    snapshots)."""
    graph = graph if graph is not None else make_toy_graph(num_nodes=60, num_snapshots=20)
    return make_trainer(
        f"schedule.method={method}", *extra, base=EXACT, model=model, devices=devices, graph=graph
    )


def single_device_grads(model, ids, extra=()):
    one = trainer(model, 1, extra=extra)
    batch, _, _ = one.pack([ids], "train", epoch=1)
    grad_fn = parallel.make_grad_fn(make_loss_fn(one.model), one.mesh)
    return grad_fn(one.params, parallel.shard_batch(one.mesh, batch))


def assert_same_gradient(got, want, tol=1e-5):
    (n_a, d_a, g_a), (n_b, d_b, g_b) = got, want
    assert float(d_b) > 0
    np.testing.assert_allclose(float(d_a), float(d_b), rtol=1e-6)
    np.testing.assert_allclose(float(n_a), float(n_b), rtol=tol)
    for x, y in zip(jax.tree.leaves(g_a), jax.tree.leaves(g_b)):
        np.testing.assert_allclose(np.asarray(x) / float(d_a), np.asarray(y) / float(d_b), rtol=tol, atol=tol)


@pytest.mark.parametrize("devices", [2, 4])
@pytest.mark.parametrize("model", ["egcn_o", "gcrn_gru"])
def test_snapshot_partition_equals_one_device(model, devices):
    # W = 5 is not a multiple of 2 or 4: the time split pads offsets on device 0
    tr = trainer(model, devices, "snapshot", extra=["data.window=5"])
    ids = list(range(8))
    step = [np.array(part) for part in np.array_split(ids, devices)]
    batch, _, _, _ = tr.pack_train(step, epoch=1)
    assert batch["feat"].shape[:3] == (devices, devices, math.ceil(5 / devices))
    got = tr.train_step.grad_fn(tr.params, parallel.shard_batch(tr.mesh, batch))
    assert_same_gradient(got, single_device_grads(model, ids, extra=["data.window=5"]))


@pytest.mark.parametrize("devices", [2, 4])
@pytest.mark.parametrize("model", ["egcn_o", "gcrn_gru"])
def test_vertex_partition_equals_one_device(model, devices):
    extra = ["model.cheb_k=3", "parallel.vertex_balance=degree"] if model == "gcrn_gru" else []
    tr = trainer(model, devices, "vertex", extra=extra)
    ids = list(range(8))
    step = [np.array(part) for part in np.array_split(ids, devices)]
    batch, _, _, _ = tr.pack_train(step, epoch=1)
    got = tr.train_step.grad_fn(tr.params, parallel.shard_batch(tr.mesh, batch))
    assert_same_gradient(got, single_device_grads(model, ids, extra=extra))


def tiny_graph():
    """6 nodes on a path 0-1-2-3-4-5 plus one moving chord, 8 snapshots, undirected."""
    from dygnex_jax.data.graph import DynamicGraph

    snaps = []
    for t in range(8):
        e = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [t % 6, (t + 2) % 6]])
        snaps.append(np.unique(np.concatenate([e, e[:, ::-1]]), axis=0).astype(np.int32))
    return DynamicGraph("tiny", 6, snaps)


TINY = [
    "data.window=2",
    "data.features=constant",
    "model.hidden=2",
    "model.layers=1",
    "model.head_hidden=2",
    "train.batch_size=2",
    "data.neg_mult=1",
    "parallel.min_bucket=1",
    "parallel.bucket_ratio=2.0",
]


@pytest.mark.parametrize("model", ["egcn_o", "gcrn_gru"])
@pytest.mark.parametrize("method", ["psg", "snapshot", "vertex"])
def test_comm_bytes_equal_hand_computed(method, model):
    """P = 2, W = 2, F = 1 (constant input), H = 2, one graph layer, Chebyshev K = 2, head 2 wide,
    float32. Conventions (comm.py): psum of s bytes 2(P-1)s, all_gather P(P-1)s, reduce_scatter
    (P-1)s, ppermute s per pair, all summed over devices."""
    tr = make_trainer(f"schedule.method={method}", base=TINY, model=model, devices=2, graph=tiny_graph())
    batch, _, _, _ = tr.pack_train([np.array([0]), np.array([1])], epoch=1)
    # Parameters: EvolveGCN-O: gcn_0 1x2 and its rows-form GRU (see below) -> 2 + 36;
    # GCRN: six ChebConvs (3 on x: 2 + 2 weights + 2 bias, 3 on h: 4 + 4 + 2) -> 18 + 30;
    # head: Dense(4 -> 2) 10, Dense(2 -> 2) 6.
    # (rows-form GRU of EvolveGCN-O: ih and hh kernels [2, 6] and two [6] biases = 36)
    n_params = {"egcn_o": 2 + (2 * 2 * 6 + 2 * 6) + 16, "gcrn_gru": 18 + 30 + 16}[model]
    assert sum(x.size for x in jax.tree.leaves(tr.params)) == n_params
    gradients = 2 * 1 * (4 * n_params + 8)  # psum of grads + loss sum + weight sum
    states = features = 0
    if method == "snapshot":
        # M = 2 micro-batches, P = 2: 3 ticks, one pair (0 -> 1), carry sent forward and its cotangent back.
        n = batch["feat"].shape[-1]
        assert batch["feat"].shape == (2, 2, 1, 8) and n == 8  # 2 windows x (3 nodes + background) + pad
        carry = {"egcn_o": 4 * 1 * 2, "gcrn_gru": 4 * n * 2}[model]  # weights 1x2 / states n x 2
        states = 2 * 3 * 1 * carry
    if method == "vertex":
        n = batch["feat"].shape[-1]
        assert batch["feat"].shape == (2, 2, 8)  # 7 real packed nodes split 4 / 3, + 1 padding node -> 8
        gather = lambda s: 2 * 1 * s  # noqa: E731  all_gather of s bytes per device
        scatter = lambda s: 1 * s  # noqa: E731  reduce_scatter (the all_gather's transpose)
        psum = lambda s: 2 * 1 * s  # noqa: E731
        final = gather(4 * n * 2) + scatter(4 * 2 * n * 2)  # embeddings for the head, forward + backward
        if model == "egcn_o":
            # per offset: gather of the inverse degrees (no gradient) and of h @ w (and its transpose)
            per_tau = gather(4 * n) + gather(4 * n * 2) + scatter(4 * 2 * n * 2)
        else:
            # per offset, one psum of the out-degrees of all 2n nodes (the Laplacian's coefficients,
            # shared by the offset's convolutions), and six ChebConvs run as three (models/cheb.py):
            # the three of x as one, h_z and h_r as one, h_h (of h * r) alone; each one
            # scaled_laplacian: gather the input; the two on h also send the gradient back.
            x_conv = gather(4 * n * 1)
            h_conv = gather(4 * n * 2) + scatter(4 * 2 * n * 2)
            per_tau = psum(4 * 2 * n) + x_conv + 2 * h_conv
        features = 2 * per_tau + final
    got = tr.comm_bytes(batch)
    assert got == {
        "gradients": gradients,
        "states": states,
        "features": features,
        "total": gradients + states + features,
    }


@pytest.mark.parametrize("model", ["egcn_o", "gcrn_gru"])
def test_vertex_comm_of_a_second_layer(model):
    """Vertex partition, the setting above with 2 graph layers instead of 1: the second layer adds its
    own input's all-gather and its transpose (and GCRN's two convolutions of its state), never another
    collective for the degrees — the offset's normalisation (``gcn_coefficients``,
    ``laplacian_coefficients``) is computed once and shared by every layer."""
    features = []
    for layers in (1, 2):
        tr = make_trainer(
            "schedule.method=vertex",
            f"model.layers={layers}",
            base=TINY,
            model=model,
            devices=2,
            graph=tiny_graph(),
        )
        batch, _, _, _ = tr.pack_train([np.array([0]), np.array([1])], epoch=1)
        features.append(tr.comm_bytes(batch)["features"])
    n = batch["feat"].shape[-1]
    gather = lambda s: 2 * 1 * s  # noqa: E731  as above: P = 2
    scatter = lambda s: 1 * s  # noqa: E731
    conv = gather(4 * n * 2) + scatter(4 * 2 * n * 2)  # a width-2 input (H = 2), forward and backward
    per_tau = {"egcn_o": conv, "gcrn_gru": 3 * conv}[model]  # GCRN: x's convolutions and the two on h
    assert features[1] - features[0] == 2 * per_tau  # W = 2 offsets


@pytest.mark.slow  # 1-2 min each on the shared 2-core machine
@pytest.mark.parametrize(
    "method,model",
    [("snapshot", "egcn_o"), ("vertex", "gcrn_gru"), ("psg", "egcn_o")],
)
def test_training_smoke_logs_comm_bytes(method, model, tmp_path):
    cfg = load_config(
        "configs/smoke.yaml",
        [f"schedule.method={method}", f"model.name={model}", "parallel.devices=4", "train.epochs=2"],
    )
    summary = train_and_evaluate(cfg, tmp_path, stream=open("/dev/null", "w"))
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(np.isfinite(r["loss"]) for r in rows)
    assert rows[1]["loss"] < rows[0]["loss"] * 1.5
    per_epoch = summary["comm_bytes_per_epoch"]
    assert per_epoch["gradients"] > 0 and per_epoch["total"] == pytest.approx(rows[0]["comm_bytes"])
    assert (per_epoch["states"] > 0) == (method == "snapshot")
    assert (per_epoch["features"] > 0) == (method == "vertex")
    assert 0 < rows[0]["padding_efficiency"] <= 1
    if method == "snapshot":
        assert rows[0]["bubble_fraction"] == pytest.approx(partition.bubble_fraction(4, 4, 4))
    assert summary["schedule"] == method and np.isfinite(summary["final"]["val_map"])


@pytest.mark.slow  # several minutes on the shared 2-core machine
def test_bench_epoch_quick(tmp_path):
    """The benchmark runs end to end; psg, snapshot and vertex compute the same gradients on the same
    mini-batches, so they train to the same losses and MAP."""
    import subprocess
    import sys

    out = tmp_path / "bench"
    cmd = [sys.executable, "tools/bench_epoch.py", "--quick", "--datasets", "synthetic", "--models", "egcn_o",
           "--devices", "2", "--two-core", "0", "--epochs", "2", "--methods", "psg,snapshot,vertex",
           "--out", str(out)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True)
    rows = {r["method"]: r for r in json.loads((out / "bench_epoch.json").read_text())["rows"]}
    assert set(rows) == {"psg", "snapshot", "vertex"}
    for m in ("snapshot", "vertex"):
        assert rows[m]["final_loss"] == pytest.approx(rows["psg"]["final_loss"], rel=1e-4)
        assert rows[m]["val_map"] == pytest.approx(rows["psg"]["val_map"], rel=1e-3)
        assert rows[m]["comm_bytes"] > rows["psg"]["comm_bytes"]
    assert (out / "bench_epoch.png").stat().st_size > 0 and "| psg |" in (out / "bench_epoch.md").read_text()
