"""Reading config text: a YAML file (strictly: a key given twice is an error), a ``key=value`` override,
a value coerced to its key's declared type, and the keys two saved configs differ in. Used by config.py;
no JAX."""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any

import yaml

from .data.timerange import TimePoint, bound_text
from .errors import UserError

_SCIENTIFIC = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+", re.ASCII)  # 1e9, 2.5E-3


def coerce(value: Any, kind: Any, key: str) -> Any:
    origin = typing.get_origin(kind)
    if kind is TimePoint:  # data.start / data.end: a number or a date, as the text written
        value, kind = bound_text(value), str
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise UserError(f"config key {key!r} must be true or false, got {value!r}: write true or false")
    if kind is int:
        if isinstance(value, str) and _SCIENTIFIC.fullmatch(value.strip()):  # 1e3: YAML 1.1 reads a string
            number = float(value)
            value = int(number) if number.is_integer() and abs(number) < 2**63 else value
        if isinstance(value, bool) or not isinstance(value, int):
            raise UserError(f"config key {key!r} must be an integer, got {value!r}: write a whole number")
        return value
    if kind is float:
        if isinstance(value, str) and _SCIENTIFIC.fullmatch(value.strip()):
            value = float(value)  # YAML 1.1 reads 1e9 (no dot) as a string
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UserError(f"config key {key!r} must be a number, got {value!r}: write a number such as 0.5")
        return float(value)
    if kind is str:
        if isinstance(value, bool):  # YAML 1.1 reads off / on / no / yes as booleans
            value = "on" if value else "off"
        if not isinstance(value, str):
            raise UserError(f"config key {key!r} must be a string, got {value!r}")
        return value
    if origin is tuple:
        args = typing.get_args(kind)
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise UserError(f"config key {key!r} must be a list of {len(args)} values, got {value!r}")
        return tuple(coerce(v, a, key) for v, a in zip(value, args))
    if origin in (typing.Union, types.UnionType):
        raise TypeError(f"unsupported config type {kind}")
    raise TypeError(f"unsupported config type {kind}")


def _nest(dotted: str, value: Any) -> dict:
    out: dict = {}
    node = out
    parts = dotted.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return out


def parse_override(text: str) -> dict:
    """``"train.batch_size=16"`` -> ``{"train": {"batch_size": 16}}`` (value parsed as YAML)."""
    if "=" not in text:
        raise UserError(f"override {text!r} is not key=value (e.g. train.batch_size=16)")
    dotted, raw = text.split("=", 1)
    if not dotted.strip():
        raise UserError(f"override {text!r} has an empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except (yaml.YAMLError, ValueError):  # ValueError: a date YAML cannot build (2004-13-01)
        value = raw
    return _nest(dotted.strip(), value)


class _StrictLoader(yaml.SafeLoader):
    """YAML's safe loader, but a key given twice in one mapping is an error (YAML keeps the last one
    silently, which would drop the first value the user wrote)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # "<<: *anchor": its keys may be overridden
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise UserError(
                    f"key {key!r} is given twice in one section (line {key_node.start_mark.line + 1}): keep one"
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_yaml(p: Path) -> dict:
    """A config file's mapping; unreadable, non-UTF-8, invalid, duplicated-key or empty files are
    one-line ``UserError``s naming the file."""
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"config file {str(p)!r} is not UTF-8 text: save it as UTF-8 YAML") from None
    except OSError as e:
        raise UserError(
            f"config file {str(p)!r} cannot be read ({e.strerror}): check its permissions"
        ) from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except UserError as e:
        raise UserError(f"config file {str(p)!r}: {e}") from None
    except yaml.composer.ComposerError as e:  # "expected a single document"
        if "single document" in str(e):
            raise UserError(
                f"config file {str(p)!r} holds more than one YAML document (a second '---'): keep one"
            ) from None
        raise UserError(f"config file {str(p)!r} is not valid YAML: fix its syntax") from None
    except (yaml.YAMLError, ValueError) as e:  # ValueError: a date YAML cannot build (2004-13-01)
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        where = f" at line {line + 1}" if line is not None else ""
        raise UserError(f"config file {str(p)!r} is not valid YAML{where}: fix its syntax") from None
    if not isinstance(data, dict):  # None: only comments
        raise UserError(
            f"config file {str(p)!r} is empty: write the keys that differ from the defaults in it, "
            "or leave out --config for the embedded default"
            if data is None
            else f"config file {str(p)!r} holds a {type(data).__name__}, not sections of keys: write "
            "sections of key: value lines, as the files in configs/ do"
        )
    return data


def key_differences(config: dict, trained: dict, defaults: dict, renamed: dict[str, str]) -> list[str]:
    """Dotted keys whose value in ``config`` (a config as a plain dict) differs from ``trained`` (one saved
    by an earlier version: keys in ``renamed`` (old -> new dotted name) are read under their new names,
    keys it lacks take their value in ``defaults``)."""
    return _differences(config, _with_defaults(_renamed(trained, renamed), defaults))


def _renamed(trained: dict, renamed: dict[str, str]) -> dict:
    """``trained`` with keys that moved since under their new names."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in trained.items()}
    for old, new in renamed.items():
        (a, b), (c, d) = old.split("."), new.split(".")
        if b in out.get(a, {}):
            out.setdefault(c, {})[d] = out[a].pop(b)
    return out


def _with_defaults(trained: dict, defaults: dict) -> dict:
    """``trained`` with the keys it lacks (added to the config after it was saved) at their defaults."""
    out = dict(trained)
    for name, value in defaults.items():
        if name not in out:
            out[name] = value
        elif isinstance(value, dict) and isinstance(out[name], dict):
            out[name] = _with_defaults(out[name], value)
    return out


def _differences(a: dict, b: dict, prefix: str = "") -> list[str]:
    out = []
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name), b.get(name)
        if isinstance(x, dict) and isinstance(y, dict):
            out += _differences(x, y, f"{prefix}{name}.")
        elif x != y:
            out.append(f"{prefix}{name}")
    return out
