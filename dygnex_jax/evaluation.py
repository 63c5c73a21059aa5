"""Link-prediction evaluation as EvolveGCN defines it: MAP and MRR over the target snapshot's candidates.

Per target snapshot (= per window): candidates are the snapshot's edges (label 1) and non-edges
(label 0) — *all* non-edges (``all``, EvolveGCN's protocol) or ``neg_per_source`` sampled non-edges per
source node of a true edge (``sampled``, for graphs too large to score every pair). AP is sklearn's
``average_precision_score`` (step-wise, tied scores form one threshold); MRR averages, over source
nodes with at least one true edge, the mean reciprocal rank of their true edges among all of that
node's candidates (tied scores get their average rank). As in EvolveGCN's logger, the epoch figure is
the mean over snapshots weighted by their number of candidates.
"""

from __future__ import annotations

import numpy as np


def average_precision(scores: np.ndarray, labels: np.ndarray) -> float:
    """sklearn-compatible average precision; NaN when there is no positive."""
    scores = np.asarray(scores, np.float64).ravel()
    labels = np.asarray(labels).ravel().astype(bool)
    n_pos = int(labels.sum())
    if n_pos == 0:
        return float("nan")
    order = np.argsort(-scores, kind="mergesort")
    s, y = scores[order], labels[order]
    last = np.r_[np.flatnonzero(np.diff(s)), len(s) - 1]  # last index of each distinct score
    tps = np.cumsum(y)[last]
    precision = tps / (last + 1)
    recall = tps / n_pos
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def reciprocal_ranks(scores: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """1 / rank of every positive entry among all ``scores`` (descending; ties share the mean rank)."""
    s = np.sort(np.asarray(scores, np.float64))
    x = np.asarray(scores, np.float64)[np.asarray(positive, bool)]
    greater = len(s) - np.searchsorted(s, x, side="right")
    equal = np.searchsorted(s, x, side="right") - np.searchsorted(s, x, side="left")
    return 1.0 / (1.0 + greater + (equal - 1) / 2.0)


def row_mrr(src: np.ndarray, scores: np.ndarray, labels: np.ndarray) -> float:
    """Mean over source nodes with a true edge of their mean reciprocal rank; NaN if none."""
    order = np.argsort(src, kind="mergesort")
    src, scores, labels = src[order], scores[order], labels[order].astype(bool)
    bounds = np.flatnonzero(np.diff(src)) + 1
    values = []
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(src)]):
        if labels[lo:hi].any():
            values.append(reciprocal_ranks(scores[lo:hi], labels[lo:hi]).mean())
    return float(np.mean(values)) if values else float("nan")


def snapshot_metrics_all(full_scores: np.ndarray, positive_codes: np.ndarray) -> tuple[float, float, int]:
    """MAP, MRR and candidate count with every ordered pair u != v as a candidate.

    Args:
      full_scores: [N, N] score of every (src, dst) pair of global node ids.
      positive_codes: sorted int64 codes ``src * N + dst`` of the target snapshot's edges.
    """
    n = full_scores.shape[0]
    labels = np.zeros(n * n, bool)
    labels[positive_codes] = True
    off_diag = ~np.eye(n, dtype=bool).ravel()
    ap = average_precision(full_scores.ravel()[off_diag], labels[off_diag])
    rows = np.unique(positive_codes // n)
    rr = []
    for u in rows:
        keep = np.arange(n) != u
        rr.append(reciprocal_ranks(full_scores[u, keep], labels.reshape(n, n)[u, keep]).mean())
    mrr = float(np.mean(rr)) if rr else float("nan")
    return ap, mrr, int(off_diag.sum())


def sample_candidates(
    positive_codes: np.ndarray, num_nodes: int, neg_per_source: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """True edges + ``neg_per_source`` random non-edges (v != u) for every source u of a true edge.

    Returns: src [C], dst [C] global ids, labels [C] (1 for true edges first).
    """
    pos_src, pos_dst = positive_codes // num_nodes, positive_codes % num_nodes
    sources = np.unique(pos_src)
    src = np.repeat(sources, neg_per_source)
    dst = rng.integers(0, num_nodes - 1, size=len(src))
    dst = dst + (dst >= src)  # uniform over v != u
    codes = src * num_nodes + dst
    pos = np.minimum(np.searchsorted(positive_codes, codes), max(len(positive_codes) - 1, 0))
    neg = positive_codes[pos] != codes if len(positive_codes) else np.ones(len(codes), bool)
    src, dst = src[neg], dst[neg]
    labels = np.r_[np.ones(len(pos_src), np.int8), np.zeros(len(src), np.int8)]
    return np.r_[pos_src, src], np.r_[pos_dst, dst], labels


def weighted_mean(values: list[float], weights: list[int]) -> float:
    v, w = np.asarray(values, np.float64), np.asarray(weights, np.float64)
    ok = ~np.isnan(v)
    return float(np.sum(v[ok] * w[ok]) / np.sum(w[ok])) if ok.any() else float("nan")
