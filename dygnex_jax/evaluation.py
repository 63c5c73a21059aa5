"""Evaluation as EvolveGCN defines it: link prediction (MAP, MRR) and edge classification (F1); node
regression's MSE (PyG-Temporal's examples). ``config.TASK_METRICS`` names what every ``data.task`` logs
per split (``val_<name>``, ``test_<name>``).

Link prediction: MAP and MRR over the target snapshot's candidates.

Per target snapshot (= per window): candidates are the snapshot's edges (label 1) and non-edges
(label 0) — *all* non-edges (``all``, EvolveGCN's protocol) or ``neg_per_source`` sampled non-edges per
source node of a true edge (``sampled``, for graphs too large to score every pair). AP is sklearn's
``average_precision_score`` (step-wise, tied scores form one threshold); MRR averages, over source
nodes with at least one true edge, the mean reciprocal rank of their true edges among all of that
node's candidates (tied scores get their average rank). As in EvolveGCN's logger, the epoch figure is
the mean over snapshots weighted by their number of candidates. With ``data.targets: new`` the true
edges are the pairs first seen at the target and the pairs seen before are no candidates at all
(``WindowSet.excluded_codes``).

Edge classification (``edge_cls``): every target edge is predicted the class of its larger logit; the
confusion counts are pooled over the split's snapshots (EvolveGCN's logger), then ``f1`` is the F1 of
class 0 (the negative rating, the minority class: EvolveGCN's ``target_class: 0``, the figure its
paper reports for Bitcoin), ``micro_f1`` the F1 of the counts pooled over both classes (= accuracy)
and ``macro_f1`` the mean of the two classes' F1. A class without true positives has F1 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np


def average_precision(scores: np.ndarray, labels: np.ndarray, weights: np.ndarray | None = None) -> float:
    """sklearn-compatible average precision (optionally with sample weights); NaN without positives.

    Step-wise over the distinct scores (tied scores form one threshold); only the thresholds at positive
    scores move the recall, so the sum runs over those, with the weighted count of negatives at or above
    each (one sort of the negatives when unweighted)."""
    scores = np.asarray(scores, np.float64).ravel()
    labels = np.asarray(labels).ravel().astype(bool)
    w = np.ones(len(scores)) if weights is None else np.asarray(weights, np.float64).ravel()
    n_pos = float(w[labels].sum())
    if n_pos == 0:
        return float("nan")
    levels, level = np.unique(scores[labels], return_inverse=True)
    per_level = np.bincount(level, w[labels], minlength=len(levels))
    tps = np.cumsum(per_level[::-1])[::-1]
    negatives = scores[~labels]
    if weights is None:
        fps = len(negatives) - np.searchsorted(np.sort(negatives), levels, side="left")
    else:
        fps = at_or_above(levels, negatives, w[~labels])
    return float(np.sum(per_level / n_pos * tps / np.maximum(tps + fps, 1e-300)))


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


def snapshot_metrics_compressed(
    local_scores: np.ndarray,
    multiplicity: np.ndarray,
    pos_src: np.ndarray,
    pos_dst: np.ndarray,
    pos_src_global: np.ndarray,
    excluded: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> tuple[float, float, int]:
    """``snapshot_metrics_all`` without the [N, N] matrix: exact, in O(L^2 log L) for L local nodes.

    Global node u has local id ``a(u)``; ``multiplicity[a]`` global nodes share local id a (1 for an
    active node, the number of inactive nodes for the background node). The score of a global pair is
    ``local_scores[a(u), a(v)]``, so the N^2 - N candidates collapse into L^2 weighted cells (minus the
    u == v pairs) plus the true edges, and AP / MRR are computed with those weights.

    Only the thresholds at the true edges' scores move the recall, so AP needs, at each distinct true-edge
    score x, the weighted count of candidates scoring >= x: one sort of the L^2 cells counts them as if
    every cell weighed 1, and the few cells that do not (the background's row and column, the diagonal,
    the true edges' and the excluded pairs' cells) are corrected exactly (``_cell_corrections``). MRR
    compares each true edge's score with its source's row (``_row_ranks``). Scores with a NaN rank
    nothing: MAP and MRR are NaN.

    Args:
      local_scores: [L, L] scores of local pairs.
      multiplicity: [L] int, global nodes per local id (sums to N).
      pos_src, pos_dst: [Q+] local ids of the target snapshot's edges; pos_src_global: their global sources.
      excluded: None, or the pairs that are no candidates (u != v, not positives): [X] local sources,
        local targets and global sources, sorted by the global source.
    """
    m = np.asarray(multiplicity, np.float64)
    n = float(m.sum())
    count = int(n * n - n) - (0 if excluded is None else len(excluded[0]))
    scores = np.asarray(local_scores)
    pos_src, pos_dst = np.asarray(pos_src, np.int64), np.asarray(pos_dst, np.int64)
    if len(pos_src) == 0 or np.isnan(scores).any():
        return float("nan"), float("nan"), count
    x = scores[pos_src, pos_dst]
    levels, per_level = np.unique(x, return_counts=True)  # ascending distinct true-edge scores
    tps = np.cumsum(per_level[::-1])[::-1].astype(np.float64)  # true edges scoring >= each level
    cells = np.sort(scores.ravel())
    fps = (cells.size - np.searchsorted(cells, levels, side="left")).astype(np.float64)
    codes, weights = _cell_corrections(m, pos_src * len(m) + pos_dst, excluded)
    fps += at_or_above(levels, scores.ravel()[codes], weights)
    ap = float(np.sum(per_level / len(x) * tps / (tps + fps)))
    greater, equal = _row_ranks(scores, m, pos_src, x, pos_src_global, excluded)
    rr = 1.0 / (1.0 + greater + (equal - 1.0) / 2.0)
    _, source = np.unique(pos_src_global, return_inverse=True)
    mrr = float(np.mean(np.bincount(source, rr) / np.bincount(source)))
    return ap, mrr, count


def at_or_above(levels: np.ndarray, values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """[len(levels)] sum of the ``weights`` of the ``values`` >= each of the ascending ``levels``."""
    reached = np.searchsorted(levels, values, side="right")  # how many levels each value reaches
    per = np.bincount(reached, weights, minlength=len(levels) + 1)
    return np.cumsum(per[::-1])[::-1][1:]


def _cell_corrections(m: np.ndarray, pos_codes: np.ndarray, excluded) -> tuple[np.ndarray, np.ndarray]:
    """The cells a * L + b whose negative-candidate weight is not 1, and that weight minus 1.

    A cell weighs ``m[a] m[b]`` ordered pairs, less ``m[a]`` self-pairs on the diagonal, less its true
    edges and excluded pairs; only the rows and columns of multiplicity != 1, the diagonal and the true
    edges' and excluded pairs' cells can differ from 1."""
    size = len(m)
    odd = np.flatnonzero(m != 1)
    every = np.arange(size, dtype=np.int64)
    ex_codes = np.zeros(0, np.int64)
    if excluded is not None:
        ex_codes = np.sort(np.asarray(excluded[0], np.int64) * size + np.asarray(excluded[1], np.int64))
    pos_codes = np.sort(pos_codes)
    codes = np.unique(
        np.concatenate(
            [
                (odd[:, None] * size + every).ravel(),
                (every[:, None] * size + odd).ravel(),
                every * (size + 1),
                pos_codes,
                ex_codes,
            ]
        )
    )
    a, b = codes // size, codes % size
    w = m[a] * m[b] - np.where(a == b, m[a], 0.0)
    for taken in (pos_codes, ex_codes):
        w -= np.searchsorted(taken, codes, side="right") - np.searchsorted(taken, codes, side="left")
    keep = w != 1.0
    return codes[keep], w[keep] - 1.0


def _row_ranks(scores, m, pos_src, x, pos_src_global, excluded) -> tuple[np.ndarray, np.ndarray]:
    """For every true edge (a, ., x): the weighted count of its source's candidates scoring above x and
    equal to x. A source's candidates are every global v != u (column b weighs ``m[b]``, less the source
    itself) but its excluded pairs."""
    size = len(m)
    odd = np.flatnonzero(m != 1)
    greater, equal = np.empty(len(x)), np.empty(len(x))
    step = max(1, (1 << 22) // max(size, 1))  # rows compared at a time: bounded memory
    for lo in range(0, len(x), step):
        rows, xs = scores[pos_src[lo : lo + step]], x[lo : lo + step, None]
        above, tied = rows > xs, rows == xs
        greater[lo : lo + step] = np.count_nonzero(above, 1) + above[:, odd] @ (m[odd] - 1.0)
        equal[lo : lo + step] = np.count_nonzero(tied, 1) + tied[:, odd] @ (m[odd] - 1.0)
    own = scores[pos_src, pos_src]  # v != u: the source's own cell loses one pair
    greater -= own > x
    equal -= own == x
    if excluded is not None and len(excluded[0]):
        values = scores[np.asarray(excluded[0]), np.asarray(excluded[1])]
        above, tied = _grouped_ranks(np.asarray(excluded[2]), values, np.asarray(pos_src_global), x)
        greater -= above
        equal -= tied
    return greater, equal


def _grouped_ranks(groups, values, query_groups, query_values) -> tuple[np.ndarray, np.ndarray]:
    """For each query: how many (group, value) entries of its group have a value above its value and
    equal to it; by one sorted integer key (group rank, value rank), no loop over groups."""
    names = np.unique(np.r_[groups, query_groups])
    levels = np.unique(np.r_[values, query_values])
    width = len(levels) + 1
    keys = np.sort(np.searchsorted(names, groups) * width + np.searchsorted(levels, values))
    base = np.searchsorted(names, query_groups) * width
    own = base + np.searchsorted(levels, query_values)
    right, left = np.searchsorted(keys, own, side="right"), np.searchsorted(keys, own, side="left")
    return np.searchsorted(keys, base + width - 1, side="right") - right, right - left


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


def drop_excluded(candidates: tuple, excluded: np.ndarray | None, num_nodes: int) -> tuple:
    """``sample_candidates``'s (src, dst, labels) without the non-edges whose code is in ``excluded``
    (sorted int64 codes; None keeps all)."""
    src, dst, labels = candidates
    if excluded is None or not len(excluded):
        return candidates
    codes = src * num_nodes + dst
    pos = np.minimum(np.searchsorted(excluded, codes), len(excluded) - 1)
    keep = (labels == 1) | (excluded[pos] != codes)
    return src[keep], dst[keep], labels[keep]


def candidate_mode(windows, config) -> str:
    """Link prediction's candidate pairs (``eval.candidates``; ``auto``: every pair when no val/test
    window has more than ``eval.all_max_nodes`` nodes, else sampled ones)."""
    e = config.eval
    if e.candidates != "auto":
        return e.candidates
    largest = int(windows.costs("val")[:, 0].max(initial=0))
    largest = max(largest, int(windows.costs("test")[:, 0].max(initial=0)))
    return "all" if largest <= e.all_max_nodes else "sampled"


def weighted_mean(values: list[float], weights: list[int]) -> float:
    v, w = np.asarray(values, np.float64), np.asarray(weights, np.float64)
    ok = ~np.isnan(v)
    return float(np.sum(v[ok] * w[ok]) / np.sum(w[ok])) if ok.any() else float("nan")


def sampled_link_candidates(windows, k: int, eval_cfg, excluded: np.ndarray | None) -> tuple:
    """Window k's sampled candidates (src [C], dst [C] global ids, labels [C]) without the ``excluded``
    codes: drawn from ``default_rng([eval.seed, k])``, so every call returns the same ones (fixed for a
    run without being kept)."""
    n = windows.graph.num_nodes
    rng = np.random.default_rng([eval_cfg.seed, k])
    sampled = sample_candidates(windows.get(k).positive_codes, n, eval_cfg.neg_per_source, rng)
    return drop_excluded(sampled, excluded, n)


class CandidateCache(dict):
    """Window id -> sampled candidates, kept while they hold at most ``max_pairs`` pairs in all (17 bytes
    a pair): a small graph's are drawn once per run, the windows past the bound re-drawn at every
    evaluation (the same ones). Re-drawing costs about a tenth of scoring them (6.3M pairs: 0.9 s of a
    7.2 s evaluation on 2 CPU cores), keeping them 100 MiB for the whole run."""

    def __init__(self, max_pairs: int = 4_000_000):
        super().__init__()
        self.max_pairs, self.pairs = max_pairs, 0

    def __setitem__(self, k: int, candidates: tuple) -> None:
        size = len(candidates[2])
        if self.pairs + size <= self.max_pairs:  # else not kept: re-drawn when needed
            super().__setitem__(k, candidates)
            self.pairs += size


def _excluded(windows, k: int) -> np.ndarray | None:
    """Pair codes window k's candidates leave out (data.targets: new: the pairs seen before), no self-pairs."""
    excluded = windows.excluded_codes(k)
    if excluded is None:
        return None
    n = windows.graph.num_nodes
    return excluded[excluded // n != excluded % n]


def all_pairs_arguments(windows, k: int) -> tuple:
    """``snapshot_metrics_compressed``'s arguments after the scores for window k's target snapshot
    over all pairs: (multiplicities, local sources, local destinations, global sources, excluded)."""
    n = windows.graph.num_nodes
    win = windows.get(k)
    mult = np.r_[np.ones(len(win.nodes)), n - len(win.nodes)]
    src = win.positive_codes // n
    excluded = _excluded(windows, k)
    ex = None
    if excluded is not None:
        ex = (win.to_local(excluded // n), win.to_local(excluded % n), excluded // n)
    return mult, win.to_local(src), win.to_local(win.positive_codes % n), src, ex


def link_window_metrics(
    windows,
    k: int,
    emb: np.ndarray,
    local_scores,
    mode: str,
    eval_cfg,
    cache: dict | None = None,
    pair_scores=None,
) -> tuple[float, float, int]:
    """AP, MRR and candidate count of window k's target snapshot from its [num_local, H] embeddings
    (the arguments are ``evaluate_link_windows``'s)."""
    if mode == "all":
        return snapshot_metrics_compressed(local_scores(emb), *all_pairs_arguments(windows, k))
    win = windows.get(k)
    candidates = cache.get(k) if cache is not None else None
    if candidates is None:
        candidates = sampled_link_candidates(windows, k, eval_cfg, _excluded(windows, k))
        if cache is not None:
            cache[k] = candidates
    src, dst, labels = candidates
    ends = win.to_local(src), win.to_local(dst)
    s = pair_scores(emb, *ends) if pair_scores is not None else local_scores(emb)[ends]
    return average_precision(s, labels), row_mrr(src, s, labels), len(labels)


def evaluate_link_windows(
    windows,
    embeddings: Mapping[int, np.ndarray] | Iterable[tuple[int, np.ndarray]],
    local_scores,
    mode: str,
    eval_cfg,
    cache: dict | None = None,
    pair_scores=None,
) -> dict:
    """MAP and MRR of a split's windows from their embeddings, whatever computed them (the JAX trainer or
    the PyTorch baseline).

    Streamed: every window is scored as it arrives and only its three figures are kept, so an iterable
    that computes the embeddings step by step holds one step's at a time. The epoch figures are weighted
    means in window-id order, whatever the order of arrival (the same floats as from a dict).

    Args:
      windows: the ``WindowSet``; embeddings: window id -> [num_local, H] embeddings, or an iterable of
        (window id, embeddings) pairs (each window once);
      local_scores: [L, H] -> [L, L] pair scores (edge logit - non-edge logit) of a window's local nodes;
      mode: "all" or "sampled" candidates; eval_cfg: the ``eval`` config section (seed, neg_per_source);
      cache: None (sampled candidates are re-drawn per call, the same ones: ``sampled_link_candidates``),
        or window id -> sampled candidates, filled here and kept by the caller (a dict, or a
        ``CandidateCache`` that keeps a bounded number);
      pair_scores: None, or (embeddings, local src [C], local dst [C]) -> [C] scores: sampled candidates
        are then scored alone, without the [L, L] matrix of ``local_scores``.
    Returns: {"map", "mrr", "snapshots"}.
    """
    items = sorted(embeddings.items()) if isinstance(embeddings, Mapping) else embeddings
    figures: dict[int, tuple[float, float, int]] = {}
    for k, emb in items:
        k = int(k)
        figures[k] = link_window_metrics(windows, k, emb, local_scores, mode, eval_cfg, cache, pair_scores)
    order = sorted(figures)
    maps, mrrs, counts = ([figures[k][i] for k in order] for i in range(3))
    return {"map": weighted_mean(maps, counts), "mrr": weighted_mean(mrrs, counts), "snapshots": len(order)}


def mse_from_sums(sums: list[tuple[float, float]]) -> dict:
    """Node regression: (sum of squared errors, target count) per evaluation step -> {"mse", "nodes"}:
    the mean over every real target node of the split, one division at the end (NaN without any)."""
    sse = float(sum(float(a) for a, _ in sums))
    count = float(sum(float(b) for _, b in sums))
    return {"mse": sse / count if count else float("nan"), "nodes": int(count)}


# --- edge classification (data.task=edge_cls) --------------------------------------------------------


def confusion(labels: np.ndarray, predicted: np.ndarray, num_classes: int = 2) -> np.ndarray:
    """[C, C] int64 counts: row = true class, column = predicted class."""
    codes = np.asarray(labels, np.int64) * num_classes + np.asarray(predicted, np.int64)
    return np.bincount(codes, minlength=num_classes * num_classes).reshape(num_classes, num_classes)


def class_f1(counts: np.ndarray) -> np.ndarray:
    """[C] F1 of every class from a confusion matrix (0 for a class without true positives)."""
    tp = np.diag(counts).astype(np.float64)
    fp = counts.sum(axis=0) - tp
    fn = counts.sum(axis=1) - tp
    return np.where(tp > 0, 2 * tp / np.maximum(2 * tp + fp + fn, 1), 0.0)


def edge_cls_metrics(counts: np.ndarray) -> dict:
    """``f1`` (class 0, the minority), ``micro_f1``, ``macro_f1`` and ``edges`` of pooled counts (NaN
    for an empty split)."""
    total = int(counts.sum())
    if total == 0:
        nan = float("nan")
        return {"f1": nan, "micro_f1": nan, "macro_f1": nan, "edges": 0}
    per_class = class_f1(counts)
    return {
        "f1": float(per_class[0]),
        "micro_f1": float(np.trace(counts) / total),
        "macro_f1": float(per_class.mean()),
        "edges": total,
    }
