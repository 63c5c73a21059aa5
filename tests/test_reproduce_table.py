"""The whole Table 2 from several calls' tables: pooling is exact, supersets win, overlaps are refused."""

import json

import numpy as np
import pytest
from helpers import assert_one_line_error, run_tool

from dygnex_jax.errors import UserError
from dygnex_jax.research import reproduce
from dygnex_jax.research.reproduce_table import full_table, load_rows, merge, table_markdown


def results(seeds, cell="egcn_o_uci", way="evolvegcn", rng=None):
    """Per-seed run results as ``reproduce.run_result`` returns them."""
    rng = rng or np.random.default_rng(sum(seeds))
    return [
        {"cell": cell, "model": "egcn_o", "dataset": "uci_collegemsg", "way": way, "seed": s,
         "best_epoch": 10 + s, "val_map": 0.02, "test_map": float(rng.uniform(0.01, 0.04)),
         "test_mrr": float(rng.uniform(0.08, 0.15)), "epochs": 60 + s, "early_stop": "x",
         "wall_seconds": 100.0 + 10 * s, "attempts": 1}
        for s in seeds
    ]  # fmt: skip


def test_pooled_rows_equal_the_table_of_all_seeds():
    runs = results([0, 1, 2, 3, 4])
    parts = [reproduce.table(runs[:1]), reproduce.table(runs[1:3]), reproduce.table(runs[3:])]
    (pooled,) = merge([dict(r, source=f"f{i}") for i, p in enumerate(parts) for r in p])
    (whole,) = reproduce.table(runs)
    for key in ("test_map_mean", "test_map_sd", "test_mrr_mean", "test_mrr_sd", "wall_seconds_mean"):
        assert pooled[key] == pytest.approx(whole[key], rel=1e-12), key
    for key in ("seeds", "best_epochs", "epochs", "verdict_map", "verdict_mrr", "published_map"):
        assert pooled[key] == whole[key], key


def test_a_row_whose_seeds_another_holds_is_superseded():
    runs = results([0, 1, 2])
    early, late = reproduce.table(runs[:1]), reproduce.table(runs)
    (row,) = merge(early + late + late)  # the same table in two files counts once
    assert row["seeds"] == [0, 1, 2] and row["test_map_mean"] == pytest.approx(late[0]["test_map_mean"])


def test_partly_overlapping_seeds_are_refused():
    runs = results([0, 1, 2])
    with pytest.raises(UserError, match="seed 1"):
        merge(reproduce.table(runs[:2]) + reproduce.table(runs[1:]))


def test_a_rerun_with_the_same_seeds_is_refused_not_pooled():
    """The same seeds trained again (other code) give other runs: neither row may silently win."""
    first, again = (
        results([0, 1, 2], rng=np.random.default_rng(1)),
        results([0, 1, 2], rng=np.random.default_rng(2)),
    )
    with pytest.raises(UserError, match="a re-run"):
        merge(reproduce.table(first) + reproduce.table(again))
    later = [dict(r, best_epoch=r["best_epoch"] + 5) for r in again]  # the superset's seed 0 is another run
    with pytest.raises(UserError, match="seed 0 is a different run"):
        merge(reproduce.table(first[:1]) + reproduce.table(later))


def test_every_published_cell_is_listed_and_ways_stay_apart():
    rows = merge(reproduce.table(results([0, 1]) + results([0], way="dygnex")))
    table = full_table(rows, {("egcn_o", "as733"): "egcn_o_as733"})
    assert len([r for r in table if r["way"] == "evolvegcn"]) == len(reproduce.PUBLISHED)
    not_run = [r for r in table if r.get("not_run")]
    assert len(not_run) == len(reproduce.PUBLISHED) - 1
    assert {"egcn_o_as733"} <= {r["cell"] for r in not_run}
    text = table_markdown(table)
    assert len(text.splitlines()) == 2 + len(table) and text.count("not run") == 2 * len(not_run)
    uci = [r["way"] for r in table if r["cell"] == "egcn_o_uci"]
    assert uci == ["evolvegcn", "dygnex"]


def test_tool_pools_files_and_refuses_a_file_without_rows(tmp_path):
    runs = results([0, 1, 2])
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(reproduce.table(runs[:1])))
    b.write_text(json.dumps({"notes": "x", "rows": reproduce.table(runs[1:])}))
    assert len(load_rows([a, b])) == 2
    r = run_tool("reproduce_table.py", str(a), str(b), "--json", str(tmp_path / "t.json"))
    assert r.returncode == 0, r.stderr
    (row,) = [x for x in json.loads((tmp_path / "t.json").read_text()) if x["cell"] == "egcn_o_uci"]
    assert row["seeds"] == [0, 1, 2] and (tmp_path / "t.md").read_text() in r.stdout
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    r = run_tool("reproduce_table.py", str(bad), "--json", str(tmp_path / "u.json"))
    assert_one_line_error(r, "holds no reproduce rows")
    assert not (tmp_path / "u.json").exists()
