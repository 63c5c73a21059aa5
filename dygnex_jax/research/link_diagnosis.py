"""Where a trained link model's MAP goes: its newest checkpoint re-scored window by window (``tools/link_diagnose.py``).

The run's own evaluation (the same embeddings, head and candidates: every non-edge, EvolveGCN's protocol)
per target snapshot, and the same scores with every pair that touches the *background* node last — the
nodes without an edge in the window's history, which share one embedding and so one score per partner:
at a sparse snapshot they are most of the graph, so a block of millions of candidate pairs moves with
that one score. MAP pools all of a snapshot's pairs and feels the block; MRR ranks each source's own
candidates and hardly does. Also counted: the target edges that touch such a node (no score from the
history can rank them above the block) and those whose both ends are silent in the last history
snapshot.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import UserError
from ..evaluation import all_pairs_arguments, snapshot_metrics_compressed, weighted_mean


def _window_figures(windows, k: int, scores: np.ndarray) -> dict:
    n = windows.graph.num_nodes
    win = windows.get(k)
    a = len(win.nodes)  # the background node's local id
    args = all_pairs_arguments(windows, k)  # the run's own evaluation's
    ls, ld = args[1], args[2]
    ap, mrr, count = snapshot_metrics_compressed(scores, *args)
    last = scores.copy()
    last[a, :] = last[:, a] = scores.min() - 1.0
    ap_last, mrr_last, _ = snapshot_metrics_compressed(last, *args)
    # each source's row less its mean over the global candidates: MRR (within a row) cannot change, MAP
    # (pooled over rows) loses what the sources' own offsets cost it
    m = np.asarray(args[0], np.float64)
    centred = scores - (scores @ m / m.sum())[:, None]
    ap_centred, mrr_centred, _ = snapshot_metrics_compressed(centred, *args)
    active_last = np.unique(win.edges[-1].ravel()) if len(win.edges[-1]) else np.zeros(0, np.int32)
    silent = ~np.isin(ls, active_last) & ~np.isin(ld, active_last)
    return {
        "window": int(k),
        "target": int(win.target),
        "positives": len(ls),
        "touching_background": int(((ls == a) | (ld == a)).sum()),
        "silent_in_last_snapshot": int(silent.sum()),
        "background_nodes": int(n - a),
        "candidates": int(count),
        "ap": ap,
        "mrr": mrr,
        "ap_background_last": ap_last,
        "mrr_background_last": mrr_last,
        "ap_rows_centred": ap_centred,
        "mrr_rows_centred": mrr_centred,
    }


def diagnose(run_dir: str | Path, split: str = "test", note=print, epoch: int | None = None) -> dict:
    """The figures of the module docstring for ``split``, from ``run_dir``'s newest checkpoint (or that of
    ``epoch``: e.g. the best validation epoch, kept with ``train.checkpoint_best``)."""
    from ..checkpoint import restore_epoch, restore_newest
    from ..config import load_config
    from ..trainer import Trainer

    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").is_file():
        raise UserError(f"{run_dir} holds no config.yaml: name the --out folder of a training run")
    config = load_config(run_dir / "config.yaml", [])
    if config.data.task != "link":
        raise UserError(f"{run_dir} trained data.task={config.data.task}: this diagnoses link prediction")
    trainer = Trainer(config)
    if trainer.candidate_mode != "all":
        raise UserError(
            f"{run_dir} evaluates sampled candidates (eval.candidates): the background block exists "
            "only among all pairs; diagnose a run with eval.candidates=all"
        )
    if epoch is not None:
        ckpt = restore_epoch(trainer, run_dir, epoch)
    else:
        ckpt, _ = restore_newest(trainer, run_dir, note)
    if ckpt is None:
        raise UserError(f"{run_dir} has no checkpoint: train with train.checkpoint_every >= 1 first")
    ev = trainer.evaluator
    head = ev.host_head(trainer)
    rows = [
        _window_figures(trainer.windows, k, ev.local_scores(trainer, emb, head).astype(np.float64))
        for k, emb in ev.embeddings(trainer, split)
    ]
    rows.sort(key=lambda r: r["window"])
    w = [r["candidates"] for r in rows]
    total = sum(r["positives"] for r in rows)
    return {
        "run": str(run_dir),
        "epoch": ckpt.epoch,
        "split": split,
        "map": weighted_mean([r["ap"] for r in rows], w),
        "mrr": weighted_mean([r["mrr"] for r in rows], w),
        "map_background_last": weighted_mean([r["ap_background_last"] for r in rows], w),
        "mrr_background_last": weighted_mean([r["mrr_background_last"] for r in rows], w),
        "map_rows_centred": weighted_mean([r["ap_rows_centred"] for r in rows], w),
        "mrr_rows_centred": weighted_mean([r["mrr_rows_centred"] for r in rows], w),
        "positives": total,
        "touching_background": sum(r["touching_background"] for r in rows) / max(total, 1),
        "silent_in_last_snapshot": sum(r["silent_in_last_snapshot"] for r in rows) / max(total, 1),
        "windows": rows,
    }
