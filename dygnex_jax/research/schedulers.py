"""The DyGNeX schedulers measured against PSG: the datasets, cases and schedule figures of the benchmark.

The benchmark (``tools/bench_schedulers.py``) has three parts, one run, one JSON:

1. **Datasets** (the main table). For every dataset of the suite (``SUITE``) — ``synthetic`` (the
   embedded default), ``bitcoin_otc``, ``uci_collegemsg``, ``as733`` (its last 100 snapshots,
   EvolveGCN's setting) and ``as733_733`` (all 733) — every device count P, batch size B (``P`` means
   B = P, one window per device, where the cross-time-window grouping matters most) and method (psg,
   dygnex_g, dygnex_l): padding efficiency (schedule and packed level, see ``dygnex_jax/plan.py``),
   imbalance and scheduler seconds of one epoch's schedule (``schedule_rows``, this module); and, for the
   cases picked by ``--measure`` selectors, the *measured* epoch time of real SPMD training on fake CPU
   devices under each method, as a speed-up over psg (``scheduler_timing``, which describes the
   measurement protocol).
2. **Cost vectors**: synthetic log-normal [K, 3] costs, a costs file, or a dataset's costs through the
   ``costs_for`` hook; gap to lower bounds (``scheduler_costs``).
3. **At scale**: dygnex_g wall time at 100,000 windows x 1,024 devices (``scheduler_costs.big_timing``).

Tables and plots: ``scheduler_report``. The functions here take the script's parsed flags (``args``, an
``argparse.Namespace``; the attributes are the flags' names: ``args.batch_sizes`` is ``--batch-sizes``).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import fnmatch
import os
import platform
from pathlib import Path

from ..config import ScheduleConfig, load_config
from ..errors import UserError
from ..schedule.cost import default_cost_model

REPO = Path(__file__).resolve().parents[2]  # the checkout: the suite's configs/ files are read from it
METHODS = ("psg", "dygnex_g", "dygnex_l")


@dataclasses.dataclass(frozen=True)
class Suite:
    """One dataset of the benchmark: a config file (None = the embedded default) + overrides."""

    name: str  # CLI name and JSON key
    label: str  # table label
    config: str | None  # path relative to the repository root
    overrides: tuple[str, ...] = ()
    measure_overrides: tuple[str, ...] = ()  # applied to measured training only (e.g. a smaller model)
    measure_windows: int = 0  # windows per measured epoch at most (0 = whole epochs)


BITCOIN = "configs/egcn_o_bitcoin_otc.yaml"
SMALL_MODEL = ("model.hidden=16", "model.head_hidden=32")
SUITE = {
    s.name: s
    for s in (
        Suite("synthetic", "synthetic", None),
        Suite("bitcoin_otc", "bitcoin_otc", BITCOIN),
        Suite("uci_collegemsg", "uci_collegemsg", "configs/gcrn_uci.yaml"),
        Suite("as733", "as733 (100)", BITCOIN, ("data.dataset=as733",), SMALL_MODEL, 32),
        Suite(
            "as733_733",
            "as733 (733)",
            BITCOIN,
            ("data.dataset=as733", "data.last_snapshots=0"),
            SMALL_MODEL,
            64,
        ),
    )
}
# --quick: the test config; one large minimum bucket means few shapes, so few compilations (seconds each)
QUICK_SUITE = Suite("smoke", "synthetic (smoke)", "configs/smoke.yaml", ("parallel.min_bucket=4096",))
# --quick: the flags it changes (where not given on the command line) and their values
QUICK = {
    "datasets": ["smoke"],
    "devices": [4],
    "batch_sizes": ["P", "8"],
    "epochs": 1,
    "measure": ["*:4:P"],
    "time_limit": 0.5,
    "windows": 24,
    "seeds": 1,
    "big_windows": 2000,
    "big_devices": 64,
    "big_batch_sizes": [256],
    "big_repeats": 1,
}


def parse_batch_token(text: str) -> str:
    """A --batch-sizes entry: ``P`` (B = P) or a positive integer; kept as text."""
    if text.upper() == "P":
        return "P"
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"batch size {text!r} must be P or a positive integer")
    return str(int(text))


def resolve_batch(token: str, p: int) -> int:
    return p if token == "P" else int(token)


def point_config(suite: Suite, method: str, p: int, b: int, args, *, measure: bool = False):
    """The config of one (dataset, method, P, B); ``args.set`` and ``args.time_limit`` apply."""
    overrides = [
        # the bucket grid and scan layout this benchmark's README tables were measured with (planned
        # budgets and the flat layouts are measured by tools/bench_padded.py); --set overrides them
        "parallel.budgets=buckets",
        "parallel.layout=scan",
        *suite.overrides,
        *(suite.measure_overrides if measure else ()),
        *args.set,
        f"schedule.method={method}",
        f"train.batch_size={b}",
        f"parallel.devices={p}",
        f"schedule.time_limit={args.time_limit}",
    ]
    path = str(REPO / suite.config) if suite.config else None
    return load_config(path, overrides)


def load_suite(suite: Suite, args):
    """(graph, WindowSet) of a dataset, built once and shared by every method, P and B."""
    from ..data import datasets
    from ..data.windows import WindowSet

    cfg = point_config(suite, "psg", 1, 1, args)
    graph = datasets.load_dataset(cfg.data)
    return graph, WindowSet(graph, cfg.data)


def schedule_rows(suite: Suite, ws, args) -> list[dict]:
    """plan() of every P x B x method of a dataset (no training)."""
    from ..plan import plan

    k = len(ws.splits["train"])
    rows = []
    for p in args.devices:
        for token in args.batch_sizes:
            b = resolve_batch(token, p)
            if p > min(b, k):
                print(f"skip {suite.name} P={p} B={b}: more devices than windows per step ({k} windows)")
                continue
            for m in args.methods:
                r = plan(point_config(suite, m, p, b, args), p, ws)
                r.pop("step_loads", None)
                r.update(dataset=suite.name, label=suite.label, batch_token=token)
                rows.append(r)
                print(
                    f"{suite.label}: K={k} P={p} B={b} {m:<9} pad-eff {r['padding_efficiency']:.3f} "
                    f"packed {r['packed_padding_efficiency']:.3f} imbalance {r['imbalance']:.3f} "
                    f"sched {r['scheduler_seconds']:.3f} s"
                    + (f" [{r['fallback']}]" if r["fallback"] else ""),
                    flush=True,
                )
    return rows


def schedule_figures(suites: list[Suite], args) -> tuple[dict, list[dict], list[dict]]:
    """Part 1's schedule figures: (the loaded datasets, name -> (suite, graph, WindowSet); the rows of
    ``schedule_rows``; the skipped datasets, a dataset that fails to load with a UserError is skipped)."""
    loaded, rows, skipped = {}, [], []
    for suite in suites:
        try:
            graph, ws = load_suite(suite, args)
        except UserError as e:
            print(f"skip {suite.name}: {e}", flush=True)
            skipped.append({"dataset": suite.name, "reason": str(e)})
            continue
        loaded[suite.name] = (suite, graph, ws)
        rows += schedule_rows(suite, ws, args)
    return loaded, rows, skipped


# --- which cases are measured ---------------------------------------------------------------------


def parse_selector(text: str) -> tuple[str, str, str]:
    """``DATASET[:P[:B]]`` with ``*`` wildcards (missing parts = ``*``); B may be ``P``."""
    parts = text.split(":")
    if len(parts) > 3 or any(not s for s in parts):
        raise UserError(f"--measure {text!r} must be DATASET[:P[:B]], e.g. 'bitcoin_otc:8:*' or '*:8:P'")
    parts += ["*"] * (3 - len(parts))
    name, p, b = parts
    if p != "*" and not p.isdigit():
        raise UserError(f"--measure {text!r}: P must be an integer or *")
    if b not in ("*", "P") and not b.isdigit():
        raise UserError(f"--measure {text!r}: B must be an integer, P or *")
    return name, p, b


def selected(selectors, name: str, p: int, token: str, b: int) -> bool:
    for s_name, s_p, s_b in selectors:
        if not fnmatch.fnmatch(name, s_name):
            continue
        if s_p != "*" and int(s_p) != p:
            continue
        if s_b == "*" or (s_b == "P" and token == "P") or (s_b.isdigit() and int(s_b) == b):
            return True
    return False


def measured_cases(loaded: dict, selectors, args) -> list[tuple]:
    """The (suite, graph, P, B token) cases of the loaded datasets that ``selectors`` pick."""
    cases = []
    for suite, graph, ws in loaded.values():
        k = len(ws.splits["train"])
        for p in args.devices:
            for token in args.batch_sizes:
                b = resolve_batch(token, p)
                if p <= min(b, k) and selected(selectors, suite.name, p, token, b):
                    cases.append((suite, graph, p, token))
    return cases


# --- the flags, checked before anything runs ------------------------------------------------------


def schedule_settings(args) -> ScheduleConfig:
    """The scheduler settings of parts 2 and 3 (``--weights``, ``--jitter``, dygnex_l's solver flags);
    a UserError for a bad ``--weights`` or ``--epochs``."""
    if args.weights == "model":
        alpha, beta, gamma = default_cost_model().weights()
    elif args.weights == "ones":
        alpha = beta = gamma = 1.0
    else:
        raise UserError("--weights must be ones or model")
    if args.epochs < 1:
        raise UserError("--epochs must be at least 1")
    return ScheduleConfig(
        jitter=args.jitter,
        alpha=float(alpha),
        beta=float(beta),
        gamma=float(gamma),
        time_limit=args.time_limit,
        mip_gap=args.mip_gap,
        solver=args.solver,
    )


def resolve_suites(args) -> list[Suite]:
    """The datasets of ``--datasets`` (``none``: no dataset; ``--quick`` adds the smoke config)."""
    suites = []
    for name in [] if args.datasets == ["none"] else args.datasets:
        if args.quick and name == QUICK_SUITE.name:
            suites.append(QUICK_SUITE)
        elif name in SUITE:
            suites.append(SUITE[name])
        else:
            raise UserError(f"unknown dataset {name!r} in --datasets: choose from {', '.join(SUITE)} or none")
    return suites


def measure_selectors(args, suites: list[Suite]) -> tuple[list, int]:
    """(the parsed ``--measure`` selectors, none with ``--no-measure``; the fake CPU devices the
    measured cases need, 0 if none). Every ``--set`` override is checked here too, so that a bad one
    is a one-line error before minutes of work."""
    names = [] if args.datasets == ["none"] else args.datasets
    selectors = [] if args.no_measure else [parse_selector(s) for s in args.measure]
    for s_name, _, _ in selectors:
        if s_name != "*" and not any(fnmatch.fnmatch(s.name, s_name) for s in suites):
            raise UserError(f"--measure {s_name!r} matches no dataset of --datasets ({', '.join(names)})")
    for override in args.set:
        load_config(None, [override])
    wanted_p = [p for p in args.devices if any(sp in ("*", str(p)) for _, sp, _ in selectors)]
    if not wanted_p:
        return selectors, 0
    if max(wanted_p) > args.fake_devices:
        raise UserError(f"--measure asks for P={max(wanted_p)} but --fake-devices is {args.fake_devices}")
    return selectors, args.fake_devices


def run_meta(args, argv: list[str], loadavg_start) -> dict:
    """The ``meta`` of the benchmark's JSON: date, machine, Python, the command line and its flags."""
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "machine": platform.platform(),
        "python": platform.python_version(),
        "argv": argv,
        "flags": vars(args),
        "loadavg_start": loadavg_start,
    }
