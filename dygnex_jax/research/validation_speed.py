"""A validation run's machine speed against its profile's (``speed_probe``), and the simulation at it.

The profile probes the machine beside its rounds; the cost-model cache entry keeps the median
(``cost_cache.entry_probe``). A validation run probes it right before its first epoch and after its
last (``worker``). ``factor`` = probe before / probe at the profile: how many times slower the machine
runs than when the model was measured. The simulation priced at the profile's speed, times ``factor``,
is a prediction made before the run from a measurement of the machine, never of the run: it is
reported beside the error at the profile's speed (``error_vs_steps`` is unchanged), with ``after``'s
factor beside it (how far the machine moved during the run, which no prediction made before it sees).
"""

from __future__ import annotations

import re

import numpy as np

from .. import cost_cache


def profile_probe(cost_note: str) -> float | None:
    """The probe seconds of the cache entry a run's cost note names ("... from PATH"; None: no
    entry, or one profiled before the probe)."""
    found = re.search(r" from (\S+)$", cost_note or "")
    data = cost_cache.read_entry(found.group(1)) if found else None
    return None if data is None else cost_cache.entry_probe(data)


def fields(data: dict, error: float) -> dict:
    """A row's ``speed``: the worker's probes, ``factor`` (before / profile), ``factor_after`` and
    ``error`` = the simulation x factor against the steps (None without the probes)."""
    s = data.get("speed") or {}
    if not s.get("profile") or not s.get("before"):
        return {"speed": None}
    factor = s["before"] / s["profile"]
    return {
        "speed": {
            **s,
            "factor": factor,
            "factor_after": s["after"] / s["profile"] if s.get("after") else None,
            "error": (1 + error) * factor - 1,
        }
    }


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def _trial_speeds(row: dict) -> list:
    return (row.get("trials") or {}).get("speed") or [row.get("speed")]


def table(rows: list[dict], within: float = 0.15) -> str:
    """Each row's trials: the error at the profile's speed, the machine's speed before and after the
    run against the profile's (x), and the error with the speed probed before the run; then how many
    rows (median trial) and trials are within ``within`` each way."""
    lines = [
        "| run | dataset | error at the profile's speed per trial | speed before / after the run (x the profile's) "
        "| error with the speed probed before the run |",
        "|---|---|---|---|---|",
    ]
    plain, probed, trials_plain, trials_probed = [], [], [], []
    for r in rows:
        speeds = _trial_speeds(r)
        errors = (r.get("trials") or {}).get("error_vs_steps") or [r["error_vs_steps"]]
        if not any(speeds):
            continue
        lines.append(
            f"| {r['run']} | {r['dataset']} | {' / '.join(_pct(e) for e in errors)} | "
            + " / ".join(
                "-" if s is None else f"{s['factor']:.2f}, {s['factor_after'] or 0:.2f}" for s in speeds
            )
            + f" | {' / '.join('-' if s is None else _pct(s['error']) for s in speeds)} |"
        )
        if r.get("speed"):
            plain.append(abs(r["error_vs_steps"]))
            probed.append(abs(r["speed"]["error"]))
        for e, s in zip(errors, speeds):
            if s is not None:
                trials_plain.append(abs(e))
                trials_probed.append(abs(s["error"]))
    if plain:

        def count(xs):
            return f"{sum(x <= within for x in xs)} of {len(xs)} within {100 * within:.0f}%, median {100 * np.median(xs):.1f}%"

        lines += [
            "",
            f"Rows (median trial): at the profile's speed {count(plain)}; with the speed probed {count(probed)}. "
            f"Trials: {count(trials_plain)}; with the speed probed {count(trials_probed)}.",
        ]
    return "\n".join(lines) + "\n"
