"""Hostile-user probes (issue 17): a table of bad and odd inputs, each run through the CLI's entry point
(``dygnex_jax.__main__.main``, in this process; a few in a fresh ``python -m dygnex_jax``) or the
library's data entry point (``load_dataset``).

A bad input must give exit code 2, exactly one line ``error: <what>: <what to do>`` on stderr, no
traceback, and nothing in ``--out``. An input that is legitimately fine (CRLF line ends, a byte-order
mark, a header naming the columns ``src dst time weight``, a batch larger than the data, ...) must give
the correct result: the same graph as the plain file, or the same training run. Every case counts its
outcome (``OUTCOMES``); ``test_probe_totals`` states the totals (README: Errors) and holds tracebacks
and silent wrong results at 0. ``was`` records what each case did before the fixes of issue 17
(traceback, memory error or kill, hang, silent wrong result), for the record.
"""

from __future__ import annotations

import collections
import datetime
import gzip
import os
import sys
import typing
from pathlib import Path

import numpy as np
import pytest
from helpers import run_cli

from dygnex_jax.__main__ import main
from dygnex_jax.config import load_config
from dygnex_jax.data.datasets import load_dataset
from dygnex_jax.data.node_windows import task_windows
from dygnex_jax.errors import UserError

REPO = Path(__file__).resolve().parents[1]
SMOKE = str(REPO / "configs" / "smoke.yaml")
DATA = Path(os.environ.get("DYGNEX_DATA", REPO.parent / "shared" / "datasets"))
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
OUTCOMES: collections.Counter = collections.Counter()  # outcome -> cases (test_probe_totals)
WAS: collections.Counter = collections.Counter()  # what the cases that ran did before the fixes


class Probe(typing.NamedTuple):
    id: str
    argv: str  # "{name}" = a file of ``probe_files``; a "same:REF" probe gives data.* overrides
    expect: str  # "error" (one line, exit 2) or "same:REF" (the graph of file REF)
    needle: str = ""  # text the error line must hold
    was: str = "error"  # before issue 17: error, traceback, memory, hang, silent
    env: tuple = ()  # (name, value) environment settings
    needs: str = ""  # "data": the real datasets; "nonroot": permissions that bite


S = f"train --config {SMOKE}"
E = "train data.dataset=edges data.path="
PROBES = [
    # --- config keys: ranges, types, lists ------------------------------------------------------------
    Probe("class-weights-zero", f"{S} train.class_weights=[0,0]", "error", "must be positive", "silent"),
    Probe("class-weights-one-zero", f"{S} train.class_weights=[0,1]", "error", "must be positive", "silent"),
    Probe("class-weights-short", f"{S} train.class_weights=[1]", "error", "list of 2 values"),
    Probe("class-weights-empty", f"{S} train.class_weights=[]", "error", "list of 2 values"),
    Probe("class-weights-long", f"{S} train.class_weights=[1,2,3]", "error", "list of 2 values"),
    Probe("class-weights-nan", f"{S} train.class_weights=[.nan,1]", "error", "got [nan, 1.0]"),
    Probe("class-weights-inf", f"{S} train.class_weights=[.inf,1]", "error", "finite (each)"),
    Probe("class-weights-text", f"{S} train.class_weights=x", "error", "list of 2 values"),
    Probe("neg-per-source-zero", f"{S} eval.neg_per_source=0", "error", "must be positive"),
    Probe("neg-per-source-negative", f"{S} eval.neg_per_source=-5", "error", "must be positive"),
    Probe("head-hidden-zero", f"{S} model.head_hidden=0", "error", "must be positive"),
    Probe("hidden-negative", f"{S} model.hidden=-1", "error", "must be positive"),
    Probe("hidden-float", f"{S} model.hidden=8.5", "error", "must be an integer"),
    Probe("layers-zero", f"{S} model.layers=0", "error", "must be in 1..64"),
    Probe("layers-huge", f"{S} model.layers=1000000", "error", "must be in 1..64", "hang"),
    Probe("cheb-k-huge", f"{S} model.name=gcrn_gru model.cheb_k=1000", "error", "must be in 1..64", "hang"),
    Probe("epochs-zero", f"{S} train.epochs=0", "error", "must be positive"),
    Probe("epochs-bool", f"{S} train.epochs=true", "error", "must be an integer"),
    Probe("epochs-list", f"{S} train.epochs=[1]", "error", "must be an integer"),
    Probe("batch-size-negative", f"{S} train.batch_size=-8", "error", "must be positive"),
    Probe("learning-rate-zero", f"{S} train.learning_rate=0", "error", "positive and finite"),
    Probe("learning-rate-nan", f"{S} train.learning_rate=.nan", "error", "positive and finite"),
    Probe("learning-rate-negative", f"{S} train.learning_rate=-0.1", "error", "positive and finite"),
    Probe("weight-decay-inf", f"{S} train.weight_decay=.inf", "error", ">= 0 and finite"),
    Probe("seed-negative", f"{S} train.seed=-1", "error", "in 0..4294967295"),
    Probe("seed-too-big", f"{S} train.seed=4294967296", "error", "in 0..4294967295"),
    Probe("eval-every-zero", f"{S} eval.every=0", "error", "must be positive"),
    Probe("checkpoint-every-negative", f"{S} train.checkpoint_every=-1", "error", ">= 0"),
    Probe("keep-checkpoints-zero", f"{S} train.keep_checkpoints=0", "error", "must be positive"),
    Probe("on-nonfinite-other", f"{S} train.on_nonfinite=maybe", "error", "stop or skip"),
    Probe("window-zero", f"{S} data.window=0", "error", "must be positive"),
    Probe("window-empty", f"{S} data.window=", "error", "must be an integer"),
    Probe("lags-negative", f"{S} data.lags=-1", "error", ">= 0"),
    Probe("train-frac-zero", f"{S} data.train_frac=0", "error", "in (0, 1)"),
    Probe("train-frac-one", f"{S} data.train_frac=1", "error", "in (0, 1)"),
    Probe("train-frac-nan", f"{S} data.train_frac=.nan", "error", "in (0, 1)"),
    Probe("val-frac-negative", f"{S} data.val_frac=-0.1", "error", "in [0, 1)"),
    Probe("fractions-sum", f"{S} data.val_frac=0.5", "error", "must be < 1"),
    Probe("neg-mult-negative", f"{S} data.neg_mult=-1", "error", ">= 0"),
    Probe("max-degree-negative", f"{S} data.max_degree=-1", "error", "must be positive, or 0 (uncapped)"),
    Probe("aggr-time-negative", f"{S} data.aggr_time=-1", "error", ">= 0 and finite"),
    Probe("aggr-time-inf", f"{S} data.aggr_time=.inf", "error", ">= 0 and finite"),
    Probe("aggr-time-overflow", f"{S} data.aggr_time=1e400", "error", ">= 0 and finite"),
    Probe("aggr-time-nan", f"{S} data.aggr_time=.nan", "error", ">= 0 and finite"),
    Probe("num-snapshots-negative", f"{S} data.num_snapshots=-3", "error", ">= 0"),
    Probe("last-snapshots-minus-two", f"{S} data.last_snapshots=-2", "error", "or -1 (default)"),
    Probe("syn-nodes-one", f"{S} data.syn_nodes=1", "error", ">= 2"),
    Probe("syn-communities-zero", f"{S} data.syn_communities=0", "error", "must be positive"),
    Probe("syn-p-in-above-one", f"{S} data.syn_p_in=1.5", "error", "in [0, 1]"),
    Probe("syn-persist-negative", f"{S} data.syn_persist=-0.1", "error", "in [0, 1]"),
    Probe("syn-skew-huge", f"{S} data.syn_skew=1000", "error", "in [0, 10]", "traceback"),
    Probe("syn-skew-nan", f"{S} data.syn_skew=.nan", "error", "in [0, 10]"),
    Probe("features-other", f"{S} data.features=onehot", "error", "must be degree, constant"),
    Probe("task-other", f"{S} data.task=regression", "error", "must be link, edge_cls"),
    Probe("neg-sampling-other", f"{S} data.neg_sampling=smart", "error", "uniform, active or evolvegcn"),
    Probe("symmetric-not-bool", f"{S} data.symmetric=maybe", "error", "true or false"),
    Probe("jitter-negative", f"{S} schedule.jitter=-1", "error", ">= 0 and finite"),
    Probe("alpha-nan", f"{S} schedule.alpha=.nan", "error", ">= 0 and finite"),
    Probe("time-limit-zero", f"{S} schedule.time_limit=0", "error", "positive and finite"),
    Probe("compose-other", f"{S} schedule.compose=x", "error", "auto, strata, rows, sorted or chrono"),
    Probe("devices-negative", f"{S} parallel.devices=-1", "error", ">= 0"),
    Probe("max-budgets-zero", f"{S} parallel.max_budgets=0", "error", "in 1..64"),
    Probe("max-budgets-65", f"{S} parallel.max_budgets=65", "error", "in 1..64"),
    Probe("budget-align-zero", f"{S} parallel.budget_align=0", "error", "in 1..4096"),
    Probe("bucket-ratio-one", f"{S} parallel.bucket_ratio=1", "error", "> 1 and finite"),
    Probe("min-bucket-zero", f"{S} parallel.min_bucket=0", "error", "in 1..1048576"),
    Probe("min-bucket-huge", f"{S} parallel.min_bucket=1000000000", "error", "in 1..1048576", "memory"),
    Probe("prefetch-huge", f"{S} parallel.prefetch=1000000000", "error", "in 0..64", "ok"),
    Probe("compile-steps-other", f"{S} parallel.compile_steps=-2", "error", "or -1 (auto)"),
    Probe("compile-seconds-negative", f"{S} parallel.compile_seconds=-1", "error", "or 0 (auto)"),
    Probe("reuse-slack-negative", f"{S} parallel.reuse_slack=-1", "error", ">= 0"),
    Probe("candidates-other", f"{S} eval.candidates=some", "error", "auto, all or sampled"),
    Probe("all-max-nodes-negative", f"{S} eval.all_max_nodes=-1", "error", ">= 0"),
    Probe("eval-batch-zero", f"{S} eval.batch_size=0", "error", "must be positive"),
    Probe("eval-seed-negative", f"{S} eval.seed=-1", "error", "in 0..4294967295"),
    Probe("model-name-list", f"{S} model.name=[a]", "error", "must be a string"),
    Probe("section-not-mapping", f"{S} data=3", "error", "must be a mapping"),
    Probe("key-under-a-value", f"{S} data.window.x=3", "error", "must be an integer"),
    Probe("config-file-scalar", "train --config {scalar}", "error", "not sections of keys", "error"),
    # --- absurd sizes: resource guards before allocating -------------------------------------------
    Probe("hidden-huge", f"{S} model.hidden=1000000000", "error", "of memory, more than", "memory"),
    Probe("head-hidden-huge", f"{S} model.head_hidden=1000000000000", "error", "of memory", "memory"),
    Probe("max-degree-huge", f"{S} data.max_degree=1000000000000", "error", "of memory", "memory"),
    Probe("neg-mult-huge", f"{S} data.neg_mult=1000000000", "error", "data.neg_mult=", "memory"),
    Probe(
        "neg-per-source-huge",
        f"{S} eval.candidates=sampled eval.neg_per_source=1000000000",
        "error",
        "eval.neg_per_source=1000000000",
        "memory",
    ),
    Probe("epochs-huge", f"{S} train.epochs=1000000", "error", "it plans ahead", "hang"),
    Probe("syn-nodes-huge", f"{S} data.syn_nodes=1000000000000", "error", "of memory", "hang"),
    Probe("syn-snapshots-huge", f"{S} data.syn_snapshots=1000000000", "error", "100,000", "memory"),
    Probe("syn-edges-huge", f"{S} data.syn_edges=1000000000000", "error", "of memory", "memory"),
    Probe("window-huge", f"{S} data.window=1000000000", "error", "use a smaller window"),
    Probe("devices-huge", f"{S} parallel.devices=1000000000", "error", "JAX sees 8 device(s)"),
    Probe(
        "eval-all-memory",
        f"{S} eval.candidates=all data.neg_mult=0",
        "error",
        "eval.candidates=all (every pair",
        "ok",  # (before: no limit to state; on a graph too large for the memory: killed)
        env=(("DYGNEX_MEMORY", "400K"),),
    ),
    Probe(
        "degree-table-memory",
        E + "{ref} data.num_snapshots=50000",
        "error",
        "degree table (50,000 x 40)",
        "hang",
        env=(("DYGNEX_MEMORY", "1M"),),
    ),
    Probe(
        "memory-setting-bad",
        S,
        "error",
        "DYGNEX_MEMORY='lots' is not a size",
        "ok",  # (a setting new in issue 17)
        env=(("DYGNEX_MEMORY", "lots"),),
    ),
    Probe(
        "bitcoin-aggr-time-tiny",
        "train data.dataset=bitcoin_otc data.aggr_time=1e-9",
        "error",
        "164,442,412,028,920,160 snapshots",
        "memory",
        needs="data",
    ),
    Probe(
        "bitcoin-aggr-time-one",
        "train data.dataset=bitcoin_otc data.aggr_time=1",
        "error",
        "use a larger data.aggr_time",
        "memory",
        needs="data",
    ),
    Probe("outlier-time", E + "{outlier} data.aggr_time=100", "error", "1000..1e+15", "memory"),
    Probe("num-snapshots-huge", E + "{ref} data.num_snapshots=1000000000", "error", "100,000", "memory"),
    Probe("distinct-times-many", E + "{many_times}", "error", "a snapshot per distinct time", "hang"),
    Probe("intervals-huge", "train data.dataset=intervals data.path={iv_huge}", "error", "100,000", "memory"),
    Probe(
        "intervals-reversed", "train data.dataset=intervals data.path={iv_bad}", "error", "first_snapshot 5"
    ),
    # --- edge files that are fine: the same graph as the plain file --------------------------------
    *(
        Probe(
            f"edges-{name}",
            f"data.dataset=edges data.path={{{name}}} data.num_snapshots=8",
            f"same:{ref}",
            was=was,
        )
        for name, ref, was in [
            ("crlf", "ref", "ok"),
            ("tabs", "ref", "ok"),
            ("trailing", "ref", "ok"),
            ("header", "ref", "ok"),
            ("bom", "ref", "refused"),
            ("utf16", "ref", "refused"),  # a Windows editor's "Unicode": read as binary before 2026-12-05
            ("utf16_be", "ref", "refused"),
            ("semicolons", "ref", "refused"),  # a European spreadsheet's CSV: one column before 2026-12-05
            ("pipes", "ref", "refused"),
            ("gzip", "ref", "ok"),
            ("commas", "ref", "ok"),
            ("quoted", "ref", "refused"),
            ("unsorted", "ref", "ok"),
            ("duplicates", "ref", "ok"),
            ("latin1_comment", "ref", "ok"),
            ("float_times", "ref", "ok"),
            ("negative_ids", "ref", "ok"),
            ("time_weight_header", "weighted", "silent"),
            ("weight_time_header", "weighted", "ok"),
            ("tgb_order", "weighted", "silent"),  # TGB's ts,src,dst,w: read by position before
            ("tgb_semicolons", "weighted", "refused"),  # the same with ';': one column before 2026-12-05
            ("pandas_index", "ref", "error"),  # to_csv's "Unnamed: 0" column: a data row before 2026-12-05
            ("extra_columns", "ref", "error"),  # JODIE-style label and feature columns
            ("iso_dates", "ref", "error"),  # 1970-01-01T00:16:40 is Unix second 1000
        ]
    ),
    # --- edge files that are not -------------------------------------------------------------------
    Probe("edges-weight-header-3col", E + "{weight3}", "error", "header names the third column", "silent"),
    Probe("edges-nan-time", E + "{nan_time}", "error", "time 'nan' is not a finite number"),
    Probe("edges-inf-time", E + "{inf_time}", "error", "time 'inf' is not a finite number"),
    Probe("edges-nan-weight", E + "{nan_weight}", "error", "weight 'nan' is not a finite number"),
    Probe("edges-single-row", E + "{single}", "error", "1 snapshot(s)"),
    Probe("edges-one-time", E + "{same_time}", "error", "every row has the same time"),
    Probe("edges-float-id", E + "{float_id}", "error", "is not an integer"),
    Probe("edges-id-overflow", E + "{big_id}", "error", "is outside the 64-bit range"),
    Probe(
        "edges-header-short-row",
        E + "{header_short}",
        "error",
        "2 fields, but the header puts 'time' in column 3",
    ),
    Probe("edges-bad-date", E + "{bad_date}", "error", "'2014-02-30' is not a calendar date"),
    Probe("edges-two-columns", E + "{two_cols}", "error", "2 columns, expected src dst [weight] time"),
    Probe("edges-five-columns", E + "{five_cols}", "error", "5 columns, expected src dst [weight] time"),
    Probe("edges-mixed-columns", E + "{mixed_cols}", "error", "wrong column count"),
    Probe("edges-latin1-row", E + "{latin1_row}", "error", "is not an integer"),
    Probe("edges-zero-bytes", E + "{zero_bytes}", "error", "is empty"),
    Probe("edges-only-header", E + "{only_header}", "error", "is empty"),
    Probe("edges-binary", E + "{binary}", "error", "is binary data"),
    Probe("edges-self-loops", E + "{loops} data.num_snapshots=4", "error", "no edges"),
    Probe("edges-directory", E + "{folder}", "error", "is a directory", "error"),
    Probe("edges-read-error", E + "/proc/self/mem", "error", "cannot be read (", "traceback"),
    Probe("edges-chmod-000", E + "{unreadable}", "error", "Permission denied", "traceback", needs="nonroot"),
    # --- output folders ----------------------------------------------------------------------------
    Probe("out-is-a-file", f"{S} --out {{scalar}}", "error", "is a file"),
    Probe(
        "out-under-a-file", f"{S} --out {{scalar}}/run", "error", "a file: choose a directory", "traceback"
    ),
    Probe("out-sys", f"{S} --out /sys/dygnex-probe/run", "error", "cannot be made", "traceback"),
    Probe(
        "out-read-only",
        f"{S} --out {{read_only}}/run",
        "error",
        "cannot be made",
        "traceback",
        needs="nonroot",
    ),
    # --- the other commands ------------------------------------------------------------------------
    Probe(
        "schedule-devices-negative",
        f"schedule --config {SMOKE} --devices -3",
        "error",
        "--devices must be >= 0",
        "bad-error",
    ),
    Probe("simulate-devices-text", f"simulate --config {SMOKE} --devices abc", "error", "comma list"),
    Probe("profile-repeats-zero", f"profile --config {SMOKE} --repeats 0", "error", "--repeats >= 1"),
    Probe("report-a-file", "report {scalar}", "error", "is a file, not a folder"),
    Probe(
        "inspect-out-a-file", f"inspect --config {SMOKE} --out {{scalar}}", "error", "is a file", "traceback"
    ),
    Probe(
        "simulate-devices-huge",
        f"simulate --config {SMOKE} --devices 1048576",
        "error",
        "more than the",
        "hang",
    ),
    Probe(
        "simulate-windows-huge",
        f"simulate --config {SMOKE} --devices 4 --windows 1000000000000",
        "error",
        "more than the 2,000,000",
        "memory",
    ),
    Probe(
        "profile-steps-huge",
        f"profile --config {SMOKE} --steps 1000000000",
        "error",
        "--steps 2..1000",
        "hang",
    ),
    Probe("epochs-huge-listed", f"{S} train.epochs=1000000000000", "error", "it plans ahead", "memory"),
    Probe(
        "simulate-bytes-huge",
        f"simulate --config {SMOKE} --devices 4 --param-bytes 1e30",
        "error",
        "--param-bytes must be in [0, 1e+15]",
        "silent",
    ),
    Probe(  # the data's header line printed before the error line
        "schedule-devices-huge",
        f"schedule --config {SMOKE} --devices 100000",
        "error",
        "100000 devices but only",
        "bad-error",
    ),
]
# a few run as a real process too: exit status and stderr of ``python -m dygnex_jax``
IN_A_PROCESS = ("hidden-huge", "outlier-time", "out-under-a-file", "edges-directory")


def _rows(n: int = 300, weighted: bool = False, time_first: bool = False) -> list[list[str]]:
    rows = []
    for i in range(n):
        t, w = str(1000 + 10 * i), str(1 + i % 5)
        tail = ([t, w] if time_first else [w, t]) if weighted else [t]
        rows.append([str(i % 40), str((i * 7 + 3) % 40), *tail])
    return rows


def _text(rows, sep=" ", end="\n") -> str:
    return "".join(sep.join(r) + end for r in rows)


def _probe_texts() -> dict[str, str | bytes]:
    ref = _text(_rows())
    lines = ref.splitlines(keepends=True)
    return {
        "ref": ref,
        "crlf": ref.replace("\n", "\r\n"),
        "tabs": _text(_rows(), sep="\t"),
        "trailing": _text(_rows(), end="  \t\n"),
        "header": "src dst time\n" + ref,
        "bom": ("\ufeff" + ref).encode("utf-8"),
        "utf16": ("\ufeff" + ref).encode("utf-16-le"),
        "utf16_be": ("\ufeff" + ref).encode("utf-16-be"),
        "gzip": gzip.compress(ref.encode()),
        "commas": _text(_rows(), sep=","),
        "semicolons": "src;dst;time\n" + _text(_rows(), sep=";"),
        "pipes": _text(_rows(), sep="|"),
        # a spreadsheet's export: every field quoted, a quoted header
        "quoted": '"src","dst","time"\n' + "".join(",".join(f'"{f}"' for f in r) + "\n" for r in _rows()),
        "unsorted": "".join(reversed(lines)),
        "duplicates": ref + ref,
        "latin1_comment": "# caf\u00e9 r\u00e9seau\n".encode("latin-1") + ref.encode(),
        "float_times": "".join(f"{u} {v} {t}.0\n" for u, v, t in _rows()),
        "negative_ids": "".join(f"{int(u) - 20} {int(v) - 20} {t}\n" for u, v, t in _rows()),
        "weighted": _text(_rows(weighted=True)),
        "time_weight_header": "src dst time weight\n" + _text(_rows(weighted=True, time_first=True)),
        "weight_time_header": "source,target,rating,timestamp\n" + _text(_rows(weighted=True), sep=","),
        "weight3": "src dst weight\n"
        + "".join(f"{u} {v} {i % 21 - 10}\n" for i, (u, v, _) in enumerate(_rows())),
        "nan_time": ref + "1 2 nan\n",
        "inf_time": ref + "1 2 inf\n",
        "nan_weight": _text(_rows(weighted=True)) + "1 2 nan 3000\n",
        "single": "1 2 1000\n",
        "same_time": "".join(f"{u} {v} 5\n" for u, v, _ in _rows()),
        "float_id": ref + "1 2.5 20\n",
        "big_id": ref + "99999999999999999999 2 20\n",
        "two_cols": "1 2\n2 3\n",
        "tgb_order": "ts,src,dst,w\n" + "".join(f"{t},{u},{v},{w}\n" for u, v, w, t in _rows(weighted=True)),
        "pandas_index": "Unnamed: 0,src,dst,time\n"
        + "".join(f"{i},{','.join(r)}\n" for i, r in enumerate(_rows())),
        "tgb_semicolons": "ts;src;dst;w\n"
        + "".join(f"{t};{u};{v};{w}\n" for u, v, w, t in _rows(weighted=True)),
        "extra_columns": "src,dst,time,label,f1,f2\n"
        + "".join(f"{u},{v},{t},0,0.5,0.25\n" for u, v, t in _rows()),
        "iso_dates": "src,dst,time\n"
        + "".join(
            f"{u},{v},{datetime.datetime.fromtimestamp(int(t), datetime.UTC):%Y-%m-%dT%H:%M:%S}\n"
            for u, v, t in _rows()
        ),
        "header_short": "src,dst,time,label\n1,2,1000,0\n3,4\n",
        "bad_date": "src,dst,date\n1,2,2014-01-31\n2,3,2014-02-30\n",
        "five_cols": "1 2 3 4 5\n",
        "mixed_cols": ref + "4 5\n",
        "latin1_row": ref.encode() + "1 2\xe9 3\n".encode("latin-1"),
        "zero_bytes": "",
        "only_header": "src dst time\n",
        "binary": b"\x7fELF\x00\x00\x01" * 50,
        "loops": "".join(f"{i} {i} {i}\n" for i in range(20)),
        "outlier": ref + "1 2 1e15\n",
        "many_times": "".join(f"{i % 40} {(i * 7 + 3) % 40} {i}\n" for i in range(100_001)),
        "iv_huge": "1,2,0,1000000000000\n2,3,0,5\n",
        "iv_bad": "1,2,5,3\n",
        "scalar": "hello\n",
        "unreadable": ref,
    }


@pytest.fixture(scope="module")
def probe_files(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("probe_files")
    paths = {}
    for name, text in _probe_texts().items():
        p = d / name
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
        paths[name] = str(p)
    (d / "folder").mkdir()
    (d / "read_only").mkdir()
    (d / "read_only").chmod(0o555)
    Path(paths["unreadable"]).chmod(0)
    paths.update(folder=str(d / "folder"), read_only=str(d / "read_only"))
    yield paths
    (d / "read_only").chmod(0o755)
    Path(paths["unreadable"]).chmod(0o644)


def _skip_reason(probe: Probe) -> str:
    if probe.needs == "data" and not (DATA / "bitcoin_otc").is_dir():
        return f"real datasets not found at {DATA} (set DYGNEX_DATA)"
    if probe.needs == "nonroot" and ROOT:
        return (
            "runs as root, where file permissions do not bite (edges-read-error and out-sys test the fault)"
        )
    return ""


def _run_main(argv: list[str], capsys) -> tuple[object, str]:
    """``main(argv)`` -> (exit code, or the exception it raised; stderr)."""
    try:
        code = main(argv)
    except SystemExit as e:  # argparse usage errors
        code = e.code
    except BaseException as e:  # noqa: BLE001 - a traceback is the outcome under test
        code = e
    return code, capsys.readouterr().err


def _outcome(code, err: str, probe: Probe, out: Path) -> str:
    lines = err.strip().splitlines()
    if isinstance(code, BaseException) or "Traceback" in err:
        return "traceback"
    if code == 0:
        return "silent"  # a bad input ran
    one_line = code == 2 and len(lines) == 1 and lines[0].startswith("error: ")
    if not one_line or probe.needle not in lines[0] or out.exists():
        return "bad-error"
    return "error"


def _check_same(probe: Probe, files: dict[str, str]) -> str:
    """A fine file: the graph equals that of its reference file (snapshots, weights, node count)."""
    ref = probe.expect.split(":", 1)[1]
    overrides = probe.argv.format(**files).split()
    got = load_dataset(load_config(None, overrides).data)
    want = load_dataset(load_config(None, [*overrides[:1], f"data.path={files[ref]}", *overrides[2:]]).data)
    same = got.num_nodes == want.num_nodes and got.num_snapshots == want.num_snapshots
    same = same and all(np.array_equal(a, b) for a, b in zip(got.snapshots, want.snapshots))
    if want.weights is not None or got.weights is not None:
        same = same and got.weights is not None and want.weights is not None
        same = same and all(np.array_equal(a, b) for a, b in zip(got.weights, want.weights))
    if probe.id == "edges-negative_ids":
        same = same and int(got.node_ids.min()) == -20
    return "ok" if same else "silent"


@pytest.mark.parametrize("probe", PROBES, ids=[p.id for p in PROBES])
def test_probe(probe, probe_files, tmp_path, capsys, monkeypatch):
    reason = _skip_reason(probe)
    if reason:
        pytest.skip(reason)
    for name, value in probe.env:
        monkeypatch.setenv(name, value)
    if probe.expect.startswith("same:"):
        try:
            outcome = _check_same(probe, probe_files)
        except UserError as e:
            outcome = f"an error instead of the graph: {e}"
        except BaseException:  # noqa: BLE001 - a traceback is the outcome under test
            outcome = "traceback"
        _record(probe, outcome)
        assert outcome == "ok", f"{probe.id}: {outcome}"
        return
    argv = probe.argv.format(**probe_files).split()
    out = tmp_path / "out"
    if argv[0] in ("train", "profile") and "--out" not in argv:
        argv = [argv[0], "--out", str(out), *argv[1:]]
    code, err = _run_main(argv, capsys)
    outcome = _outcome(code, err, probe, out)
    _record(probe, outcome)
    assert outcome == "error", f"{probe.id}: {outcome} (exit {code!r}): {err[-2000:]}"


def _record(probe: Probe, outcome: str) -> None:
    known = ("ok", "error", "traceback", "silent", "bad-error")
    OUTCOMES[outcome if outcome in known else "refused"] += 1  # refused: a fine input gave an error
    WAS[probe.was] += 1


@pytest.mark.parametrize("case", IN_A_PROCESS)
def test_probe_in_a_fresh_process(case, probe_files, tmp_path):
    probe = next(p for p in PROBES if p.id == case)
    argv = probe.argv.format(**probe_files).split()
    out = tmp_path / "out"
    if "--out" not in argv:
        argv = [argv[0], "--out", str(out), *argv[1:]]
    proc = run_cli(*argv, fake_devices=8)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("error: ") and probe.needle in lines[0], proc.stderr
    assert not out.exists()


@pytest.mark.slow  # two short training runs each (~10-30 s on 2 cores, mostly compiling)
@pytest.mark.parametrize("key", ["train.batch_size", "eval.batch_size"])
def test_a_batch_larger_than_the_data_is_the_whole_split(key, tmp_path):
    """``train.batch_size=10**9`` / ``eval.batch_size=10**9`` run as a batch of every window of the split
    (before: 125,000,000 window slots per device, padding efficiency 0.17): the same losses and metrics
    as the batch of exactly the split's windows."""
    from dygnex_jax.train import train_and_evaluate

    base = load_config(SMOKE, ["train.epochs=1"])
    ws = task_windows(load_dataset(base.data), base.data)
    whole = len(ws.splits["train"]) if key == "train.batch_size" else len(ws.splits["val"])
    runs = {}
    for size in (whole, 10**9):
        config = load_config(SMOKE, ["train.epochs=1", f"{key}={size}"])
        runs[size] = train_and_evaluate(config, tmp_path / str(size), stream=open(os.devnull, "w"))
    a, b = runs[whole], runs[10**9]
    same = a["planned_budgets"] == b["planned_budgets"] and all(
        np.isclose(a["final"][k], b["final"][k], rtol=1e-5, equal_nan=True) for k in a["final"]
    )
    OUTCOMES["ok" if same else "silent"] += 1
    WAS["silent"] += 1
    assert same, (a["final"], b["final"], a["planned_budgets"], b["planned_budgets"])


@pytest.mark.slow  # two short training runs (~10-20 s on 2 cores)
def test_a_run_that_failed_in_training_leaves_no_folder_blocking_its_rerun(tmp_path, capsys):
    """An error raised after ``--out`` exists (a non-finite step at ``train.learning_rate=1e30``, the one
    bad-config error training itself finds) is one line, and the corrected run may use the same folder."""
    out = str(tmp_path / "run")
    code, err = _run_main(["train", "--out", out, "--config", SMOKE, "train.learning_rate=1e30"], capsys)
    lines = err.strip().splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    failed_cleanly = (
        code == 2 and errors == lines[-1:] and "non-finite" in lines[-1] and "Traceback" not in err
    )
    code, err = _run_main(["train", "--out", out, "--config", SMOKE, "train.epochs=1"], capsys)
    ok = failed_cleanly and code == 0 and (Path(out) / "summary.json").is_file()
    OUTCOMES["ok" if ok else "silent"] += 1
    WAS["blocked"] += 1  # before: its empty metrics.jsonl made the folder "already hold a run"
    assert ok, err[-2000:]


def test_probe_totals():
    """The totals of the cases run in this session (README: Errors states them for the full module)."""
    total = sum(OUTCOMES.values())
    line = ", ".join(f"{k} {v}" for k, v in sorted(OUTCOMES.items()))
    before = ", ".join(f"{k} {v}" for k, v in sorted(WAS.items()))
    print(f"\nprobes: {total} cases: {line}; before issue 17: {before}", file=sys.stderr)
    assert all(OUTCOMES[k] == 0 for k in ("traceback", "silent", "bad-error", "refused")), line
