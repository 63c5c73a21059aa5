"""Config: every file in configs/ loads; overrides; unknown keys and bad values are UserErrors; every key
has a comment and a declared range / choices (or is free), and every declaration is enforced."""

import ast
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dygnex_jax.config import Config, dump_config, load_config, parse_override, to_dict
from dygnex_jax.config_check import Interval, key, keys
from dygnex_jax.errors import UserError

REPO = Path(__file__).resolve().parents[1]
CONFIGS = sorted((REPO / "configs").glob("*.yaml"))


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


# --- every key's declared range or choices (config_check.key beside the key), checked in one place ---


def _nested(dotted: str, value) -> dict:
    *sections, last = dotted.split(".")
    out = {last: value}
    for section in reversed(sections):
        out = {section: out}
    return out


def _outside(name: str, declared, default) -> list:
    """Values just outside ``default``'s key's declaration: past each finite bound, inf where the upper
    bound is open at inf, nan for floats, an unknown string for choices, a non-bool for a bool."""
    if isinstance(default, bool):
        return ["maybe"]
    if "choices" in declared:
        return ["no_such_choice"]
    iv, also = declared["interval"], declared.get("also", {})
    integer = isinstance(default[0] if isinstance(default, tuple) else default, int)
    step = 1 if integer else 0.5
    bad = []
    if iv.lo != -math.inf:
        below = iv.lo if iv.lo_open else iv.lo - step
        while below in also:
            below -= 1
        bad.append(below)
    if iv.hi != math.inf:
        bad.append(iv.hi if iv.hi_open else iv.hi + step)
    elif iv.hi_open and not integer:
        bad.append(math.inf)
    if not integer:
        bad.append(math.nan)
    return [[b, *default[1:]] if isinstance(default, tuple) else b for b in bad]


DECLARED = [(name, f.metadata, value) for name, f, value in keys(Config())]
META = {name: declared for name, declared, _ in DECLARED}
OUT_OF_RANGE = [
    pytest.param(name, bad, id=f"{name}={bad}")
    for name, declared, default in DECLARED
    if "free" not in declared
    for bad in _outside(name, declared, default)
]


def test_every_key_declares_its_range_or_choices_or_is_free():
    assert len(DECLARED) > 60
    for name, declared, default in DECLARED:
        kinds = [k for k in ("interval", "choices", "free") if k in declared]
        if isinstance(default, bool):
            assert kinds == [], name  # true / false: the type is the choice
        else:
            assert len(kinds) == 1, f"{name} declares {kinds or 'nothing'}: use config_check.key"
            assert isinstance(default, str) or kinds != ["free"], f"{name}: a number is never free"


def test_every_key_has_a_comment():
    source = (Path(__file__).resolve().parents[1] / "dygnex_jax" / "config.py").read_text()
    lines = source.splitlines()
    missing = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name.endswith("Config"):
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and not ast.unparse(stmt.annotation).endswith("Config"):
                    own = " ".join(lines[stmt.lineno - 1 : stmt.end_lineno])
                    if "#" not in own and not lines[stmt.lineno - 2].strip().startswith("#"):
                        missing.append(f"{node.name}.{stmt.target.id}")
    assert not missing, f"keys without a comment: {missing}"


@pytest.mark.parametrize("name, bad", OUT_OF_RANGE)
def test_every_declared_range_and_choice_is_enforced(name, bad, tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(_nested(name, bad)))
    with pytest.raises(UserError) as err:
        load_config(p)
    msg = str(err.value)
    assert name in msg and "\n" not in msg, msg


def test_out_of_range_messages_read_as_before():
    for override, line in [
        (
            "train.batch_size=0",
            "train.batch_size must be positive, got 0: set train.batch_size within that range",
        ),
        (
            "train.learning_rate=.inf",
            "train.learning_rate must be positive and finite, got inf: set train.learning_rate within that range",
        ),
        (
            "train.checkpoint_every=-1",
            "train.checkpoint_every must be >= 0, got -1: set train.checkpoint_every within that range",
        ),
        ("train.on_nonfinite=halt", "train.on_nonfinite must be stop or skip, got 'halt': set one of them"),
        (
            "data.train_frac=1",
            "data.train_frac must be in (0, 1), got 1.0: set data.train_frac within that range",
        ),
        (
            "parallel.max_budgets=65",
            "parallel.max_budgets must be in 1..64, got 65: set parallel.max_budgets within that range",
        ),
        (
            "parallel.compile_seconds=-1",
            "parallel.compile_seconds must be in (0, 86400], or 0 (auto), got -1.0: set parallel.compile_seconds within that range",
        ),
        (
            "parallel.compile_steps=-2",
            "parallel.compile_steps must be >= 0, or -1 (auto), got -2.0: set parallel.compile_steps within that range",
        ),
        (
            "parallel.bucket_ratio=1",
            "parallel.bucket_ratio must be > 1 and finite, got 1.0: set parallel.bucket_ratio within that range",
        ),
        (
            "data.last_snapshots=-2",
            "data.last_snapshots must be >= 0, or -1 (default), got -2: set data.last_snapshots within that range",
        ),
        (
            "train.class_weights=[0.5, -1]",
            "train.class_weights must be positive and finite (each), got [0.5, -1.0]: set train.class_weights within that range",
        ),
        ("data.syn_nodes=5", "data.syn_nodes (5) must be >= 2 * data.syn_communities (6)"),
    ]:
        with pytest.raises(UserError) as err:
            load_config(None, [override])
        assert str(err.value) == line
    assert load_config(None, ["parallel.compile_steps=-1", "data.last_snapshots=-1"]) == Config()
    assert load_config(None, ["parallel.compile_steps=.inf"]).parallel.compile_steps == math.inf


def test_neg_sampling_typo_is_rejected():
    assert load_config(None, ["data.neg_sampling=active"]).data.neg_sampling == "active"
    with pytest.raises(UserError) as err:
        load_config(None, ["data.neg_sampling=smart"])
    assert (
        str(err.value)
        == "data.neg_sampling must be uniform, active or evolvegcn, got 'smart': set one of them"
    )


def test_schedule_method_is_checked_once_in_config_against_the_strategies():
    from dygnex_jax.strategies import METHODS

    assert META["schedule.method"]["choices"]() == METHODS
    for method in METHODS:
        assert load_config(None, [f"schedule.method={method}"]).schedule.method == method
    with pytest.raises(UserError) as err:
        load_config(None, ["schedule.method=magic"])
    assert str(err.value) == f"unknown schedule.method 'magic': choose one of {', '.join(METHODS)}"


def test_compose_choices_are_the_schedulers():
    from dygnex_jax.schedule.greedy import COMPOSE

    assert set(META["schedule.compose"]["choices"]) == set(COMPOSE)


def test_loading_a_config_imports_no_jax():
    code = (
        "import sys; from dygnex_jax.config import load_config; "
        "load_config(None, ['schedule.method=vertex']); assert 'jax' not in sys.modules"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr


def test_declarations_are_checked_when_declared():
    assert Interval.parse("[1, inf)").describe(integer=True) == "positive"
    assert Interval.parse("(0, inf)").describe(integer=False) == "positive and finite"
    assert Interval.parse("[0, inf]").describe(integer=False) == ">= 0"
    assert Interval.parse("[0.5, 2)").describe(integer=False) == "in [0.5, 2)"
    for text in ("1..64", "[2, 1]", "(0, x)", "[1, 2"):
        with pytest.raises(ValueError, match="bad interval"):
            Interval.parse(text)
    for kwargs in ({}, {"interval": "[0, 1]", "free": "x"}, {"choices": ("a",), "also": {-1: "auto"}}):
        with pytest.raises(TypeError):
            key(0, **kwargs)


def test_duplicate_sections_and_keys_are_errors_at_any_depth(tmp_path):
    """YAML keeps the last of two equal keys silently; the config loader refuses them (a section, a
    key inside a section), and the same keys once each still load."""
    for text, name in (
        ("train:\n  epochs: 2\ntrain:\n  learning_rate: 0.1\n", "train"),
        ("schedule:\n  method: psg\n  alpha: 1\n  method: dygnex_g\n", "method"),
    ):
        path = tmp_path / "c.yaml"
        path.write_text(text)
        with pytest.raises(UserError, match=f"key '{name}' is given twice"):
            load_config(path)
    path.write_text("train:\n  epochs: 2\n  learning_rate: 0.1\n")
    cfg = load_config(path)
    assert cfg.train.epochs == 2 and cfg.train.learning_rate == 0.1


def test_changed_keys_reads_an_older_versions_config():
    """A checkpoint's config from before a key existed (it ran with the default) or was renamed (its value
    under the new name) is not a change; a real difference is."""
    from dygnex_jax.config import changed_keys

    config = load_config(None, ["eval.every=5"])
    old = to_dict(config)
    del old["data"]["start"], old["eval"]["every"]
    old["train"]["eval_every"] = 5
    assert changed_keys(config, old) == []
    old["train"]["eval_every"] = 3
    assert changed_keys(config, old) == ["eval.every"]
    old["train"]["eval_every"] = 5
    old["model"]["hidden"] = config.model.hidden + 1
    assert changed_keys(config, old) == ["model.hidden"]


def test_an_integer_key_takes_scientific_notation_of_a_whole_number():
    """YAML 1.1 reads 1e3 as a string: an integer key takes it as 1000, and refuses 1.5e0 with the fix."""
    assert load_config(None, ["train.epochs=1e3"]).train.epochs == 1000
    with pytest.raises(UserError, match="must be an integer, got '1.5e0': write a whole number"):
        load_config(None, ["train.epochs=1.5e0"])


def test_yaml_anchors_and_merge_keys_load(tmp_path):
    """Valid YAML with an anchor, an alias and a merge key (``<<: *a``) whose key is overridden loads
    (the duplicate-key check looked into the merge key and called the file invalid YAML)."""
    path = tmp_path / "c.yaml"
    path.write_text(
        "train: &t\n  epochs: 2\n  learning_rate: 0.1\neval:\n  every: 1\n"
        "schedule:\n  method: psg\nmodel: {hidden: &h 12}\nparallel:\n  min_bucket: *h\n"
    )
    cfg = load_config(path)
    assert cfg.train.epochs == 2 and cfg.model.hidden == 12 and cfg.parallel.min_bucket == 12
    import yaml

    from dygnex_jax.config_yaml import _StrictLoader

    merged = yaml.load("a: &a {x: 1, y: 2}\nb:\n  <<: *a\n  y: 3\n", Loader=_StrictLoader)
    assert merged["b"] == {"x": 1, "y": 3}
    with pytest.raises(UserError, match="key 'y' is given twice"):
        yaml.load("b:\n  <<: {x: 1}\n  y: 3\n  y: 4\n", Loader=_StrictLoader)
