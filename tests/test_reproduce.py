"""EvolveGCN's protocol (issue: reproduce its table): early stopping on val with patience, the first
evaluated epoch, test only at a new best, a bounded planning horizon, the uncapped degree one-hot, the
RReLU activation at its mean slope, configs/repro, and tools/reproduce.py's runs and table."""

import json
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import make_trainer, run_python

from dygnex_jax.__main__ import main
from dygnex_jax.config import load_config
from dygnex_jax.errors import UserError
from dygnex_jax.models.layers import RRELU_MEAN_SLOPE, activation
from dygnex_jax.plan import planned_epochs
from dygnex_jax.research import reproduce
from dygnex_jax.runlog import early_stop_note, ended_early, is_new_best

REPO = Path(__file__).resolve().parents[1]
SMOKE = str(REPO / "configs" / "smoke.yaml")


def history(vals, task_key="val_map"):
    """Metric rows of epochs 1.. with ``vals`` (None: not evaluated)."""
    return [{"epoch": i + 1, **({task_key: v} if v is not None else {})} for i, v in enumerate(vals)]


# --- early stopping and test-at-best: the rule ------------------------------------------------------


def test_early_stop_counts_evaluations_without_a_strictly_better_val():
    config = load_config(None, ["train.patience=2"])
    # best .3 at epoch 2; .3 again is no improvement (EvolveGCN keeps a best until a strictly better one)
    rows = history([0.1, 0.3, None, 0.2, 0.3])
    assert early_stop_note(config, rows) is None  # 2 evaluations since the best: not more than 2
    rows = history([0.1, 0.3, None, 0.2, 0.3, 0.25])
    note = early_stop_note(config, rows)
    assert note is not None and "3 evaluations" in note and "epoch 2" in note and "after epoch 6" in note
    assert early_stop_note(config, history([0.1, 0.3, 0.2, 0.2, 0.4])) is None  # improved at the end
    assert early_stop_note(load_config(None, []), rows) is None  # patience 0: never
    assert early_stop_note(config, history([None, None, None, None])) is None  # nothing evaluated
    # NaN evaluations are no evaluations of the metric
    assert early_stop_note(config, history([0.3, float("nan"), float("nan"), float("nan")])) is None


def test_a_run_ended_early_only_before_its_last_epoch():
    """The rule firing on the last configured epoch is no early end (summary.json early_stop is null)."""
    rows = history([0.1, 0.3, None, 0.2, 0.3, 0.25])  # the rule fires at epoch 6
    assert early_stop_note(load_config(None, ["train.patience=2", "train.epochs=6"]), rows) is not None
    assert ended_early(load_config(None, ["train.patience=2", "train.epochs=6"]), rows) is None
    assert "after epoch 6" in ended_early(load_config(None, ["train.patience=2", "train.epochs=7"]), rows)
    assert ended_early(load_config(None, ["train.patience=2", "train.epochs=7"]), rows[:5]) is None


def test_early_stop_of_a_metric_to_minimise():
    config = load_config(None, ["train.patience=1", "data.task=node_reg", "data.dataset=chickenpox_hungary"])
    rows = history([5.0, 4.0, 4.5, 4.0], task_key="val_mse")
    assert early_stop_note(config, rows) is not None  # 4.0 again after 4.0: two without a lower one
    assert early_stop_note(config, rows[:3]) is None


def test_a_new_best_is_strictly_better():
    rows = history([0.1, 0.3, 0.2])
    assert is_new_best("link", [], 0.01)  # the first evaluation is the best so far
    assert not is_new_best("link", rows, 0.3) and not is_new_best("link", rows, 0.29)
    assert is_new_best("link", rows, 0.31)
    assert not is_new_best("link", rows, float("nan"))
    assert is_new_best("node_reg", history([2.0, 1.0], "val_mse"), 0.5)
    assert not is_new_best("node_reg", history([2.0, 1.0], "val_mse"), 1.5)


# --- early stopping in a run, and resuming a stopped run ---------------------------------------------


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory):
    """The smoke config at a learning rate too small to move any parameter (Adam's step ~ lr): every
    evaluation gives the same val MAP, so the run must stop exactly ``patience`` + 1 evaluations after the
    first one, at epoch start + patience + 1."""
    out = tmp_path_factory.mktemp("early") / "run"
    args = ["--config", SMOKE, "--out", str(out), "train.epochs=40", "train.learning_rate=1e-30"]
    args += ["train.patience=2", "eval.start=3", "eval.test=at_best", "parallel.plan_epochs=2"]
    args += ["train.checkpoint_every=4"]
    assert main(["train", *args]) == 0
    return out


def read_rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_a_run_stops_after_patience_evaluations_without_improvement(stopped_run):
    rows = read_rows(stopped_run)
    assert [r["epoch"] for r in rows] == list(range(1, 7))  # evaluated 3, 4, 5, 6: stopped after 6
    assert [("val_map" in r) for r in rows] == [False, False, True, True, True, True]  # eval.start=3
    assert len({r["val_map"] for r in rows if "val_map" in r}) == 1  # the premise: nothing moved
    # eval.test=at_best: the test split only where val was a new best (the first evaluation here)
    assert [("test_map" in r) for r in rows] == [False, False, True, False, False, False]
    summary = json.loads((stopped_run / "summary.json").read_text())
    assert summary["epochs"] == 6 and "train.patience=2" in summary["early_stop"]
    assert summary["best"]["epoch"] == 3 and summary["best"]["test_map"] == rows[2]["test_map"]
    # the last epoch was checkpointed although checkpoint_every=4 did not make it due
    assert (stopped_run / "checkpoints" / "epoch_000006").is_dir()


def test_resuming_a_stopped_run_trains_nothing_more(stopped_run, capsys):
    before = (stopped_run / "metrics.jsonl").read_text()
    assert main(["train", "--resume", str(stopped_run)]) == 0
    assert (stopped_run / "metrics.jsonl").read_text() == before
    err = capsys.readouterr().err
    assert "nothing to run: it stopped early" in err and "early stop after epoch 6" in err


# --- planning horizon, degree width, activation ------------------------------------------------------


def test_plan_epochs_bounds_the_planned_epochs():
    assert planned_epochs(load_config(None, ["train.epochs=50"])) == list(range(1, 51))
    assert planned_epochs(load_config(None, ["train.epochs=50", "parallel.plan_epochs=7"])) == list(
        range(1, 8)
    )
    assert planned_epochs(load_config(None, ["train.epochs=5", "parallel.plan_epochs=7"])) == list(
        range(1, 6)
    )


def test_uncapped_degree_one_hot_is_one_slot_per_degree():
    capped = make_trainer("data.max_degree=3")
    uncapped = make_trainer("data.max_degree=0")
    ws = uncapped.windows
    widest = max(int(d.max()) for d in ws._degree)
    assert widest > 3  # the toy graph has degrees the cap merges
    assert uncapped.windows.num_features == widest + 1 and capped.windows.num_features == 3
    k = int(ws.splits["train"][-1])
    feat_capped = capped.windows.get(k).feat
    feat = ws.get(k).feat
    assert feat.max() <= widest and feat_capped.max() == 2
    assert np.array_equal(np.minimum(feat, 2), feat_capped)  # the same degrees, capped or not


def test_a_scaled_up_instance_keeps_its_uncapped_degree_width():
    """simulate --windows resamples the instance: the degree width it recorded must survive the copy
    (it was dropped, and an uncapped run's simulation failed with 'does not record')."""
    from dygnex_jax.simulate_instance import instance_from_config, scale_up

    config = load_config(SMOKE, ["data.max_degree=0"])
    inst = instance_from_config(config)
    assert inst.num_features > 1
    big = scale_up(inst, 64)
    assert len(big.costs) == 64 and big.features(config) == inst.num_features
    assert (
        main(["simulate", "--config", SMOKE, "data.max_degree=0", "--devices", "4", "--windows", "64"]) == 0
    )


def test_rrelu_mean_is_the_leaky_relu_of_rrelus_expected_slope():
    x = jnp.linspace(-3.0, 3.0, 13)
    got = activation("rrelu_mean")(x)
    assert RRELU_MEAN_SLOPE == pytest.approx(11 / 48)
    np.testing.assert_allclose(np.asarray(got), np.where(x > 0, x, x * 11 / 48), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(activation("relu")(x)), np.maximum(np.asarray(x), 0))
    with pytest.raises(ValueError, match="model.activation"):
        activation("gelu")


@pytest.mark.parametrize("name", ["egcn_o", "egcn_h", "gcn_gru"])
def test_the_activation_reaches_the_model(name):
    """Same parameters, relu vs rrelu_mean: the embeddings differ (the option is no no-op), and the
    parameter trees are the same (an activation has no parameters)."""
    from dygnex_jax.models import LinkPredictor

    relu = make_trainer(model=name, devices=1)
    leaky = make_trainer("model.activation=rrelu_mean", model=name, devices=1)
    assert jax.tree.structure(relu.params) == jax.tree.structure(leaky.params)
    batch = relu.pack([[0, 1]], "train", 1)[0]
    batch = {k: jnp.asarray(v[0]) for k, v in batch.items()}  # device 0's rows
    params = jax.device_get(relu.params)
    a = relu.model.apply(params, batch, method=LinkPredictor.embed)
    b = leaky.model.apply(params, batch, method=LinkPredictor.embed)
    assert float(jnp.abs(a).max()) > 0 and not np.allclose(np.asarray(a), np.asarray(b))


def test_activation_is_refused_where_a_model_has_no_gcn_layers():
    with pytest.raises(UserError, match="model.activation=rrelu_mean applies to"):
        load_config(None, ["model.name=gcrn_gru", "model.activation=rrelu_mean"])


# --- configs/repro and tools/reproduce.py -------------------------------------------------------------


def test_every_published_cell_has_a_config_that_loads():
    configs = sorted((REPO / "configs" / "repro").glob("*.yaml"))
    # the one mapping the tools read names every file, by stem, and loads each as load_config does
    assert list(reproduce.cells().values()) == configs
    loaded = reproduce.cell_configs()
    cells = set()
    for path in configs:
        c = load_config(path)
        assert loaded[path.stem] == c
        cells.add((c.model.name, c.data.dataset))
        # the protocol: early stopping on val, evaluation from IBM's epoch, test at the best val, all
        # non-edges as candidates, one window per step in time order on one device
        assert c.train.patience == 50 and c.eval.start == 7 and c.eval.test == "at_best"
        assert c.eval.candidates == "all" and c.train.batch_size == 1 and c.parallel.devices == 1
        assert c.schedule.method == "psg" and not c.schedule.shuffle
        assert c.data.max_degree == 0 and c.data.neg_sampling == "evolvegcn" and c.data.edge_weight == "count"
        assert c.model.activation == "rrelu_mean"
    assert cells == set(reproduce.PUBLISHED)


def test_the_edge_classification_configs_follow_ibms_file():
    for path in sorted((REPO / "configs" / "repro_edge").glob("*.yaml")):
        c = load_config(path)
        assert c.data.task == "edge_cls" and c.data.edge_weight == "count" and c.data.max_degree == 0
        assert c.train.patience == 100 and c.train.class_weights == (0.8, 0.2) and c.eval.test == "at_best"


def fake_result(cell, way, seed, test_map, test_mrr, model="egcn_o", dataset="uci_collegemsg"):
    return {
        "cell": cell,
        "model": model,
        "dataset": dataset,
        "way": way,
        "seed": seed,
        "best_epoch": 10 + seed,
        "val_map": 0.0,
        "test_map": test_map,
        "test_mrr": test_mrr,
        "epochs": 60 + seed,
        "early_stop": "stopped",
        "wall_seconds": 100.0,
        "attempts": 1,
    }


def test_verdicts_against_the_published_value():
    assert reproduce.verdict([0.03, 0.03], 0.027) == "within (ours higher)"
    assert reproduce.verdict([0.020, 0.030], 0.027) == "within"  # mean .025, sd .0071: 2 sd reaches .027
    v = reproduce.verdict([0.016, 0.017, 0.018], 0.027)  # mean .017, sd .001: 2 sd reaches .019
    assert v.startswith("below by 37 %")
    assert reproduce.verdict([0.0135], 0.027) == "n=1, 50 % below"
    # the published value as printed to four decimals: .0001 is anything from .00005
    assert reproduce.verdict([0.00006], 0.0001) == "within (rounds to it)"
    assert reproduce.verdict([0.00004], 0.0001) == "n=1, 60 % below"
    assert reproduce.verdict([0.0002, 0.0002, 0.0002], 0.0004).startswith("below by 50 %")  # .00035 unreached
    assert reproduce.verdict([0.00027, 0.0003, 0.00033], 0.0004) == "within"  # 2 sd: .00036, not .0004
    assert reproduce.verdict([0.00036, 0.00036], 0.0004) == "within (rounds to it)"


def test_the_table_groups_seeds_per_cell_and_way():
    results = [
        fake_result("egcn_o_uci", "evolvegcn", s, m, 0.1) for s, m in ((0, 0.02), (1, 0.03), (2, 0.025))
    ]
    results.append(fake_result("egcn_o_uci", "dygnex", 0, 0.024, 0.09))
    rows = {(r["cell"], r["way"]): r for r in reproduce.table(results)}
    row = rows[("egcn_o_uci", "evolvegcn")]
    assert row["seeds"] == [0, 1, 2] and row["test_map_mean"] == pytest.approx(0.025)
    assert row["test_map_sd"] == pytest.approx(0.005) and row["test_mrr_sd"] == pytest.approx(0.0)
    assert row["published_map"] == 0.0270 and row["verdict_map"] == "within"
    assert row["best_epochs"] == [10, 11, 12] and row["epochs"] == [60, 61, 62]
    assert rows[("egcn_o_uci", "dygnex")]["test_map_sd"] is None
    text = reproduce.markdown(list(rows.values()))
    assert "| egcn_o_uci | evolvegcn | 0,1,2 | 0.0250 ± 0.0050 | 0.0270 | within |" in text


def test_runs_resume_where_they_stopped(tmp_path):
    config = REPO / "configs" / "repro" / "egcn_o_uci.yaml"
    runs = reproduce.plan_runs([config], [0, 1], ["evolvegcn", "dygnex"], tmp_path, devices=8, batch=16)
    assert [(r.way, r.seed) for r in runs] == [
        ("evolvegcn", 0),
        ("dygnex", 0),
        ("evolvegcn", 1),
        ("dygnex", 1),
    ]
    dy = runs[1]
    assert (
        dy.devices == 8
        and "schedule.method=dygnex_g" in dy.overrides
        and "train.batch_size=16" in dy.overrides
    )
    assert "train.learning_rate=0.004" in dy.overrides  # 0.001 x sqrt(16 / 1): the square-root rule
    linear = reproduce.plan_runs([config], [0], ["dygnex"], tmp_path, devices=8, batch=16, lr_scale="linear")
    assert "train.learning_rate=0.016" in linear[0].overrides
    assert not any(o.startswith("train.learning_rate") for o in runs[0].overrides)  # evolvegcn: as written
    assert not any(o.startswith("schedule.compose") for o in dy.overrides)  # dygnex: the plan's choice
    (chrono,) = reproduce.plan_runs([config], [0], ["dygnex_chrono"], tmp_path, devices=8, batch=16)
    assert set(chrono.overrides) == set(dy.overrides) | {"schedule.compose=chrono"}
    assert chrono.out == tmp_path / "egcn_o_uci" / "dygnex_chrono" / "seed0" and chrono.devices == 8
    # patience in optimiser updates: x 16 / 1 for the dygnex ways (own way name and folder), as written
    # for the EvolveGCN way
    evo, slow = reproduce.plan_runs(
        [config], [0], ["evolvegcn", "dygnex"], tmp_path, devices=8, batch=16, patience_scale="updates"
    )
    assert evo == runs[0]
    assert (
        slow.way == "dygnex-patience800"
        and slow.out == tmp_path / "egcn_o_uci" / "dygnex-patience800" / "seed0"
    )
    assert set(slow.overrides) - set(dy.overrides) == {"train.patience=800"}
    # a deviation from the protocol (--set): every way, its own way name and folder
    (evo_set, dy_set) = reproduce.plan_runs(
        [config], [0], ["evolvegcn", "dygnex"], tmp_path, 8, 16, sets=("data.neg_sampling=uniform",)
    )
    assert (
        evo_set.way == "evolvegcn+data.neg_sampling=uniform"
        and dy_set.way == "dygnex+data.neg_sampling=uniform"
    )
    assert evo_set.out == tmp_path / "egcn_o_uci" / evo_set.way / "seed0"
    assert set(evo_set.overrides) - set(runs[0].overrides) == {"data.neg_sampling=uniform"}
    assert set(dy_set.overrides) - set(dy.overrides) == {"data.neg_sampling=uniform"}
    argv, env = reproduce.command(dy)
    assert "--config" in argv and "train.seed=0" in argv
    assert "--xla_force_host_platform_device_count=8" in env["XLA_FLAGS"]
    # the child trains this process's code, not whatever package the working directory holds
    root = env["PYTHONPATH"].split(os.pathsep)[0]
    assert (Path(root) / "dygnex_jax" / "research" / "reproduce.py").resolve() == Path(
        reproduce.__file__
    ).resolve()
    dy.out.mkdir(parents=True)
    (dy.out / "config.yaml").write_text("name: x\n")  # started, no summary: interrupted
    argv, _ = reproduce.command(dy)
    assert argv[-2:] == ["--resume", str(dy.out)] and "--config" not in argv
    assert not dy.done and reproduce.run_result(dy) is None


def test_a_runs_wall_time_counts_attempts_killed_before_they_logged(tmp_path):
    """Wall seconds: the larger of the attempts' logged seconds and the seconds of the epochs the result is
    made of; a killed attempt logs nothing, so the epochs' own clock must carry the run."""
    config = REPO / "configs" / "repro" / "egcn_o_uci.yaml"
    (run,) = reproduce.plan_runs([config], [0], ["evolvegcn"], tmp_path, devices=1, batch=1)
    run.out.mkdir(parents=True)
    best = {"epoch": 2, "val_map": 0.02, "test_map": 0.021, "test_mrr": 0.11}
    summary = {"model": "egcn_o", "dataset": "uci_collegemsg", "best": best, "epochs": 3, "early_stop": "x"}
    (run.out / "summary.json").write_text(json.dumps(summary))
    rows = [
        {"epoch": e, "loss": 0.5, "epoch_seconds": 100.0 + e, "eval_seconds": 10.0, "padding_efficiency": 1.0}
        for e in (1, 2, 3)
    ]
    (run.out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run.out / reproduce.RUN_LOG).write_text('{"seconds": 150.0, "exit": 0, "resumed": true}\n')
    got = reproduce.run_result(run)
    assert (got["attempt_seconds"], got["epoch_seconds"], got["wall_seconds"]) == (150.0, 336.0, 336.0)
    # an uninterrupted run: its attempt also holds the start-up, and stands
    (run.out / reproduce.RUN_LOG).write_text('{"seconds": 350.0, "exit": 0, "resumed": false}\n')
    assert reproduce.run_result(run)["wall_seconds"] == 350.0 and reproduce.epoch_seconds(tmp_path) == 0.0


_PARENT = """
import sys
from pathlib import Path
from dygnex_jax.research import reproduce
out = Path(sys.argv[1])
out.mkdir()
child = (
    "import pathlib, signal, sys, time\\n"
    "p = pathlib.Path(sys.argv[1])\\n"
    "def stop(*a):\\n"
    "    (p / 'sigints').open('a').write('x')\\n"
    "    time.sleep(0.5)\\n"  # a second one, had it come, would be counted meanwhile
    "    sys.exit(130)\\n"
    "signal.signal(signal.SIGINT, stop)\\n"
    "(p / 'ready').write_text('1')\\n"
    "time.sleep(600)\\n"
)
reproduce.command = lambda run: ([sys.executable, "-c", child, str(out)], None)
run = reproduce.Run("c", out / "c.yaml", "evolvegcn", 0, out, (), 1)
try:
    reproduce.execute(run, log=lambda *a: None)
except KeyboardInterrupt:
    sys.exit(99)
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_to_the_tool_stops_its_training_child_as_one_ctrl_c(tmp_path, sig):
    """SIGTERM / SIGINT / SIGHUP to ``execute``'s process: the child gets exactly one SIGINT (its
    graceful stop), the attempt is logged, and the caller sees KeyboardInterrupt."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "run"
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(out)], cwd=REPO)
    deadline = time.monotonic() + 300
    while not (out / "ready").is_file():
        assert parent.poll() is None and time.monotonic() < deadline, "the child never started"
        time.sleep(0.1)
    parent.send_signal(getattr(signal, sig))
    assert parent.wait(timeout=300) == 99
    assert (out / "sigints").read_text() == "x"
    (attempt,) = [json.loads(line) for line in (out / reproduce.RUN_LOG).read_text().splitlines()]
    assert attempt["exit"] == 130 and attempt["seconds"] > 0


def test_tool_reports_finished_runs_and_refuses_bad_arguments(tmp_path):
    out = tmp_path / "repro"
    run = out / "egcn_o_uci" / "evolvegcn" / "seed0"
    run.mkdir(parents=True)
    best = {"epoch": 12, "loss": 0.3, "val_map": 0.02, "test_map": 0.021, "test_mrr": 0.11}
    summary = {"model": "egcn_o", "dataset": "uci_collegemsg", "best": best, "epochs": 63, "early_stop": "x"}
    (run / "summary.json").write_text(json.dumps(summary))
    (run / reproduce.RUN_LOG).write_text('{"seconds": 30.0, "exit": 0, "resumed": false}\n' * 2)
    # a run another call made (another cell), finished, and one still running: the table is the folder's
    other = out / "gcn_gru_uci" / "evolvegcn" / "seed2"
    other.mkdir(parents=True)
    (other / "summary.json").write_text(json.dumps({**summary, "model": "gcn_gru", "epochs": 40}))
    (out / "gcn_gru_uci" / "evolvegcn" / "seed3").mkdir()
    tool = REPO / "tools" / "reproduce.py"
    args = ["--out", out, "--cells", "egcn_o_uci", "--seeds", "0", "--ways", "evolvegcn", "--report"]
    got = run_python([tool, *args], timeout=600)
    assert got.returncode == 0, got.stderr
    rows = {r["cell"]: r for r in json.loads((out / "reproduce.json").read_text())}
    assert set(rows) == {"egcn_o_uci", "gcn_gru_uci"} and rows["gcn_gru_uci"]["seeds"] == [2]
    row = rows["egcn_o_uci"]
    assert row["test_map_mean"] == 0.021 and row["wall_seconds_mean"] == 60.0
    assert not list(out.glob(".*.part"))
    assert "| egcn_o_uci | evolvegcn | 0 | 0.0210 | 0.0270 | n=1, 22 % below |" in got.stdout
    for bad, what in (
        (["--cells", "nope"], "unknown --cells"),
        (["--seeds", "a"], "--seeds must be"),
        (["--ways", "torch"], "--ways must be"),
        (["--devices", "0"], "--devices and --batch"),
        (["--set", "data.neg_sampling"], "--set takes KEY=VALUE"),
        (["--set", "data.neg_sampling=sometimes"], "neg_sampling"),
    ):
        got = run_python([tool, "--out", tmp_path / "x", *bad], timeout=600)
        assert got.returncode == 2 and got.stderr.startswith("error: ") and what in got.stderr, got.stderr
        assert got.stderr.count("\n") == 1


# --- EvolveGCN's weighted adjacency and negative sampling --------------------------------------------


def repeated_rows_graph(tmp_path, snapshots=12, nodes=30, rows=240, seed=3):
    """An edges file whose pairs repeat within snapshots (in either direction), loaded as a dataset."""
    from dygnex_jax.data.datasets import load_dataset

    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, nodes, rows), rng.integers(0, nodes // 2, rows)
    times = np.sort(rng.integers(0, snapshots * 100, rows))
    path = tmp_path / "repeats.txt"
    path.write_text("".join(f"{s} {d} {t}\n" for s, d, t in zip(src, dst, times)))
    keys = ["data.dataset=edges", f"data.path={path}", "data.aggr_time=100"]
    return load_dataset(load_config(None, keys).data), keys, (src, dst, times)


def test_multiplicity_counts_the_rows_of_both_directions(tmp_path):
    graph, _, (src, dst, times) = repeated_rows_graph(tmp_path)
    ids = graph.node_ids
    seen_repeats = False
    for t, (pairs, mult) in enumerate(zip(graph.snapshots, graph.multiplicity)):
        in_t = ((times - times.min()) // 100) == t  # the stream is bucketed from its first time
        for (a, b), m in zip(pairs, mult):
            u, v = ids[a], ids[b]
            rows = np.count_nonzero(in_t & (((src == u) & (dst == v)) | ((src == v) & (dst == u))))
            assert m == rows  # the rows of both directions, self-loops dropped
            seen_repeats |= m > 1
    assert seen_repeats


def test_edge_weight_count_reaches_the_packed_edges_and_the_model(tmp_path):
    from dygnex_jax.models import LinkPredictor

    graph, keys, _ = repeated_rows_graph(tmp_path)
    base = [*keys, "data.window=3", "model.hidden=8", "model.head_hidden=8", "parallel.layout=scan"]
    plain = make_trainer(*base, base=[], graph=graph, devices=1)
    counted = make_trainer(*base, "data.edge_weight=count", base=[], graph=graph, devices=1)
    pos = [0, 1, 2]
    a, b = plain.pack([pos], "train", 1)[0], counted.pack([pos], "train", 1)[0]
    assert np.array_equal(a["senders"], b["senders"]) and np.array_equal(a["receivers"], b["receivers"])
    real = a["edge_mask"] != 0
    assert set(np.unique(a["edge_mask"][real])) == {1.0}
    # the packed weights are the rows behind each pair, window by window and offset by offset
    want = []
    for k in counted.windows.splits["train"][pos]:
        win = counted.windows.get(int(k))
        want.append(
            [graph.multiplicity[win.target - 1 - (counted.windows.window - 1) + tau] for tau in range(3)]
        )
    for tau in range(3):
        got = b["edge_mask"][0, tau][real[0, tau]]
        assert np.array_equal(got, np.concatenate([w[tau] for w in want]).astype(np.float32))
    assert b["edge_mask"][real].max() > 1
    params = jax.device_get(plain.params)
    emb = lambda tr, batch: tr.model.apply(  # noqa: E731
        params, {k: jnp.asarray(v[0]) for k, v in batch.items()}, method=LinkPredictor.embed
    )
    assert not np.allclose(np.asarray(emb(plain, a)), np.asarray(emb(counted, b)))


def test_evolvegcn_negatives_take_target_sources_and_active_destinations():
    tr = make_trainer("data.neg_sampling=evolvegcn", "data.neg_mult=5", devices=1)
    ws = tr.windows
    for k in ws.splits["train"][:4]:
        k = int(k)
        win = ws.get(k)
        target = ws.target_edges(win.target)
        neg = ws._negatives(k, 5, seed=0, epoch=1)
        assert len(neg) == 5 * len(win.positives)
        assert np.isin(neg[:, 0], target[:, 0]).all() and np.isin(neg[:, 1], win.nodes).all()
        codes = neg[:, 0] * ws.graph.num_nodes + neg[:, 1]
        assert not np.isin(codes, win.positive_codes).any() and (neg[:, 0] != neg[:, 1]).all()
    # sources that are not active in the history (new nodes) are drawn too
    news = [
        np.setdiff1d(ws.target_edges(ws.get(int(k)).target)[:, 0], ws.get(int(k)).nodes).size
        for k in ws.splits["train"]
    ]
    assert max(news) > 0


@pytest.mark.parametrize(
    "keys,match",
    [
        (["data.edge_weight=count", "data.cumulative=true"], "cumulative series"),
        (["data.edge_weight=count", "schedule.method=vertex", "model.name=gcrn_gru"], "partitioned step"),
        (["data.edge_weight=count", "data.task=node_reg", "data.dataset=chickenpox_hungary"], "node_reg"),
    ],
)
def test_edge_weight_count_is_refused_where_it_has_no_meaning(keys, match):
    with pytest.raises(UserError, match=match):
        load_config(None, keys)
