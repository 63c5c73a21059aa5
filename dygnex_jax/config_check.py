"""How a config key declares its allowed values (``key``, beside the key in config.py), and the one
checker that holds every key of a config to its declaration (``check_keys``; config.validate calls it).

A declaration is exactly one of: ``interval`` (numbers, e.g. ``"[1, inf)"``, ``"(0, 1)"``, ``"[1, 64]"``;
``inf`` closed means inf is allowed; a tuple key's every value), ``choices`` (strings; a function is a
registry, read when checked), or ``free`` (why the value is not checked here). ``also`` adds values
outside an interval, with their meaning (``{-1: "auto"}``). Errors are the one line of a ``UserError``:
``train.batch_size must be positive, got 0``; a registry's ``unknown schedule.method 'x': choose one of``.
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .errors import UserError


class Interval(typing.NamedTuple):
    """The numbers a key allows, declared as text: ``"[1, inf)"``, ``"(0, 1)"``, ``"[0, inf]"`` (inf too)."""

    lo: float
    hi: float
    lo_open: bool
    hi_open: bool

    @classmethod
    def parse(cls, text: str) -> Interval:
        num = r"\s*(-?\d+|-?\d*\.\d+|-?inf)\s*"
        m = re.fullmatch(rf"([\[(]){num},{num}([\])])", text)
        lo, hi = (int(b) if b.lstrip("-").isdigit() else float(b) for b in m.group(2, 3)) if m else (1, 0)
        if not lo <= hi:
            raise ValueError(f"bad interval {text!r}: write it like [1, inf), (0, 1] or [1, 64]")
        return cls(lo, hi, m[1] == "(", m[4] == ")")

    def admits(self, x: float) -> bool:
        above = self.lo < x if self.lo_open else self.lo <= x
        return above and (x < self.hi if self.hi_open else x <= self.hi)

    def describe(self, integer: bool) -> str:
        """The phrase after "must be": "positive", ">= 0", "> 1 and finite", "in 1..64", "in (0, 1)"."""
        if self.hi != math.inf:
            if integer and not (self.lo_open or self.hi_open):
                return f"in {self.lo}..{self.hi}"
            return f"in {'(['[not self.lo_open]}{self.lo}, {self.hi}{')]'[not self.hi_open]}"
        positive = (self.lo == 0 and self.lo_open) or (integer and self.lo == 1 and not self.lo_open)
        bound = "positive" if positive else f"{'>' if self.lo_open else '>='} {self.lo}"
        return bound + (" and finite" if self.hi_open and not integer else "")


def key(
    default: Any,
    interval: str = "",
    *,
    choices: Sequence[str] | Callable[[], Sequence[str]] = (),
    also: dict | None = None,
    free: str = "",
) -> Any:
    """A config key's default and, beside it, its allowed values: exactly one of ``interval`` (numbers;
    a tuple key's every value), ``choices`` (strings; a function = a registry, read when checked) or
    ``free`` (why not checked here); ``also`` adds values outside the interval and their meaning."""
    if sum(map(bool, (interval, choices, free))) != 1 or (also and not interval):
        raise TypeError("declare exactly one of interval, choices or free (also: with an interval)")
    meta: dict[str, Any] = {"interval": Interval.parse(interval)} if interval else {}
    meta |= {"choices": choices} if choices else {"free": free} if free else {}
    return dataclasses.field(default=default, metadata=meta | ({"also": also} if also else {}))


def keys(section: Any, prefix: str = "") -> Iterator[tuple[str, dataclasses.Field, Any]]:
    """Every key under ``section`` (a ``Config`` or one of its sections) in declaration order, as
    (dotted name, field, value); the field's ``metadata`` is the key's declaration."""
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if dataclasses.is_dataclass(value):
            yield from keys(value, f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", f, value


def _either(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def key_problem(name: str, declared: typing.Mapping, value: Any) -> str | None:
    """What is wrong with ``value`` for the key ``name`` declared by ``declared`` (a field's metadata),
    as the one line of a ``UserError``; None when it is allowed."""
    choices, interval = declared.get("choices"), declared.get("interval")
    if callable(choices):  # a registry
        names = list(choices())
        return None if value in names else f"unknown {name} {value!r}: choose one of {', '.join(names)}"
    if choices:
        return (
            None if value in choices else f"{name} must be {_either(choices)}, got {value!r}: set one of them"
        )
    if interval is None:
        return None
    also = declared.get("also", {})
    values = value if isinstance(value, tuple) else (value,)
    if all(v in also or interval.admits(v) for v in values):
        return None
    phrase = interval.describe(integer=isinstance(values[0], int))
    phrase += " (each)" if isinstance(value, tuple) else ""
    phrase += "".join(f", or {v} ({meaning})" for v, meaning in also.items())
    got = list(value) if isinstance(value, tuple) else value
    return f"{name} must be {phrase}, got {got}: set {name} within that range"


def check_keys(section: Any, prefix: str = "") -> None:
    """A ``UserError`` for the first key of ``section`` outside its declared range or choices."""
    for name, f, value in keys(section, prefix):
        problem = key_problem(name, f.metadata, value)
        if problem:
            raise UserError(problem)
