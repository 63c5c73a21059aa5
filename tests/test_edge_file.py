"""Edge files in the formats other public dynamic graphs ship in (dygnex_jax/data/edge_file.py): a header
naming the columns in any order with columns to skip (JODIE, TGB, Reddit hyperlinks), node names, ISO
dates, bipartite user/item ids. Each is read into exactly the graph its plain ``src dst [weight] time``
twin gives, and a bad row is one line naming it."""

from __future__ import annotations

import datetime
import io
from pathlib import Path

import numpy as np
import pytest

from dygnex_jax.config import DataConfig, load_config
from dygnex_jax.data.datasets import load_dataset
from dygnex_jax.data.edge_file import header_roles, read_edge_file
from dygnex_jax.errors import UserError

RNG = np.random.default_rng(7)
ROWS = [(int(RNG.integers(20)), int(RNG.integers(12)), 500 * i + int(RNG.integers(500))) for i in range(300)]
EPOCH = datetime.datetime(2014, 1, 1, tzinfo=datetime.UTC)


def _graph(tmp_path, name: str, text: str, **data):
    path = tmp_path / name
    path.write_text(text)
    cfg = DataConfig(**{"dataset": "edges", "path": str(path), "num_snapshots": 12, **data})
    return load_dataset(cfg)


def _same_graph(a, b) -> None:
    assert a.num_nodes == b.num_nodes and a.num_snapshots == b.num_snapshots
    for sa, sb in zip(a.snapshots, b.snapshots):
        assert np.array_equal(sa, sb)
    assert np.allclose(a.times, b.times)


def test_jodie_csv_is_bipartite_and_skips_the_label_and_features(tmp_path):
    """JODIE's user_id,item_id,timestamp,state_label,features...: items are nodes apart from users (item
    k is node max_user + 1 + k), the label and the 4 feature fields are skipped."""
    jodie = "user_id,item_id,timestamp,state_label,comma_separated_list_of_features\n" + "".join(
        f"{u},{i},{float(t)},0,0.1,0.2,0.3,0.4\n" for u, i, t in ROWS
    )
    shift = max(u for u, _, _ in ROWS) + 1 - min(i for _, i, _ in ROWS)
    plain = "".join(f"{u} {i + shift} {t}\n" for u, i, t in ROWS)
    got = _graph(tmp_path, "wikipedia.csv", jodie)
    _same_graph(got, _graph(tmp_path, "plain.txt", plain))
    assert got.info["bipartite"] is True and "user_id -> src" in got.info["columns"]
    src, dst, _, _, _ = read_edge_file(tmp_path / "wikipedia.csv")
    assert set(src.tolist()).isdisjoint(dst.tolist())


def test_reddit_tsv_names_and_dates_with_a_space(tmp_path):
    """Reddit hyperlinks: tab-separated, subreddit names for nodes, 'YYYY-MM-DD HH:MM:SS' times (a space
    inside a field), a properties field holding commas: the same graph as integer ids and Unix seconds."""
    names = [f"sub_{chr(97 + k)}{k}" for k in range(32)]
    head = "SOURCE_SUBREDDIT\tTARGET_SUBREDDIT\tPOST_ID\tTIMESTAMP\tLINK_SENTIMENT\tPROPERTIES\n"
    tsv = head + "".join(
        f"{names[u]}\t{names[i + 20]}\tp{k}\t{EPOCH + datetime.timedelta(seconds=t):%Y-%m-%d %H:%M:%S}\t1\t0.1,2,3\n"
        for k, (u, i, t) in enumerate(ROWS)
    )
    order = sorted(range(32), key=lambda k: names[k])  # names are numbered in sorted order
    rank = {k: r for r, k in enumerate(order)}
    start = EPOCH.timestamp()
    plain = "".join(f"{rank[u]} {rank[i + 20]} {start + t:.0f}\n" for u, i, t in ROWS)
    got = _graph(tmp_path, "reddit.tsv", tsv)
    _same_graph(got, _graph(tmp_path, "plain.txt", plain))
    assert got.info["node_names"] and got.info["dates"] and "bipartite" not in got.info


def test_a_header_puts_the_columns_in_any_order(tmp_path):
    """TGB-style ``ts,src,dst,w`` and quoted CSV: the header decides, not the position."""
    tgb = "ts,src,dst,w\n" + "".join(f"{t},{u},{i},{1 + (u % 3)}\n" for u, i, t in ROWS)
    plain = "".join(f"{u} {i} {1 + (u % 3)} {t}\n" for u, i, t in ROWS)
    a, b = _graph(tmp_path, "tgb.csv", tgb), _graph(tmp_path, "plain.txt", plain)
    _same_graph(a, b)
    for wa, wb in zip(a.weights, b.weights):
        assert np.array_equal(wa, wb)
    quoted = '"time","from","to","note"\n' + "".join(f'"{t}","{u}","{i}","a, b"\n' for u, i, t in ROWS)
    _same_graph(
        _graph(tmp_path, "q.csv", quoted),
        _graph(tmp_path, "p3.txt", "".join(f"{u} {i} {t}\n" for u, i, t in ROWS)),
    )
    spaced = "time,src,dst\n" + "".join(f"{t} {u} {i}\n" for u, i, t in ROWS)  # a comma header, spaced rows
    _same_graph(
        _graph(tmp_path, "s.txt", spaced),
        _graph(tmp_path, "p4.txt", "".join(f"{u} {i} {t}\n" for u, i, t in ROWS)),
    )


def test_iso_dates_are_utc_unix_seconds(tmp_path):
    text = "src,dst,date\n1,2,2014-01-31\n2,3,2014-01-31T16:39:58Z\n3,1,2014-02-01 00:00:00\n"
    (tmp_path / "d.csv").write_text(text)
    *_, time, facts = read_edge_file(tmp_path / "d.csv")
    want = [datetime.datetime(2014, 1, 31, tzinfo=datetime.UTC).timestamp(), 0, 0]
    want[1] = want[0] + 16 * 3600 + 39 * 60 + 58
    want[2] = want[0] + 86400
    assert time.tolist() == want and facts["dates"]
    zoned = "src,dst,date\n1,2,2014-01-31T18:39:58+02:00\n2,3,2014-01-31T16:39:58Z\n3,1,2014-01-31 16:39:58\n"
    (tmp_path / "z.csv").write_text(zoned)
    *_, time, _ = read_edge_file(tmp_path / "z.csv")
    assert time.tolist() == [want[1]] * 3  # the same moment three ways


@pytest.mark.parametrize(
    "names, roles",
    [
        (["user_id", "item_id", "timestamp", "state_label", "features"], {"src": 0, "dst": 1, "time": 2}),
        (["ts", "src", "dst", "w"], {"time": 0, "src": 1, "dst": 2, "weight": 3}),
        (["SOURCE_SUBREDDIT", "TARGET_SUBREDDIT", "POST_ID", "TIMESTAMP"], {"src": 0, "dst": 1, "time": 3}),
        (["from", "to", "rating", "time"], {"src": 0, "dst": 1, "weight": 2, "time": 3}),
        (["a", "b", "time"], None),  # no source named: by position
        (["src", "dst", "time", "timestamp"], None),  # two times: by position
        (["src", "dst", "weight"], None),  # no time
    ],
)
def test_header_roles(names, roles):
    assert header_roles(names) == roles


@pytest.mark.parametrize(
    "text, words",
    [
        (
            "user_id,item_id,timestamp,label\n1,2,5,0\n3,4\n",
            ["line 3", "2 fields", "'timestamp' in column 3"],
        ),
        ("src,dst,date\n1,2,2014-01-31\n2,3,1391212800\n", ["line 3", "'1391212800'", "not an ISO date"]),
        ("src,dst,date\n1,2,2014-01-31\n2,3,2014-02-30\n", ["line 3", "'2014-02-30'", "not a calendar date"]),
        ("src,dst,time\n1,2,5\nalice,3,6\n", ["line 3", "'alice'", "not an integer"]),
        ("1,2,5,0,0.1,0.2\n", ["line 1", "6 columns", "name the columns in a header line"]),
        ("src,dst,time\n", ["empty"]),
        ("src,dst,time,w\n1,2,5,1\n3,,6,1\n", ["line 3", "'dst' field is empty"]),
    ],
)
def test_bad_rows_are_one_line_naming_them(tmp_path, text, words):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(UserError) as e:
        read_edge_file(path)
    msg = str(e.value)
    assert "bad.csv" in msg and "\n" not in msg, msg
    for w in words:
        assert w in msg, msg


def test_a_named_file_trains_end_to_end(tmp_path):
    """A Reddit-style file (names, dates) through the whole stack: one epoch, finite loss."""
    from dygnex_jax.train import train_and_evaluate

    names = [f"n{k}" for k in range(30)]
    text = "source,target,timestamp\n" + "".join(
        f"{names[u]},{names[i + 18]},{EPOCH + datetime.timedelta(seconds=t):%Y-%m-%dT%H:%M:%S}\n"
        for u, i, t in ROWS
    )
    (tmp_path / "named.csv").write_text(text)
    smoke = Path(__file__).resolve().parents[1] / "configs" / "smoke.yaml"
    sets = [
        f"data.path={tmp_path / 'named.csv'}",
        "data.dataset=edges",
        "data.num_snapshots=14",
        "train.epochs=1",
        "parallel.devices=2",
    ]
    summary = train_and_evaluate(load_config(smoke, sets), tmp_path / "run", stream=io.StringIO())
    assert np.isfinite(summary["final"]["loss"])


def test_names_and_dates_without_a_header(tmp_path):
    """Read by position, ids may still be names and times ISO dates: the same graph as their numbers."""
    names = [f"acct{k:02d}" for k in range(40)]  # sorted order = k
    start = EPOCH.timestamp()
    named = "".join(
        f"{names[u]} {names[i + 20]} {EPOCH + datetime.timedelta(seconds=t):%Y-%m-%d}\n" for u, i, t in ROWS
    )
    plain = "".join(f"{u} {i + 20} {start + 86400 * (t // 86400)}\n" for u, i, t in ROWS)
    got = _graph(tmp_path, "named.txt", named)
    _same_graph(got, _graph(tmp_path, "plain.txt", plain))
    assert got.info["columns"] == "by position" and got.info["node_names"] and got.info["dates"]


def test_named_nodes_keep_their_names(tmp_path):
    """node_ids[i] is node i's id in the file: its name; bipartite names are marked user / item."""
    g = _graph(tmp_path, "n.csv", "src,dst,time\nbob,alice,1\nalice,carol,2\ncarol,bob,3\n", num_snapshots=0)
    assert g.node_ids.tolist() == ["alice", "bob", "carol"]
    text = "user_id,item_id,timestamp\nann,x,1\nbo,x,2\nann,y,3\n"
    assert _graph(tmp_path, "b.csv", text, num_snapshots=0).node_ids.tolist() == [
        "item:x",
        "item:y",
        "user:ann",
        "user:bo",
    ]


def test_snapshot_files_with_node_names(tmp_path):
    """One file per snapshot, nodes by name: a single-row file ``alice bob`` is an edge (not a header),
    a header-only file an empty snapshot; the graph equals the integer twin, node_ids are the names."""
    folder, twin = tmp_path / "named", tmp_path / "ints"
    folder.mkdir(), twin.mkdir()
    files = ["alice bob\n", "src dst\n", "bob carol\ncarol alice\n", "dave alice\n"]
    number = {"alice": 0, "bob": 1, "carol": 2, "dave": 3}
    for t, text in enumerate(files):
        (folder / f"day{t}.txt").write_text(text)
        ints = "".join(
            f"{number[a]} {number[b]}\n" for a, b in (ln.split() for ln in text.splitlines()) if a in number
        )
        (twin / f"day{t}.txt").write_text(ints)
    cfg = {"dataset": "snapshots", "window": 2}
    named = load_dataset(DataConfig(**{**cfg, "path": str(folder)}))
    plain = load_dataset(DataConfig(**{**cfg, "path": str(twin)}))
    _same_graph(named, plain)
    assert [len(s) for s in named.snapshots] == [2, 0, 4, 2]  # symmetric
    assert named.node_ids.tolist() == ["alice", "bob", "carol", "dave"]
    (folder / "day4.txt").write_text("4 5\n")
    with pytest.raises(UserError, match="has integer node ids but .*day0.txt' has node names"):
        load_dataset(DataConfig(**{**cfg, "path": str(folder)}))


@pytest.mark.parametrize(
    "row, what",
    [
        ("3 1_0 3", "target node id '1_0' is not an integer"),  # Python's int() reads 10
        ("3 \u0661\u0660 3", "target node id '\u0661\u0660' is not an integer"),  # Arabic-Indic 10
        ("3 4 \u0663", "time '\u0663' is not a number"),
        ("3 4 1_5", "time '1_5' is not a number"),
    ],
)
def test_numbers_python_reads_but_a_file_does_not_mean_are_refused(tmp_path, row, what):
    path = tmp_path / "e.txt"
    path.write_text(f"1 2 1\n2 3 2\n10 1 4\n{row}\n", encoding="utf-8")
    with pytest.raises(UserError, match=f"line 4: {what}"):
        read_edge_file(path)


def test_ids_in_another_scripts_digits_are_names(tmp_path):
    path = tmp_path / "e.txt"
    path.write_text("\u0661 1 1\n1 2 2\n", encoding="utf-8")  # Arabic-Indic one, then ASCII 1
    src, dst, _, _, read = read_edge_file(path)
    assert len(set(src.tolist()) | set(dst.tolist())) == 3  # three distinct names: one is not 1
