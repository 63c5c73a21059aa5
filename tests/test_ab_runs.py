"""research/ab_runs.py, the A/B driver of tools/bench_step.py and tools/bench_pack.py: rounds alternate the
sides, a worker's result is taken from its marked line, and a run that measured another checkout, failed
or printed nothing is one error line naming it."""

import os
import sys

import pytest

from dygnex_jax.errors import UserError
from dygnex_jax.research.ab_runs import reference_tree, run_worker, side_order

MARK = "AB_TEST "


def fake_tree(tmp_path, name: str, body: str):
    tree = tmp_path / name
    (tree / "dygnex_jax").mkdir(parents=True)
    (tree / "worker.py").write_text(body)
    return tree


def worker(tmp_path, body: str, name="tree"):
    tree = fake_tree(tmp_path, name, body)
    return run_worker(tree, [sys.executable, "worker.py"], dict(os.environ), MARK, "case x")


def test_sides_alternate_round_by_round():
    assert [side_order(r) for r in range(4)] == [("ref", "this"), ("this", "ref")] * 2


def test_the_marked_line_of_a_worker_of_this_checkout_is_its_result(tmp_path):
    body = (
        "import json, os, sys\n"
        "print('noise')\n"
        f"print({MARK!r} + json.dumps({{'v': 1, 'imported_from': "
        "[os.path.join(os.environ['PYTHONPATH'], 'dygnex_jax', 'a.py')]}))\n"
    )
    assert worker(tmp_path, body)["v"] == 1


def test_a_worker_that_measured_another_checkout_is_refused(tmp_path):
    body = f"import json\nprint({MARK!r} + json.dumps({{'imported_from': '/elsewhere/dygnex_jax/a.py'}}))\n"
    with pytest.raises(UserError, match=r"case x: dygnex_jax came from /elsewhere/dygnex_jax/a.py, not "):
        worker(tmp_path, body)


@pytest.mark.parametrize(
    "body,want",
    [
        ("import sys\nsys.exit('error: the config has 3 windows')\n", r"exit 1\): the config has 3 windows$"),
        ("print('nothing marked')\n", r"exit 0\): no output$"),
    ],
)
def test_a_failed_or_silent_worker_is_one_line(tmp_path, body, want):
    with pytest.raises(UserError, match=want) as err:
        worker(tmp_path, body)
    assert "\n" not in str(err.value) and str(err.value).startswith("case x with ")


def test_a_reference_that_is_not_a_checkout_is_refused(tmp_path):
    with pytest.raises(UserError, match="is not a dygnex_jax checkout"):
        reference_tree(str(tmp_path))
    with pytest.raises(UserError, match="is not a dygnex_jax checkout"):
        reference_tree(None)
    assert reference_tree(str(fake_tree(tmp_path, "ok", ""))) == (tmp_path / "ok").resolve()


@pytest.mark.parametrize("tool", ["bench_step.py", "bench_pack.py"])
def test_the_tools_import_the_driver_inside_functions(tool):
    """The workers run the tool's script against the reference checkout, which may predate ab_runs: the
    script must not import it at module level."""
    import ast
    from pathlib import Path

    tree = ast.parse((Path(__file__).resolve().parents[1] / "tools" / tool).read_text())
    top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    names = [a.name for n in top for a in n.names] + [
        n.module or "" for n in top if isinstance(n, ast.ImportFrom)
    ]
    assert not any("ab_runs" in name for name in names)
    assert "ab_runs" in ast.unparse(tree)  # and uses it in the driver
