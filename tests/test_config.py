"""Config: every file in configs/ loads; overrides; unknown keys and bad values are UserErrors."""

from pathlib import Path

import pytest

from dygnex_jax.config import Config, dump_config, load_config, parse_override
from dygnex_jax.errors import UserError

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_config_file_loads_and_round_trips(path, tmp_path):
    config = load_config(path)
    dump_config(config, tmp_path / "c.yaml")
    assert load_config(tmp_path / "c.yaml") == config


def test_no_config_is_the_embedded_default():
    assert load_config(None) == Config()
    assert load_config(Path(__file__).resolve().parents[1] / "configs" / "default.yaml") == Config()


def test_overrides_apply_in_order_and_parse_types():
    c = load_config(None, ["train.batch_size=16", "train.class_weights=[0.2, 0.8]", "schedule.shuffle=false"])
    assert c.train.batch_size == 16 and c.train.class_weights == (0.2, 0.8) and c.schedule.shuffle is False
    assert load_config(None, ["train.epochs=3", "train.epochs=4"]).train.epochs == 4
    assert load_config(None, ["train.learning_rate=1"]).train.learning_rate == 1.0
    assert parse_override("name=x=y") == {"name": "x=y"}


@pytest.mark.parametrize(
    "override, needle",
    [
        ("train.nope=1", "unknown config key 'train.nope'"),
        ("nope.x=1", "unknown config key 'nope'"),
        ("train=3", "must be a mapping"),
        ("train.epochs=1.5", "must be an integer"),
        ("schedule.shuffle=maybe", "true or false"),
        ("train.class_weights=[1]", "list of 2"),
        ("train.batch_size=-1", "must be positive"),
        ("data.train_frac=0.95", "train_frac + data.val_frac"),
        ("eval.candidates=some", "auto, all or sampled"),
        ("justakey", "not key=value"),
    ],
)
def test_bad_values_are_user_errors(override, needle):
    with pytest.raises(UserError, match=None) as err:
        load_config(None, [override])
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_bad_yaml_file(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("train: [unclosed\n")
    with pytest.raises(UserError, match="not valid YAML"):
        load_config(p)
