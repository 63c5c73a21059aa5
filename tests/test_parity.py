"""Parity with PyTorch Geometric Temporal: every encoder equals its PyG-T twin on the same windows.

Each test builds the PyG-Temporal layer(s) with fixed random weights, copies those weights into our Flax
encoder, runs the same windows (two windows packed on one device with padding on our side; one call
sequence per window, state reset between windows, on the PyG-T side) and checks the embeddings and the
gradient of a fixed random projection of them w.r.t. every parameter to 1e-5 in float32.

Semantics fixed on the PyG-T side to ours (README, Models): the recurrent state (evolved weights, hidden
states) restarts in every window (``reinitialize_weight`` / ``H=None``); stacked layers feed the next one
the new state of the same time offset; EvolveGCN layers are followed by ReLU; MPNN-LSTM runs in training
mode (per-window batch statistics) with dropout 0. GCN-GRU has no PyG-T layer: its twin is PyG's
``GCNConv`` stack followed by ``torch.nn.GRUCell``.
"""

from __future__ import annotations

import importlib.util
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

# A guard for local users without the torch extra; CI (CI=true) installs it, and there a missing
# package is an error, not a skip.
if not os.environ.get("CI"):
    for _mod in ("torch", "torch_geometric", "torch_geometric_temporal"):
        if importlib.util.find_spec(_mod) is None:
            pytest.skip(
                f"{_mod} is not installed: pip install -r requirements-torch.txt (see README)",
                allow_module_level=True,
            )
import torch  # noqa: E402

from dygnex_jax.baselines.pyg_compat import recurrent  # noqa: E402
from dygnex_jax.baselines.torch_models import GCNGRU as GCNGRUTwin  # noqa: E402
from dygnex_jax.baselines.torch_models import EvolveStack, RecurrentStack  # noqa: E402
from dygnex_jax.baselines.weights import ENCODER_MAPS, dense, link_model_params  # noqa: E402
from dygnex_jax.config import ModelConfig  # noqa: E402
from dygnex_jax.data.windows import LocalWindow  # noqa: E402
from dygnex_jax.graphs import Budget, DeviceWork, pack_device  # noqa: E402
from dygnex_jax.models import ENCODERS, set_matmul_precision  # noqa: E402

N, W = 40, 4  # nodes per window, time offsets
TOL = 1e-5
torch.set_default_dtype(torch.float32)


# --- windows -------------------------------------------------------------------------------------


def make_window(seed: int, num_features: int) -> LocalWindow:
    """A directed random window on N nodes (all active, no self-loops), sizes varying over time."""
    rng = np.random.default_rng(seed)
    edges = []
    for _ in range(W):
        m = int(rng.integers(30, 120))
        e = rng.integers(0, N, size=(m, 2))
        edges.append(np.unique(e[e[:, 0] != e[:, 1]], axis=0).astype(np.int32))
    feat = np.zeros((W, N + 1), np.int32)
    feat[:, :N] = rng.integers(0, num_features, size=(W, N))
    empty = np.zeros((0, 2), np.int32)
    return LocalWindow(seed, W, np.arange(N), edges, feat, empty, np.zeros(0, np.int64), inactive=0)


def packed_batch(wins: list[LocalWindow]) -> dict:
    """Our side: the windows packed on one device with generous padding (window j at node j*(N+1))."""
    work = DeviceWork(wins, [np.zeros((0, 2), np.int32)] * len(wins), [np.zeros(0, np.int32)] * len(wins))
    budget = Budget(nodes=len(wins) * (N + 1) + 13, edges=2 * 120 + 17, pairs=8, windows=len(wins) + 1)
    return {k: jnp.asarray(v) for k, v in pack_device(work, budget, W).items()}


def torch_inputs(win: LocalWindow, num_features: int):
    xs = [
        torch.nn.functional.one_hot(torch.as_tensor(win.feat[t, :N], dtype=torch.long), num_features).float()
        for t in range(W)
    ]
    es = [torch.as_tensor(e.T.astype(np.int64)) for e in win.edges]
    return xs, es


# --- PyG-T sides with our window semantics ---------------------------------------------------------


class MPNNTwin(torch.nn.Module):
    def __init__(self, f, h):
        super().__init__()
        self.inner = recurrent().MPNNLSTM(f, h, num_nodes=N, window=W, dropout=0.0)
        self.inner.train()

    def forward(self, xs, es):
        x = torch.cat(xs)  # [W*N, F], time-major, as PyG-T's MPNNLSTM reads it
        e = torch.cat([ei + t * N for t, ei in enumerate(es)], dim=1)  # one block per time offset
        return self.inner(x, e, None)


# --- cases -----------------------------------------------------------------------------------------

F, H, K, LAYERS = 6, 8, 3, 2  # Chebyshev order 3 to exercise the T_k recursion


def build(name, F=F, H=H):  # noqa: N803 -- the module constants, overridable
    """(torch module, weight map, our ModelConfig, num_features) for a model name."""
    rec = recurrent()

    def to_flax(t):
        return ENCODER_MAPS[name](t, LAYERS, K)

    if name == "gcrn_gru":
        mod = RecurrentStack([rec.GConvGRU(F if i == 0 else H, H, K) for i in range(LAYERS)], lstm=False)
        return mod, to_flax, ModelConfig(name, H, LAYERS, K), F
    if name == "gconv_lstm":
        mod = RecurrentStack([rec.GConvLSTM(F if i == 0 else H, H, K) for i in range(LAYERS)], lstm=True)
        return mod, to_flax, ModelConfig(name, H, LAYERS, K), F
    if name == "gc_lstm":
        mod = RecurrentStack([rec.GCLSTM(F if i == 0 else H, H, K) for i in range(LAYERS)], lstm=True)
        return mod, to_flax, ModelConfig(name, H, LAYERS, K), F
    if name == "tgcn":
        mod = RecurrentStack([rec.TGCN(F if i == 0 else H, H) for i in range(LAYERS)], lstm=False)
        return mod, to_flax, ModelConfig(name, H, LAYERS), F
    if name == "egcn_o":  # PyG-T's layer is square: input width = hidden
        mod = EvolveStack([rec.EvolveGCNO(H) for _ in range(LAYERS)])
        return mod, to_flax, ModelConfig(name, H, LAYERS), H
    if name == "egcn_h":
        mod = EvolveStack([rec.EvolveGCNH(N, H) for _ in range(LAYERS)])
        return mod, to_flax, ModelConfig(name, H, LAYERS), H
    if name == "gcn_gru":
        return GCNGRUTwin(F, H, LAYERS), to_flax, ModelConfig(name, H, LAYERS), F
    if name == "mpnn_lstm":
        return MPNNTwin(F, H), to_flax, ModelConfig(name, H), F
    raise KeyError(name)


MODELS = ["egcn_o", "egcn_h", "gcrn_gru", "gconv_lstm", "gc_lstm", "tgcn", "gcn_gru", "mpnn_lstm"]


def test_every_registered_model_has_a_parity_case():
    assert sorted(ENCODERS) == sorted(MODELS)


@pytest.mark.parametrize("name", MODELS)
def test_parity_with_pyg_temporal(name):
    torch.manual_seed(0)
    mod, to_flax, cfg, f = build(name)
    with torch.no_grad():  # PyG-T zero-initialises biases; random ones make the check meaningful
        for p in mod.parameters():
            p.add_(0.1 * torch.randn_like(p))
    wins = [make_window(1, f), make_window(2, f)]
    batch = packed_batch(wins)

    # PyG-T: one window at a time, state restarted
    outs = [mod(*torch_inputs(w, f)) for w in wins]
    rng = np.random.default_rng(3)
    proj = [rng.standard_normal(o.shape).astype(np.float32) for o in outs]
    loss = sum((o * torch.as_tensor(r)).sum() for o, r in zip(outs, proj))
    mod.zero_grad()
    loss.backward()
    named = dict(mod.named_parameters())
    values = to_flax({k: v.detach().numpy() for k, v in named.items()})
    grads_ref = to_flax(
        {k: v.grad.numpy() if v.grad is not None else np.zeros(v.shape, np.float32) for k, v in named.items()}
    )

    # ours: the same weights, both windows packed with padding, float32 products as the trainer sets them
    set_matmul_precision(cfg.matmul_precision)
    encoder = ENCODERS[name](cfg, f)
    init = encoder.init(jax.random.key(0), batch)["params"]
    assert jax.tree.structure(init) == jax.tree.structure(values), "every parameter is mapped"
    for a, b in zip(jax.tree.leaves(init), jax.tree.leaves(values)):
        assert a.shape == b.shape
    params = {"params": jax.tree.map(jnp.asarray, values)}
    offsets = [j * (N + 1) for j in range(len(wins))]
    emb = encoder.apply(params, batch)
    for o, off in zip(outs, offsets):
        np.testing.assert_allclose(np.asarray(emb[off : off + N]), o.detach().numpy(), rtol=TOL, atol=TOL)

    def our_loss(p):
        e = encoder.apply(p, batch)
        return sum(jnp.sum(e[off : off + N] * r) for off, r in zip(offsets, proj))

    grads = jax.grad(our_loss)(params)["params"]
    for (path, g), r in zip(jax.tree_util.tree_leaves_with_path(grads), jax.tree.leaves(grads_ref)):
        np.testing.assert_allclose(np.asarray(g), r, rtol=TOL, atol=TOL, err_msg=jax.tree_util.keystr(path))


def same_distribution(ours: np.ndarray, ref: np.ndarray) -> str | None:
    """Why ``ours`` cannot come from ``ref``'s initial distribution (None if it can): the same constant
    where PyG-T's is constant (zeros, ones), else the same spread (n >= 8 values: std within
    0.1 + 2 / sqrt(n), about 4.5 standard errors of a uniform sample's std plus a margin) and no value
    beyond PyG-T's largest."""
    if ref.size > 1 and np.ptp(ref) == 0:
        return None if np.array_equal(ours, ref) else f"constant {ref.flat[0]} in PyG-T"
    tol = 0.1 + 2.0 / np.sqrt(ref.size)
    if ref.size >= 8 and abs(ours.std() / ref.std() - 1.0) > tol:
        return f"std {ours.std():.4g} vs PyG-T's {ref.std():.4g}"
    if np.abs(ours).max() > 1.1 * np.abs(ref).max():
        return f"max |value| {np.abs(ours).max():.4g} vs PyG-T's {np.abs(ref).max():.4g}"
    return None


def assert_initialised_like(ours: dict, ref: dict) -> None:
    """Every parameter of ``ours`` passes ``same_distribution`` against its twin in ``ref``."""
    assert jax.tree.structure(ours) == jax.tree.structure(ref)
    for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(ours), jax.tree.leaves(ref)):
        why = same_distribution(np.asarray(a), np.asarray(b))
        assert why is None, (jax.tree_util.keystr(path), why)


@pytest.mark.parametrize("name", MODELS)
def test_models_initialise_as_pyg_temporal(name):
    """Every encoder and the link head start from their PyTorch twins' initial distributions (so that a
    few epochs of both systems compare like with like; with the same initial values both train alike,
    README): each parameter checked by ``same_distribution`` at realistic widths (16 inputs, 64 hidden).
    Flax's defaults fail this: LeCun-normal kernels have sqrt(3) times torch.nn.Linear's / GRU's spread
    and values past their bound, and zero biases where torch's are uniform."""
    f, h = 16, 64
    torch.manual_seed(0)
    theirs, to_flax, cfg, f = build(name, F=f, H=h)
    ref = to_flax({k: v.detach().numpy() for k, v in theirs.named_parameters()})
    ours = ENCODERS[name](cfg, f).init(jax.random.key(0), packed_batch([make_window(1, f)]))["params"]
    assert_initialised_like(ours, ref)


def test_heads_initialise_as_their_torch_twins():
    """The link head as ``torch.nn.Linear`` pairs (EvolveGCN's classifier), the node head as PyG-T's
    examples' ``Linear(hidden, 1)``."""
    from dygnex_jax.baselines.torch_models import LinkHead as TorchLinkHead
    from dygnex_jax.models.head import LinkHead, NodeHead

    h, hidden = 64, 128
    torch.manual_seed(0)
    t = {k: v.detach().numpy() for k, v in TorchLinkHead(h, hidden).named_parameters()}
    ref = {"hidden": dense(t, "hidden"), "out": dense(t, "out")}
    emb, ends = jnp.ones((5, h)), jnp.arange(5)
    ours = LinkHead(hidden).init(jax.random.key(0), emb, ends, ends)["params"]
    t = {f"out.{k}": v.detach().numpy() for k, v in torch.nn.Linear(h, 1).named_parameters()}
    ref["node"] = {"out": dense(t, "out")}
    ours = {**ours, "node": NodeHead().init(jax.random.key(1), emb)["params"]}
    assert_initialised_like(ours, ref)


@pytest.mark.parametrize("layout", ["full", "packed"])
def test_torch_runner_loss_equals_the_trainer_loss(layout):
    """The baseline runner sees the same windows, negatives and class weights as our trainer: with the
    same weights, one step's weighted loss sum and weight sum agree, whether the runner runs each window
    on the whole node set (``full``) or packs active nodes + background nodes as we do (``packed``)."""
    from dygnex_jax.baselines.torch_runner import Runner
    from dygnex_jax.config import load_config
    from dygnex_jax.train import Trainer, make_loss_fn

    cfg = load_config(
        None,
        [
            "data.syn_nodes=120",
            "data.syn_snapshots=16",
            "data.syn_edges=150",
            "data.window=4",
            "data.neg_mult=2",
        ]
        + [
            "model.name=gcrn_gru",
            "model.hidden=8",
            "model.head_hidden=8",
            "model.cheb_k=3",
            "parallel.devices=1",
        ],
    )
    torch.manual_seed(0)
    runner = Runner(cfg, rank=0, world=1, layout=layout)
    tr = Trainer(cfg)
    named = {k: v.detach().numpy() for k, v in runner.model.named_parameters()}
    params = link_model_params("gcrn_gru", named, 2, 3)
    assert jax.tree.structure(params) == jax.tree.structure(jax.device_get(tr.params))
    ids = [0, 1, 2, 3]
    # the windows leave nodes inactive: the full layout runs nodes the packed one folds into one
    assert all(runner.windows.get(int(k)).inactive > 0 for k in runner.windows.splits["train"][ids])
    num_t, den_t = runner.forward(runner.windows.splits["train"][ids], epoch=1)
    batch, _, _ = tr.pack([ids], "train", epoch=1)
    num_j, den_j = make_loss_fn(tr.model)(params, {k: jnp.asarray(v[0]) for k, v in batch.items()})
    np.testing.assert_allclose(float(den_j), float(den_t), rtol=1e-6)
    np.testing.assert_allclose(float(num_j), float(num_t.detach()), rtol=1e-5)


@pytest.mark.slow  # two spawned DDP processes, each importing torch and building the data
def test_torch_baseline_tool_writes_the_trainers_files(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    out = tmp_path / "run"
    cmd = [sys.executable, "tools/torch_baseline.py", "--config", "configs/smoke.yaml", "--procs", "2"]
    cmd += ["--out", str(out), "model.name=tgcn", "train.epochs=2"]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2] and all(np.isfinite(r["loss"]) for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["devices"] == 2 and summary["model"] == "tgcn" and np.isfinite(summary["final"]["val_map"])


@pytest.mark.parametrize(
    "override",
    ["data.edge_weight=count", "model.activation=rrelu_mean", "train.patience=3", "eval.test=at_best"],
)
def test_torch_baseline_refuses_what_it_does_not_implement(tmp_path, override):
    """A setting the baseline would silently train without (unit edges, ReLU, no early stop, test every
    evaluation) is one line, exit 2, and no run folder."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    out = tmp_path / "run"
    cmd = [sys.executable, "tools/torch_baseline.py", "--config", "configs/smoke.yaml", "--procs", "1"]
    cmd += ["--out", str(out), "model.name=egcn_o", override]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    key = override.split("=")[0]
    assert len(lines) == 1 and lines[0].startswith("error: the PyTorch baseline does not implement " + key)
    assert not out.exists()


@pytest.mark.parametrize("name", ["tgcn", "egcn_o"])
def test_same_initial_values_train_alike(tmp_path, name):
    """``tools/same_init.py``: PyG-T's initial weights copied into ours, both trained 2 epochs on the same
    windows, negatives and mini-batches -> the same training loss and validation MAP each epoch (float32
    reassociation only). A wrong map, optimiser or loss shows as a difference of percents."""
    import json

    from helpers import run_tool

    out = tmp_path / "same.json"
    small = ["data.syn_nodes=120", "data.syn_snapshots=16", "data.syn_edges=150", "data.window=4"]
    model = [f"model.name={name}", "model.egcn_gru=rows", "model.hidden=8", "model.head_hidden=8"]
    if name == "egcn_o":  # PyG-T's EvolveGCNO is square: input width = hidden
        model.append("data.max_degree=8")
    proc = run_tool(
        "same_init.py", "--config", "configs/smoke.yaml", "--epochs", "2", "--json", out,
        *small, "data.neg_mult=2", *model, "train.batch_size=4", "train.learning_rate=0.01",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [r["epoch"] for r in rows] == [1, 2]
    for r in rows:
        assert r["loss_rel_diff"] < 1e-4, r
        assert r["val_rel_diff"] < 1e-3, r
    assert rows[0]["loss_ours"] != rows[1]["loss_ours"]  # it trained


def test_torch_baseline_on_missing_gpus_is_one_error_and_no_run_folder(tmp_path):
    """``--device cuda`` asks for one GPU per process: more processes than torch sees GPUs is a UserError
    naming both counts, before the run's folder exists."""
    from dygnex_jax.baselines.torch_runner import run
    from dygnex_jax.config import load_config
    from dygnex_jax.errors import UserError

    procs = torch.cuda.device_count() + 1
    out = tmp_path / "run"
    with pytest.raises(UserError, match=f"--procs {procs} needs {procs} GPU"):
        run(load_config("configs/smoke.yaml", ["model.name=tgcn"]), out, procs=procs, device="cuda")
    assert not out.exists()


def test_the_model_sets_its_matmul_precision():
    """``create_model`` sets ``model.matmul_precision`` for the steps traced after it: "highest" is JAX's
    float32 setting (what the GPU parity cases need), "default" leaves the backend's choice."""
    from dygnex_jax.models import create_model

    before = jax.config.jax_default_matmul_precision
    try:
        create_model(ModelConfig(matmul_precision="default"), 8)
        assert jax.config.jax_default_matmul_precision is None
        create_model(ModelConfig(), 8)
        assert jax.config.jax_default_matmul_precision == "highest"
        x = jnp.asarray(np.random.default_rng(0).standard_normal((64, 64)), jnp.float32)
        want = np.asarray(x, np.float64) @ np.asarray(x, np.float64)
        np.testing.assert_allclose(np.asarray(jax.jit(jnp.matmul)(x, x)), want, rtol=1e-4, atol=1e-4)
    finally:
        jax.config.update("jax_default_matmul_precision", before)
