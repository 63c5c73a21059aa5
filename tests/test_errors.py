"""Every row of README's error table: the CLI prints one line ``error: ...``, exits 2, writes nothing.

The table and ``CASES`` are checked against each other, so a row without a test (or a test without a
row) fails. Rows run ``dygnex_jax.__main__.main(argv)`` in this process (the same code path as
``python -m dygnex_jax``, without paying a JAX start-up per row); ``test_one_row_in_a_fresh_process``
runs one row as a real subprocess for the exit status.
"""

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_pygt_json import bad_inputs as pygt_bad_inputs

from dygnex_jax.__main__ import main
from dygnex_jax.checkpoint import FOLDER
from dygnex_jax.config import dump_config, load_config, to_dict
from dygnex_jax.runlock import LOCK_FILE, this_process
from dygnex_jax.schedule.ilp import installed_milp_solvers

REPO = Path(__file__).resolve().parents[1]
SMOKE = str(REPO / "configs" / "smoke.yaml")
GOOD = "".join(f"{i % 7} {(i * 3 + 1) % 7} {i * 10}\n" for i in range(60))

PYGT = ["train", "--config", SMOKE, "data.task=node_reg", "data.dataset=pygt_json"]
NAMED_SIGNAL = [*PYGT[:4], "data.dataset=chickenpox_hungary", "data.root={pygt_root}"]

# id -> (argv, text the one line must contain). {x} names a path prepared by `inputs` below;
# {out} is the --out directory that must not appear.
CASES = {
    # bad data
    "data-root-missing": (["train", "data.dataset=bitcoin_otc", "data.root={nowhere}"], "does not exist"),
    "download-unknown-dataset": (["download", "nope", "--root", "{empty_dir}"], "unknown dataset 'nope'"),
    "download-needs-root": (["download", "bitcoin_otc", "--root", ""], "download needs a data folder"),
    "download-no-source": (
        ["download", "enron_dysat", "--root", "{empty_dir}"],
        "has no public single-file source here (DySAT's split",
    ),
    "dataset-file-missing": (
        ["train", "data.dataset=bitcoin_otc", "data.root={empty_dir}"],
        "soc-sign-bitcoinotc.csv.gz' does not exist",
    ),
    "dataset-needs-path": (["train", "data.dataset=snapshots"], "needs data.path=FOLDER (or a glob)"),
    "edge-file-missing": (["train", "data.dataset=edges", "data.path={nowhere}"], "does not exist"),
    "edge-file-empty": (["train", "data.dataset=edges", "data.path={empty}"], "is empty"),
    "edge-file-binary": (["train", "data.dataset=edges", "data.path={binary}"], "is binary data"),
    "edge-file-json": (["train", "data.dataset=edges", "data.path={json}"], "is JSON, not a text edge list"),
    "damaged-gzip": (["train", "data.dataset=edges", "data.path={bad_gzip}"], "damaged gzip"),
    "wrong-column-count": (
        ["train", "data.dataset=edges", "data.path={bad_row}"],
        "line 3: wrong column count",
    ),
    "node-id-not-integer": (
        ["train", "data.dataset=edges", "data.path={float_id}"],
        "line 2: target node id '2.5' is not an integer",
    ),
    "node-id-too-large": (
        ["train", "data.dataset=edges", "data.path={big_id}"],
        "line 2: source node id 12345678901234567890123 is outside the 64-bit range",
    ),
    "time-not-a-number": (
        ["train", "data.dataset=edges", "data.path={bad_time}"],
        "time 'noon' is not a number",
    ),
    # (a read error: /proc/self/mem reads EIO at offset 0, for root too, where chmod 000 does not bite)
    "edge-file-unreadable": (["train", "data.dataset=edges", "data.path=/proc/self/mem"], "cannot be read"),
    "edge-file-is-a-directory": (["train", "data.dataset=edges", "data.path={empty_dir}"], "is a directory"),
    "edge-header-short-row": (
        ["train", "data.dataset=edges", "data.path={header_short}"],
        "line 3: 2 fields, but the header puts 'timestamp' in column 3",
    ),
    "edge-date-impossible": (
        ["train", "data.dataset=edges", "data.path={bad_date}"],
        "is not a calendar date",
    ),
    "snapshot-files-mixed-ids": (
        ["train", "data.dataset=snapshots", "data.path={mixed_snaps}"],
        "has integer node ids but",
    ),
    "edge-header-weight-no-time": (
        ["train", "data.dataset=edges", "data.path={weight_header}"],
        "its header names the third column 'weight'",
    ),
    "too-many-snapshots": (
        ["train", "data.dataset=edges", "data.path={good}", "data.aggr_time=1e-9"],
        "snapshots, more than the 100,000 a run takes: use a larger data.aggr_time",
    ),
    "not-enough-memory": (
        ["train", "--config", SMOKE, "model.hidden=1000000000"],
        "of memory, more than the",
    ),
    "step-does-not-fit": (
        ["train", "--config", SMOKE, "parallel.memory_gb=0.000001"],
        "a training step of one window per device needs about",
    ),
    "too-many-planned-steps": (
        ["train", "--config", SMOKE, "train.epochs=1000000"],
        "more than the 20,000 it plans ahead",
    ),
    "too-few-snapshots": (
        ["train", "data.dataset=edges", "data.path={good}", "data.aggr_time=1e9"],
        "1 snapshot(s) after bucketing",
    ),
    "no-edges": (
        ["train", "data.dataset=edges", "data.path={self_loops}", "data.num_snapshots=4"],
        "no edges",
    ),
    "time-range-bad-value": (["train", "data.start=yesterday"], "data.start='yesterday' is neither a number"),
    "time-range-end-before-start": (
        ["train", "data.start=2004-06-01", "data.end=2004-01-01"],
        "data.end=2004-01-01 is not after data.start=2004-06-01",
    ),
    "time-range-keeps-nothing": (
        ["train", "data.dataset=edges", "data.path={good}", "data.start=1e6"],
        "keep no rows of",
    ),
    "snapshots-path-missing": (["train", "data.dataset=snapshots", "data.path={nowhere}"], "does not exist"),
    "snapshots-path-is-a-file": (
        ["train", "data.dataset=snapshots", "data.path={good}"],
        "is a file: data.dataset=snapshots reads a folder",
    ),
    "edge-times-one-value": (
        ["train", "data.dataset=edges", "data.path={same_time}", "data.num_snapshots=10"],
        "every row has the same time (5)",
    ),
    "edge-times-past-2-53": (
        ["train", "data.dataset=edges", "data.path={ns_times}"],
        "past 2**53, where float64 rounds distinct times together",
    ),
    "snapshots-folder-empty": (
        ["train", "data.dataset=snapshots", "data.path={empty_dir}"],
        "holds no files",
    ),
    "snapshots-no-match": (
        ["train", "data.dataset=snapshots", "data.path={empty_dir}/*.txt"],
        "matches no files",
    ),
    "snapshot-file-bad": (
        ["train", "data.dataset=snapshots", "data.path={snap_bad}"],
        "snap2.txt' line 2: target node id '2.5' is not an integer",
    ),
    "snapshot-files-columns-differ": (
        ["train", "data.dataset=snapshots", "data.path={snap_mixed}"],
        "every snapshot file needs the same columns",
    ),
    "snapshot-files-no-rows": (
        ["train", "data.dataset=snapshots", "data.path={snap_no_rows}"],
        "have no data rows",
    ),
    "snapshots-rebucket": (
        ["train", "data.dataset=snapshots", "data.path={snap_mixed}", "data.aggr_time=10"],
        "one snapshot per file",
    ),
    "targets-new-task": (
        ["train", "--config", SMOKE, "data.targets=new", "data.task=edge_cls"],
        "data.targets=new applies to data.task=link",
    ),
    "window-longer-than-series": (["train", "--config", SMOKE, "data.window=500"], "data.window=500 needs"),
    "window-larger-than-train-split": (
        ["train", "--config", SMOKE, "data.window=17"],
        "too few for the split",
    ),
    "more-devices-than-windows": (["train", "--config", SMOKE, "train.batch_size=4"], "devices but only 4"),
    "more-devices-than-training-windows": (
        ["train", "--config", SMOKE, "data.window=12", "train.batch_size=32"],
        "only 6 windows per step (6 training windows, batch_size 32): use at most 6 devices",
    ),
    # bad config
    "config-file-missing": (["train", "--config", "{nowhere}"], "does not exist"),
    "config-not-yaml": (["train", "--config", "{bad_yaml}"], "is not valid YAML"),
    "config-many-documents": (["train", "--config", "{multi_yaml}"], "holds more than one YAML document"),
    "config-is-a-folder": (["train", "--config", "{a_folder}"], "is a folder: pass a YAML file"),
    "empty-path": (["train", "--config", SMOKE, "--out", ""], "--out is empty: give a path"),
    "both-bucketings": (
        ["train", "--config", SMOKE, "data.aggr_time=100", "data.num_snapshots=10"],
        "both bucket the edges into snapshots: set one of them",
    ),
    "no-targets": (
        ["train", "data.dataset=edges", "data.path={far_outlier}", "data.num_snapshots=30", "data.window=4"],
        "train windows hold no target edge",
    ),
    "config-duplicate-key": (
        ["train", "--config", "{dup_yaml}"],
        "key 'epochs' is given twice in one section",
    ),
    "config-empty": (["train", "--config", "{empty}"], "is empty: write the keys that differ"),
    "config-not-a-mapping": (["train", "--config", "{a_file}"], "holds a str, not sections of keys"),
    "config-not-utf8": (["train", "--config", "{latin1_yaml}"], "is not UTF-8 text"),
    "unknown-config-key": (["train", "train.no_such_key=1"], "unknown config key 'train.no_such_key'"),
    "wrong-value-type": (["train", "train.epochs=many"], "'train.epochs' must be an integer"),
    "bad-value": (["train", "train.batch_size=0"], "train.batch_size must be positive"),
    "config-key-renamed": (["train", "--config", SMOKE, "train.eval_every=2"], "is now 'eval.every'"),
    "non-finite-learning-rate": (["train", "train.learning_rate=.inf"], "positive and finite"),
    "override-not-key-value": (["train", "epochs"], "is not key=value"),
    "unknown-dataset": (["train", "data.dataset=no_such_set"], "unknown dataset 'no_such_set'"),
    "unknown-model": (["train", "--config", SMOKE, "model.name=transformer"], "unknown model.name"),
    "unknown-scheduler": (["train", "--config", SMOKE, "schedule.method=magic"], "unknown schedule.method"),
    "partition-model": (
        ["train", "--config", SMOKE, "schedule.method=vertex", "model.name=tgcn"],
        "schedule.method=vertex runs model.name egcn_o or gcrn_gru",
    ),
    "partition-task": (
        ["train", "--config", SMOKE, "schedule.method=vertex", "data.task=node_reg"],
        "schedule.method=vertex runs data.task=link only",
    ),
    "task-without-signal": (["train", "--config", SMOKE, "data.task=node_reg"], "needs a node signal"),
    "signal-json-malformed": (
        [
            "train",
            "--config",
            SMOKE,
            "data.task=node_reg",
            "data.dataset=pedalme_london",
            "data.root={bad_signal}",
        ],
        "is not valid JSON",
    ),
    # data.dataset=pygt_json (data/pygt_json.py) and data.features=given (tests/test_pygt_json.py)
    "pygt-json-file-missing": (
        ["train", "--config", SMOKE, "data.task=node_reg", "data.dataset=pygt_json", "data.path={nowhere}"],
        "(data.path) does not exist: check the path",
    ),
    "pygt-json-malformed": (PYGT + ["data.path={pygt_cut}"], "is a damaged gzip file"),
    "pygt-json-missing-key": (PYGT + ["data.path={pygt_no_y}"], "snapshot record '3' has no 'y'"),
    "pygt-json-record-gap": (PYGT + ["data.path={pygt_gap}"], "has snapshot records up to '5' but none '3'"),
    "pygt-json-ambiguous-key": (PYGT + ["data.path={pygt_two_targets}"], "the target is ambiguous"),
    "pygt-json-bad-shape": (PYGT + ["data.path={pygt_two_wide}"], "must be [N] numbers, got shape [5, 2]"),
    "pygt-json-non-finite": (PYGT + ["data.path={pygt_nan}"], "holds a non-finite value"),
    "pygt-json-inconsistent-nodes": (
        PYGT + ["data.path={pygt_ragged}", "data.features=given"],
        "'X' has 4 nodes at step 4 but 5 at step 0",
    ),
    "pygt-json-bad-node-id": (PYGT + ["data.path={pygt_far}"], "names node 9, outside 0..4"),
    "pygt-json-static-link": (
        ["train", "--config", SMOKE, "data.dataset=pygt_json", "data.path={pygt_static}"],
        "has one static graph",
    ),
    "features-given-missing": (
        PYGT + ["data.path={pygt_no_x}", "data.features=given"],
        "has no node features for data.features=given",
    ),
    "features-given-named": (
        NAMED_SIGNAL + ["data.features=given"],
        "data.features=given needs node features, which 'chickenpox_hungary' has not",
    ),
    "features-given-task": (
        ["train", "--config", SMOKE, "data.features=given"],
        "data.features=given applies to data.task=node_reg",
    ),
    "lags-zero": (NAMED_SIGNAL + ["data.lags=0"], "data.lags=0 leaves a node-regression window no input"),
    "edge-cls-partition": (
        ["train", "--config", SMOKE, "schedule.method=snapshot", "data.task=edge_cls"],
        "schedule.method=snapshot runs data.task=link only",
    ),
    "edge-cls-no-ratings": (["train", "--config", SMOKE, "data.task=edge_cls"], "needs edge ratings"),
    "edge-cls-one-class": (
        ["train", "--config", SMOKE, "data.task=edge_cls", "data.dataset=edges", "data.path={one_class}"],
        "every training edge has label 1",
    ),
    "unknown-solver": (
        ["train", "--config", SMOKE, "schedule.method=dygnex_l", "schedule.solver=NOPE"],
        "unknown schedule.solver 'NOPE'",
    ),
    "solver-not-installed": (
        ["train", "--config", SMOKE, "schedule.method=dygnex_l", "schedule.solver={missing_solver}"],
        "is not installed here",
    ),
    "cost-model-missing": (["train", "--config", SMOKE, "schedule.cost_model={nowhere}"], "cost model file"),
    "compile-cache-unusable": (
        ["train", "--config", SMOKE, "parallel.compile_cache={a_file}/xla"],
        "choose another parallel.compile_cache or 'off'",
    ),
    "layout-model": (
        ["train", "--config", SMOKE, "model.name=gcrn_gru", "parallel.layout=flat"],
        "does not fit model.name 'gcrn_gru'",
    ),
    "activation-model": (
        ["train", "--config", SMOKE, "model.name=tgcn", "model.activation=rrelu_mean"],
        "applies to model.name egcn_h, egcn_o, gcn_gru",
    ),
    "patience-without-val": (
        ["train", "--config", SMOKE, "train.patience=3", "data.val_frac=0"],
        "leaves no validation split",
    ),
    "edge-weight-cumulative": (
        ["train", "--config", SMOKE, "data.edge_weight=count", "data.cumulative=true"],
        "which a cumulative series (data.cumulative=true) does not have",
    ),
    "edge-weight-partitioned": (
        [
            "train",
            "--config",
            SMOKE,
            "data.edge_weight=count",
            "schedule.method=vertex",
            "model.name=gcrn_gru",
        ],
        "its partitioned step packs unit edges",
    ),
    "edge-weight-node-reg": (
        ["train", "data.edge_weight=count", "data.task=node_reg", "data.dataset=chickenpox_hungary"],
        "applies to data.task link and edge_cls",
    ),
    "usage": (["fly"], "invalid choice"),
    # bad environment, run directories
    "coordinator-unreachable": (
        [
            "train",
            "--coordinator",
            "{dead_address}",
            "--num-processes",
            "2",
            "--process-id",
            "1",
            "--coordinator-timeout",
            "1",
        ],
        "cannot reach the coordinator",
    ),
    "too-many-devices": (["train", "--config", SMOKE, "parallel.devices=16"], "JAX sees 8 device(s)"),
    "out-is-a-file": (["train", "--config", SMOKE, "--out", "{a_file}"], "is a file"),
    "out-under-a-file": (["train", "--config", SMOKE, "--out", "{a_file}/run"], "a file: choose a directory"),
    # (/sys refuses a new folder to root too, where a chmod 555 folder would not)
    "out-cannot-be-made": (["train", "--config", SMOKE, "--out", "/sys/dygnex-test/run"], "cannot be made"),
    "out-holds-a-run": (["train", "--config", SMOKE, "--out", "{finished_run}"], "already holds a run"),
    "out-holds-another-run": (
        ["train", "--config", SMOKE, "--out", "{other_unfinished_run}"],
        "holds a run of another config (train.seed differ) that has no checkpoint",
    ),
    "out-name-taken": (
        ["train", "--config", SMOKE, "--out", "{name_taken_dir}"],
        "holds checkpoints (not a folder) where the run writes its own",
    ),
    # a file name past the file system's limit (a full disk: tests/test_files.py, which needs root)
    "fs-fault": (
        [
            "schedule",
            "--config",
            SMOKE,
            "--devices",
            "2",
            "--json",
            "{name_taken_dir}/" + "x" * 300 + ".json",
        ],
        "File name too long: free space or fix the path",
    ),
    "out-holds-foreign-config": (
        ["train", "--config", SMOKE, "--out", "{foreign_config_dir}"],
        "holds a config.yaml that is not this run's",
    ),
    "run-in-use": (["train", "--resume", "{locked_run}"], "is in use by process"),
    "resume-no-checkpoint-restores": (
        ["train", "--resume", "{damaged_run}"],
        "none of its checkpoints restores (epoch_000002: meta.json is not valid JSON",
    ),
    "resume-missing-dir": (["train", "--resume", "{nowhere}"], "does not exist"),
    "resume-is-a-file": (["train", "--resume", "{good}"], "is a file, not a folder"),
    "resume-no-checkpoint": (["train", "--resume", "{half_checkpoint_run}"], "holds no complete checkpoint"),
    "resume-with-config": (
        ["train", "--resume", "{fake_checkpoint_run}", "--config", SMOKE],
        "drop --config",
    ),
    "resume-changes-config": (
        ["train", "--resume", "{fake_checkpoint_run}", "data.window=3"],
        "--resume cannot change data.window",
    ),
    "resume-moved-data-differs": (
        ["train", "--resume", "{digest_run}", "data.root={a_folder}"],
        "is not the data this run trained on",
    ),
    "resume-data-changed": (["train", "--resume", "{digest_run}"], "changed since this run trained on it"),
    "resume-moved-data-unrecorded": (
        ["train", "--resume", "{fake_checkpoint_run}", "data.root={a_folder}"],
        "record no digest of their data",
    ),
    "resume-fewer-epochs": (
        ["train", "--resume", "{fake_checkpoint_run}", "train.epochs=1"],
        "the checkpoint is at epoch 2",
    ),
    "profile-bad-steps": (["profile", "--config", SMOKE, "--steps", "1"], "--steps >= 2"),
    "profile-bad-max-load": (["profile", "--config", SMOKE, "--max-load", "-1"], "--max-load must be >= 0"),
    # the test process itself keeps the load average above this
    "profile-machine-busy": (["profile", "--config", SMOKE, "--max-load", "0.000001"], "is above --max-load"),
    "schedule-bad-devices": (["schedule", "--config", SMOKE, "--devices", "-3"], "--devices must be >= 0"),
    "inspect-bad-rows": (["inspect", "--config", SMOKE, "--rows", "1"], "--rows >= 2"),
    "output-under-a-file": (
        ["schedule", "--config", SMOKE, "--json", "{good}/figures.json"],
        "which is a file: choose another path",
    ),
    "simulate-negative-bytes": (
        ["simulate", "--config", SMOKE, "--param-bytes", "-5"],
        "--param-bytes must be in [0, 1e+15] (0: the model's own), got -5",
    ),
    "simulate-bad-cost-entry": (
        ["simulate", "--config", SMOKE, "--cost-model", "{bad_entry}"],
        "is malformed (a dataset's rows are malformed): re-run profile",
    ),
    "report-missing-run": (["report", "{nowhere}"], "does not exist"),
    "report-not-a-run": (["report", "{empty_dir}"], "is not a training run"),
    "report-run-is-a-file": (["report", "{good}"], "is a file, not a folder"),
}


def readme_rows() -> list[str]:
    """Row ids of the table under README's "## Errors" heading."""
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Errors", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z0-9-]+)` \|", section, flags=re.M)


def test_readme_table_and_tests_match():
    rows = readme_rows()
    assert len(rows) == len(set(rows)), "duplicate rows in README's error table"
    assert sorted(rows) == sorted(CASES), set(rows) ^ set(CASES)


def dead_address() -> str:
    """127.0.0.1:PORT where nothing listens (a port the OS just handed out and took back)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def fake_checkpoint_run(path: Path, **meta) -> Path:
    """A run folder with config.yaml and a complete-looking checkpoint of epoch 2 (resume_config only
    reads its meta.json, so the refusals are tested without training), ``meta`` added to its meta.json."""
    config = load_config(SMOKE)
    ckpt = path / FOLDER / "epoch_000002"
    (ckpt / "state").mkdir(parents=True)
    dump_config(config, path / "config.yaml")
    (ckpt / "meta.json").write_text(
        json.dumps({"epoch": 2, "config": to_dict(config), "history": [], **meta})
    )
    return path


def run_folders(d: Path) -> dict:
    """Run folders for the run-directory rows: one a live process holds (this one, by its lock record),
    one whose only checkpoint is damaged, one of another config interrupted before its first checkpoint,
    and a folder holding someone else's config.yaml."""
    locked = fake_checkpoint_run(d / "locked_run")
    (locked / LOCK_FILE).write_text(json.dumps(this_process()))
    damaged = fake_checkpoint_run(d / "damaged_run")
    (damaged / FOLDER / "epoch_000002" / "meta.json").write_text('{"epoch": 2, "con')
    other = d / "other_run"
    other.mkdir()
    dump_config(load_config(SMOKE, ["train.seed=7"]), other / "config.yaml")
    (other / "metrics.jsonl").write_text('{"epoch": 1}\n')
    (d / "foreign").mkdir()
    (d / "foreign" / "config.yaml").write_text("foo: 1\n")
    (d / "taken").mkdir()
    (d / "taken" / "checkpoints").write_text("a file where the run keeps its checkpoints\n")
    return {
        "name_taken_dir": str(d / "taken"),
        "locked_run": str(locked),
        "damaged_run": str(damaged),
        "other_unfinished_run": str(other),
        "foreign_config_dir": str(d / "foreign"),
    }


def _mixed_snapshots(folder) -> str:
    """A snapshot folder whose first file names its nodes and whose second numbers them."""
    folder.mkdir()
    (folder / "day1.txt").write_text("alice bob\n")
    (folder / "day2.txt").write_text("1 2\n")
    return str(folder)


@pytest.fixture
def inputs(tmp_path):
    d = tmp_path / "in"
    d.mkdir()

    def write(name, text):
        (d / name).write_text(text)
        return str(d / name)

    (d / "empty_dir").mkdir()
    (d / "bad.gz").write_bytes(gzip.compress(GOOD.encode())[:30])
    (d / "binary").write_bytes(b"\x7fELF\x00\x00\x01" * 50)
    (d / "latin1.yaml").write_bytes("name: caf\u00e9\n".encode("latin-1"))
    half = d / "half_run" / FOLDER
    (half / "epoch_000001" / "state").mkdir(parents=True)  # no meta.json: cut short
    (half / ".tmp-epoch_000002-123" / "state").mkdir(parents=True)
    (d / "half_run" / "metrics.jsonl").write_text('{"epoch": 1}\n')
    (d / "finished").mkdir()
    (d / "finished" / "metrics.jsonl").write_text('{"epoch": 1}\n')
    for folder, second in (("snap_bad", "1 2\n1 2.5\n"), ("snap_mixed", "1 2 10\n")):
        (d / folder).mkdir()
        (d / folder / "snap1.txt").write_text("1 2\n2 3\n")
        (d / folder / "snap2.txt").write_text(second)
    (d / "snap_no_rows").mkdir()
    (d / "snap_no_rows" / "snap1.txt").write_text("# nothing\n")
    (d / "bad_signal" / "pedalme_london").mkdir(parents=True)
    (d / "bad_signal" / "pedalme_london" / "pedalme_london.json.gz").write_bytes(
        gzip.compress(b'{"edges": [[0, 1],')
    )
    installed = installed_milp_solvers()
    return {
        "nowhere": str(tmp_path / "no" / "such"),
        "dead_address": dead_address(),
        "empty_dir": str(d / "empty_dir"),
        "empty": write("empty.txt", "# only a comment\n"),
        "binary": str(d / "binary"),
        "json": write("edges.json", '{"edges": [[1, 2, 10], [2, 3, 20]]}\n'),
        "bad_gzip": str(d / "bad.gz"),
        "bad_row": write("bad_row.txt", "1 2 10\n2 3 20\n4 5\n"),
        "float_id": write("float_id.txt", "1 2 10\n1 2.5 20\n"),
        "big_id": write("big_id.txt", "1 2 10\n12345678901234567890123 2 20\n"),
        "bad_time": write("bad_time.txt", "1 2 10\n2 3 noon\n"),
        "good": write("good.txt", GOOD),
        "same_time": write("same_time.txt", "".join(f"{i} {i + 1} 5\n" for i in range(10))),
        "ns_times": write(
            "ns.txt",
            "".join(f"{i % 3} {i % 4 + 3} {1_700_000_000_000_000_000 + i * 100}\n" for i in range(12)),
        ),
        # ratings all positive (src dst rating time): every edge_cls label is 1
        "one_class": write(
            "one_class.txt", "".join(f"{i % 7} {(i * 3 + 1) % 7} 5 {i * 10}\n" for i in range(60))
        ),
        "self_loops": write("loops.txt", "".join(f"{i} {i} {i}\n" for i in range(20))),
        "bad_yaml": write("bad.yaml", "train: [unclosed\n"),
        "multi_yaml": write("multi.yaml", "train:\n  epochs: 2\n---\nmodel:\n  hidden: 3\n"),
        "a_folder": str(d),
        # the rows at times 0..590 and one far off: 30 equal spans leave every target but the last empty
        "far_outlier": write("far_outlier.txt", GOOD + "1 2 1e300\n"),
        # a cost-model cache entry whose dataset has rows but no seconds
        "bad_entry": write(
            "bad_entry.json", '{"format": "dygnex_cost_profiles", "datasets": {"a": {"rows": [[1, 2, 3]]}}}\n'
        ),
        "dup_yaml": write("dup.yaml", "train:\n  epochs: 2\n  epochs: 3\n"),
        "latin1_yaml": str(d / "latin1.yaml"),
        "missing_solver": next((s for s in ("GLPK_MI", "CBC", "SCIP", "GUROBI") if s not in installed), ""),
        "a_file": write("a_file", "not a directory\n"),
        "weight_header": write("weight_header.txt", "src dst weight\n1 2 5\n2 3 4\n"),
        "header_short": write("jodie.csv", "user_id,item_id,timestamp,state_label\n1,2,5.0,0\n3,4\n"),
        "bad_date": write("dates.csv", "src,dst,date\n1,2,2014-01-31\n2,3,2014-02-30\n"),
        "mixed_snaps": _mixed_snapshots(d / "mixed_snaps"),
        "bad_signal": str(d / "bad_signal"),
        "snap_bad": str(d / "snap_bad"),
        "snap_mixed": str(d / "snap_mixed"),
        "snap_no_rows": str(d / "snap_no_rows"),
        "finished_run": str(d / "finished"),
        "half_checkpoint_run": str(d / "half_run"),
        "fake_checkpoint_run": str(fake_checkpoint_run(d / "fake_run")),
        "digest_run": str(fake_checkpoint_run(d / "digest_run", data_digest="0" * 64)),
        **run_folders(d),
        **pygt_bad_inputs(d / "pygt"),
    }


def tree(path: Path) -> dict:
    """Every file under ``path`` with its bytes (to prove a command changed nothing)."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_error_row(case, inputs, tmp_path, capsys):
    argv, needle = CASES[case]
    if "{missing_solver}" in argv and not inputs["missing_solver"]:
        pytest.skip("every MILP solver tried is installed here")
    argv = [a.format(**inputs) for a in argv]
    out = tmp_path / "out"
    if argv[0] in ("train", "profile", "report") and "--out" not in argv and "--resume" not in argv:
        argv = [argv[0], "--out", str(out), *argv[1:]]
    before = tree(tmp_path / "in")
    try:
        code = main(argv)
    except SystemExit as e:  # argparse usage errors
        code = e.code
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert needle in lines[0], lines[0]
    assert not out.exists(), f"{case}: wrote to --out"
    assert tree(tmp_path / "in") == before, f"{case}: changed files it was given"


def test_one_row_in_a_fresh_process(inputs):
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"}
    result = subprocess.run(
        [sys.executable, "-m", "dygnex_jax", "train", "--resume", inputs["half_checkpoint_run"]],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: --resume {inputs['half_checkpoint_run']!r} holds no complete checkpoint "
        f"(looked in {str(Path(inputs['half_checkpoint_run']) / FOLDER)!r}): start the run again with --out"
    ]
