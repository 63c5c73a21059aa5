"""The DyGNeX schedulers measured against PSG: schedule figures and real SPMD epoch times.

Three parts, one run, one JSON:

1. **Datasets** (the main table). For every dataset of the suite — ``synthetic`` (the embedded
   default), ``bitcoin_otc``, ``uci_collegemsg``, ``as733`` (its last 100 snapshots, EvolveGCN's
   setting) and ``as733_733`` (all 733) — every device count P (``--devices``), batch size B
   (``--batch-sizes``; ``P`` means B = P, one window per device, where the cross-time-window grouping
   matters most) and method (psg, dygnex_g, dygnex_l): padding efficiency (schedule and packed level,
   see ``dygnex_jax/plan.py``), imbalance and scheduler seconds of one epoch's schedule; and, for the
   cases picked by ``--measure`` (default: P = 8, both batch sizes, every dataset), the *measured* epoch
   time of real SPMD training on fake CPU devices under each method, as a speed-up over psg.
2. **Cost vectors** (the earlier schedule-only benchmark): synthetic log-normal [K, 3] costs, a
   ``--costs`` file, or ``--dataset NAME`` through the ``costs_for`` hook below; gap to lower bounds.
3. **At scale**: dygnex_g wall time at 100,000 windows x 1,024 devices.

Measurement protocol (part 1). The three methods' ``Trainer``s are built first and then run
interleaved epoch by epoch (psg, dygnex_g, dygnex_l for epoch 1, then for epoch 2, ...), so that load
from other users of a shared machine hits all methods alike. An epoch is run with ``train_epoch(e)``;
if it compiled a new shape bucket (the train step's trace count grew) it was a warm-up and is run
again with the same epoch number — the same schedule (cached here, so even dygnex_l under a time limit
gives the same one), the same negatives, the same buckets, no compilation — and that second run is
timed (``--warmup always`` warms up before every timed run). The figure is the median over
``--epochs`` epochs of the timed runs; speed-up = psg's median / the method's median (the JSON also
holds every run, the minimum — robust when other processes only ever slow a run down — and the
speed-up on minima and the median of per-epoch ratios). Where B = P, dygnex_l's schedule is
dygnex_g's (one window per device leaves nothing to solve), so the difference between their times
there is the measurement noise of the machine. A persistent
compilation cache shared by the three trainers (a temporary folder) lets a bucket compiled for one
method load for the next. Epochs larger than a dataset's window cap (``Suite.measure_windows``, or
``--measure-windows``) run a stratified sample of their steps: the steps are ordered by predicted padded
cost, cut into n strata of equal count, one random step per stratum is run, and the epoch time is the
stratum-size weighted sum of those steps' measured times (under SPMD a step's time is set by its
padded shapes, which is what the strata group). The expensive AS-733 cases also train a smaller model
(``Suite.measure_overrides``); the schedule figures do not depend on the model.

Writes ``bench_schedulers.json`` (all rows + metadata), ``bench_schedulers.png`` (padding efficiency
at the largest P, measured speed-up over psg, greedy runtime at scale), ``bench_schedulers.md`` (the
README table) and, for part 2, ``bench_schedulers_costs.png`` to ``--out``.

    python tools/bench_schedulers.py                      # everything (30-40 min on 2 cores)
    python tools/bench_schedulers.py --no-measure         # schedule figures only (under 2 min)
    python tools/bench_schedulers.py --datasets bitcoin_otc --measure 'bitcoin_otc:8:P'
    python tools/bench_schedulers.py --quick              # tiny settings, for tests
    python tools/bench_schedulers.py --datasets none --costs costs.npy   # [K, 3] costs only

Real window costs of part 2 plug in through ``costs_for(dataset_name)`` below (marked HOOK).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import fnmatch
import gc
import hashlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dygnex_jax.config import ScheduleConfig, load_config  # noqa: E402
from dygnex_jax.devices import force_host_devices  # noqa: E402
from dygnex_jax.errors import UserError, run_tool  # noqa: E402
from dygnex_jax.schedule import schedule  # noqa: E402
from dygnex_jax.schedule.cost import default_cost_model  # noqa: E402
from dygnex_jax.schedule.metrics import (  # noqa: E402
    imbalance,
    padding_efficiency,
    step_loads,
    step_objectives,
)

METHODS = ("psg", "dygnex_g", "dygnex_l")


# ================================================================================================
# Part 1: datasets, schedule figures and measured epoch times
# ================================================================================================


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
    from dygnex_jax.data import datasets
    from dygnex_jax.data.windows import WindowSet

    cfg = point_config(suite, "psg", 1, 1, args)
    graph = datasets.load_dataset(cfg.data)
    return graph, WindowSet(graph, cfg.data)


def schedule_rows(suite: Suite, ws, args) -> list[dict]:
    """plan() of every P x B x method of a dataset (no training)."""
    from dygnex_jax.plan import plan

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


class ScheduleTap:
    """Stands in for ``dygnex_jax.train.schedule`` while measuring.

    Caches every (costs, P, B, settings, seed, epoch) schedule, so a warm-up and its timed rerun use
    the same one (dygnex_l under a time limit need not be reproducible) and the scheduler runs once.
    With ``choose`` set (``schedule -> (step ids, stratum sizes)`` or ``(None, None)``), hands
    ``train_epoch`` only the chosen steps. Keeps what it handed out last (``full``, ``subset``,
    ``weights``) and when it returned (the epoch's clock in ``train_epoch`` starts right after), for
    per-step times. It sees exactly the arguments ``train_epoch`` passes, whatever they are.
    """

    def __init__(self, fn):
        self.fn = fn
        self.cache: dict = {}
        self.choose = None
        self.full = None
        self.subset: list[int] | None = None
        self.weights: np.ndarray | None = None
        self.returned_at = 0.0

    def __call__(self, costs, n_devices, batch_size, settings, *, seed, epoch=0):
        costs = np.ascontiguousarray(costs, dtype=np.float64)
        key = (
            hashlib.sha1(costs.tobytes()).hexdigest(),
            costs.shape,
            n_devices,
            batch_size,
            repr(settings),
            seed,
            epoch,
        )
        if key not in self.cache:
            self.cache[key] = self.fn(costs, n_devices, batch_size, settings, seed=seed, epoch=epoch)
        sched = self.full = self.cache[key]
        self.subset, self.weights = self.choose(sched) if self.choose is not None else (None, None)
        if self.subset is not None:
            sched = dataclasses.replace(sched, steps=[sched.steps[i] for i in self.subset])
        self.returned_at = time.perf_counter()
        return sched


@contextlib.contextmanager
def patched_schedule(train_module):
    tap = ScheduleTap(train_module.schedule)
    original = train_module.schedule
    train_module.schedule = tap
    try:
        yield tap
    finally:
        train_module.schedule = original


def sample_steps(trainer, sched, max_windows: int, rng: np.random.Generator):
    """Stratified sample of an epoch's steps: (step ids in run order, stratum sizes), or (None, None)
    when the whole epoch fits in ``max_windows`` windows."""
    from dygnex_jax import plan

    n_steps = sched.num_steps
    n = max(1, max_windows // sched.batch_size) if max_windows > 0 else n_steps
    if n >= n_steps:
        return None, None
    c = trainer.config
    slots = plan.window_slots(c.train.batch_size, trainer.n_devices)
    needs = plan.step_needs(
        trainer.train_costs, trainer.windows.edge_profile("train"), sched, trainer.layout, slots
    )
    w, weights = trainer.windows.window, trainer.weights
    budgets = np.array(
        [
            trainer.padded_work(plan.paid_budget(n, trainer.planned or [], c, w, trainer.layout, weights))
            for n in needs
        ]
    )
    model = getattr(trainer, "cost_model", None) or default_cost_model(trainer.windows.window)
    predicted = model.predict_costs(budgets, trainer.windows.window)
    strata = np.array_split(np.argsort(predicted, kind="stable"), n)
    picks = sorted((int(rng.choice(s)), len(s)) for s in strata)
    return [i for i, _ in picks], np.array([w for _, w in picks], dtype=np.float64)


def run_epoch(trainer, epoch: int, tap: ScheduleTap, choose):
    """One ``train_epoch`` (of the chosen steps, if any): (result, per-step seconds, compilations).
    The tap's ``full``, ``subset`` and ``weights`` then describe what ran."""
    stamps: list[float] = []
    tap.choose = choose
    before = len(trainer.train_step.traces)
    try:
        result = trainer.train_epoch(epoch, progress=lambda done, total: stamps.append(time.perf_counter()))
    finally:
        tap.choose = None
    steps = np.diff([tap.returned_at, *stamps])
    return result, steps, len(trainer.train_step.traces) - before


def measure_case(suite: Suite, graph, p: int, token: str, args, clock, tap, train_module) -> list[dict]:
    """Measured epoch time of every method on one (dataset, P, B), methods interleaved by epoch."""
    from dygnex_jax import parallel

    b = resolve_batch(token, p)
    cap = args.measure_windows if args.measure_windows >= 0 else suite.measure_windows
    mesh = parallel.make_mesh(p)
    trainers = {}
    for m in args.methods:
        cfg = point_config(suite, m, p, b, args, measure=True)
        trainers[m] = train_module.Trainer(cfg, graph=graph, mesh=mesh)
    model = trainers[args.methods[0]].config.model
    state = {m: {"seconds": [], "pad": [], "warmups": 0, "dirty": 0, "sampled": []} for m in args.methods}
    tag = f"{suite.label} P={p} B={b}"
    print(
        f"[{clock():7.1f} s] {tag}: measuring {', '.join(args.methods)} over {args.epochs} epoch(s), "
        f"model {model.name} hidden {model.hidden} head {model.head_hidden}"
        + (f", at most {cap} windows per epoch" if cap else ""),
        flush=True,
    )
    for e in range(1, args.epochs + 1):
        for m, tr in trainers.items():
            # the same seed for a warm-up and its rerun: the same steps (the schedule is cached)
            seed = [args.seed, e, b]

            def choose(sched, tr=tr, seed=seed):
                return sample_steps(tr, sched, cap, np.random.default_rng(seed))

            what = f"{tag} epoch {e}/{args.epochs} {m}"
            print(f"[{clock():7.1f} s] {what}: run", flush=True)
            result, steps, compiled = run_epoch(tr, e, tap, choose)
            if compiled or args.warmup == "always":
                state[m]["warmups"] += 1
                print(
                    f"[{clock():7.1f} s] {what}: warm-up {result['epoch_seconds']:.2f} s, "
                    f"{compiled} new bucket(s) compiled; timing a second run",
                    flush=True,
                )
                result, steps, compiled = run_epoch(tr, e, tap, choose)
                if compiled:  # cannot happen: the same steps have the same shapes
                    state[m]["dirty"] += 1
            n_steps = tap.full.num_steps
            if tap.subset is None:
                seconds, note = result["epoch_seconds"], f"{n_steps}/{n_steps} steps"
                state[m]["sampled"].append(None)
            else:
                seconds = float(tap.weights @ steps)
                note = f"estimated from {len(tap.subset)}/{n_steps} steps"
                state[m]["sampled"].append([len(tap.subset), n_steps])
            state[m]["seconds"].append(seconds)
            state[m]["pad"].append(result["padding_efficiency"])
            print(
                f"[{clock():7.1f} s] {what}: {seconds:.2f} s ({note}), "
                f"measured pad-eff {result['padding_efficiency']:.3f}",
                flush=True,
            )
    rows = []
    psg = state.get("psg")
    for m, s in state.items():
        med = statistics.median(s["seconds"])
        row = {
            "dataset": suite.name,
            "label": suite.label,
            "devices": p,
            "batch_size": b,
            "batch_token": token,
            "method": m,
            "epochs": args.epochs,
            "epoch_seconds": med,
            "epoch_seconds_all": s["seconds"],
            "epoch_seconds_min": min(s["seconds"]),
            "measured_padding_efficiency": statistics.median(s["pad"]),
            "sampled_steps": s["sampled"],
            "warmups": s["warmups"],
            "compilations": len(trainers[m].train_step.traces),
            "compiled_in_timed_run": s["dirty"],
            "model": {"name": model.name, "hidden": model.hidden, "head_hidden": model.head_hidden},
            "measure_overrides": list(suite.measure_overrides),
            "speedup_vs_psg": None,
            "speedup_vs_psg_paired": None,
            "speedup_vs_psg_min": None,
        }
        if psg is not None:
            row["speedup_vs_psg"] = statistics.median(psg["seconds"]) / med
            row["speedup_vs_psg_min"] = min(psg["seconds"]) / min(s["seconds"])
            row["speedup_vs_psg_paired"] = statistics.median(
                [a / x for a, x in zip(psg["seconds"], s["seconds"])]
            )
        rows.append(row)
    del trainers
    gc.collect()
    return rows


# --- output ---------------------------------------------------------------------------------------


def _num(x, fmt: str = ".3f") -> str:
    return "-" if x is None else format(x, fmt)


def markdown_table(suite_rows: list[dict], measured: list[dict]) -> str:
    """The README table: one line per dataset x P x B x method, measured columns where measured."""
    by_key = {(r["dataset"], r["devices"], r["batch_size"], r["method"]): r for r in measured}
    head = (
        "| dataset | P | B | method | pad-eff | packed pad-eff | imbalance | sched s "
        "| measured pad-eff | epoch s (measured) | speed-up vs psg |"
    )
    lines = [head, "|" + "---|" * 4 + "---:|" * 7]
    notes: list[str] = []
    sampled_any = False
    for r in suite_rows:
        key = (r["dataset"], r["devices"], r["batch_size"], r["method"])
        m = by_key.get(key)
        sched = f"{r['scheduler_seconds']:.3f}"
        if r["fallback"]:
            notes.append(r["fallback"])
            sched += f" [{len(notes)}]"
        epoch = speed = meas_pad = "-"
        if m is not None:
            epoch = f"{m['epoch_seconds']:.2f}"
            if any(m["sampled_steps"]):
                epoch += "*"
                sampled_any = True
            speed = _num(m["speedup_vs_psg"], ".2f")
            meas_pad = f"{m['measured_padding_efficiency']:.3f}"
        lines.append(
            f"| {r['label']} | {r['devices']} | {r['batch_size']} | {r['method']} "
            f"| {r['padding_efficiency']:.3f} | {r['packed_padding_efficiency']:.3f} | {r['imbalance']:.3f} "
            f"| {sched} | {meas_pad} | {epoch} | {speed} |"
        )
    text = "\n".join(lines) + "\n"
    if sampled_any:
        text += (
            "\n\\* estimated from a stratified sample of the epoch's steps (a smaller model for AS-733; "
            "see `sampled_steps` and `model` in the JSON); measured pad-eff is that of the sampled steps.\n"
        )
    if notes:
        text += "\n" + "\n".join(f"[{i}] dygnex_l fallback: {n}" for i, n in enumerate(notes, 1)) + "\n"
    return text


def plot_summary(suite_rows, measured, big, path: Path) -> None:
    """(a) padding efficiency at the largest P, (b) measured speed-up over psg, (c) greedy at scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(18, 5), gridspec_kw={"width_ratios": [3, 2, 1]})
    colors = {m: f"C{i}" for i, m in enumerate(METHODS)}

    ax = axes[0]
    if suite_rows:
        p_max = max(r["devices"] for r in suite_rows)
        rows = [r for r in suite_rows if r["devices"] == p_max]
        groups = list(dict.fromkeys((r["label"], r["batch_size"]) for r in rows))
        methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
        width = 0.8 / max(len(methods), 1)
        x = np.arange(len(groups))
        for i, m in enumerate(methods):
            sel = {(r["label"], r["batch_size"]): r for r in rows if r["method"] == m}
            eff = [sel[g]["padding_efficiency"] if g in sel else np.nan for g in groups]
            packed = [sel[g]["packed_padding_efficiency"] if g in sel else np.nan for g in groups]
            ax.bar(x + i * width, eff, width, color=colors[m], label=m)
            ax.plot(x + i * width, packed, "k.", ms=7, label="packed (SPMD budget)" if i == 0 else None)
        ax.set_xticks(x + width * (len(methods) - 1) / 2)
        ax.set_xticklabels([f"{d}\nB={b}" for d, b in groups], fontsize=8, rotation=30, ha="right")
        ax.set_ylim(0, 1.2)
        ax.axhline(1.0, color="k", lw=0.5)
        ax.legend(fontsize=8, ncol=4, loc="upper right")
        ax.set_title(f"(a) padding efficiency, P={p_max} (1 = perfect balance)")
    else:
        ax.text(0.5, 0.5, "no dataset rows", ha="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])

    ax = axes[1]
    others = [m for m in METHODS if m != "psg" and any(r["method"] == m for r in measured)]
    groups = list(dict.fromkeys((r["label"], r["devices"], r["batch_size"]) for r in measured))
    if groups and others and any(r["speedup_vs_psg"] is not None for r in measured):
        width = 0.8 / len(others)
        x = np.arange(len(groups))
        for i, m in enumerate(others):
            sel = {(r["label"], r["devices"], r["batch_size"]): r for r in measured if r["method"] == m}
            sp = [
                sel[g]["speedup_vs_psg"] if g in sel and sel[g]["speedup_vs_psg"] is not None else np.nan
                for g in groups
            ]
            ax.bar(x + i * width, sp, width, color=colors[m], label=m)
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
        ax.set_xticks(x + width * (len(others) - 1) / 2)
        ax.set_xticklabels([f"{d} B={b}" for d, p, b in groups], fontsize=8, rotation=30, ha="right")
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
    ax.set_title("(b) measured epoch time: speed-up over psg")

    ax = axes[2]
    if big:
        x = np.arange(len(big))
        ax.bar(x, [r["seconds_min"] for r in big], color=colors["dygnex_g"])
        for i, r in enumerate(big):
            ax.text(
                i,
                r["seconds_min"],
                f"eff {r['padding_efficiency']:.2f}\n(psg {r['psg_padding_efficiency']:.2f})",
                ha="center",
                va="bottom",
                fontsize=8,
            )
        ax.set_xticks(x)
        ax.set_xticklabels([f"B={r['batch_size']}" for r in big])
        ax.set_ylabel("seconds per epoch schedule")
        ax.set_ylim(0, 1.3 * max(r["seconds_min"] for r in big))
        ax.set_title(
            f"(c) dygnex_g, {big[0]['windows']:,} windows x {big[0]['devices']:,} devices", fontsize=9
        )
    else:
        ax.text(0.5, 0.5, "skipped", ha="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title("(c) dygnex_g at scale")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ================================================================================================
# Part 2: cost vectors (synthetic log-normal, a file, or a dataset's costs) and part 3: at scale
# ================================================================================================


def lognormal_costs(n_windows: int, seed: int, sigma: float = 1.0, window: int = 10, neg_mult: int = 10):
    """[K, 3] synthetic skewed window costs (nodes, edges, pairs), i.i.d. log-normal sizes.

    nodes ~ 200 · exp(sigma · z); edges over the W snapshots ~ nodes · 4 · W; target pairs ~
    nodes · 2 · (1 + neg_mult); each with its own log-normal noise (sigma 0.3), so the three columns
    are correlated but not proportional (the multi-dimensional case the scheduler must handle).
    """
    rng = np.random.default_rng([seed, 7919])
    nodes = np.round(200.0 * np.exp(sigma * rng.standard_normal(n_windows))) + 1
    edges = np.round(nodes * 4 * window * np.exp(0.3 * rng.standard_normal(n_windows)))
    pairs = np.round(nodes * 2 * (1 + neg_mult) * np.exp(0.3 * rng.standard_normal(n_windows)))
    return np.column_stack([nodes, edges, pairs]).astype(np.float64)


def load_costs_file(path: str) -> np.ndarray:
    """[K, 3] costs from a .npy file or a .json file holding a [K, 3] list (or {"costs": [...]})."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"costs file {path!r} does not exist")
    if p.suffix == ".npy":
        costs = np.load(p)
    else:
        data = json.loads(p.read_text())
        costs = np.asarray(data["costs"] if isinstance(data, dict) else data, dtype=np.float64)
    costs = np.asarray(costs, dtype=np.float64)
    if costs.ndim != 2 or costs.shape[1] != 3:
        raise UserError(f"costs file {path!r} must hold a [K, 3] array, got {costs.shape}")
    return costs


# ================================================================================================
# HOOK: real window costs. Return the [K, 3] (nodes, edges, pairs) cost vectors of a dataset's
# training windows, in time order. "lognormal" is the synthetic default; any other name goes
# through the data package (dygnex_jax.data: load_dataset + WindowSet.costs), which the data
# owner may replace with a cached or faster path.
# ================================================================================================
def costs_for(dataset_name: str, *, seed: int = 0, n_windows: int = 100, sigma: float = 1.0) -> np.ndarray:
    if dataset_name == "lognormal":
        return lognormal_costs(n_windows, seed, sigma)
    try:
        from dygnex_jax.config import DataConfig
        from dygnex_jax.data.datasets import load_dataset
        from dygnex_jax.data.windows import WindowSet
    except ImportError as e:
        raise UserError(f"dataset {dataset_name!r}: the data package is not available ({e})") from None
    cfg = DataConfig(dataset=dataset_name)
    graph = load_dataset(cfg)
    return WindowSet(graph, cfg).costs("train", cfg.neg_mult)


# ================================================================================================


def run_one(costs, n_devices, batch_size, method, settings, seed) -> dict:
    cfg = dataclasses.replace(settings, method=method)
    sched = schedule(costs, n_devices, batch_size, cfg, seed=seed)
    w = np.array([cfg.alpha, cfg.beta, cfg.gamma])
    loads = step_loads(costs, sched)
    row = {
        "method": method,
        "devices": n_devices,
        "batch_size": batch_size,
        "windows": len(costs),
        "steps": sched.num_steps,
        "padding_efficiency": padding_efficiency(loads, w),
        "imbalance": imbalance(loads, w),
        "objective": float(step_objectives(loads, w).sum()),
        "scheduler_seconds": sched.seconds,
        "fallback": sched.fallback,
    }
    if "lower_bound" in sched.info:
        row["lower_bound"] = float(sched.info["lower_bound"])
        row["gap_to_lower_bound"] = (row["objective"] - row["lower_bound"]) / row["objective"]
    if method == "dygnex_l":
        row["ilp_statuses"] = sched.info["statuses"]
        row["ilp_improved_steps"] = sched.info["improved_steps"]
        row["greedy_objective"] = sched.info["greedy_objective"]
    return row


def big_timing(n_windows, n_devices, batch_sizes, repeats, settings, seed) -> list[dict]:
    """dygnex_g wall time at scale (min over repeats; the first run is also reported)."""
    costs = lognormal_costs(n_windows, seed)
    cfg = dataclasses.replace(settings, method="dygnex_g")
    w = np.array([cfg.alpha, cfg.beta, cfg.gamma])
    out = []
    for b in batch_sizes:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            sched = schedule(costs, n_devices, b, cfg, seed=seed)
            times.append(time.perf_counter() - t0)
        loads = step_loads(costs, sched)
        row = {
            "windows": n_windows,
            "devices": n_devices,
            "batch_size": b,
            "seconds_min": min(times),
            "seconds_all": times,
            "method_seconds": sched.seconds,
            "padding_efficiency": padding_efficiency(loads, w),
            "objective_over_lower_bound": sched.info["objective"] / sched.info["lower_bound"],
            "lpt_over_lower_bound": sched.info["lpt_objective"] / sched.info["lower_bound"],
            "local_search": sched.info["local_search"],
        }
        psg = schedule(costs, n_devices, b, dataclasses.replace(settings, method="psg"), seed=seed)
        row["psg_padding_efficiency"] = padding_efficiency(step_loads(costs, psg), w)
        print(
            f"  big: K={n_windows} P={n_devices} B={b}: dygnex_g {min(times):.3f} s (runs "
            f"{', '.join(f'{t:.3f}' for t in times)}), padding eff {row['padding_efficiency']:.3f} "
            f"(psg {row['psg_padding_efficiency']:.3f}), objective/LB {row['objective_over_lower_bound']:.4f}",
            flush=True,
        )
        out.append(row)
    return out


def plot_cost_instances(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = sorted({(r["devices"], r["batch_size"]) for r in rows})
    methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    x = np.arange(len(configs))
    width = 0.8 / max(len(methods), 1)
    for i, m in enumerate(methods):
        eff, sec = [], []
        for p, b in configs:
            sel = [r for r in rows if r["method"] == m and r["devices"] == p and r["batch_size"] == b]
            eff.append(np.mean([r["padding_efficiency"] for r in sel]) if sel else np.nan)
            sec.append(np.mean([r["scheduler_seconds"] for r in sel]) if sel else np.nan)
        axes[0].bar(x + i * width, eff, width, label=m)
        axes[1].bar(x + i * width, sec, width, label=m)
    labels = [f"P={p}\nB={b}" for p, b in configs]
    for ax in axes:
        ax.set_xticks(x + width * (len(methods) - 1) / 2)
        ax.set_xticklabels(labels)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="upper center", ncol=len(methods), frameon=False)
    axes[0].set_ylabel("padding efficiency (1 = perfect)")
    axes[0].set_ylim(0, 1.05)
    axes[0].set_title("load balance")
    axes[1].set_yscale("log")
    axes[1].set_ylabel("scheduler seconds per epoch")
    axes[1].set_title("scheduler time")
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def cost_instance_rows(args, settings) -> tuple[list, list[dict], list[dict]]:
    """Part 2: (instances, rows, summary) of the cost-vector benchmark; prints its table."""
    if args.costs:
        instances = [(Path(args.costs).name, load_costs_file(args.costs))]
    elif args.dataset == "lognormal":
        instances = [
            (
                f"lognormal(sigma={args.sigma},seed={s})",
                costs_for("lognormal", seed=s, n_windows=args.windows, sigma=args.sigma),
            )
            for s in range(args.seeds)
        ]
    else:
        instances = [(args.dataset, costs_for(args.dataset))]

    rows = []
    for name, costs in instances:
        for p in args.devices:
            for token in args.batch_sizes:
                b = resolve_batch(token, p)
                if p > min(b, len(costs)):
                    print(f"skip {name} P={p} B={b}: more devices than windows per step", flush=True)
                    continue
                for m in args.methods:
                    print(f"{name}: K={len(costs)} P={p} B={b} {m} ...", end=" ", flush=True)
                    row = run_one(costs, p, b, m, settings, seed=0)
                    row["instance"] = name
                    rows.append(row)
                    print(
                        f"eff {row['padding_efficiency']:.3f}, {row['scheduler_seconds']:.2f} s"
                        + (
                            f", gap {100 * row['gap_to_lower_bound']:.2f}%"
                            if "gap_to_lower_bound" in row
                            else ""
                        )
                        + (f" [{row['fallback']}]" if row["fallback"] else ""),
                        flush=True,
                    )

    # every method against the best lower bound known for the instance (dygnex_l's MILP bound is
    # usually tighter than the analytic one dygnex_g reports)
    for r in rows:
        same = [
            q.get("lower_bound", 0.0)
            for q in rows
            if (q["instance"], q["devices"], q["batch_size"])
            == (r["instance"], r["devices"], r["batch_size"])
        ]
        r["best_lower_bound"] = max(same)
        r["gap_to_best_bound"] = (r["objective"] - r["best_lower_bound"]) / r["objective"] if same else None

    summary = []
    if not rows:
        return instances, rows, summary
    # table: mean over instances. gap.own: (objective - the method's own lower bound) / objective;
    # gap.best: the same against the best bound any method found for the instance.
    print()
    header = (
        f"{'P':>3} {'B':>4} {'method':<9} {'pad.eff':>8} {'imbal':>7} {'gap.own':>9} {'gap.best':>9} "
        f"{'sched s':>8}  notes"
    )
    print(header)
    print("-" * len(header))
    keys = sorted({(r["devices"], r["batch_size"], METHODS.index(r["method"])) for r in rows})
    for p, b, mi in keys:
        m = METHODS[mi]
        sel = [r for r in rows if r["devices"] == p and r["batch_size"] == b and r["method"] == m]
        s = {
            "devices": p,
            "batch_size": b,
            "method": m,
            "padding_efficiency": float(np.mean([r["padding_efficiency"] for r in sel])),
            "imbalance": float(np.mean([r["imbalance"] for r in sel])),
            "scheduler_seconds": float(np.mean([r["scheduler_seconds"] for r in sel])),
            "instances": len(sel),
        }
        gaps = [r["gap_to_lower_bound"] for r in sel if "gap_to_lower_bound" in r]
        s["gap_to_own_lower_bound"] = float(np.mean(gaps)) if gaps else None
        s["gap_to_best_bound"] = float(np.mean([r["gap_to_best_bound"] for r in sel]))
        notes = sum(1 for r in sel if r["fallback"])
        summary.append(s)
        own = f"{100 * s['gap_to_own_lower_bound']:8.2f}%" if gaps else f"{'-':>9}"
        print(
            f"{p:>3} {b:>4} {m:<9} {s['padding_efficiency']:8.3f} {s['imbalance']:7.3f} {own} "
            f"{100 * s['gap_to_best_bound']:8.2f}% {s['scheduler_seconds']:8.3f}  "
            f"{f'{notes} fallback(s)' if notes else ''}"
        )
    print()
    return instances, rows, summary


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


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", default="results/bench_schedulers")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="tiny settings for tests: the smoke config only, P=4, one epoch, small cost instances "
        "and a 2,000 x 64 timing (changes the defaults of " + ", ".join(QUICK) + ")",
    )
    g = ap.add_argument_group("datasets (part 1)")
    g.add_argument(
        "--datasets",
        nargs="+",
        default=list(SUITE),
        help=f"from {', '.join(SUITE)}; 'none' skips part 1",
    )
    g.add_argument("--devices", type=int, nargs="+", default=[4, 8], help="device counts P")
    g.add_argument(
        "--batch-sizes",
        type=parse_batch_token,
        nargs="+",
        default=["P", "32"],
        help="B values; P means B = P",
    )
    g.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    g.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="config override for every dataset"
    )
    g.add_argument(
        "--measure",
        nargs="+",
        default=["*:8:*"],
        metavar="DATASET[:P[:B]]",
        help="cases whose epoch time is measured by training (* wildcards; B may be P); default '*:8:*'",
    )
    g.add_argument("--no-measure", action="store_true", help="schedule figures only, no training")
    g.add_argument("--epochs", type=int, default=3, help="measured epochs E per method (median reported)")
    g.add_argument(
        "--warmup",
        choices=("auto", "always"),
        default="auto",
        help="auto: rerun an epoch (timed) when it compiled something; always: warm up before every timed run",
    )
    g.add_argument(
        "--measure-windows",
        type=int,
        default=-1,
        help="windows per measured epoch at most, by stratified step sampling (0 = whole epochs; "
        "default: per dataset, only the AS-733 cases are sampled)",
    )
    g.add_argument("--fake-devices", type=int, default=8, help="XLA fake CPU devices for measuring")
    g.add_argument(
        "--no-compile-cache", action="store_true", help="no persistent compilation cache between trainers"
    )
    g.add_argument("--seed", type=int, default=0, help="step sampling seed")

    g = ap.add_argument_group("cost vectors (part 2)")
    g.add_argument("--dataset", default="lognormal", help="lognormal (synthetic) or a name for costs_for()")
    g.add_argument("--costs", default="", help="a [K, 3] .npy/.json file (overrides --dataset)")
    g.add_argument("--windows", type=int, default=100, help="synthetic windows K")
    g.add_argument("--sigma", type=float, default=1.0, help="synthetic log-normal skew")
    g.add_argument("--seeds", type=int, default=1, help="synthetic instances (seeds 0..n-1); 0 skips part 2")
    g.add_argument("--jitter", type=float, default=0.1)
    g.add_argument(
        "--weights", default="ones", help="ones (config defaults 1,1,1) or model (default cost model's)"
    )

    g = ap.add_argument_group("dygnex_l (parts 1 and 2)")
    g.add_argument("--time-limit", type=float, default=2.0, help="dygnex_l solver seconds per step")
    g.add_argument("--mip-gap", type=float, default=0.01)
    g.add_argument("--solver", default="HIGHS")

    g = ap.add_argument_group("at scale (part 3)")
    g.add_argument("--big-windows", type=int, default=100_000, help="0 skips the at-scale timing")
    g.add_argument("--big-devices", type=int, default=1024)
    g.add_argument("--big-batch-sizes", type=int, nargs="+", default=[4096, 8192])
    g.add_argument("--big-repeats", type=int, default=3)
    return ap


def explicit_flags(argv) -> set[str]:
    """The destinations of the options given on the command line (not left at their defaults)."""
    parser = build_parser()
    for action in parser._actions:
        action.default = argparse.SUPPRESS
    return set(vars(parser.parse_args(argv)))


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.quick:
        given = explicit_flags(argv)
        for k, v in QUICK.items():
            if k not in given:
                setattr(args, k, v)
    started = time.perf_counter()
    clock = lambda: time.perf_counter() - started  # noqa: E731
    load_start = os.getloadavg()

    if args.weights == "model":
        alpha, beta, gamma = default_cost_model().weights()
    elif args.weights == "ones":
        alpha = beta = gamma = 1.0
    else:
        raise UserError("--weights must be ones or model")
    if args.epochs < 1:
        raise UserError("--epochs must be at least 1")
    settings = ScheduleConfig(
        jitter=args.jitter,
        alpha=float(alpha),
        beta=float(beta),
        gamma=float(gamma),
        time_limit=args.time_limit,
        mip_gap=args.mip_gap,
        solver=args.solver,
    )
    names = [] if args.datasets == ["none"] else args.datasets
    suites = []
    for name in names:
        if args.quick and name == QUICK_SUITE.name:
            suites.append(QUICK_SUITE)
        elif name in SUITE:
            suites.append(SUITE[name])
        else:
            raise UserError(f"unknown dataset {name!r} in --datasets: choose from {', '.join(SUITE)} or none")
    selectors = [] if args.no_measure else [parse_selector(s) for s in args.measure]
    for s_name, _, _ in selectors:
        if s_name != "*" and not any(fnmatch.fnmatch(s.name, s_name) for s in suites):
            raise UserError(f"--measure {s_name!r} matches no dataset of --datasets ({', '.join(names)})")
    for override in args.set:  # one-line error now rather than after minutes of work
        load_config(None, [override])
    wanted_p = [p for p in args.devices if any(sp in ("*", str(p)) for _, sp, _ in selectors)]
    if wanted_p:
        if max(wanted_p) > args.fake_devices:
            raise UserError(f"--measure asks for P={max(wanted_p)} but --fake-devices is {args.fake_devices}")
        force_host_devices(args.fake_devices)  # before JAX is imported (by dygnex_jax.train, below)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result: dict = {
        "meta": {
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "nproc": os.cpu_count(),
            "machine": platform.platform(),
            "python": platform.python_version(),
            "argv": sys.argv[1:] if argv is None else list(argv),
            "flags": vars(args),
            "loadavg_start": load_start,
        },
        "datasets": [],
        "skipped": [],
        "measured": [],
    }

    def save() -> None:
        result["meta"]["wall_seconds"] = clock()
        result["meta"]["loadavg_end"] = os.getloadavg()
        (out / "bench_schedulers.json").write_text(json.dumps(result, indent=2, default=float) + "\n")

    # --- part 1: schedule figures --------------------------------------------------------------
    loaded = {}
    for suite in suites:
        try:
            graph, ws = load_suite(suite, args)
        except UserError as e:
            print(f"skip {suite.name}: {e}", flush=True)
            result["skipped"].append({"dataset": suite.name, "reason": str(e)})
            continue
        loaded[suite.name] = (suite, graph, ws)
        result["datasets"] += schedule_rows(suite, ws, args)
    save()

    # --- part 1: measured epoch times ----------------------------------------------------------
    cases = []
    for suite, graph, ws in loaded.values():
        k = len(ws.splits["train"])
        for p in args.devices:
            for token in args.batch_sizes:
                b = resolve_batch(token, p)
                if p <= min(b, k) and selected(selectors, suite.name, p, token, b):
                    cases.append((suite, graph, p, token))
    if cases:
        import jax

        from dygnex_jax import train as train_module

        result["meta"]["jax"] = jax.__version__
        result["meta"]["jax_devices"] = len(jax.devices())
        print(f"\nmeasuring {len(cases)} case(s) on {len(jax.devices())} {jax.devices()[0].platform} devices")
        with contextlib.ExitStack() as stack:
            if not args.no_compile_cache:
                cache_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench_xla_cache_"))
                jax.config.update("jax_compilation_cache_dir", cache_dir)
                jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
                jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
            tap = stack.enter_context(patched_schedule(train_module))
            for suite, graph, p, token in cases:
                result["measured"] += measure_case(suite, graph, p, token, args, clock, tap, train_module)
                save()
            if not args.no_compile_cache:
                jax.config.update("jax_compilation_cache_dir", None)

    # --- part 2: cost vectors ------------------------------------------------------------------
    instances, rows, summary = [], [], []
    if args.costs or args.dataset != "lognormal" or args.seeds > 0:
        print("\ncost-vector instances (part 2)")
        instances, rows, summary = cost_instance_rows(args, settings)
    result.update(
        settings=dataclasses.asdict(settings),
        weights=[settings.alpha, settings.beta, settings.gamma],
        instances=[name for name, _ in instances],
        rows=rows,
        summary=summary,
    )
    save()

    # --- part 3: at scale ----------------------------------------------------------------------
    big = []
    if args.big_windows > 0:
        print(f"dygnex_g at scale: {args.big_windows} windows x {args.big_devices} devices", flush=True)
        big = big_timing(
            args.big_windows, args.big_devices, args.big_batch_sizes, args.big_repeats, settings, seed=0
        )
    result["big"] = big

    # --- outputs -------------------------------------------------------------------------------
    table = markdown_table(result["datasets"], result["measured"]) if result["datasets"] else ""
    if table:
        print("\n" + table)
        (out / "bench_schedulers.md").write_text(table)
    for r in big:
        print(
            f"dygnex_g K={r['windows']} P={r['devices']} B={r['batch_size']}: {r['seconds_min']:.3f} s "
            f"(min of {len(r['seconds_all'])}), padding eff {r['padding_efficiency']:.3f} "
            f"(psg {r['psg_padding_efficiency']:.3f})"
        )
    save()
    written = [out / "bench_schedulers.json"]
    plot_summary(result["datasets"], result["measured"], big, out / "bench_schedulers.png")
    written.append(out / "bench_schedulers.png")
    if table:
        written.append(out / "bench_schedulers.md")
    if rows:
        plot_cost_instances(rows, out / "bench_schedulers_costs.png")
        written.append(out / "bench_schedulers_costs.png")
    print(f"\nwrote {', '.join(str(p) for p in written)} in {clock():.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
