"""Parameter-free link predictors scored by the trainer's own evaluator: a floor for the reproduction table.

Each heuristic scores every ordered pair of a window's local nodes from its W history snapshots alone,
and ``evaluate_link_windows`` — the function that scores trained models — turns the scores into MAP and
MRR over the same candidates (EvolveGCN's protocol: every non-edge of the target snapshot). Nodes
without an edge in the history share the background node's score, 0, as they share its embedding in
a model.

    repeat      the pair's edge rows in the history (its weight under ``data.edge_weight: count``,
                else 1 a snapshot): "the pairs that talked before talk again", a memorisation
                baseline in the spirit of EdgeBank (Poursafaei et al., NeurIPS 2022)
    degree      deg(u) · deg(v), the degrees summed over the history (preferential attachment)
    repeat+degree  repeat first, degree among pairs of equal repeat

numpy only; a window's [L, L] scores are dense (L = its active nodes + 1), as the evaluator's are.
"""

from __future__ import annotations

import time

import numpy as np

from ..evaluation import evaluate_link_windows

KINDS = ("repeat", "degree", "repeat+degree")


def history_scores(win, kind: str) -> np.ndarray:
    """[L, L] scores of window ``win``'s local pairs (a ``LocalWindow``) by heuristic ``kind``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    n = win.num_local
    seen = np.zeros((n, n))
    degree = np.zeros(n)
    for tau, e in enumerate(win.edges):
        w = np.ones(len(e)) if win.weights is None else np.asarray(win.weights[tau], np.float64)
        np.add.at(seen, (e[:, 0], e[:, 1]), w)
        np.add.at(degree, e[:, 0], 1.0)
        np.add.at(degree, e[:, 1], 1.0)
    # the background node (local id n - 1) stands for nodes without history edges: score 0
    seen[-1, :] = seen[:, -1] = 0.0
    degree[-1] = 0.0
    pa = np.outer(degree, degree)
    if kind == "repeat":
        return seen
    if kind == "degree":
        return pa
    return seen * (pa.max() + 1.0) + pa  # lexicographic: repeat, then degree


def evaluate(windows, split: str, kinds=KINDS, eval_cfg=None, mode: str = "all") -> list[dict]:
    """MAP / MRR of each heuristic on a split's windows (``windows``: a link ``WindowSet``)."""
    ids = [int(k) for k in windows.splits[split]]
    rows = []
    for kind in kinds:
        t0 = time.perf_counter()
        by_window = ((k, windows.get(k)) for k in ids)
        r = evaluate_link_windows(
            windows, by_window, lambda win, kind=kind: history_scores(win, kind), mode, eval_cfg
        )
        rows.append({"heuristic": kind, "split": split, **r, "seconds": time.perf_counter() - t0})
    return rows
