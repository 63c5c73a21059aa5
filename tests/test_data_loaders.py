"""Loaders, synthetic generator, named datasets and the as-733 conversion: exact hand-computed snapshots,
error messages, and the facts the real datasets' SOURCE.md files state."""

from __future__ import annotations

import dataclasses
import datetime
import gzip
import io
import tarfile
import time
import urllib.error

import numpy as np
import pytest

from dygnex_jax.config import DataConfig
from dygnex_jax.data import datasets, download, edge_file, loaders, synthetic
from dygnex_jax.errors import UserError


def write(path, text: str, gz: bool = False):
    data = text.encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def snaps_equal(graph, expected: list[list[list[int]]]) -> None:
    assert graph.num_snapshots == len(expected)
    for got, want in zip(graph.snapshots, expected, strict=True):
        assert got.dtype == np.int32 and got.shape[1:] == (2,)
        np.testing.assert_array_equal(got, np.array(want, dtype=np.int32).reshape(-1, 2))


def check_invariants(graph, symmetric: bool = True, self_loops: bool = False) -> None:
    """Unique, lexicographically sorted pairs in range; symmetric / self-loop rules hold."""
    n = graph.num_nodes
    for s in graph.snapshots:
        code = s[:, 0].astype(np.int64) * n + s[:, 1]
        assert np.all(np.diff(code) > 0)
        assert s.size == 0 or (s.min() >= 0 and s.max() < n)
        if not self_loops:
            assert not np.any(s[:, 0] == s[:, 1])
        if symmetric:
            np.testing.assert_array_equal(np.sort(code), np.sort(s[:, 1].astype(np.int64) * n + s[:, 0]))


STREAM = """# a comment
% another comment
src dst time
30 10 250
10 20 100

10 30 120
20 10 205
10 10 110
"""


def stream_graph(tmp_path, gz=False, **kw):
    path = write(tmp_path / "edges.txt", STREAM, gz)
    src, dst, w, t = edge_file.read_edge_stream(path)
    return loaders.edge_stream_to_graph(src, dst, w, t, **kw)


# ------------------------------------------------------------------------------------------ streams


@pytest.mark.parametrize("gz", [False, True])
def test_stream_aggr_time_directed_and_symmetric(tmp_path, gz):
    g = stream_graph(tmp_path, gz, aggr_time=100, symmetric=False)
    np.testing.assert_array_equal(g.node_ids, [10, 20, 30])
    assert g.num_nodes == 3 and g.weights is None
    snaps_equal(g, [[[0, 1], [0, 2]], [[1, 0], [2, 0]]])
    np.testing.assert_array_equal(g.times, [100.0, 200.0])
    assert g.info["raw_rows"] == 5 and g.info["aggr_time"] == 100
    both = [[0, 1], [0, 2], [1, 0], [2, 0]]
    snaps_equal(stream_graph(tmp_path, gz, aggr_time=100), [both, both])
    g = stream_graph(tmp_path, gz, aggr_time=100, self_loops=True)
    snaps_equal(g, [[[0, 0], *both], both])
    check_invariants(g, self_loops=True)


def test_stream_num_snapshots_and_distinct_times(tmp_path):
    g = stream_graph(tmp_path, num_snapshots=3, symmetric=False)  # width 50 over [100, 250]
    snaps_equal(g, [[[0, 1], [0, 2]], [], [[1, 0], [2, 0]]])
    assert g.snapshots[1].shape == (0, 2)
    np.testing.assert_array_equal(g.times, [100.0, 150.0, 200.0])
    g = stream_graph(tmp_path, symmetric=False)  # one snapshot per distinct time
    snaps_equal(g, [[[0, 1]], [], [[0, 2]], [[1, 0]], [[2, 0]]])
    np.testing.assert_array_equal(g.times, [100, 110, 120, 205, 250])


def test_comma_gzip_weights_last_in_time(tmp_path):
    text = "1,2,7,20\n1,2,5,10\n2,1,-3,30\n3,1,4,5\n"  # file order != time order for pair (1,2)
    path = write(tmp_path / "w.csv.bin", text, gz=True)  # gzip detected by content, not name
    src, dst, w, t = edge_file.read_edge_stream(path)
    np.testing.assert_array_equal(w, [7, 5, -3, 4])
    g = loaders.edge_stream_to_graph(src, dst, w, t, aggr_time=100, symmetric=False)
    snaps_equal(g, [[[0, 1], [1, 0], [2, 0]]])
    np.testing.assert_array_equal(g.weights[0], [7, -3, 4])
    g = loaders.edge_stream_to_graph(src, dst, w, t, aggr_time=100, symmetric=True)
    snaps_equal(g, [[[0, 1], [0, 2], [1, 0], [2, 0]]])
    np.testing.assert_array_equal(g.weights[0], [-3, 4, -3, 4])  # {1,2}: the t=30 row is last
    assert g.weights[0].dtype == np.float32


def test_remap_counts_ids_of_dropped_self_loops(tmp_path):
    path = write(tmp_path / "e.txt", "1000\t5 3\n999 999 4\n77 5 1\n")
    g = loaders.edge_stream_to_graph(*edge_file.read_edge_stream(path), aggr_time=10, symmetric=False)
    np.testing.assert_array_equal(g.node_ids, [5, 77, 999, 1000])
    snaps_equal(g, [[[1, 0], [3, 0]]])
    assert g.info["self_loop_rows"] == 1


def test_unsorted_equals_sorted(tmp_path):
    rng = np.random.default_rng(3)
    rows = np.column_stack([rng.integers(0, 40, 500), rng.integers(0, 40, 500), rng.integers(0, 10_000, 500)])
    lines = [" ".join(map(str, r)) for r in rows]
    a = write(tmp_path / "a.txt", "\n".join(lines))
    b = write(tmp_path / "b.txt", "\n".join(lines[i] for i in np.argsort(rows[:, 2], kind="stable")))
    ga, gb = (loaders.edge_stream_to_graph(*edge_file.read_edge_stream(p), aggr_time=700) for p in (a, b))
    assert ga.num_snapshots == gb.num_snapshots == 15
    for x, y in zip(ga.snapshots, gb.snapshots, strict=True):
        np.testing.assert_array_equal(x, y)
    check_invariants(ga)
    # every kept pair is a row of its bucket, and vice versa
    for t, s in enumerate(ga.snapshots):
        sel = rows[(rows[:, 2] - rows[:, 2].min()) // 700 == t]
        sel = sel[sel[:, 0] != sel[:, 1]]
        want = {(int(u), int(v)) for u, v in sel[:, :2]} | {(int(v), int(u)) for u, v in sel[:, :2]}
        got = {(int(ga.node_ids[u]), int(ga.node_ids[v])) for u, v in s}
        assert got == want


@pytest.mark.parametrize(
    "text, words",
    [
        ("# only comments\n\n", ["empty"]),
        ("src dst time\n", ["empty"]),
        ("1 2 3\n1 2 3\n1 2 3 4 5\n", ["line 3", "column"]),
        ("# c\n1 2\n", ["line 2", "columns, expected 3 or 4"]),
        ("1 2 3\na 2 5\n", ["line 2", "'a'", "not an integer"]),
        ("1 2 3\n\n1.5 2 5\n", ["line 3", "'1.5'", "not an integer"]),
        ("1 2 3\n4 5 abc\n", ["line 2", "time", "'abc'", "not a number"]),
        ("1 2 x 3\n", ["line 1", "weight", "not a number"]),
        ("1 2 3\n4 5 nan\n", ["line 2", "finite"]),
    ],
)
def test_stream_errors_name_problem_and_line(tmp_path, text, words):
    path = write(tmp_path / "bad.txt", text)
    with pytest.raises(UserError) as e:
        edge_file.read_edge_stream(path)
    msg = str(e.value)
    assert "bad.txt" in msg and "\n" not in msg
    for w in words:
        assert w in msg


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        edge_file.read_edge_stream(tmp_path / "nope.txt")
    with pytest.raises(UserError, match="does not exist"):
        loaders.load_edge_intervals(tmp_path / "nope.csv")


# ------------------------------------------------------------------------------------------ intervals

INTERVALS = "src,dst,first_snapshot,last_snapshot\n1,2,0,2\n2,3,1,1\n3,3,0,0\n2,1,2,3\n"


def test_intervals_exact(tmp_path):
    path = write(tmp_path / "iv.csv.gz", INTERVALS, gz=True)
    und = [[0, 1], [1, 0]]
    g = loaders.load_edge_intervals(path)
    snaps_equal(g, [und, [[0, 1], [1, 0], [1, 2], [2, 1]], und, und])
    np.testing.assert_array_equal(g.times, [0, 1, 2, 3])
    g = loaders.load_edge_intervals(path, self_loops=True)
    snaps_equal(g, [[[0, 1], [1, 0], [2, 2]], [[0, 1], [1, 0], [1, 2], [2, 1]], und, und])
    check_invariants(g, self_loops=True)
    g = loaders.load_edge_intervals(path, symmetric=False)
    snaps_equal(g, [[[0, 1]], [[0, 1], [1, 2]], und, [[1, 0]]])
    dates = write(tmp_path / "d.csv", "snapshot,date\n0,19971108\n1,19971109\n3,19980101\n2,19971231\n")
    g = loaders.load_edge_intervals(path, dates_path=dates)
    epoch = [datetime.datetime(*d, tzinfo=datetime.UTC).timestamp() for d in [(1997, 11, 8), (1997, 11, 9)]]
    np.testing.assert_array_equal(g.times[:2], epoch)
    assert g.times[3] == datetime.datetime(1998, 1, 1, tzinfo=datetime.UTC).timestamp()


@pytest.mark.parametrize(
    "text, words",
    [
        ("src,dst,first_snapshot,last_snapshot\n1,2,0,2\n1,3,3,1\n", ["line 3", "first_snapshot 3 > last"]),
        ("1,2,0,2\n1,2,0\n", ["line 2", "column"]),
        ("1,2,0,2\n1,b,0,1\n", ["line 2", "'b'", "not an integer"]),
        ("1,2,0,2\n1,2,0,x\n", ["line 2", "last_snapshot", "not an integer"]),
    ],
)
def test_interval_errors(tmp_path, text, words):
    with pytest.raises(UserError) as e:
        loaders.load_edge_intervals(write(tmp_path / "iv.csv", text))
    for w in words:
        assert w in str(e.value)


def test_snapshot_column_file(tmp_path):
    text = "snapshot,u,v,timestamp\n0,5,6,100\n0,5,6,90\n2,6,7,300\n2,7,7,310\n"
    g = loaders.load_snapshot_edges(write(tmp_path / "s.csv", text))
    snaps_equal(g, [[[0, 1], [1, 0]], [], [[1, 2], [2, 1]]])
    np.testing.assert_array_equal(g.times, [90, 90, 300])
    assert g.num_nodes == 3


# ------------------------------------------------------------------------------------------ datasets


def test_load_dataset_edges_and_errors(tmp_path, monkeypatch):
    path = write(tmp_path / "edges.txt", STREAM)
    g = datasets.load_dataset(DataConfig(dataset="edges", path=str(path), aggr_time=100))
    assert g.num_snapshots == 2 and g.info["file"] == str(path)
    g = datasets.load_dataset(DataConfig(dataset="edges", path=str(path), num_snapshots=3, last_snapshots=2))
    assert g.num_snapshots == 2 and g.snapshots[0].shape == (0, 2)
    with pytest.raises(UserError, match="at least 2"):
        datasets.load_dataset(DataConfig(dataset="edges", path=str(path), aggr_time=1000))
    with pytest.raises(UserError, match="no edges"):  # only a self-loop row in one of the two buckets
        datasets.load_dataset(
            DataConfig(dataset="edges", path=str(write(tmp_path / "l.txt", "1 1 0\n2 2 5\n")))
        )
    with pytest.raises(UserError) as e:
        datasets.load_dataset(DataConfig(dataset="nope"))
    assert (
        "unknown dataset 'nope'" in str(e.value) and "bitcoin_otc" in str(e.value) and "as733" in str(e.value)
    )
    with pytest.raises(UserError, match="data.path"):
        datasets.load_dataset(DataConfig(dataset="edges"))
    g = datasets.load_dataset(
        DataConfig(dataset="intervals", path=str(write(tmp_path / "iv.csv", INTERVALS)))
    )
    assert g.num_snapshots == 4


def test_resolve_root_and_missing_named_file(tmp_path, monkeypatch):
    assert datasets.resolve_root(str(tmp_path)) == tmp_path
    with pytest.raises(UserError) as e:
        datasets.resolve_root(str(tmp_path / "missing"))
    assert "does not exist" in str(e.value) and "data.root" in str(e.value) and "download" in str(e.value)
    monkeypatch.setenv("DYGNEX_DATA", str(tmp_path))
    assert datasets.resolve_root("") == tmp_path
    with pytest.raises(UserError) as e:
        datasets.load_dataset(DataConfig(dataset="bitcoin_otc"))
    msg = str(e.value)
    assert "soc-sign-bitcoinotc.csv.gz" in msg and "download bitcoin_otc" in msg


def test_real_bitcoin_otc(data_root):
    g = datasets.load_dataset(DataConfig(dataset="bitcoin_otc", root=str(data_root)))
    assert (g.info["raw_rows"], g.num_nodes, g.num_snapshots) == (35_592, 5_881, 138)
    assert g.info["aggr_time"] == 1_200_000
    check_invariants(g)
    w = np.concatenate(g.weights)
    assert w.min() >= -10 and w.max() <= 10
    # directed and no duplicate pairs in the source: every row is one directed edge of its snapshot
    g = datasets.load_dataset(DataConfig(dataset="bitcoin_otc", root=str(data_root), symmetric=False))
    assert int(g.edge_counts().sum()) == 35_592


def test_real_bitcoin_alpha_and_uci(data_root):
    g = datasets.load_dataset(DataConfig(dataset="bitcoin_alpha", root=str(data_root)))
    assert (g.info["raw_rows"], g.num_nodes, g.num_snapshots) == (24_186, 3_783, 137)
    g = datasets.load_dataset(DataConfig(dataset="uci_collegemsg", root=str(data_root), symmetric=False))
    assert (g.info["raw_rows"], g.num_nodes, g.num_snapshots) == (59_835, 1_899, 89)
    check_invariants(g, symmetric=False)
    assert g.weights is None


def test_real_as733(data_root):
    g = datasets.load_dataset(
        DataConfig(dataset="as733", root=str(data_root), last_snapshots=0, self_loops=True)
    )
    assert (g.num_snapshots, g.num_nodes) == (733, 7_716)
    undirected = np.array([np.count_nonzero(s[:, 0] <= s[:, 1]) for s in g.snapshots])
    assert (undirected.min(), undirected.max(), undirected.sum()) == (248, 13_895, 6_260_128)
    nodes = np.array([1 + np.count_nonzero(np.diff(s[:, 0])) for s in g.snapshots])  # sources are sorted
    assert (nodes.min(), nodes.max()) == (103, 6_474)
    assert g.times[0] == datetime.datetime(1997, 11, 8, tzinfo=datetime.UTC).timestamp()
    assert g.times[-1] == datetime.datetime(2000, 1, 2, tzinfo=datetime.UTC).timestamp()
    check_invariants(g.select(700, 733), self_loops=True)
    last = datasets.load_dataset(DataConfig(dataset="as733", root=str(data_root)))  # default: last 100
    assert last.num_snapshots == 100
    np.testing.assert_array_equal(last.times, g.times[-100:])
    for a, b in zip(last.snapshots[-3:], g.snapshots[-3:], strict=True):
        np.testing.assert_array_equal(a, b[b[:, 0] != b[:, 1]])
    with pytest.raises(UserError, match="native snapshots"):
        datasets.load_dataset(DataConfig(dataset="as733", root=str(data_root), aggr_time=86400))


def test_real_enron(data_root):
    g = datasets.load_dataset(DataConfig(dataset="enron_dysat", root=str(data_root)))
    assert g.num_snapshots == 16 and g.num_nodes == 143
    assert np.all(g.edge_counts() > 0) and np.all(np.diff(g.times) > 0)
    check_invariants(g)
    g = datasets.load_dataset(DataConfig(dataset="enron_dysat", root=str(data_root), aggr_time=30 * 86400))
    assert g.num_snapshots == 44 and g.info["raw_rows"] == 22_784


# ------------------------------------------------------------------------------------------ synthetic


def test_synthetic_deterministic_skewed_and_fast():
    cfg = DataConfig()
    start = time.perf_counter()
    g = synthetic.generate(cfg)
    assert time.perf_counter() - start < 0.5
    assert (g.name, g.num_nodes, g.num_snapshots) == ("synthetic", 600, 48)
    check_invariants(g)
    same = synthetic.generate(cfg)
    assert all(np.array_equal(a, b) for a, b in zip(g.snapshots, same.snapshots, strict=True))
    other = synthetic.generate(dataclasses.replace(cfg, syn_seed=1))
    assert not all(np.array_equal(a, b) for a, b in zip(g.snapshots, other.snapshots, strict=True))
    e = g.edge_counts()
    assert e.max() / e.min() > 20 and abs(e.mean() / 2 - cfg.syn_edges) < 0.1 * cfg.syn_edges
    nodes = np.array([len(np.unique(s)) for s in g.snapshots])
    assert nodes.max() > 3 * nodes.min() and np.corrcoef(nodes, e)[0, 1] > 0.5
    flat = synthetic.generate(dataclasses.replace(cfg, syn_skew=0.0)).edge_counts()
    assert flat.max() / flat.min() < 1.05
    assert datasets.load_dataset(cfg).num_snapshots == 48
    with pytest.raises(UserError, match="syn_nodes"):
        synthetic.generate(dataclasses.replace(cfg, syn_nodes=5))


def test_synthetic_persistence_and_communities():
    def overlap(graph):
        sets = [set(map(tuple, s.tolist())) for s in graph.snapshots]
        return np.mean([len(a & b) / len(b) for a, b in zip(sets[:-1], sets[1:], strict=True)])

    cfg = DataConfig(syn_skew=0.0, symmetric=False)
    persist, fresh = synthetic.generate(cfg), synthetic.generate(dataclasses.replace(cfg, syn_persist=0.0))
    assert overlap(persist) > overlap(fresh) + 0.3
    # a fraction ~ syn_p_in of edges join nodes of one community: same-block pairs are over-represented
    s = np.concatenate(fresh.snapshots)
    g2 = synthetic.generate(dataclasses.replace(cfg, syn_p_in=0.0, syn_persist=0.0))
    s2 = np.concatenate(g2.snapshots)
    adj = np.zeros((600, 600))
    np.add.at(adj, (s[:, 0], s[:, 1]), 1)
    adj2 = np.zeros((600, 600))
    np.add.at(adj2, (s2[:, 0], s2[:, 1]), 1)
    # clustered graph: top eigenvalues dominate much more than for the p_in=0 one
    top = np.sort(np.abs(np.linalg.eigvalsh(adj + adj.T)))[-6:].sum() / (adj.sum() + 1)
    top2 = np.sort(np.abs(np.linalg.eigvalsh(adj2 + adj2.T)))[-6:].sum() / (adj2.sum() + 1)
    assert top > 1.5 * top2


# ------------------------------------------------------------------------------------------ download

RAW = {  # daily files as SNAP stores them: both directions, comments, a self-loop
    "19971108": [(1, 2), (2, 1), (2, 3), (3, 2), (4, 4)],
    "19971109": [(1, 2), (2, 1)],
    "19971111": [(2, 3), (3, 2), (1, 2), (2, 1), (4, 4)],
    "19971112": [(3, 5), (5, 3)],
}


def make_tarball(path):
    with tarfile.open(path, "w:gz") as tar:
        for date, pairs in RAW.items():
            body = f"# Undirected graph: as{date}.txt\n# FromNodeId\tToNodeId\n"
            body += "".join(f"{a}\t{b}\n" for a, b in pairs)
            data = body.encode()
            info = tarfile.TarInfo(f"as{date}.txt")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_as733_tarball_round_trip(tmp_path):
    out = download.build_as733_intervals(make_tarball(tmp_path / "as-733.tar.gz"), tmp_path / "as733")
    assert out == tmp_path / "as733" / "as733_edge_intervals.csv.gz"
    lines = gzip.decompress(out.read_bytes()).decode().splitlines()
    assert lines == [
        "src,dst,first_snapshot,last_snapshot",
        "1,2,0,2",
        "2,3,0,0",
        "2,3,2,2",
        "3,5,3,3",
        "4,4,0,0",
        "4,4,2,2",
    ]
    assert (tmp_path / "as733" / "as733_dates.csv").read_text().splitlines() == [
        "snapshot,date",
        "0,19971108",
        "1,19971109",
        "2,19971111",
        "3,19971112",
    ]
    g = loaders.load_edge_intervals(out, self_loops=True, dates_path=tmp_path / "as733" / "as733_dates.csv")
    assert g.num_snapshots == 4
    for s, pairs in zip(g.snapshots, RAW.values(), strict=True):
        assert {(int(g.node_ids[a]), int(g.node_ids[b])) for a, b in s} == set(pairs)
    assert not list((tmp_path / "as733").glob("*.part"))


def test_download_errors_and_existing(tmp_path, monkeypatch):
    with pytest.raises(UserError, match="no public single-file source"):
        download.download("enron_dysat", tmp_path)
    with pytest.raises(UserError, match="unknown dataset"):
        download.download("nope", tmp_path)
    (tmp_path / "bitcoin_otc").mkdir()
    existing = write(tmp_path / "bitcoin_otc" / "soc-sign-bitcoinotc.csv.gz", "x")
    assert download.download("bitcoin_otc", tmp_path) == existing

    def offline(*args, **kwargs):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(download.urllib.request, "urlopen", offline)
    with pytest.raises(UserError) as e:
        download.download("uci_collegemsg", tmp_path)
    assert "https://snap.stanford.edu/data/CollegeMsg.txt.gz" in str(e.value)
    assert list((tmp_path / "uci_collegemsg").iterdir()) == []  # no half-written file left


def test_download_as733_offline(tmp_path, monkeypatch):
    blob = make_tarball(tmp_path / "src.tar.gz").read_bytes()
    urls = []

    def serve(url, timeout=None):
        urls.append(url)
        return io.BytesIO(blob)

    monkeypatch.setattr(download.urllib.request, "urlopen", serve)
    out = download.download("as733", tmp_path / "data")
    assert urls == ["https://snap.stanford.edu/data/as-733.tar.gz"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["as733_dates.csv", "as733_edge_intervals.csv.gz"]
    g = datasets.load_dataset(DataConfig(dataset="as733", root=str(tmp_path / "data"), self_loops=True))
    assert g.num_snapshots == 4 and g.num_nodes == 5  # fewer than the default 100: all are kept


def test_decimal_times_on_a_bucket_boundary_open_that_bucket():
    """0.411 / 0.137 is 2.99999... in floating point: the boundary time still opens snapshot 3, with
    data.aggr_time and with data.num_snapshots; integer times are bucketed exactly."""
    k = np.arange(20)
    times = np.array([float(f"{i * 0.137:.4f}") for i in k])  # as a file writes them
    src, dst = k % 5, (k * 3) % 7 + 5
    for kw in ({"aggr_time": 0.137}, {"num_snapshots": 19}):
        g = loaders.edge_stream_to_graph(src, dst, np.ones(20), times, symmetric=False, **kw)
        # aggr_time: 20 snapshots of one edge; 19 equal spans: the last time (the span's end) joins the last
        expected = [1] * 20 if "aggr_time" in kw else [1] * 18 + [2]
        assert [len(s) for s in g.snapshots] == expected
    # integer times one unit below a boundary stay below it (no tolerance where the division is exact)
    ints = np.array([0, 999_999_999, 1_000_000_000, 1_999_999_999])
    g = loaders.edge_stream_to_graph(
        ints % 2, ints % 2 + 2, np.ones(4), ints, symmetric=False, num_snapshots=2
    )
    assert [len(s) for s in g.snapshots] == [2, 2]
    g = loaders.edge_stream_to_graph(ints % 2, ints % 2 + 2, np.ones(4), ints, symmetric=False, aggr_time=1e9)
    assert [len(s) for s in g.snapshots] == [2, 2]


def test_times_past_2_53_need_buckets_to_be_snapshots(tmp_path):
    """Nanosecond stamps 100 apart round together in float64: a snapshot per distinct time is refused
    (12 rows read as 5 snapshots before), equal spans are not."""
    path = tmp_path / "ns.txt"
    path.write_text(
        "".join(f"{i % 3} {i % 4 + 3} {1_700_000_000_000_000_000 + i * 100}\n" for i in range(12))
    )
    with pytest.raises(UserError, match=r"past 2\*\*53.*set data.aggr_time"):
        datasets.load_dataset(DataConfig(dataset="edges", path=str(path), window=1))
    g = datasets.load_dataset(DataConfig(dataset="edges", path=str(path), window=1, num_snapshots=4))
    assert g.num_snapshots == 4 and sum(len(s) for s in g.snapshots) > 0


def test_a_short_first_row_is_the_one_blamed(tmp_path):
    """Most rows have 4 fields: the short first data row (line 2) is named, not the rows after it."""
    path = tmp_path / "e.csv"
    path.write_text("u,i,ts,label\n1,2,1\n1,2,3,0\n2,3,4,1\n3,4,5,0\n")
    with pytest.raises(UserError, match=r"line 2: wrong column count 3 \(line 3 has 4\)"):
        datasets.load_dataset(DataConfig(dataset="edges", path=str(path), window=1))


@pytest.mark.parametrize("kw", [{}, {"num_snapshots": 10}, {"aggr_time": 1.0}])
def test_rows_all_at_one_time_are_named_as_such(kw):
    with pytest.raises(UserError, match=r"every row has the same time \(5\)"):
        loaders.edge_stream_to_graph(np.array([1, 2, 3]), np.array([2, 3, 4]), None, np.full(3, 5.0), **kw)


def test_binary_without_nul_bytes_is_refused_and_a_dos_eof_is_not(tmp_path):
    blob = tmp_path / "blob.dat"
    blob.write_bytes(b"\xd0\x9b\xe7&P\x1a\xbb\x13\xe7\xda\xb0U")  # valid UTF-8 in part, no NUL
    with pytest.raises(UserError, match="is binary data"):
        loaders.read_text(blob, "edge")
    dos = tmp_path / "dos.txt"
    dos.write_bytes(b"1 2 10\r\n2 3 20\r\n\x1a")
    assert loaders.read_text(dos, "edge").startswith("1 2 10")
