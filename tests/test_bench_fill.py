"""tools/bench_fill.py: the variants it times are what it says they are (one budget, thinner real work;
the datasets' steps on one common budget), and its inputs fail as one line."""

import json

from helpers import assert_one_line_error, run_tool


def test_fills_run_one_budget_with_less_real_work(tmp_path):
    out = tmp_path / "fill.json"
    r = run_tool(
        "bench_fill.py", "--datasets", "synthetic", "--draws", "2", "--repeats", "1", "--json", str(out)
    )
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    for draw in (0, 1):
        mine = sorted((row for row in rows if row["draw"] == draw), key=lambda row: -row["fraction"])
        assert [row["fraction"] for row in mine] == [1.0, 0.75, 0.5, 0.25]
        assert len({tuple(row["budget"]) for row in mine}) == 1  # one program for all four
        budget = mine[0]["budget"]
        for row in mine:  # the real load fits the budget, and shrinks with the windows left out
            assert all(real <= cap for real, cap in zip(row["real_max_load"], budget[:3]))
        nodes = [row["real_max_load"][0] for row in mine]
        assert nodes == sorted(nodes, reverse=True) and nodes[-1] < nodes[0]
        assert mine[0]["over_full"] == 1.0 and all(row["seconds_median"] > 0 for row in mine)


def test_same_budget_holds_every_datasets_own_step(tmp_path):
    out = tmp_path / "same.json"
    r = run_tool(
        "bench_fill.py", "--same-budget", "--datasets", "synthetic", "synthetic", "--draws", "1",
        "--repeats", "1", "--json", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    common = rows[0]["budget"]
    assert all(row["budget"] == common for row in rows)
    # the common budget is the column-wise largest of the steps' own budgets, so it holds each
    assert common == [max(col) for col in zip(*(row["own_budget"] for row in rows))]
    assert rows[0]["over_first"] == 1.0


def test_bad_budgets_are_one_line(tmp_path):
    out = tmp_path / "b.json"
    for bad in ("1,2,3", "1,2,3,-4", "a,b,c,d"):
        r = run_tool("bench_fill.py", "--datasets", "synthetic", "--budgets", bad, "--json", str(out))
        assert_one_line_error(r, "--budgets", "four integers")
    r = run_tool("bench_fill.py", "--datasets", "synthetic", "--budgets", "1,1,1,1", "--json", str(out))
    assert_one_line_error(r, "cannot hold")
    assert not out.exists()


def test_both_orders_time_every_budget_as_often(tmp_path):
    out = tmp_path / "order.json"
    r = run_tool(
        "bench_fill.py", "--datasets", "synthetic", "--budgets", "1000,1000,6000,32", "1500,1500,9000,32",
        "--order", "both", "--blocks", "2", "--repeats", "2", "--json", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [row["budget"] for row in rows] == [[1000, 1000, 6000, 32], [1500, 1500, 9000, 32]]
    for row in rows:  # blocks x repeats runs per order, the ratio of their medians
        assert len(row["seconds_round_robin"]) == len(row["seconds_back_to_back"]) == 4
        ratio = row["median_round_robin"] / row["median_back_to_back"]
        assert abs(row["round_robin_over_back_to_back"] - ratio) < 1e-12
    r = run_tool("bench_fill.py", "--datasets", "synthetic", "--budgets", "1,1,1,1", "--blocks", "0")
    assert_one_line_error(r, "--blocks")
