"""Bring your own data: ``data.start`` / ``data.end`` (a time range), ``data.dataset: snapshots`` (one
edge file per snapshot), ``data.cumulative`` and ``data.targets`` — on small files made here, then a real
dataset re-written as one file per snapshot (the same graph, and it trains from the CLI)."""

from __future__ import annotations

import gzip
import json
import types
from pathlib import Path

import numpy as np
import pytest

from dygnex_jax.config import DataConfig, load_config
from dygnex_jax.data import datasets
from dygnex_jax.data.cumulative import SeenPairs, accumulate, target_mode
from dygnex_jax.data.graph import DynamicGraph
from dygnex_jax.data.snapshots import natural_key
from dygnex_jax.data.windows import WindowSet
from dygnex_jax.errors import UserError
from dygnex_jax.evaluation import average_precision, evaluate_link_windows, reciprocal_ranks
from dygnex_jax.runlog import header_line

REPO = Path(__file__).resolve().parents[1]
SMOKE = str(REPO / "configs" / "smoke.yaml")
DAY0 = 1072915200.0  # 2004-01-01T00:00:00Z


def rows(n: int = 100, t0: float = 0.0, step: float = 1.0) -> list[tuple[int, int, float]]:
    """n rows (u, v, t): distinct directed pairs, one per time step."""
    return [(i % 13, (i * 5 + 1) % 13, t0 + i * step) for i in range(n) if i % 13 != (i * 5 + 1) % 13]


def write_edges(path: Path, table) -> str:
    path.write_text("".join(" ".join(str(x) for x in r) + "\n" for r in table))
    return str(path)


def load(**kw) -> DynamicGraph:
    return datasets.load_dataset(DataConfig(**kw))


def edge_sets(graph: DynamicGraph) -> list[set]:
    """Every snapshot's pairs in the file's node ids."""
    ids = graph.node_ids
    return [{(int(ids[a]), int(ids[b])) for a, b in s} for s in graph.snapshots]


# --------------------------------------------------------------------------------- data.start / end


def test_a_range_keeps_exactly_its_rows_bucketed_from_its_start(tmp_path):
    table = rows(100)
    path = write_edges(tmp_path / "e.txt", table)
    flags = {"symmetric": False, "self_loops": True}
    g = load(dataset="edges", path=path, aggr_time=10, start="25", end="55", **flags)
    assert g.times.tolist() == [25.0, 35.0, 45.0]  # buckets from the start, not from the first row
    want = [{(u, v) for u, v, t in table if lo <= t < lo + 10} for lo in (25, 35, 45)]
    assert edge_sets(g) == want
    # an open end keeps every row from the start on; an open start every row before the end
    g = load(dataset="edges", path=path, start="90", **flags)  # one snapshot per distinct time
    assert set().union(*edge_sets(g)) == {(u, v) for u, v, t in table if t >= 90}
    g = load(dataset="edges", path=path, end="3", **flags)
    assert edge_sets(g) == [{(u, v)} for u, v, t in table if t < 3]


def test_iso_dates_stand_for_unix_seconds(tmp_path):
    table = rows(24, t0=DAY0, step=3600.0)  # hourly from 2004-01-01
    path = write_edges(tmp_path / "e.txt", table)
    flags = {"symmetric": False, "self_loops": True}
    g = load(dataset="edges", path=path, start="2004-01-01T05:00:00", end="2004-01-01T10:00", **flags)
    assert set().union(*edge_sets(g)) == {(u, v) for u, v, t in table if 5 <= (t - DAY0) / 3600 < 10}
    # an offset is honoured: 07:00+02:00 is 05:00 UTC
    g2 = load(dataset="edges", path=path, start="2004-01-01T07:00:00+02:00", end="2004-01-01T10:00", **flags)
    assert edge_sets(g2) == edge_sets(g)
    # YAML reads a bare date as a date and a number as a number: both are kept as text
    cfg = load_config(None, ["data.start=2004-01-01", "data.end=1072916000"]).data
    assert (cfg.start, cfg.end) == ("2004-01-01", "1072916000")
    (tmp_path / "c.yaml").write_text("data:\n  start: 2004-01-01 12:00:00\n  end: 1.5e+9\n")
    cfg = load_config(tmp_path / "c.yaml").data
    assert (cfg.start, cfg.end) == ("2004-01-01T12:00:00", "1500000000.0")
    (tmp_path / "c.yaml").write_text("data:\n  start: 2004-13-01\n")  # YAML cannot build that date
    with pytest.raises(UserError, match="c.yaml' is not valid YAML"):
        load_config(tmp_path / "c.yaml")


def test_empty_snapshots_in_the_range_are_kept_counted_and_warned(tmp_path):
    path = write_edges(tmp_path / "e.txt", rows(100, t0=100))  # rows at t = 100 .. 199
    g = load(dataset="edges", path=path, aggr_time=10, start="0", end="300")
    counts = g.edge_counts()
    assert len(counts) == 30 and (counts[:10] == 0).all() and (counts[10:20] > 0).all()
    assert (counts[20:] == 0).all()
    g4 = load(dataset="edges", path=path, num_snapshots=4, start="0", end="200")  # spans of the range
    assert g4.times.tolist() == [0, 50, 100, 150] and g4.edge_counts()[:2].tolist() == [0, 0]
    windows = types.SimpleNamespace(splits={"train": [0, 1], "val": [], "test": [2]})
    config = load_config(None, [])
    head = header_line(g, windows, 8, config, "all").splitlines()
    assert "30 snapshots (20 empty)," in head[0]
    assert len(head) == 2 and head[1].startswith("warning: 20 of 30 snapshots of edges are empty")
    assert "data.aggr_time (now 10 s)" in head[1] and "data.start / data.end" in head[1]
    half = load(dataset="edges", path=path, aggr_time=10, start="0")  # 10 of 20 empty: no warning
    assert header_line(half, windows, 8, config, "all").splitlines()[1:] == []


def test_a_range_selects_native_snapshots_by_their_time(tmp_path):
    folder = tmp_path / "snaps"
    folder.mkdir()
    for t in range(6):
        write_edges(folder / f"s{t}.txt", [(t, t + 1), (t + 1, t + 2)])
    g = load(dataset="snapshots", path=str(folder), start="2", end="5")  # no time column: the index
    assert g.num_snapshots == 3 and {(2, 3), (3, 2), (3, 4), (4, 3)} == edge_sets(g)[0]


@pytest.mark.parametrize(
    "start, end, needle",
    [
        ("yesterday", "", "data.start='yesterday' is neither a number"),
        ("", "2004-13-01", "data.end='2004-13-01' is neither a number"),
        ("nan", "", "is not a finite time"),
        ("2004-06-01", "2004-01-01", "data.end=2004-01-01 is not after data.start=2004-06-01"),
        ("5", "5", "data.end=5 is not after data.start=5"),
    ],
)
def test_bad_bounds_are_one_line_errors(start, end, needle):
    with pytest.raises(UserError) as err:
        load_config(None, [f"data.start={start}", f"data.end={end}"])
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_a_range_that_keeps_nothing_says_where_the_data_is(tmp_path):
    path = write_edges(tmp_path / "e.txt", rows(50, t0=100))
    with pytest.raises(UserError, match=r"keep no rows of .*e.txt': its times run 100 \.\. 149: choose"):
        load(dataset="edges", path=path, start="1000")
    with pytest.raises(UserError, match="an ISO date stands for Unix seconds; these times are not"):
        load(dataset="edges", path=path, start="2004-01-01")
    dated = write_edges(tmp_path / "d.txt", rows(50, t0=DAY0, step=60))
    with pytest.raises(UserError, match=r"\(2004-01-01 00:00 \.\. 2004-01-01 00:49 UTC\)"):
        load(dataset="edges", path=dated, end="2003-01-01")


# --------------------------------------------------------------------------------- data.dataset: snapshots


def test_snapshot_files_in_natural_order_plain_or_gzip_time_optional(tmp_path):
    folder = tmp_path / "snaps"
    folder.mkdir()
    write_edges(folder / "snap10.txt", [(10, 11)])
    (folder / "snap2.txt.gz").write_bytes(gzip.compress(b"# day two\n2 3\n3 4\n"))
    (folder / "snap1.csv").write_text("src,dst\n1,2\n")
    (folder / "snap3.txt").write_text("src dst\n% nothing that day\n")  # no rows: an empty snapshot
    (folder / ".hidden").write_text("not a snapshot\n")
    (folder / "sub").mkdir()
    assert sorted(["snap10", "snap2", "snap1"], key=natural_key) == ["snap1", "snap2", "snap10"]
    g = load(dataset="snapshots", path=str(folder), symmetric=False)
    assert [Path(f).name for f in g.info["files"]] == ["snap1.csv", "snap2.txt.gz", "snap3.txt", "snap10.txt"]
    assert edge_sets(g) == [{(1, 2)}, {(2, 3), (3, 4)}, set(), {(10, 11)}]
    assert g.times.tolist() == [0, 1, 2, 3] and g.weights is None  # no time column: the file's position
    glob = load(dataset="snapshots", path=str(folder / "snap*.txt*"), symmetric=False)
    assert edge_sets(glob) == [{(2, 3), (3, 4)}, set(), {(10, 11)}]


def test_snapshot_files_with_time_and_weight_columns(tmp_path):
    folder = tmp_path / "snaps"
    folder.mkdir()
    write_edges(folder / "a1.txt", [(1, 2, 5, 100), (1, 2, -1, 90), (2, 3, 1, 95)])
    write_edges(folder / "a2.txt", [])
    write_edges(folder / "a3.txt", [(1, 3, -2, 300)])
    g = load(dataset="snapshots", path=str(folder), symmetric=False)
    assert g.times.tolist() == [90, 90, 300]  # the earliest row; an empty snapshot repeats the last
    first = dict(zip(map(tuple, g.node_ids[g.snapshots[0]].tolist()), g.weights[0].tolist()))
    assert first == {(1, 2): 5.0, (2, 3): 1.0}  # the last row in time order, as for edges
    assert g.votes[0].tolist() == [0, 1] and g.votes[2].tolist() == [-1]


@pytest.mark.parametrize(
    "files, path, needle",
    [
        ({}, "{dir}", "holds no files: put one edge file per snapshot in it"),
        ({"a.txt": "1 2\n"}, "{dir}/*.csv", "matches no files"),
        ({}, "{dir}/nope", "does not exist: give a folder of snapshot files or a glob"),
        ({"s1.txt": "1 2\n", "s2.txt": "1 2\n1 2.5\n"}, "{dir}", "s2.txt' line 2: target node id '2.5'"),
        ({"s1.txt": "1 2\n", "s2.txt": "1 2 10\n"}, "{dir}", "s2.txt' has 3 columns but"),
        ({"s1.txt": "1 2\n", "s2.gz": "1 2\n"}, "{dir}", "s2.gz' is binary data"),  # not gzip, no text
        ({"s1.txt": "# none\n", "s2.txt": ""}, "{dir}", "have no data rows"),
    ],
)
def test_snapshot_file_errors_name_the_folder_or_file(tmp_path, files, path, needle):
    folder = tmp_path / "snaps"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_bytes(b"\x00\x01" if name.endswith(".gz") else text.encode())
    with pytest.raises(UserError) as err:
        load(dataset="snapshots", path=path.format(dir=folder))
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_snapshot_files_are_not_rebucketed(tmp_path):
    (tmp_path / "s1.txt").write_text("1 2\n")
    with pytest.raises(UserError, match="one snapshot per file: data.aggr_time / data.num_snapshots"):
        load(dataset="snapshots", path=str(tmp_path), aggr_time=10)


# --------------------------------------------------------------------------------- data.cumulative


def test_cumulative_snapshot_is_the_union_so_far_held_once():
    from conftest import make_toy_graph

    g = make_toy_graph(num_nodes=40, num_snapshots=8)
    acc = accumulate(g)
    union = set()
    for t, s in enumerate(g.snapshots):
        union |= set(map(tuple, s.tolist()))
        got = list(map(tuple, acc.snapshots[t].tolist()))
        assert len(got) == len(set(got)) and set(got) == union
    # every snapshot is a prefix of one read-only array: memory O(distinct pairs), not O(T x pairs)
    base = acc.snapshots[-1]
    assert all(np.shares_memory(s, base) and len(s) <= len(base) for s in acc.snapshots)
    assert not base.flags.writeable and acc.info["cumulative"] and acc.num_nodes == g.num_nodes


def test_cumulative_weights_are_the_latest_and_votes_summed():
    snaps = [np.array([[0, 1]], np.int32), np.array([[0, 1], [1, 2]], np.int32)]
    g = DynamicGraph("w", 3, snaps, weights=[np.array([1.0], np.float32), np.array([-1.0, 2.0], np.float32)])
    g.votes = [np.array([1], np.int32), np.array([-2, 1], np.int32)]
    acc = accumulate(g)
    assert acc.snapshots[1].tolist() == [[0, 1], [1, 2]]
    assert acc.weights[1].tolist() == [-1.0, 2.0] and acc.votes[1].tolist() == [-1, 1]
    assert acc.weights[0].tolist() == [1.0] and acc.votes[0].tolist() == [1]


def test_cumulative_through_the_loader_counts_rows_before_the_last_snapshots(tmp_path):
    table = rows(60)
    path = write_edges(tmp_path / "e.txt", table)
    g = load(dataset="edges", path=path, aggr_time=10, cumulative=True, last_snapshots=2, symmetric=False)
    assert g.num_snapshots == 2
    assert edge_sets(g)[0] == {(u, v) for u, v, t in table if t < 50}  # the trimmed snapshots count
    assert edge_sets(g)[1] == {(u, v) for u, v, _ in table}


# --------------------------------------------------------------------------------- data.targets


def test_targets_auto_is_new_on_a_cumulative_link_series():
    assert target_mode(DataConfig()) == "all" and target_mode(DataConfig(cumulative=True)) == "new"
    assert target_mode(DataConfig(targets="new")) == "new"
    assert target_mode(DataConfig(cumulative=True, targets="all")) == "all"
    assert target_mode(DataConfig(cumulative=True, task="edge_cls")) == "all"
    with pytest.raises(UserError, match="data.targets=new applies to data.task=link, not 'edge_cls'"):
        load_config(None, ["data.targets=new", "data.task=edge_cls"])


def _codes(s: np.ndarray, n: int) -> set:
    return set((s[:, 0].astype(np.int64) * n + s[:, 1]).tolist())


@pytest.mark.parametrize("cumulative", [False, True])
def test_new_targets_are_the_pairs_never_seen_and_seen_pairs_are_no_negatives(cumulative):
    from conftest import make_toy_graph

    g = make_toy_graph(num_nodes=40, num_snapshots=10)
    g = accumulate(g) if cumulative else g
    n = g.num_nodes
    cfg = DataConfig(window=2, targets="new", neg_mult=5, train_frac=0.5, val_frac=0.2)
    ws, every = WindowSet(g, cfg), WindowSet(g, DataConfig(window=2, neg_mult=5))
    seen = SeenPairs(g)
    for k, t in enumerate(ws.targets):
        before = set().union(*(_codes(s, n) for s in g.snapshots[:t]))
        assert set(ws.get(k).positive_codes.tolist()) == _codes(g.snapshots[t], n) - before
        assert set(every.get(k).positive_codes.tolist()) == _codes(g.snapshots[t], n)
        assert set(ws.excluded_codes(k).tolist()) == before == set(seen.codes_before(t).tolist())
        pairs, labels = ws.global_training_pairs(k, 5, seed=0, epoch=1)
        neg = set((pairs[labels == 0, 0].astype(np.int64) * n + pairs[labels == 0, 1]).tolist())
        assert neg and not neg & (before | _codes(g.snapshots[t], n))
    pairs_cost = np.concatenate([ws.costs(split, 0)[:, 2] for split in ("train", "val", "test")])
    assert pairs_cost.tolist() == [len(ws.get(k).positives) for k in range(len(ws))]  # what is scored
    assert every.excluded_codes(0) is None


@pytest.mark.parametrize("cumulative", [False, True])
def test_new_targets_evaluate_on_unseen_pairs_only_exactly(cumulative):
    """MAP / MRR with all candidates (the compressed computation) equal the brute force over every
    global pair that is not a self-pair and has no edge before the target (seen pairs of nodes
    inactive in the window fall on the background node); sampled candidates skip the seen pairs too."""
    rng = np.random.default_rng(0)
    snaps = []
    for _ in range(8):  # each snapshot among 8 random nodes of 30: nodes come and go
        e = rng.choice(30, size=8, replace=False)[rng.integers(0, 8, size=(20, 2))]
        snaps.append(np.unique(e[e[:, 0] != e[:, 1]], axis=0).astype(np.int32))
    g = DynamicGraph("toy", 30, snaps)
    g = accumulate(g) if cumulative else g
    n = g.num_nodes
    ws = WindowSet(g, DataConfig(window=2, targets="new", train_frac=0.5, val_frac=0.2))
    eval_cfg = types.SimpleNamespace(seed=1, neg_per_source=200)
    background = 0  # seen pairs from nodes inactive in the window: excluded from the background node
    for k in range(len(ws)):
        win = ws.get(k)
        emb = rng.normal(size=(win.num_local, 4))
        got = evaluate_link_windows(ws, {k: emb}, lambda e: e @ e.T, "all", eval_cfg, {})
        local = win.to_local(np.arange(n))
        full = (emb @ emb.T)[local[:, None], local[None, :]]
        label = np.zeros((n, n), bool)
        label.ravel()[win.positive_codes] = True
        cand = ~np.eye(n, dtype=bool)
        cand.ravel()[ws.excluded_codes(k)] = False
        assert got["map"] == pytest.approx(average_precision(full[cand], label[cand]))
        rows = np.unique(win.positive_codes // n)
        mrr = np.mean([reciprocal_ranks(full[u, cand[u]], label[u, cand[u]]).mean() for u in rows])
        assert got["mrr"] == pytest.approx(mrr)
        background += int(np.sum(win.to_local(ws.excluded_codes(k) // n) == len(win.nodes)))
        cache: dict = {}
        evaluate_link_windows(ws, {k: emb}, lambda e: e @ e.T, "sampled", eval_cfg, cache)
        src, dst, labels = cache[k]
        sampled_neg = set((src[labels == 0] * n + dst[labels == 0]).tolist())
        assert sampled_neg and not sampled_neg & set(ws.excluded_codes(k).tolist())
    assert background > 0 or cumulative


# --------------------------------------------------------------------------------- a real dataset


AGGR, LO, HI = 1_200_000.0, 40, 70  # Bitcoin-OTC's snapshots 40..69 (EvolveGCN's 1,200,000 s buckets)


def bitcoin_as_files(data_root: Path, folder: Path) -> tuple[float, float]:
    """Bitcoin-OTC's snapshots LO..HI-1 written as one file per snapshot (src dst rating time; every
    third gzip; an empty bucket an empty file) -> the (start, end) times of that range."""
    from dygnex_jax.data.edge_file import read_edge_stream

    src, dst, rating, time = read_edge_stream(data_root / "bitcoin_otc" / "soc-sign-bitcoinotc.csv.gz")
    bucket = np.floor((time - time.min()) / AGGR).astype(int)
    folder.mkdir()
    for i, b in enumerate(range(LO, HI)):
        mine = bucket == b
        text = "src dst rating time\n" + "".join(
            f"{u} {v} {w:g} {t:.0f}\n" for u, v, w, t in zip(src[mine], dst[mine], rating[mine], time[mine])
        )
        name = folder / f"snap{i}.txt"
        if i % 3 == 0:
            Path(f"{name}.gz").write_bytes(gzip.compress(text.encode()))
        else:
            name.write_text(text)
    return time.min() + LO * AGGR, time.min() + HI * AGGR


def test_bitcoin_rewritten_as_snapshot_files_is_the_same_graph(data_root, tmp_path):
    """The files read back (in natural order: snap2 before snap10) as the same graph as the stream cut
    to their range by data.start / data.end, and as the original's snapshots LO..HI-1."""
    start, end = bitcoin_as_files(data_root, tmp_path / "otc")
    cut = load(dataset="bitcoin_otc", root=str(data_root), start=f"{start:.0f}", end=f"{end:.0f}")
    files = load(dataset="snapshots", path=str(tmp_path / "otc"))
    assert files.num_snapshots == cut.num_snapshots == HI - LO
    assert np.array_equal(files.node_ids, cut.node_ids)
    for name in ("snapshots", "weights", "votes"):
        assert all(np.array_equal(a, b) for a, b in zip(getattr(files, name), getattr(cut, name))), name
    whole = load(dataset="bitcoin_otc", root=str(data_root))
    assert edge_sets(files) == edge_sets(whole)[LO:HI]


@pytest.mark.slow  # ~20 s on 2 cores, mostly compiling
def test_bitcoin_snapshot_files_train_from_the_cli(data_root, tmp_path, capsys):
    from dygnex_jax.__main__ import main

    bitcoin_as_files(data_root, tmp_path / "otc")
    out = tmp_path / "run"
    argv = ["train", "--out", str(out), "--config", SMOKE, "data.dataset=snapshots"]
    assert main([*argv, f"data.path={tmp_path / 'otc'}", "train.epochs=1"]) == 0
    err = capsys.readouterr().err
    assert "snapshots: " in err and " nodes, 30 snapshots, windows train/val/test 18/3/5" in err
    assert (out / "summary.json").is_file()


def test_a_cumulative_series_trains_on_new_links_from_the_cli(tmp_path, capsys):
    """An edges file read as a cumulative series: the header says so, and a run trains and evaluates
    on the new links (data.targets: auto), its sampled candidates scored alone."""
    from dygnex_jax.__main__ import main

    rng = np.random.default_rng(0)
    table = [(int(u), int(v), i) for i, (u, v) in enumerate(rng.integers(0, 60, size=(900, 2))) if u != v]
    path = write_edges(tmp_path / "e.txt", table)
    out = tmp_path / "run"
    argv = ["train", "--out", str(out), "--config", SMOKE, "data.dataset=edges", f"data.path={path}"]
    options = ["data.num_snapshots=20", "data.cumulative=true", "eval.candidates=sampled", "train.epochs=1"]
    assert main([*argv, *options]) == 0
    err = capsys.readouterr().err
    assert "20 cumulative snapshots, windows train/val/test 11/2/3" in err and "task link, targets new" in err
    final = json.loads((out / "summary.json").read_text())["final"]  # sampled: candidates scored alone
    assert 0 < final["val_map"] <= 1 and 0 < final["test_mrr"] <= 1


def test_sampled_candidates_are_scored_alone_as_the_dense_matrix_scores_them():
    """A cumulative series makes every node active in every window: sampled evaluation scores its
    candidates alone (models.head.pair_scores), the same scores as the [L, L] matrix it no longer
    builds, and the same metrics."""
    import jax

    from dygnex_jax.models.head import dense_pair_scores, pair_scores

    rng = np.random.default_rng(0)
    hidden, width, local = 16, 8, 300
    head = {
        "hidden": {"kernel": rng.normal(size=(2 * width, hidden)), "bias": rng.normal(size=hidden)},
        "out": {"kernel": rng.normal(size=(hidden, 2)), "bias": rng.normal(size=2)},
    }
    head = jax.tree.map(lambda x: np.asarray(x, np.float32), head)
    h = rng.normal(size=(local, width)).astype(np.float32)
    src, dst = rng.integers(0, local, size=(2, 20_000))
    dense_fn, pair_fn = jax.jit(dense_pair_scores), jax.jit(pair_scores)
    dense = np.asarray(dense_fn(head, h, h))
    np.testing.assert_allclose(np.asarray(pair_fn(head, h, src, dst)), dense[src, dst], rtol=1e-5, atol=1e-5)

    g = accumulate(
        DynamicGraph("toy", 40, [np.unique(rng.integers(0, 40, (30, 2)), axis=0) for _ in range(6)])
    )
    ws = WindowSet(g, DataConfig(window=2, train_frac=0.5, val_frac=0.2))
    cfg = types.SimpleNamespace(seed=1, neg_per_source=50)
    emb = {k: rng.normal(size=(ws.get(k).num_local, width)).astype(np.float32) for k in range(len(ws))}

    def dense_of(e):
        return np.asarray(dense_fn(head, e, e))

    def alone(e, s, d):
        return np.asarray(pair_fn(head, e, s, d))

    want = evaluate_link_windows(ws, emb, dense_of, "sampled", cfg, {})
    got = evaluate_link_windows(ws, emb, lambda e: pytest.fail("no [L, L] matrix"), "sampled", cfg, {}, alone)
    assert got == pytest.approx(want)
