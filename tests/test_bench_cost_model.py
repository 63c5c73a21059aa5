"""tools/bench_cost_model.py's figures, from a worker's payload (no training here)."""

import numpy as np
import pytest
from helpers import run_tool

from dygnex_jax import plan
from dygnex_jax.padding import Budget
from dygnex_jax.research import cost_model_check as check
from dygnex_jax.schedule.cost import default_cost_model


def payload():
    """Two epochs of two steps; the second step of epoch 1 compiled (it is left out)."""
    steps = []
    for e in (1, 2):
        steps.append(
            {
                "epoch": e,
                "seconds": 1.0,
                "compiled": False,
                "predicted_seconds": 1.2,
                "budget": [100, 50, 400, 2],
            }
        )
        steps.append(
            {
                "epoch": e,
                "seconds": 2.0,
                "compiled": e == 1,
                "predicted_seconds": 1.5,
                "budget": [200, 80, 900, 2],
            }
        )
    return {
        "steps": steps,
        "cost_model": {"source": "profile:x"},
        "slowdown": 1.0,
        "layout": "scan",
        "window": 4,
        "devices": 8,
        "compile_seconds": 3.0,
        "load": [1.0, 2.0],
    }


def test_row_compares_the_steps_that_compiled_nothing():
    r = check.row("d", True, payload(), cores=2)
    assert r["steps_timed"] == 3 and r["devices"] == 8
    # step errors |1.2/1 - 1|, |1.2/1 - 1|, |1.5/2 - 1| -> median 0.2
    assert r["profiled"]["step_error_median"] == pytest.approx(0.2)
    # epoch 1: 1.2 / 1.0; epoch 2: 2.7 / 3.0 -> median of (+0.2, -0.1)
    assert r["profiled"]["epoch_error"] == pytest.approx(0.05)
    analytic = plan.step_seconds_fn(default_cost_model(4), 4, "scan", 8.0)  # 8 fake devices share the host
    want = np.array([analytic(Budget(100, 50, 400, 2)), analytic(Budget(100, 50, 400, 2))])
    assert r["analytic"]["epoch_predicted"] == pytest.approx(
        float(np.median([want[0], want[1] + analytic(Budget(200, 80, 900, 2))]))
    )
    assert "| 8 | d | yes | 3 |" in check.markdown([r])


def test_every_step_compiled_is_one_error():
    p = payload()
    for s in p["steps"]:
        s["compiled"] = True
    with pytest.raises(Exception, match="every step compiled"):
        check.row("d", True, p, cores=2)


def test_bad_device_list_is_one_line(tmp_path):
    r = run_tool("bench_cost_model.py", "--devices", "two", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "error: --devices must be comma-separated integers, got 'two'"
    ]
