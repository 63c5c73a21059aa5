"""Link evaluation streamed step by step (tasks.LinkEvaluator, evaluation.evaluate_link_windows): the
same MAP / MRR floats as the earlier evaluation that collected every window's embeddings and kept the
sampled candidates for the run (kept here as the reference), windows scored as their step comes back,
and sampled candidates re-drawn identically at every evaluation."""

from __future__ import annotations

import types

import numpy as np
import pytest
from helpers import make_trainer

from dygnex_jax import tasks
from dygnex_jax.evaluation import (
    CandidateCache,
    average_precision,
    drop_excluded,
    evaluate_link_windows,
    row_mrr,
    sample_candidates,
    snapshot_metrics_compressed,
    weighted_mean,
)
from dygnex_jax.graphs import node_offsets

SPLITS = ["data.train_frac=0.5", "data.val_frac=0.25"]  # the toy graph's 12 windows: 6 / 3 / 3


def reference_embeddings(evaluator, trainer, split: str) -> dict:
    """The earlier ``LinkEvaluator.embeddings``: every window of the split collected into one dict."""
    out = {}
    for work, emb in tasks.eval_outputs(trainer, split, evaluator.embed_step):
        for p, dev in enumerate(work):
            for win, off in zip(dev.windows, node_offsets(dev)):
                out[win.index] = emb[p, off : off + win.num_local]
    return out


def reference_evaluate(windows, embeddings, local_scores, mode, eval_cfg, cache, pair_scores=None) -> dict:
    """The earlier ``evaluate_link_windows``, as it was: a dict of all embeddings, candidates cached."""
    n = windows.graph.num_nodes
    maps, mrrs, counts = [], [], []
    for k, emb in sorted(embeddings.items()):
        win = windows.get(k)
        excluded = windows.excluded_codes(k)
        if excluded is not None:
            excluded = excluded[excluded // n != excluded % n]
        if mode == "all":
            mult = np.r_[np.ones(len(win.nodes)), n - len(win.nodes)]
            src = win.positive_codes // n
            ex = None
            if excluded is not None:
                ex = (win.to_local(excluded // n), win.to_local(excluded % n), excluded // n)
            ap, mrr, count = snapshot_metrics_compressed(
                local_scores(emb), mult, win.to_local(src), win.to_local(win.positive_codes % n), src, ex
            )
        else:
            if k not in cache:
                rng = np.random.default_rng([eval_cfg.seed, k])
                sampled = sample_candidates(win.positive_codes, n, eval_cfg.neg_per_source, rng)
                cache[k] = drop_excluded(sampled, excluded, n)
            src, dst, labels = cache[k]
            ends = win.to_local(src), win.to_local(dst)
            s = pair_scores(emb, *ends) if pair_scores is not None else local_scores(emb)[ends]
            ap, mrr, count = average_precision(s, labels), row_mrr(src, s, labels), len(labels)
        maps.append(ap)
        mrrs.append(mrr)
        counts.append(count)
    return {"map": weighted_mean(maps, counts), "mrr": weighted_mean(mrrs, counts), "snapshots": len(maps)}


def reference_run(trainer, split: str, cache: dict) -> dict:
    """The earlier ``LinkEvaluator.evaluate`` of ``trainer``."""
    from dygnex_jax import parallel

    ev = trainer.evaluator
    head = parallel.to_host(trainer.params["params"]["head"])
    return reference_evaluate(
        trainer.windows,
        reference_embeddings(ev, trainer, split),
        lambda emb: ev.local_scores(trainer, emb, head),
        trainer.candidate_mode,
        trainer.config.eval,
        cache,
        pair_scores=lambda emb, src, dst: ev.pair_scores(trainer, emb, src, dst, head),
    )


@pytest.mark.parametrize(
    "options",
    [
        ["eval.candidates=sampled", "eval.neg_per_source=20"],
        ["eval.candidates=all"],
        ["eval.candidates=sampled", "data.targets=new"],
    ],
    ids=["sampled", "all", "sampled-new"],
)
def test_streamed_evaluation_gives_the_same_floats_as_the_collected_one(options):
    """Evaluations of each split after a trained epoch: bit-identical to the reference (one candidate
    cache for the run) and to each other, whether the candidates are all kept, some or none (re-drawn
    candidates are the same ones)."""
    tr = make_trainer(*options, *SPLITS, "eval.batch_size=2", "data.neg_mult=2", devices=2)
    tr.train_epoch(1)
    cache: dict = {}
    want = {split: reference_run(tr, split, cache) for split in ("val", "test")}
    kept = sum(len(c[2]) for c in cache.values())
    for bound in (CandidateCache().max_pairs, kept // 2, 0):
        tr.evaluator.candidates = CandidateCache(bound)
        for split in ("val", "test"):
            assert len(tr.windows.splits[split]) > 2  # more than one evaluation step
            assert tr.evaluate(split) == want[split] and tr.evaluate(split) == want[split]
            assert reference_run(tr, split, cache) == want[split]
            assert want[split]["snapshots"] == len(tr.windows.splits[split]) and np.isfinite(
                want[split]["map"]
            )
        held = tr.evaluator.candidates
        assert held.pairs == sum(len(c[2]) for c in held.values()) <= bound
        if "eval.candidates=sampled" in options:  # the default bound keeps all, half of them some, 0 none
            assert 0 < kept // 2 and kept <= CandidateCache().max_pairs
            assert len(held) == len(cache) if bound >= kept else (0 < len(held) < len(cache)) == (bound > 0)


def test_a_step_is_scored_before_the_next_one_runs(monkeypatch):
    """Streaming: the windows of evaluation step i are scored before step i + 1 is packed, so the host
    holds one step's embeddings at a time."""
    tr = make_trainer("eval.candidates=sampled", *SPLITS, "eval.batch_size=2", devices=2)
    events = []
    pack, score = tr.packer.pack, tr.evaluator.pair_scores
    monkeypatch.setattr(tr.packer, "pack", lambda *a, **k: events.append("pack") or pack(*a, **k))
    monkeypatch.setattr(tr.evaluator, "pair_scores", lambda *a: events.append("score") or score(*a))
    tr.evaluate("test")
    steps = len(list(tasks.split_steps(len(tr.windows.splits["test"]), tr.eval_per_step, tr.n_devices)))
    assert steps > 1 and events.count("pack") == steps
    # pack, its windows' scores, pack, ...: never two packs in a row
    assert "pack pack" not in " ".join(events) and events[0] == "pack" and events[-1] == "score"


def test_any_order_of_windows_gives_the_dict_floats():
    """``evaluate_link_windows`` of a dict (the PyTorch baseline) and of the same windows as an iterable
    in any order, with or without a candidate cache: the same floats."""
    tr = make_trainer("eval.candidates=sampled", *SPLITS, devices=2)
    ws = tr.windows
    cfg = types.SimpleNamespace(seed=3, neg_per_source=30)
    rng = np.random.default_rng(0)
    ids = [int(k) for k in ws.splits["val"]] + [int(k) for k in ws.splits["test"]]
    emb = {k: rng.normal(size=(ws.get(k).num_local, 6)) for k in ids}
    for mode in ("sampled", "all"):
        want = reference_evaluate(ws, emb, lambda e: e @ e.T, mode, cfg, {})
        assert evaluate_link_windows(ws, emb, lambda e: e @ e.T, mode, cfg, {}) == want
        shuffled = [(k, emb[k]) for k in rng.permutation(ids)]
        assert evaluate_link_windows(ws, iter(shuffled), lambda e: e @ e.T, mode, cfg) == want
