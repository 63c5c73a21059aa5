"""Edge classification (data.task=edge_cls, EvolveGCN's Bitcoin rating-sign task): labels from ratings,
windows that read the target snapshot, F1, padding invariance, 8 devices == 1 device, a CLI run."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import SMALL, make_trainer
from test_parallel import assert_trees_close, grads_on_eight_and_one

from dygnex_jax.__main__ import main
from dygnex_jax.config import DataConfig, load_config
from dygnex_jax.data.edge_file import read_edge_stream
from dygnex_jax.data.loaders import edge_stream_to_graph
from dygnex_jax.data.windows import WindowSet
from dygnex_jax.evaluation import class_f1, confusion, edge_cls_metrics
from dygnex_jax.graphs import Budget, pack_device, stack_devices, step_budget
from dygnex_jax.train import Trainer, make_loss_fn

# --- labels from ratings ----------------------------------------------------------------------------

# src dst rating time; aggr_time 10 -> snapshot 0 = [0, 10), snapshot 1 = [10, 20)
HAND = """\
1 2 5 0
2 1 -3 1
1 2 -1 2
3 4 -2 3
4 3 7 4
5 6 10 5
2 3 -4 12
2 3 6 13
3 2 1 14
"""


def test_votes_are_evolvegcn_majority_of_rating_signs(tmp_path):
    path = tmp_path / "hand.txt"
    path.write_text(HAND)
    src, dst, rating, time = read_edge_stream(path)
    # undirected (EvolveGCN adds every row reversed): both directions of a pair vote together
    g = edge_stream_to_graph(src, dst, rating, time, aggr_time=10)
    ids = {int(v): i for i, v in enumerate(g.node_ids)}
    got = [
        {(int(g.node_ids[u]), int(g.node_ids[v])): int(x) for (u, v), x in zip(s, vo)}
        for s, vo in zip(g.snapshots, g.votes)
    ]
    # {1,2}: +5 -3 -1 -> 1 - 2 = -1; {3,4}: -2 +7 -> tie 0 (label 0); {5,6}: +10 -> 1; {2,3}: -4 +6 +1 -> 1
    assert got[0] == {(1, 2): -1, (2, 1): -1, (3, 4): 0, (4, 3): 0, (5, 6): 1, (6, 5): 1}
    assert got[1] == {(2, 3): 1, (3, 2): 1}
    # directed: every direction votes alone
    d = edge_stream_to_graph(src, dst, rating, time, aggr_time=10, symmetric=False)
    got = {(int(d.node_ids[u]), int(d.node_ids[v])): int(x) for (u, v), x in zip(d.snapshots[0], d.votes[0])}
    assert got == {(1, 2): 0, (2, 1): -1, (3, 4): -1, (4, 3): 1, (5, 6): 1}
    # and the window labels: 1 for a majority of positive ratings, ties and negatives 0
    ws = WindowSet(g, DataConfig(task="edge_cls", window=1, train_frac=0.5, val_frac=0.0))
    np.testing.assert_array_equal(ws.targets, [0, 1])
    win = ws.get(0)
    labels = dict(zip(map(tuple, win.nodes[win.positives].tolist()), ws.edge_labels(0).tolist()))
    pairs = [(1, 2), (2, 1), (3, 4), (4, 3), (5, 6), (6, 5)]
    assert labels == {(ids[u], ids[v]): int(u + v == 11) for u, v in pairs}
    assert ws.edge_labels(1).tolist() == [1, 1]


def rated_stream(num_nodes=60, rows=2400, buckets=16, seed=0):
    """A random rating stream: one node in five is rated negatively (a learnable, skewed signal)."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, rows)
    dst = rng.integers(0, num_nodes, rows)
    bad = np.arange(num_nodes) % 5 == 0
    size = rng.integers(1, 11, rows)
    rating = np.where(bad[dst], -size, size)
    time = np.sort(rng.uniform(0, buckets, rows) ** 1.3)  # snapshots of different sizes
    return src, dst, rating, time


def rated_graph(**kw):
    src, dst, rating, time = rated_stream(**kw)
    return edge_stream_to_graph(src, dst, rating, time, aggr_time=1.0, name="rated")


def test_edge_cls_windows_read_the_target_and_classify_its_edges():
    g = rated_graph()
    ws = WindowSet(g, DataConfig(task="edge_cls", window=4, neg_mult=7))
    link = WindowSet(g, DataConfig(window=4))
    np.testing.assert_array_equal(ws.targets, np.arange(3, g.num_snapshots))  # W - 1 .. T - 1
    np.testing.assert_array_equal(link.targets, np.arange(4, g.num_snapshots))
    for k in (0, len(ws) - 1):
        win = ws.get(k)
        for tau, e in enumerate(win.edges):  # history t-W+1 .. t: the last offset is the target
            np.testing.assert_array_equal(win.nodes[e], g.snapshots[win.target - 3 + tau])
        pairs, labels = ws.training_pairs(k, neg_mult=7, seed=0, epoch=1)
        np.testing.assert_array_equal(win.nodes[pairs], g.snapshots[win.target])  # no negatives
        np.testing.assert_array_equal(labels, g.votes[win.target] > 0)
        again, _ = ws.training_pairs(k, neg_mult=0, seed=5, epoch=9)
        np.testing.assert_array_equal(pairs, again)
        assert (pairs < len(win.nodes)).all(), "every target node is active: no background pair"
    for split in ("train", "val", "test"):  # the pair column is the target's edges, in every split
        c = ws.costs(split, 7)
        np.testing.assert_array_equal(c[:, 2], [len(ws.get(int(k)).positives) for k in ws.splits[split]])


# --- F1 ---------------------------------------------------------------------------------------------


def test_f1_hand_values():
    labels = np.array([0, 0, 0, 1, 1, 1, 1, 1, 1, 1])
    pred = np.array([0, 0, 1, 0, 0, 1, 1, 1, 1, 1])
    counts = confusion(labels, pred)
    np.testing.assert_array_equal(counts, [[2, 1], [2, 5]])
    # class 0: tp 2, fp 2, fn 1 -> 4 / 7; class 1: tp 5, fp 1, fn 2 -> 10 / 13
    np.testing.assert_allclose(class_f1(counts), [4 / 7, 10 / 13])
    m = edge_cls_metrics(counts)
    assert m["f1"] == pytest.approx(4 / 7) and m["micro_f1"] == pytest.approx(0.7)
    assert m["macro_f1"] == pytest.approx((4 / 7 + 10 / 13) / 2) and m["edges"] == 10
    # a class never predicted correctly has F1 0 (EvolveGCN's logger); an empty split is NaN
    assert edge_cls_metrics(confusion([0, 1, 1], [1, 1, 1]))["f1"] == 0.0
    assert np.isnan(edge_cls_metrics(np.zeros((2, 2), np.int64))["f1"])


def test_f1_equals_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(1)
    for _ in range(5):
        labels, pred = rng.integers(0, 2, 200), rng.integers(0, 2, 200)
        m = edge_cls_metrics(confusion(labels, pred))
        assert m["f1"] == pytest.approx(metrics.f1_score(labels, pred, pos_label=0))
        assert m["micro_f1"] == pytest.approx(metrics.f1_score(labels, pred, average="micro"))
        assert m["macro_f1"] == pytest.approx(metrics.f1_score(labels, pred, average="macro"))


# --- the model on edge_cls batches ------------------------------------------------------------------

EDGE_CLS = ["data.task=edge_cls", *SMALL, "train.batch_size=8"]


def trainer(devices: int, *extra) -> Trainer:
    return make_trainer(
        "train.class_weights=[0.8, 0.2]", *extra, base=EDGE_CLS, devices=devices, graph=rated_graph()
    )


def test_edge_cls_padding_invariance():
    tr = trainer(1)
    ids = tr.windows.splits["train"][:3]
    work = tr.device_work(ids, "train", epoch=2)
    tight, _, budget = tr.pack([[0, 1, 2]], "train", epoch=2)
    big = Budget(budget.nodes * 2 + 5, budget.edges * 3 + 7, budget.pairs * 2 + 3, budget.windows + 2)
    loose = stack_devices([pack_device(work, big, tr.windows.window, tr.config.train.class_weights)])
    local = lambda b: {k: jnp.asarray(v[0]) for k, v in b.items()}  # noqa: E731
    params = jax.device_get(tr.params)
    vg = jax.jit(jax.value_and_grad(make_loss_fn(tr.model), has_aux=True))
    (n_a, d_a), g_a = vg(params, local(tight))
    (n_b, d_b), g_b = vg(params, local(loose))
    q = work.real_pairs()
    labels = np.concatenate(work.labels)
    assert float(d_a) == pytest.approx(float(np.asarray([0.8, 0.2])[labels].sum()), rel=1e-6)
    np.testing.assert_allclose([float(n_a), float(d_a)], [float(n_b), float(d_b)], rtol=1e-6)
    assert_trees_close(g_a, g_b)
    logits = jax.jit(tr.model.apply)
    np.testing.assert_allclose(
        np.asarray(logits(params, local(tight)))[:q], np.asarray(logits(params, local(loose)))[:q], atol=1e-5
    )


def test_edge_cls_eight_devices_equal_one_device():
    multi, single = trainer(8), trainer(1)
    loss_fn = make_loss_fn(multi.model)
    (n8, d8, g8), (n1, d1, g1), _, _ = grads_on_eight_and_one(multi, single, loss_fn)
    assert float(d8) == pytest.approx(float(d1), rel=1e-6) and float(d1) > 0
    np.testing.assert_allclose(float(n8), float(n1), rtol=1e-5)
    assert_trees_close(jax.tree.map(lambda g: g / d8, g8), jax.tree.map(lambda g: g / d1, g1))


def test_edge_cls_evaluation_equals_windows_one_by_one():
    """The packed, sharded evaluation (5 windows a step over 8 devices) = every window run alone."""
    tr = trainer(8, "eval.batch_size=5")
    params = jax.device_get(tr.params)
    apply = jax.jit(tr.model.apply)
    for split in ("val", "test"):
        works = [tr.device_work([k], split, epoch=0) for k in tr.windows.splits[split]]
        budget = step_budget(works, 2.0, 8)  # one shape for all: one compilation
        counts = np.zeros((2, 2), np.int64)
        for work in works:
            batch = pack_device(work, budget, tr.windows.window)
            logits = np.asarray(apply(params, {key: jnp.asarray(v) for key, v in batch.items()}))
            counts += confusion(work.labels[0], logits[: work.real_pairs()].argmax(-1))
        got = tr.evaluate(split)
        assert got == edge_cls_metrics(counts)
        assert got["edges"] == sum(len(w.pairs[0]) for w in works) > 0


# --- the command line -------------------------------------------------------------------------------


@pytest.mark.slow  # 16 epochs of 3 steps: 31 s on the 2-core machine beside two training runs
def test_labels_that_the_inputs_determine_are_learned():
    """End to end on a label the model can see (a pair is negative when its destination has degree >= 4
    in the target snapshot, an input feature): validation F1 of the minority class goes near 1."""
    graph = rated_graph()
    graph.votes = [
        np.where(np.bincount(s[:, 1], minlength=graph.num_nodes)[s[:, 1]] >= 4, -1, 1).astype(np.int32)
        for s in graph.snapshots
    ]
    tr = make_trainer(
        "train.learning_rate=0.03", "train.class_weights=[0.5, 0.5]", base=EDGE_CLS, devices=2, graph=graph
    )
    base = tr.evaluate("val")
    # 48 updates: validation F1 0.0 at epoch 4, 0.67 at 8, 0.89 at 12, 0.95 at 16 (2026-12-04)
    for epoch in range(1, 17):
        tr.train_epoch(epoch)
    got = tr.evaluate("val")
    assert got["f1"] > 0.8 and got["macro_f1"] > max(base["macro_f1"], 0.8), (base, got)


@pytest.mark.slow  # three trainers and a MILP solve: about a minute
def test_full_batch_step_is_the_same_under_every_window_scheduler():
    """B = all training windows: one step, so psg, dygnex_g and dygnex_l must give the same update."""
    graph = rated_graph()
    k = len(WindowSet(graph, load_config(None, EDGE_CLS).data).splits["train"])
    runs = [
        make_trainer(f"schedule.method={m}", f"train.batch_size={k}", base=EDGE_CLS, devices=2, graph=graph)
        for m in ("psg", "dygnex_g", "dygnex_l")
    ]
    losses = [r.train_epoch(1)["loss"] for r in runs]
    np.testing.assert_allclose(losses, losses[0], rtol=1e-6)
    for other in runs[1:]:
        assert_trees_close(runs[0].params, other.params)


def test_cli_edge_cls_run_logs_f1_and_picks_the_best_by_val_f1(tmp_path, capsys):
    src, dst, rating, time = rated_stream()
    path = tmp_path / "rated.txt"
    path.write_text("".join(f"{a} {b} {r} {t:.4f}\n" for a, b, r, t in zip(src, dst, rating, time)))
    out = tmp_path / "run"
    argv = ["train", "--config", "configs/smoke.yaml", "--out", str(out), "data.task=edge_cls"]
    argv += ["data.dataset=edges", f"data.path={path}", "data.aggr_time=1", "train.epochs=2"]
    argv += ["train.class_weights=[0.8, 0.2]", "train.learning_rate=0.05"]
    assert main(argv) == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2]
    for r in rows:
        assert np.isfinite(r["loss"]) and "val_map" not in r
        for key in ("val_f1", "val_micro_f1", "val_macro_f1", "test_f1", "test_micro_f1", "test_macro_f1"):
            assert 0 <= r[key] <= 1
    summary = json.loads((out / "summary.json").read_text())
    best = max(rows, key=lambda r: r["val_f1"])
    assert summary["task"] == "edge_cls" and summary["best"]["epoch"] == best["epoch"]
    assert summary["best"]["test_f1"] == best["test_f1"] and summary["final"]["val_f1"] == rows[-1]["val_f1"]
    assert "val F1" in capsys.readouterr().err
