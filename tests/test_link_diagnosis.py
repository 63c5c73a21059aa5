"""tools/link_diagnose.py's re-scoring equals the run's own evaluation; the background-last figures move only
the background pairs."""

import numpy as np
import pytest
from helpers import assert_one_line_error, run_tool

from dygnex_jax import checkpoint
from dygnex_jax.config import load_config
from dygnex_jax.errors import UserError
from dygnex_jax.research.link_diagnosis import diagnose
from dygnex_jax.train import train_and_evaluate


@pytest.fixture(scope="module", params=["all", "new"])
def trained(tmp_path_factory, request):
    # data.targets=new: the candidates leave out the pairs seen before, in the diagnosis too
    out = tmp_path_factory.mktemp("diag") / "run"
    config = load_config(
        "configs/smoke.yaml",
        ["train.epochs=2", "eval.candidates=all", f"data.targets={request.param}"]
        + ["train.checkpoint_best=true", "train.keep_checkpoints=1"],
    )
    return out, train_and_evaluate(config, out)


def test_rescoring_the_checkpoint_gives_the_runs_own_figures(trained):
    out, summary = trained
    d = diagnose(out, "val", note=lambda _: None)
    assert d["epoch"] == 2
    assert d["map"] == pytest.approx(summary["final"]["val_map"], rel=1e-6)
    assert d["mrr"] == pytest.approx(summary["final"]["val_mrr"], rel=1e-6)
    rows = d["windows"]
    assert sum(r["positives"] for r in rows) == d["positives"] > 0
    for r in rows:
        assert 0 <= r["touching_background"] <= r["positives"]
        if r["positives"] == 0:  # data.targets=new: a snapshot of repeats has no figure
            assert np.isnan(r["ap"]) and np.isnan(r["ap_background_last"])
            continue
        if r["background_nodes"] == 0:  # every node active: there is no block to move
            assert r["ap_background_last"] == pytest.approx(r["ap"], rel=1e-12)
        if r["touching_background"] == 0:  # only negatives move down: neither figure can fall
            assert r["ap_background_last"] >= r["ap"] - 1e-12
            assert r["mrr_background_last"] >= r["mrr"] - 1e-12
    assert any(r["touching_background"] == 0 for r in rows) and np.isfinite(d["map_background_last"])
    # each source's row shifted by its own mean: the ranks within a row, so MRR, are those of the run
    for r in rows:
        if r["positives"]:
            assert r["mrr_rows_centred"] == pytest.approx(r["mrr"], rel=1e-9)
    assert np.isfinite(d["map_rows_centred"]) and d["mrr_rows_centred"] == pytest.approx(d["mrr"], rel=1e-9)


def test_the_best_epochs_checkpoint_is_kept_and_rescores_to_the_runs_best(trained):
    """train.checkpoint_best: the best val epoch's checkpoint stays beside the newest (keep 1), and
    re-scoring it gives the figures summary.json reports as the run's best."""
    out, summary = trained
    best = summary["best"]["epoch"]
    assert sorted({best, 2}) == [e for e, _ in checkpoint.complete(out)]
    d = diagnose(out, "val", note=lambda _: None, epoch=best)
    assert d["epoch"] == best and d["map"] == pytest.approx(summary["best"]["val_map"], rel=1e-6)
    with pytest.raises(UserError, match="no checkpoint of epoch 7"):
        diagnose(out, "val", epoch=7)


def test_refusals_are_one_line(tmp_path):
    with pytest.raises(UserError, match="no config.yaml"):
        diagnose(tmp_path, "val")
    r = run_tool("link_diagnose.py", str(tmp_path / "nothing"), "--json", str(tmp_path / "d.json"))
    assert_one_line_error(r, "no config.yaml")
    assert not (tmp_path / "d.json").exists()
