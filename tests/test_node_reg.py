"""Node regression (data.task: node_reg) on PyG-Temporal's signal datasets: the loaders against values
read by hand from the JSON files, lag / target / graph alignment against PyG-T's loader formulas,
edge-weighted GCN and Chebyshev operators against dense references (and PyG itself when installed),
padding invariance of the loss, 8 devices == 1 device, and a CLI run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import dense_gcn, dense_laplacian, make_trainer
from test_parallel import grads_on_eight_and_one

from dygnex_jax.config import DataConfig
from dygnex_jax.data import datasets
from dygnex_jax.data.graph import DynamicGraph
from dygnex_jax.data.node_windows import NodeWindowSet
from dygnex_jax.graphs import Budget, pack_node_device, step_budget
from dygnex_jax.models.graph_view import edge_list_graph
from dygnex_jax.models.layers import gcn_aggregate, scaled_laplacian
from dygnex_jax.train import Trainer, make_loss_fn, node_loss

REPO = Path(__file__).resolve().parents[1]


def signal_graph(t: int = 14, n: int = 9, seed: int = 0) -> DynamicGraph:
    """A small weighted dynamic graph with a node signal: every step its own edges (with self-loops on
    some nodes) and weights, signal values that differ by node and step."""
    rng = np.random.default_rng(seed)
    snaps, weights = [], []
    for _ in range(t):
        e = rng.integers(0, n, size=(3 * n, 2))
        e = np.unique(np.concatenate([e, [[0, 0], [3, 3]]]), axis=0).astype(np.int32)
        snaps.append(e)
        weights.append(rng.uniform(0.2, 3.0, len(e)).astype(np.float32))
    signal = rng.normal(size=(t, n)).astype(np.float32)
    return DynamicGraph("toy_signal", n, snaps, weights=weights, signal=signal)


# --- loaders: the real files --------------------------------------------------------------------------


def load(name: str, root: Path) -> DynamicGraph:
    return datasets.load_dataset(DataConfig(dataset=name, root=str(root), task="node_reg"))


def test_chickenpox_and_pedalme_values(data_root):
    g = load("chickenpox_hungary", data_root)
    assert (g.num_nodes, g.num_snapshots, len(g.snapshots[0])) == (20, 521, 102)
    np.testing.assert_allclose(g.signal[0, :3], [-1.08135724e-03, -0.711136085, -3.22808515], rtol=1e-6)
    assert np.all(g.weights[0] == 1.0) and [0, 0] in g.snapshots[0].tolist()  # self-loops kept
    p = load("pedalme_london", data_root)
    assert (p.num_nodes, p.num_snapshots, len(p.snapshots[0])) == (15, 35, 225)
    np.testing.assert_allclose(p.signal[1, :2], [-0.04768326604624195, 0.12403636475292439], rtol=1e-6)
    edge = int(np.flatnonzero((p.snapshots[0] == [0, 1]).all(1))[0])
    assert p.weights[0][edge] == pytest.approx(0.4254589621618998)


def test_england_covid_and_montevideo_values(data_root):
    g = load("england_covid", data_root)
    assert (g.num_nodes, g.num_snapshots) == (129, 61)
    assert len(g.snapshots[0]) == 2158 and len(g.snapshots[60]) == 1511  # a graph per day
    for (src, dst), w in [((23, 23), 180647.0), ((47, 47), 160550.0), ((41, 0), 1498.0)]:
        edge = int(np.flatnonzero((g.snapshots[0] == [src, dst]).all(1))[0])
        assert g.weights[0][edge] == w
    # y[:3, 0] = 4, 0, 2 in the file: standardised per node over the 61 days (PyG-T's loader)
    raw = g.signal[:, 0] * 1.0
    assert np.allclose(raw.mean(), 0.0, atol=1e-6) and np.allclose(raw.std(), 1.0, atol=1e-5)
    assert raw[0] > raw[2] > raw[1]
    m = load("montevideo_bus", data_root)
    assert (m.num_nodes, m.num_snapshots, len(m.snapshots[0])) == (675, 744, 690)
    a, b = (int(np.flatnonzero(m.node_ids == stop)[0]) for stop in (5289, 5290))
    edge = int(np.flatnonzero((m.snapshots[0] == [a, b]).all(1))[0])
    assert m.weights[0][edge] == pytest.approx(172.2)
    np.testing.assert_allclose(m.signal.mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(m.signal.std(0), 1.0, atol=1e-4)


def test_node_reg_needs_a_signal():
    from dygnex_jax.errors import UserError

    with pytest.raises(UserError, match="needs a node signal"):
        datasets.load_dataset(DataConfig(task="node_reg", syn_nodes=30, syn_snapshots=6, syn_edges=40))


# --- windows: lags, target and graph alignment ---------------------------------------------------------


@pytest.mark.parametrize("window,lags", [(1, 4), (3, 1), (2, 3)])
def test_lags_target_and_graph_alignment(window, lags):
    """The last snapshot of the window for target t is PyG-T's sample i = t - lags (features
    signal[i : i + lags].T, target signal[i + lags], graph of step i); snapshot tau is the sample before
    it by W - 1 - tau steps."""
    g = signal_graph(t=12)
    g.signal[:] = 10 * np.arange(12)[:, None] + np.arange(g.num_nodes)[None, :]  # value = 10 t + node
    ws = NodeWindowSet(g, DataConfig(window=window, lags=lags, train_frac=0.5, val_frac=0.2, task="node_reg"))
    assert len(ws) == 12 - lags - window + 1
    for k in range(len(ws)):
        win = ws.get(k)
        t = int(ws.targets[k])
        np.testing.assert_array_equal(win.y, g.signal[t])
        for tau in range(window):
            i = t - lags - (window - 1 - tau)  # PyG-T's sample index
            np.testing.assert_array_equal(win.x[tau], g.signal[i : i + lags].T)
            np.testing.assert_array_equal(win.edges[tau], g.snapshots[i])
            np.testing.assert_array_equal(win.weights[tau], g.weights[i])
    no_val = NodeWindowSet(
        g, DataConfig(window=window, lags=lags, train_frac=0.5, val_frac=0.0, task="node_reg")
    )
    assert no_val.costs("val").shape == (0, 3) and len(no_val.splits["test"]) == len(ws) - len(
        ws.splits["train"]
    )
    # by hand, window 1 / lags 4 / target 4 (the first): inputs are steps 0..3, the graph of step 0
    if (window, lags) == (1, 4):
        assert ws.targets[0] == 4
        np.testing.assert_array_equal(ws.get(0).x[0, 2], [2, 12, 22, 32])
        np.testing.assert_array_equal(ws.get(0).y[:2], [40, 41])


# --- weighted graph operators ---------------------------------------------------------------------------


def weighted_graph(seed=0, n=7, pad=5):
    """Edges with weights, self-loops on nodes 0 (weight 2.5) and 3 (0.4), padding edges (n-1, n-1)."""
    rng = np.random.default_rng(seed)
    e = np.unique(rng.integers(0, n - 1, size=(18, 2)), axis=0)
    e = e[e[:, 0] != e[:, 1]]
    e = np.concatenate([e, [[0, 0], [3, 3]]])
    w = np.concatenate([rng.uniform(0.1, 4.0, len(e) - 2), [2.5, 0.4]])
    senders = np.concatenate([e[:, 0], np.full(pad, n - 1)]).astype(np.int32)
    receivers = np.concatenate([e[:, 1], np.full(pad, n - 1)]).astype(np.int32)
    mask = np.concatenate([w, np.zeros(pad)]).astype(np.float32)
    h = rng.normal(size=(n, 3)).astype(np.float32)
    return h, senders, receivers, mask


def test_weighted_gcn_and_cheb_equal_dense_reference():
    h, s, r, w = weighted_graph()
    n = len(h)
    gcn = dense_gcn(h, s, r, w)
    np.testing.assert_allclose(
        np.asarray(gcn_aggregate(edge_list_graph(jnp.asarray(h), s, r, jnp.asarray(w)))), gcn, rtol=1e-5
    )
    cheb = dense_laplacian(n, s, r, w) @ h  # ChebConv: loops removed, degrees over sources
    got = np.asarray(scaled_laplacian(edge_list_graph(jnp.asarray(h), s, r, jnp.asarray(w))))
    np.testing.assert_allclose(got, cheb, rtol=1e-5, atol=1e-6)


def test_weighted_operators_equal_pyg():
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.nn")
    h, s, r, w = weighted_graph(seed=1)
    real = w > 0  # PyG gets the real edges only
    ei = torch.tensor(np.stack([s[real], r[real]]), dtype=torch.long)
    ew = torch.tensor(w[real])
    x = torch.tensor(h)
    f = h.shape[1]
    gcn = pyg.GCNConv(f, f, bias=False)
    cheb = pyg.ChebConv(f, f, K=2, bias=False)
    with torch.no_grad():
        gcn.lin.weight.copy_(torch.eye(f))
        cheb.lins[0].weight.zero_()
        cheb.lins[1].weight.copy_(torch.eye(f))
        want_gcn = gcn(x, ei, ew).numpy()
        want_cheb = cheb(x, ei, ew).numpy()
    np.testing.assert_allclose(
        np.asarray(gcn_aggregate(edge_list_graph(jnp.asarray(h), s, r, jnp.asarray(w)))),
        want_gcn,
        rtol=1e-5,
        atol=1e-6,
    )
    got = np.asarray(scaled_laplacian(edge_list_graph(jnp.asarray(h), s, r, jnp.asarray(w))))
    np.testing.assert_allclose(got, want_cheb, rtol=1e-5, atol=1e-6)


# --- training: padding invariance, devices, CLI -------------------------------------------------------

# window 3 (not helpers.SMALL's 4) and the default head width
NODE_REG = ["data.task=node_reg", "data.window=3", "data.lags=2", "train.batch_size=8", "model.hidden=8"]


def trainer(model: str, devices: int, extra=()) -> Trainer:
    return make_trainer(*extra, base=NODE_REG, model=model, devices=devices, graph=signal_graph(t=24))


@pytest.mark.parametrize("model", ["gcrn_gru", "tgcn"])
def test_node_loss_padding_invariance(model):
    tr = trainer(model, 1)
    work = tr.device_work(tr.windows.splits["train"][[0, 3, 5]], "train", epoch=1)
    loss_fn = jax.jit(jax.value_and_grad(lambda p, b: make_loss_fn(tr.model, node_loss)(p, b), has_aux=True))
    params = jax.device_get(tr.params)
    nf = tr.windows.num_features
    results = []
    tight = step_budget([work], 1.001, 1)
    loose = Budget(tight.nodes + 40, tight.edges + 100, tight.pairs + 50, tight.windows + 2)
    for budget in (tight, loose):
        batch = {k: jnp.asarray(v) for k, v in pack_node_device(work, budget, 3, nf).items()}
        (loss, count), grads = loss_fn(params, batch)
        results.append((float(loss), float(count), grads))
    assert results[0][1] == results[1][1] == 3 * 9
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5)
    for a, b in zip(jax.tree.leaves(results[0][2]), jax.tree.leaves(results[1][2])):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)


def test_eight_devices_equal_one_device_node_reg():
    multi, single = trainer("gcrn_gru", 8), trainer("gcrn_gru", 1)
    loss_fn = make_loss_fn(multi.model, node_loss)
    (n8, d8, g8), (n1, d1, g1), _, _ = grads_on_eight_and_one(multi, single, loss_fn)
    assert float(d8) == float(d1) == 8 * 9  # every node of every window is a target
    np.testing.assert_allclose(float(n8), float(n1), rtol=1e-5)
    for a, b in zip(jax.tree.leaves(g8), jax.tree.leaves(g1)):
        np.testing.assert_allclose(np.asarray(a) / float(d8), np.asarray(b) / float(d1), rtol=1e-5, atol=1e-6)
    # evaluation: the MSE of a split is the same on 8 devices and on 1, and equals a host computation
    for split in ("val", "test"):
        m8, m1 = multi.evaluate(split), single.evaluate(split)
        assert m8["nodes"] == m1["nodes"] == 9 * len(multi.windows.splits[split])
        np.testing.assert_allclose(m8["mse"], m1["mse"], rtol=1e-5)
    params = jax.device_get(single.params)
    errs = []
    for k in single.windows.splits["test"]:
        work = single.device_work([k], "test", 0)
        batch = pack_node_device(work, Budget(16, 64, 16, 1), 3, single.windows.num_features)
        pred = single.model.apply(params, {key: jnp.asarray(v) for key, v in batch.items()})
        errs.append((np.asarray(pred)[:9] - single.windows.get(int(k)).y) ** 2)
    np.testing.assert_allclose(single.evaluate("test")["mse"], np.mean(errs), rtol=1e-5)


def test_cli_train_writes_mse_and_picks_the_lowest(data_root, tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"}
    env["PYTHONPATH"] = str(REPO)
    cmd = [
        sys.executable,
        "-m",
        "dygnex_jax",
        "train",
        "--config",
        str(REPO / "configs" / "pedalme_london.yaml"),
        "--out",
        str(out),
        "train.epochs=3",
        "eval.every=1",
        "model.hidden=8",
        f"data.root={data_root}",
    ]
    result = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert all(np.isfinite(r["val_mse"]) and np.isfinite(r["test_mse"]) for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    best = min(rows, key=lambda r: r["val_mse"])
    assert summary["best"]["epoch"] == best["epoch"] and summary["best"]["val_mse"] == best["val_mse"]
    assert "val MSE" in result.stderr


@pytest.mark.parametrize("name", ["gcrn_gru", "tgcn"])
def test_node_regressor_equals_pyg_temporal_with_edge_weights(name):
    """Encoder + head against PyG-T's GConvGRU / TGCN + ReLU + Linear, stepping the hidden state through
    the window's snapshots with their edge weights (self-loops included), two windows packed."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch_geometric")  # PyG-T itself is imported through pyg_compat
    from dygnex_jax.baselines.pyg_compat import recurrent
    from dygnex_jax.baselines.weights import map_gcrn_gru, map_tgcn
    from dygnex_jax.config import ModelConfig
    from dygnex_jax.graphs import DeviceWork
    from dygnex_jax.models import create_model

    torch.manual_seed(0)
    g = signal_graph(t=12)
    ws = NodeWindowSet(g, DataConfig(window=3, lags=2, train_frac=0.5, val_frac=0.2, task="node_reg"))
    f, h, k = 2, 8, 2
    layer = recurrent().GConvGRU(f, h, k) if name == "gcrn_gru" else recurrent().TGCN(f, h)
    linear = torch.nn.Linear(h, 1)
    t = {f"cells.0.{key}": v.detach().numpy() for key, v in layer.named_parameters()}
    enc = map_gcrn_gru(t, 1, k) if name == "gcrn_gru" else map_tgcn(t, 1, k)
    head = {"out": {"kernel": linear.weight.detach().numpy().T, "bias": linear.bias.detach().numpy()}}
    params = jax.tree.map(jnp.asarray, {"params": {"encoder": enc, "head": head}})
    model = create_model(ModelConfig(name=name, hidden=h, layers=1, cheb_k=k), f, "node_reg")

    wins = [ws.get(i) for i in (0, 4)]
    work = DeviceWork(wins, [np.arange(9, dtype=np.int32)] * 2, [w.y for w in wins])
    batch = pack_node_device(work, Budget(40, 120, 40, 3), 3, f)
    ours = np.asarray(model.apply(params, {key: jnp.asarray(v) for key, v in batch.items()}))
    for j, win in enumerate(wins):
        state = None
        for tau in range(3):
            ei = torch.as_tensor(win.edges[tau].T.astype(np.int64))
            state = layer(torch.as_tensor(win.x[tau]), ei, torch.as_tensor(win.weights[tau]), state)
        want = linear(torch.relu(state))[:, 0].detach().numpy()
        np.testing.assert_allclose(ours[9 * j : 9 * j + 9], want, rtol=1e-5, atol=1e-5)


@pytest.mark.slow  # three trainers compile: 195 s measured on the shared 2-core machine (load ~15)
def test_full_batch_node_reg_step_does_not_depend_on_the_scheduler():
    """psg, dygnex_g and dygnex_l place the same full-batch step differently: same loss and update."""
    runs = [
        trainer("tgcn", 2, [f"schedule.method={m}", "train.batch_size=14"])
        for m in ("psg", "dygnex_g", "dygnex_l")
    ]
    assert len(runs[0].windows.splits["train"]) == 14
    losses = [r.train_epoch(1)["loss"] for r in runs]
    np.testing.assert_allclose(losses, losses[0], rtol=1e-6)
    for other in runs[1:]:
        for a, b in zip(jax.tree.leaves(runs[0].params), jax.tree.leaves(other.params)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
