"""data.dataset: pygt_json (data/pygt_json.py), data.features: given (data/node_windows.py) and PyG-T's
signal objects (baselines/from_pygt.py): both JSON layouts on small files made here (every value where
it should land, down to the model's input), the real PyG-T files against our named loaders, bad input
as one-line errors, and end to end: a real file re-written into the per-snapshot layout trains from the
CLI like the original."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from dygnex_jax.__main__ import main
from dygnex_jax.config import DataConfig, load_config
from dygnex_jax.data import datasets, pygt_json
from dygnex_jax.data.node_windows import NodeWindowSet, task_windows
from dygnex_jax.data.signals import standardize
from dygnex_jax.data.windows import WindowSet
from dygnex_jax.errors import UserError
from dygnex_jax.graphs import Budget, DeviceWork, pack_node_device

REPO = Path(__file__).resolve().parents[1]
T, N, F = 12, 5, 3
Y = np.arange(T)[:, None] + np.arange(N)[None, :] / 10  # y[t, i] = t + i / 10
X = 100.0 * np.arange(T)[:, None, None] + 10 * np.arange(N)[None, :, None] + np.arange(F)  # X[t, i, j]
HAS_PYGT = all(importlib.util.find_spec(m) for m in ("torch", "torch_geometric", "torch_geometric_temporal"))
NEEDS_PYGT = pytest.mark.skipif(
    not HAS_PYGT, reason="the torch extra is not installed (pip install -r requirements-torch.txt)"
)


def step_edges(t: int) -> list[list[int]]:
    """Step t's edges: every node to one other, a different one as t moves on."""
    return [[i, (i + 1 + t % 3) % N] for i in range(N)]


def step_weights(t: int) -> list[float]:
    return [1.0 + t + i / 10 for i in range(N)]


def records_data(t: int = T) -> dict:
    """The per-snapshot layout (PyG-T's DynamicGraphTemporalSignal files, e.g. twitter_tennis)."""
    recs = {
        str(s): {"edges": step_edges(s), "weights": step_weights(s), "X": X[s].tolist(), "y": Y[s].tolist()}
        for s in range(t)
    }
    return {"time_periods": t, **recs}


def static_data() -> dict:
    """The static layout: one graph, the target [T, N] and the features [T, N, F] at the top."""
    return {"edges": step_edges(0), "weights": step_weights(0), "y": Y.tolist(), "X": X.tolist()}


def write(path: Path, data: dict, gz: bool = False) -> str:
    text = json.dumps(data).encode()
    path.write_bytes(gzip.compress(text) if gz else text)
    return str(path)


def data_cfg(path, **kw) -> DataConfig:
    return DataConfig(dataset="pygt_json", path=str(path), **{"task": "node_reg", **kw})


def sorted_graph(t: int) -> tuple[list, np.ndarray]:
    order = sorted(range(N), key=lambda i: step_edges(t)[i])
    return [step_edges(t)[i] for i in order], np.float32(step_weights(t))[order]


# --- both layouts: where every value lands --------------------------------------------------------------


@pytest.mark.parametrize("layout", ["static", "records"])
@pytest.mark.parametrize("lags", [0, 2])
def test_given_features_and_targets_land_where_they_should(tmp_path, layout, lags):
    data = static_data() if layout == "static" else records_data()
    cfg = data_cfg(write(tmp_path / "d.json.gz", data, gz=True), features="given", lags=lags, window=3)
    graph = datasets.load_dataset(cfg)
    assert graph.info["layout"] == ("static graph" if layout == "static" else "a graph per step")
    ws = task_windows(graph, cfg)
    assert isinstance(ws, NodeWindowSet) and ws.num_features == F + lags
    assert ws.targets[0] == 3 - 1 + lags and ws.targets[-1] == T - 1
    for k in range(len(ws)):
        win, t = ws.get(k), int(ws.targets[k])
        np.testing.assert_array_equal(win.y, np.float32(Y[t]))  # the target of the last step read
        for tau in range(3):
            u = t - 2 + tau  # the step snapshot tau stands for; the last one is t itself
            np.testing.assert_array_equal(
                win.x[tau], np.float32(np.concatenate([X[u], Y[u - lags : u].T], 1))
            )
            edges, weights = sorted_graph(u if layout == "records" else 0)
            assert win.edges[tau].tolist() == edges
            np.testing.assert_array_equal(win.weights[tau], weights)
    # the model's input: the packed batch's x (models/layers.node_inputs reads it as is)
    win = ws.get(0)
    work = DeviceWork([win], [np.arange(N, dtype=np.int32)], [win.y])
    batch = pack_node_device(work, Budget(N + 3, 3 * N + 4, N + 3, 2), 3, ws.num_features)
    np.testing.assert_array_equal(batch["x"][:, :N, :F], np.float32(X[0 + lags : 3 + lags]))
    assert not batch["x"][:, N:].any()  # padding nodes get zeros


def test_lags_alone_keep_the_graph_of_the_first_lag_day(tmp_path):
    """Without given features a per-snapshot file runs today's rule: the L values before the step, the
    graph of step u - L (PyG-T's pairing, as england_covid)."""
    cfg = data_cfg(write(tmp_path / "d.json", records_data()), lags=3, window=2)
    ws = task_windows(datasets.load_dataset(cfg), cfg)
    assert ws.num_features == 3
    win, t = ws.get(2), int(ws.targets[2])
    for tau in range(2):
        u = t - 1 + tau
        np.testing.assert_array_equal(win.x[tau], np.float32(Y[u - 3 : u].T))
        assert win.edges[tau].tolist() == sorted_graph(u - 3)[0]


def test_real_pygt_files_read_as_our_loaders(data_root):
    """PyG-T's own files through pygt_json: chickenpox (FX) and pedalme (X) as our named loaders;
    england_covid (edge_mapping per day) the same graphs, its y as in the file (ours standardises)."""
    files = {
        "chickenpox_hungary": "chickenpox_hungary/chickenpox.json.gz",
        "pedalme_london": "pedalme_london/pedalme_london.json.gz",
        "england_covid": "england_covid/england_covid.json.gz",
    }
    for name, file in files.items():
        ours = datasets.load_dataset(DataConfig(dataset=name, root=str(data_root), task="node_reg"))
        got = datasets.load_dataset(data_cfg(data_root / file))
        assert (got.num_nodes, got.num_snapshots) == (ours.num_nodes, ours.num_snapshots)
        assert all(np.array_equal(a, b) for a, b in zip(got.snapshots, ours.snapshots))
        assert all(np.array_equal(a, b) for a, b in zip(got.weights, ours.weights))
        want = standardize(got.signal.astype(np.float64), 1e-10) if name == "england_covid" else got.signal
        np.testing.assert_allclose(want, ours.signal, rtol=1e-5, atol=1e-6)
    assert got.info["target"] == "y" and got.info["layout"] == "a graph per step"


def test_keys_are_detected_or_named(tmp_path):
    both = {"edges": step_edges(0), "FX": Y.tolist(), "y": (Y + 1).tolist()}
    path = write(tmp_path / "both.json", both)
    with pytest.raises(
        UserError, match=r"the target is ambiguous: FX, y could each be it: set data.target_key"
    ):
        datasets.load_dataset(data_cfg(path))
    g = datasets.load_dataset(data_cfg(path, target_key="y", features="given", lags=0))
    np.testing.assert_array_equal(g.signal, np.float32(Y + 1))
    np.testing.assert_array_equal(g.features[:, :, 0], np.float32(Y))  # the only other array: FX, F = 1
    assert g.info["features"] == "FX"
    with pytest.raises(UserError, match=r"has no 'z' \(data.target_key\): keys found: edges, FX, y"):
        datasets.load_dataset(data_cfg(path, target_key="z"))
    # records: y / X by default; named keys too; a record without the key is named
    recs = records_data()
    for r in recs.values():
        if isinstance(r, dict):
            r["cases"] = r.pop("y")
    g = datasets.load_dataset(data_cfg(write(tmp_path / "r.json", recs), target_key="cases"))
    np.testing.assert_array_equal(g.signal, np.float32(Y))
    del recs["4"]["cases"]
    with pytest.raises(UserError, match=r"snapshot record '4' has no 'cases': keys there: edges, weights, X"):
        datasets.load_dataset(data_cfg(write(tmp_path / "r.json", recs), target_key="cases"))


def test_link_reads_a_graph_per_step_and_refuses_a_static_one(tmp_path):
    recs = records_data()
    for r in recs.values():
        if isinstance(r, dict):
            del r["y"], r["X"]  # link needs no target
    cfg = data_cfg(write(tmp_path / "r.json", recs), task="link", window=3)
    graph = datasets.load_dataset(cfg)
    assert graph.signal is None and isinstance(task_windows(graph, cfg), WindowSet)
    assert graph.snapshots[5].tolist() == sorted_graph(5)[0]
    with pytest.raises(UserError, match="has one static graph"):
        datasets.load_dataset(data_cfg(write(tmp_path / "s.json", static_data()), task="link"))


@pytest.mark.parametrize("layout", ["static", "records"])
def test_dump_reads_back_the_same_graph(tmp_path, layout):
    cfg = data_cfg(write(tmp_path / "d.json", static_data() if layout == "static" else records_data()))
    cfg.features, cfg.lags = "given", 0
    g = datasets.load_dataset(cfg)
    cfg.path = str(pygt_json.dump(g, tmp_path / "again.json.gz"))
    h = datasets.load_dataset(cfg)
    assert h.info["layout"] == g.info["layout"]
    for a, b in [(g.signal, h.signal), (g.features, h.features), *zip(g.snapshots, h.snapshots)]:
        np.testing.assert_array_equal(a, b)
    assert all(np.array_equal(a, b) for a, b in zip(g.weights, h.weights))
    assert pygt_json.dumps(g, gz=True) == pygt_json.dumps(h, gz=True)  # the same bytes every time


# --- bad input: one line, what is wrong and what to do ------------------------------------------------


def bad_inputs(d: Path) -> dict[str, str]:
    """Broken pygt_json files (and a small named-dataset root) for this module and the README error
    table (tests/test_errors.py): placeholder -> path."""
    d.mkdir(parents=True, exist_ok=True)
    recs = records_data(6)
    no_y = json.loads(json.dumps(recs))
    del no_y["3"]["y"]
    two_wide = json.loads(json.dumps(recs))
    two_wide["2"]["y"] = [[1.0, 2.0]] * N
    ragged = json.loads(json.dumps(recs))
    ragged["4"]["X"] = ragged["4"]["X"][:-1]
    nan = static_data()
    nan["y"][3][1] = float("nan")
    far = static_data()
    far["edges"] = [*far["edges"], [2, 9]]
    far["weights"] = [*far["weights"], 1.0]
    root = d / "pygt_root" / "chickenpox_hungary"
    root.mkdir(parents=True, exist_ok=True)
    write(root / "chickenpox.json.gz", {"edges": step_edges(0), "FX": Y.tolist()}, gz=True)
    (d / "pygt_cut.json.gz").write_bytes(gzip.compress(json.dumps(recs).encode())[:40])
    files = {"no_y": no_y, "two_targets": {"edges": step_edges(0), "FX": Y.tolist(), "y": Y.tolist()}}
    files |= {"two_wide": two_wide, "ragged": ragged, "nan": nan, "far": far, "static": static_data()}
    files |= {"no_x": {"edges": step_edges(0), "y": Y.tolist()}}
    # records without time_periods: one missing in the middle, and numbered from 1
    files |= {"gap": {k: v for k, v in recs.items() if k not in ("time_periods", "3")}}
    files |= {"from_one": {str(int(k) + 1): v for k, v in recs.items() if k != "time_periods"}}
    out = {f"pygt_{k}": write(d / f"pygt_{k}.json", v) for k, v in files.items()}
    return {**out, "pygt_cut": str(d / "pygt_cut.json.gz"), "pygt_root": str(d / "pygt_root")}


BAD = [  # (placeholder, extra keys, text the one line holds)
    ("pygt_cut", [], "is a damaged gzip file: give a PyG-Temporal JSON file"),
    ("pygt_no_y", [], "snapshot record '3' has no 'y': keys there: edges, weights, X"),
    ("pygt_two_targets", [], "the target is ambiguous: FX, y could each be it"),
    ("pygt_two_wide", [], "'y' of snapshot record '2' must be [N] numbers, got shape [5, 2]"),
    ("pygt_ragged", ["data.features=given"], "'X' has 4 nodes at step 4 but 5 at step 0"),
    ("pygt_nan", [], "'y' holds a non-finite value (NaN or infinity) at step 3"),
    ("pygt_far", [], "'edges' names node 9, outside 0..4 (N = 5"),
    (
        "pygt_no_x",
        ["data.features=given"],
        "has no node features for data.features=given: set data.feature_key",
    ),
    ("pygt_static", ["data.task=link"], "has one static graph"),
    ("pygt_gap", [], "has snapshot records up to '5' but none '3'"),
    ("pygt_from_one", [], "its snapshot records start at '1', not '0'"),
]


@pytest.mark.parametrize("name, extra, needle", BAD, ids=[b[0] for b in BAD])
def test_bad_files_are_one_line_errors(tmp_path, capsys, name, extra, needle):
    path = bad_inputs(tmp_path / "in")[name]
    task = [] if "data.task=link" in extra else ["data.task=node_reg"]
    argv = [
        "train",
        "--out",
        str(tmp_path / "out"),
        "data.dataset=pygt_json",
        f"data.path={path}",
        *task,
        *extra,
    ]
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_more_bad_shapes(tmp_path):
    cases = [
        ({"time_periods": 4, **{str(t): records_data()[str(t)] for t in range(3)}}, "no snapshot record '3'"),
        ({"edges": [[0, 1.5]], "y": Y.tolist()}, "integer node ids, got shape"),
        (
            {"edges": [[0, 1, 2]], "y": Y.tolist()},
            "must be [[src, dst], ...] integer node ids, got shape [1, 3]",
        ),
        ({"edges": [[0, 1]], "weights": [1, 2], "y": Y.tolist()}, "one number per edge (1), got shape [2]"),
        (
            {"edges": [[0, 1]], "weights": [float("inf")], "y": Y.tolist()},
            "the weights of 'edges' holds a non-finite",
        ),
        ({"edges": [[0, 1]], "y": [[1.0, 2.0], [3.0]]}, "'y' has 1 nodes at step 1 but 2 at step 0"),
        ({"edges": [[0, 1]]}, "has no node-regression target: set data.target_key=KEY (keys found: edges)"),
        ({"y": Y.tolist()}, "has no graph: give 'edges'"),
        ([1, 2], "is not a JSON object"),
    ]
    for k, (data, needle) in enumerate(cases):
        path = tmp_path / f"{k}.json"
        path.write_text(json.dumps(data))
        with pytest.raises(UserError) as err:
            datasets.load_dataset(data_cfg(path))
        assert needle in str(err.value) and "\n" not in str(err.value), (k, str(err.value))
    # [2, E] edge_index (as PyG holds it) is taken
    path = write(tmp_path / "ei.json", {"edges": [[0, 1, 2], [1, 2, 0]], "y": Y[:, :3].tolist()})
    assert datasets.load_dataset(data_cfg(path)).snapshots[0].tolist() == [[0, 1], [1, 2], [2, 0]]


def test_config_rules_for_given_features():
    with pytest.raises(UserError, match="data.features=given applies to data.task=node_reg, not 'link'"):
        load_config(None, ["data.features=given"])
    assert load_config(None, ["data.features=given", "data.task=node_reg", "data.lags=0"]).data.lags == 0


# --- end to end: a real file re-written into the per-snapshot layout ------------------------------------


def samples_as_records(data_root: Path, lags: int) -> tuple[dict, np.ndarray]:
    """england_covid as PyG-T's loader makes its samples (lags of the standardised cases, graph of the
    first lag day), each written as a snapshot record with X = the lags and y = the target."""
    raw = json.loads(gzip.decompress((data_root / "england_covid" / "england_covid.json.gz").read_bytes()))
    y = standardize(np.asarray(raw["y"], np.float64), 1e-10)
    index, weight = raw["edge_mapping"]["edge_index"], raw["edge_mapping"]["edge_weight"]
    n = len(y) - lags
    recs = {
        str(i): {
            "edges": index[str(i)],
            "weights": weight[str(i)],
            "X": y[i : i + lags].T.tolist(),
            "y": y[i + lags].tolist(),
        }
        for i in range(n)
    }
    return {"time_periods": n, **recs}, y


ENGLAND = ("england_covid.yaml", "england_records.json.gz")
AS_RECORDS = ["data.dataset=pygt_json", "data.features=given", "data.lags=0"]


def test_real_file_in_the_per_snapshot_layout_gives_the_same_windows(data_root, tmp_path):
    """England COVID re-written as snapshot records (X = the 8 lags) gives the same windows (inputs,
    targets, graphs, split) as our england_covid with data.lags=8, read through the CLI's config."""
    path = write(tmp_path / ENGLAND[1], samples_as_records(data_root, 8)[0], gz=True)
    config = REPO / "configs" / ENGLAND[0]
    original = load_config(config, [f"data.root={data_root}"]).data
    mine = load_config(config, [*AS_RECORDS, f"data.path={path}"]).data
    a = task_windows(datasets.load_dataset(original), original)
    b = task_windows(datasets.load_dataset(mine), mine)
    assert len(a) == len(b) == 53 and a.num_features == b.num_features == 8
    assert all(np.array_equal(a.splits[s], b.splits[s]) for s in a.splits)
    for k in range(len(a)):
        wa, wb = a.get(k), b.get(k)
        for u, v in [(wa.x, wb.x), (wa.y, wb.y), *zip(wa.edges, wb.edges), *zip(wa.weights, wb.weights)]:
            np.testing.assert_array_equal(u, v)


@pytest.mark.slow  # two CLI runs, about 35 s on the 2-core machine
def test_real_file_in_the_per_snapshot_layout_trains_like_the_original(data_root, tmp_path):
    """One CLI epoch on the re-written file and one on england_covid: the same loss and MSE."""
    path = write(tmp_path / ENGLAND[1], samples_as_records(data_root, 8)[0], gz=True)
    quick = ["train.epochs=1", "model.hidden=8", "eval.every=1"]
    runs = {}
    for name, keys in {
        "original": [f"data.root={data_root}"],
        "records": [*AS_RECORDS, f"data.path={path}"],
    }.items():
        out = tmp_path / name
        argv = ["train", "--config", str(REPO / "configs" / ENGLAND[0]), "--out", str(out)]
        assert main([*argv, *quick, *keys]) == 0
        runs[name] = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert json.loads((tmp_path / "records" / "summary.json").read_text())["epochs"] == 1
    for key in ("loss", "val_mse", "test_mse"):
        np.testing.assert_allclose(runs["records"][key], runs["original"][key], rtol=1e-6)


# --- PyG-T's signal objects (the torch extra) -----------------------------------------------------------


def pygt_loader(cls_name: str, file: Path):
    """A PyG-T dataset loader fed the local file (its __init__ would download by URL)."""
    from dygnex_jax.baselines.pyg_compat import install_torch_sparse_shim

    install_torch_sparse_shim()
    from torch_geometric_temporal import dataset

    loader = getattr(dataset, cls_name).__new__(getattr(dataset, cls_name))
    loader._dataset = json.loads(gzip.decompress(file.read_bytes()))
    return loader


@NEEDS_PYGT
def test_from_signal_equals_our_loaders(data_root):
    from dygnex_jax.baselines.from_pygt import from_signal

    chick = pygt_loader("ChickenpoxDatasetLoader", data_root / "chickenpox_hungary" / "chickenpox.json.gz")
    g = from_signal(chick.get_dataset(lags=4), name="chickenpox_hungary")
    ours = datasets.load_dataset(
        DataConfig(dataset="chickenpox_hungary", root=str(data_root), task="node_reg")
    )
    assert g.info == {"source": "StaticGraphTemporalSignal", "lags": 4, "features": 0}
    assert g.num_snapshots == ours.num_snapshots == 521 and g.num_nodes == 20
    np.testing.assert_array_equal(g.signal, ours.signal)
    assert all(np.array_equal(a, b) for a, b in zip(g.snapshots, ours.snapshots))
    assert all(np.array_equal(a, b) for a, b in zip(g.weights, ours.weights))
    # a graph per day: the samples' graphs are ours; the given-features reading has the same windows
    eng = pygt_loader("EnglandCovidDatasetLoader", data_root / "england_covid" / "england_covid.json.gz")
    signal = eng.get_dataset(lags=8)
    g = from_signal(signal)
    ours = datasets.load_dataset(DataConfig(dataset="england_covid", root=str(data_root), task="node_reg"))
    np.testing.assert_array_equal(g.signal, ours.signal)
    assert all(np.array_equal(a, b) for a, b in zip(g.snapshots[:53], ours.snapshots[:53]))
    given = from_signal(signal, lags=0)
    assert given.info["lags"] == 0 and given.features.shape == (53, 129, 8)
    cfg_a, cfg_b = (
        DataConfig(task="node_reg", window=1, lags=8),
        DataConfig(task="node_reg", window=1, lags=0, features="given"),
    )
    a, b = NodeWindowSet(g, cfg_a), NodeWindowSet(given, cfg_b)
    for k in (0, 20, 52):
        np.testing.assert_array_equal(a.get(k).x, b.get(k).x)
        np.testing.assert_array_equal(a.get(k).edges[0], b.get(k).edges[0])


@NEEDS_PYGT
def test_from_signal_keeps_given_features_and_refuses_bad_ones():
    from dygnex_jax.baselines.from_pygt import config_for, from_signal
    from dygnex_jax.baselines.pyg_compat import install_torch_sparse_shim

    install_torch_sparse_shim()
    from torch_geometric_temporal.signal import DynamicGraphTemporalSignal

    edges = [np.asarray(step_edges(t)).T for t in range(T)]
    weights = [np.asarray(step_weights(t)) for t in range(T)]
    signal = DynamicGraphTemporalSignal(edges, weights, list(X), list(Y))
    g = from_signal(signal)
    assert g.info["lags"] == 0 and g.info["features"] == F
    cfg = config_for(g, "unused.json").data
    assert (cfg.features, cfg.lags, cfg.dataset, cfg.task) == ("given", 0, "pygt_json", "node_reg")
    ws = NodeWindowSet(g, DataConfig(task="node_reg", window=2, lags=0, features="given"))
    win = ws.get(3)
    np.testing.assert_array_equal(win.x, np.float32(X[3:5]))
    np.testing.assert_array_equal(win.y, np.float32(Y[4]))
    assert win.edges[1].tolist() == sorted_graph(4)[0]
    bad = DynamicGraphTemporalSignal(edges, weights, [*X[:5], X[5][:-1], *X[6:]], list(Y))
    with pytest.raises(UserError, match="the features have 4 nodes at snapshot 5 but 5 at snapshot 0"):
        from_signal(bad)
    with pytest.raises(UserError, match="the features are not the 3 target values before each target"):
        from_signal(signal, lags=3)
    with pytest.raises(UserError, match="from_signal takes a PyG-Temporal"):
        from_signal([1, 2, 3])


@pytest.mark.slow  # imports torch and trains an epoch, about 30 s on the 2-core machine
@NEEDS_PYGT
def test_train_on_a_pygt_signal(data_root, tmp_path):
    """from_pygt.train: PyG-T's PedalMe samples -> a run whose config.yaml names the written file."""
    from dygnex_jax.baselines import from_pygt

    loader = pygt_loader("PedalMeDatasetLoader", data_root / "pedalme_london" / "pedalme_london.json.gz")
    config = load_config(REPO / "configs" / "pedalme_london.yaml", ["train.epochs=1", "model.hidden=8"])
    out = tmp_path / "run"
    summary = from_pygt.train(loader.get_dataset(lags=4), config, out)
    assert np.isfinite(summary["final"]["val_mse"])
    saved = load_config(out / "config.yaml").data
    assert (saved.dataset, saved.path, saved.lags) == ("pygt_json", str(out / from_pygt.DATA_FILE), 4)
    again = datasets.load_dataset(saved)
    ours = datasets.load_dataset(DataConfig(dataset="pedalme_london", root=str(data_root), task="node_reg"))
    np.testing.assert_array_equal(again.signal, ours.signal)


def test_train_refuses_before_it_writes(tmp_path):
    """from_pygt.train on a duck-typed static signal (PyG-T's attribute names; no torch needed): a bad
    config leaves no folder behind, and another run's data file is never overwritten."""
    from types import SimpleNamespace

    from dygnex_jax.baselines import from_pygt

    lagged = [Y[i : i + 2].T for i in range(T - 2)]  # PyG-T's lag features: the 2 values before y
    signal = SimpleNamespace(
        edge_index=np.asarray(step_edges(0)).T, edge_weight=None, features=lagged, targets=list(Y[2:])
    )
    graph = from_pygt.from_signal(signal)
    assert graph.info["lags"] == 2 and graph.num_snapshots == T
    np.testing.assert_array_equal(graph.signal, np.float32(Y))
    config = load_config(None, ["data.window=50", "model.name=gcrn_gru"])
    with pytest.raises(UserError, match="data.window=50 with data.lags=2 needs at least 52 snapshots"):
        from_pygt.train(signal, config, tmp_path / "run")
    assert not (tmp_path / "run").exists()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / from_pygt.DATA_FILE).write_bytes(b"another run's data")
    with pytest.raises(UserError, match="holds another pygt_data.json.gz"):
        from_pygt.train(signal, config, tmp_path / "other")
    assert (tmp_path / "other" / from_pygt.DATA_FILE).read_bytes() == b"another run's data"
