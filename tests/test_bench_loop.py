"""tools/bench_loop.py: its four ways run the same steps from the same state (so they differ only in
what runs around the step), the train way's beside / alone split is training's, and bad input is one line."""

import json

from helpers import assert_one_line_error, run_tool

WAYS = ("train", "noprefetch", "prepacked", "jit")


def test_four_ways_run_the_same_steps(tmp_path):
    out = tmp_path / "loop.json"
    r = run_tool(
        "bench_loop.py", "--dataset", "synthetic", "--devices", "2", "--batch", "8", "--rounds", "2",
        "--epochs", "2", "--json", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(out.read_text())
    assert got["prefetch"] >= 1  # the config trains with prefetch, so `train` has steps beside a packing
    for rnd in got["rounds"]:
        ways = rnd["ways"]
        assert set(ways) == set(WAYS)
        ref = ways["prepacked"]["steps"]
        assert len({s["epoch"] for s in ref}) == 2 and len(ref) > 2
        for way in WAYS:
            steps = ways[way]["steps"]
            assert [(s["epoch"], s["budget"]) for s in steps] == [(s["epoch"], s["budget"]) for s in ref]
            for a, b in zip(steps, ref):  # same batches from the same parameters: same losses
                assert abs(a["loss"] - b["loss"]) <= 1e-6 * max(1.0, abs(b["loss"]))
            assert ways[way]["wall_seconds"] >= sum(s["seconds"] for s in steps) > 0
        train = ways["train"]["steps"]
        for i, s in enumerate(train):  # with prefetch only the last step of an epoch runs alone
            last = i == len(train) - 1 or train[i + 1]["epoch"] != s["epoch"]
            assert s["alone"] == last
        assert all(s["alone"] for s in ways["noprefetch"]["steps"])
        # the alone steps are priced as the other ways' steps of their budget, the beside ones higher
        alone_price = {tuple(s["budget"]): s["predicted_seconds"] for s in ref}
        for s in train:
            price = alone_price[tuple(s["budget"])]
            assert s["predicted_seconds"] == price if s["alone"] else s["predicted_seconds"] >= price
    summ = got["summary"]
    assert summ["prepacked"]["over_prepacked"] == 1.0
    # the run compiled its planned budgets ahead: no pre-packed step on the executables compiles
    assert summ["prepacked"]["steps_timed"] == sum(
        len(r["ways"]["prepacked"]["steps"]) for r in got["rounds"]
    )
    assert summ["train"]["beside_median"] is not None and summ["noprefetch"]["beside_median"] is None


def test_bad_counts_are_one_line(tmp_path):
    out = tmp_path / "loop.json"
    for flag in ("--rounds", "--devices", "--epochs"):
        r = run_tool("bench_loop.py", "--dataset", "synthetic", flag, "0", "--json", str(out))
        assert_one_line_error(r, flag, "at least 1")
    assert not out.exists()
