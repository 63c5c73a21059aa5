"""tools/bench_locality.py: the pair pass timed at each span (pairs inside their blocks), saved with the
load average; bad sizes are one line."""

import json

import numpy as np
from helpers import assert_one_line_error, run_tool

from dygnex_jax.research.locality import CHUNK, pairs_within


def test_pairs_stay_inside_their_span_blocks():
    rng = np.random.default_rng(0)
    ends = pairs_within(10_000, 2 * CHUNK, 300, rng)
    assert ends.shape == (2, 2, CHUNK)
    src, dst = ends[:, 0].ravel(), ends[:, 1].ravel()
    assert np.array_equal(src // 300, dst // 300)  # both ends in one block
    assert src.max() < 10_000 - 10_000 % 300  # whole blocks only
    assert len(np.unique(src // 300)) > 20  # many blocks used
    wide = pairs_within(10_000, CHUNK, 20_000, rng)  # a span beyond N: one block of all nodes
    assert wide.max() < 10_000 and wide.max() > 9_000


def test_spans_are_timed_and_saved(tmp_path):
    out = tmp_path / "loc.json"
    r = run_tool("bench_locality.py", "--nodes", "3000", "--pairs", "8192", "--hidden", "16", "--spans", "64",
                 "3000", "--rounds", "2", "--json", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(out.read_text())
    assert [x["span"] for x in got["rows"]] == [64, 3000]
    assert all(x["ms"] > 0 for x in got["rows"]) and got["rows"][0]["ratio"] == 1.0
    assert len(got["load"]) == 2 and (tmp_path / "loc.png").exists()
    assert "span    3000 nodes" in r.stdout


def test_bad_sizes_are_one_line():
    assert_one_line_error(run_tool("bench_locality.py", "--rounds", "0"), "--rounds")
    assert_one_line_error(run_tool("bench_locality.py", "--spans", "0"), "--spans")
