"""MAP / MRR as EvolveGCN defines them, checked against brute force and hand-computed values."""

import numpy as np
import pytest

from dygnex_jax.evaluation import (
    average_precision,
    reciprocal_ranks,
    row_mrr,
    sample_candidates,
    snapshot_metrics_all,
    weighted_mean,
)


def brute_ap(scores, labels):
    """Mean over positives of precision at the positive's rank (valid when scores are distinct)."""
    order = np.argsort(-scores)
    y = labels[order]
    hits = np.cumsum(y)
    return np.mean([hits[i] / (i + 1) for i in range(len(y)) if y[i]])


def test_ap_matches_brute_force_on_distinct_scores():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(2, 200))
        scores = rng.permutation(n).astype(float)
        labels = rng.random(n) < 0.3
        if labels.any():
            assert average_precision(scores, labels) == pytest.approx(brute_ap(scores, labels))


def test_ap_hand_values_and_ties():
    assert average_precision([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0]) == pytest.approx(0.5 + 0.5 * 2 / 3)
    # a tie forms one threshold (sklearn): at 0.5 P=1/2 R=1/2, at 0.1 P=2/3 R=1
    assert average_precision([0.5, 0.5, 0.1], [1, 0, 1]) == pytest.approx(0.5 * 0.5 + 0.5 * 2 / 3)
    assert average_precision([0.5, 0.5, 0.5], [0, 1, 0]) == pytest.approx(1 / 3)
    assert np.isnan(average_precision([0.1, 0.2], [0, 0]))


def test_reciprocal_ranks_average_ties():
    np.testing.assert_allclose(reciprocal_ranks(np.array([3.0, 2.0, 1.0]), np.array([0, 1, 0])), [1 / 2])
    # two positives tied at the top share ranks 1 and 2 -> mean rank 1.5
    np.testing.assert_allclose(
        reciprocal_ranks(np.array([5.0, 5.0, 1.0]), np.array([1, 1, 0])), [1 / 1.5] * 2
    )


def test_row_mrr_groups_by_source():
    src = np.array([0, 0, 0, 1, 1, 2])
    scores = np.array([0.9, 0.1, 0.5, 0.2, 0.3, 0.7])
    labels = np.array([0, 1, 0, 1, 0, 0])  # source 0: rank 3; source 1: rank 2; source 2: no positive
    assert row_mrr(src, scores, labels) == pytest.approx((1 / 3 + 1 / 2) / 2)


def test_all_pairs_metrics_against_brute_force():
    rng = np.random.default_rng(1)
    n = 9
    full = rng.normal(size=(n, n))
    edges = {(0, 1), (0, 4), (3, 2), (8, 7)}
    codes = np.sort([u * n + v for u, v in edges])
    ap, mrr, count = snapshot_metrics_all(full, codes)
    pairs = [(u, v) for u in range(n) for v in range(n) if u != v]
    s = np.array([full[u, v] for u, v in pairs])
    y = np.array([(u, v) in edges for u, v in pairs])
    assert count == n * (n - 1)
    assert ap == pytest.approx(brute_ap(s, y))
    rr = []
    for u in (0, 3, 8):
        row = [(full[u, v], (u, v) in edges) for v in range(n) if v != u]
        ranked = sorted(row, key=lambda t: -t[0])
        rr.append(np.mean([1 / (i + 1) for i, (_, pos) in enumerate(ranked) if pos]))
    assert mrr == pytest.approx(np.mean(rr))


def test_sampled_candidates_are_non_edges_and_deterministic():
    n = 50
    codes = np.sort(np.array([1 * n + 2, 1 * n + 3, 7 * n + 9, 30 * n + 1]))
    a = sample_candidates(codes, n, 20, np.random.default_rng(5))
    b = sample_candidates(codes, n, 20, np.random.default_rng(5))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    src, dst, labels = a
    assert labels[:4].all() and not labels[4:].any()
    neg = src[4:] * n + dst[4:]
    assert not np.isin(neg, codes).any() and (src[4:] != dst[4:]).all()
    assert set(src[4:]) <= {1, 7, 30}


def test_weighted_mean_skips_nan():
    assert weighted_mean([0.5, float("nan"), 1.0], [1, 5, 3]) == pytest.approx((0.5 + 3.0) / 4)


def test_compressed_all_pairs_equal_the_full_matrix():
    """Collapsing inactive nodes into one weighted background cell changes neither MAP nor MRR."""
    from dygnex_jax.evaluation import snapshot_metrics_compressed

    rng = np.random.default_rng(7)
    for trial in range(20):
        n = int(rng.integers(5, 30))
        active = np.sort(rng.choice(n, size=int(rng.integers(1, n)), replace=False))
        local = np.full(n, len(active))
        local[active] = np.arange(len(active))
        s_local = np.round(rng.normal(size=(len(active) + 1, len(active) + 1)), 1)  # ties on purpose
        full = s_local[np.ix_(local, local)]
        m = int(rng.integers(1, n * 2))
        e = rng.integers(0, n, size=(m, 2))
        e = e[e[:, 0] != e[:, 1]]
        codes = np.unique(e[:, 0] * n + e[:, 1])
        src, dst = codes // n, codes % n
        mult = np.r_[np.ones(len(active)), n - len(active)]
        got = snapshot_metrics_compressed(s_local, mult, local[src], local[dst], src)
        want = snapshot_metrics_all(full, codes)
        assert got[2] == want[2]
        np.testing.assert_allclose(got[:2], want[:2], rtol=1e-9, err_msg=f"trial {trial}")


def test_weighted_ap_equals_repeated_samples():
    rng = np.random.default_rng(3)
    scores = np.round(rng.normal(size=30), 1)
    labels = rng.random(30) < 0.4
    w = rng.integers(1, 4, size=30)
    expanded = average_precision(np.repeat(scores, w), np.repeat(labels, w))
    assert average_precision(scores, labels, w) == pytest.approx(expanded)


def test_compressed_metrics_with_excluded_pairs_and_no_background_against_brute_force():
    """Excluded pairs (data.targets: new), ties, and a background of multiplicity 0 (every node active):
    the compressed figures equal AP and per-source MRR over the expanded candidate list."""
    from dygnex_jax.evaluation import snapshot_metrics_compressed

    rng = np.random.default_rng(11)
    for trial in range(30):
        n = int(rng.integers(4, 25))
        size = int(rng.integers(1, n + 1))  # == n: no inactive node, the background weighs 0
        active = np.sort(rng.choice(n, size=size, replace=False))
        local = np.full(n, size)
        local[active] = np.arange(size)
        s_local = np.round(rng.normal(size=(size + 1, size + 1)), 1)
        pairs = [(u, v) for u in range(n) for v in range(n) if u != v]
        pick = rng.permutation(len(pairs))
        positive = sorted(pairs[i] for i in pick[: int(rng.integers(1, 2 * n))])
        excluded = sorted(pairs[i] for i in pick[len(positive) : len(positive) + int(rng.integers(0, 3 * n))])
        src, dst = np.array(positive).T
        ex = np.array(excluded, dtype=np.int64).reshape(-1, 2)
        mult = np.r_[np.ones(size), n - size]
        got = snapshot_metrics_compressed(
            s_local, mult, local[src], local[dst], src, (local[ex[:, 0]], local[ex[:, 1]], ex[:, 0])
        )
        keep = [p for p in pairs if p not in set(excluded)]
        s = np.array([s_local[local[u], local[v]] for u, v in keep])
        y = np.array([p in set(positive) for p in keep])
        assert got[2] == len(keep)
        rr = []
        for u in sorted(set(src.tolist())):
            mine = np.array([p[0] == u for p in keep])
            rr.append(reciprocal_ranks(s[mine], y[mine]).mean())
        np.testing.assert_allclose(
            got[:2], [average_precision(s, y), np.mean(rr)], rtol=1e-9, err_msg=f"{trial}"
        )


def test_compressed_metrics_are_nan_when_a_score_is_nan():
    from dygnex_jax.evaluation import snapshot_metrics_compressed

    s = np.array([[0.0, np.nan], [1.0, 2.0]])
    ap, mrr, count = snapshot_metrics_compressed(s, np.ones(2), np.array([0]), np.array([1]), np.array([0]))
    assert np.isnan(ap) and np.isnan(mrr) and count == 2
