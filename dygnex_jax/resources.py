"""Resource guards: what a run would allocate, estimated from sizes known before it allocates, checked
against limits, so that an absurd value is a one-line ``UserError`` that names the estimate and the fix
instead of an out-of-memory kill, a numpy ``MemoryError`` or an hour of planning.

Limits: the memory available to this process (``available_memory``: ``$DYGNEX_MEMORY`` when set, e.g.
``8G``, else the smaller of the kernel's MemAvailable and what the cgroup's limit leaves), and two fixed
counts: ``MAX_SNAPSHOTS`` snapshots per graph and ``MAX_PLANNED_STEPS`` training steps planned before
epoch 1. Every estimate is a lower bound (the largest buffers a step or an evaluation certainly holds),
so a guard never refuses what could run; the shipped configs and datasets need a few GB at most.

Where they run: snapshot counts where an edge stream is bucketed (data/loaders.py), the snapshots x
nodes degree table (data/windows.py), the synthetic graph's sizes with the config (``check_config``),
and the model, its training pairs, the planning horizon and evaluation with the windows
(``check_run``, called by the Trainer before the model is built).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from .errors import UserError

MAX_SNAPSHOTS = 100_000  # a run builds per-snapshot arrays and per-window costs: beyond, minutes of set-up
MAX_PLANNED_STEPS = 20_000  # parallel.budgets=planned schedules every step ahead (~2-5 ms a step on a CPU)
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _meminfo_available() -> float | None:
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    m = re.search(r"^MemAvailable:\s+(\d+) kB", text, flags=re.M)
    return float(m.group(1)) * 1024 if m else None


def _cgroup_left() -> float | None:
    """Bytes the cgroup's memory limit leaves (v2, else v1), reclaimable file cache counted as free;
    None without a limit."""
    for folder, limit, usage, cache in (
        ("/sys/fs/cgroup", "memory.max", "memory.current", "inactive_file"),
        ("/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"),
    ):
        try:
            cap, used = (Path(folder, f).read_text().strip() for f in (limit, usage))
            stat = Path(folder, "memory.stat").read_text() if Path(folder, "memory.stat").is_file() else ""
        except OSError:
            continue
        if cap.isdigit() and used.isdigit() and int(cap) < 2**60:
            m = re.search(rf"^{cache} (\d+)", stat, flags=re.M)
            return float(max(int(cap) - int(used) + (int(m.group(1)) if m else 0), 0))
    return None


def available_memory() -> tuple[float, str]:
    """(bytes this process may still allocate, where the figure comes from); inf when unknown."""
    env = os.environ.get("DYGNEX_MEMORY", "").strip()
    if env:
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?", env, flags=re.I)
        if not m:
            raise UserError(f"DYGNEX_MEMORY={env!r} is not a size: write bytes or e.g. 512M, 8G")
        return float(m.group(1)) * _UNITS[m.group(2).upper()], "DYGNEX_MEMORY"
    figures = [(v, s) for v, s in ((_meminfo_available(), "MemAvailable"), (_cgroup_left(), "cgroup limit"))]
    figures = [(v, s) for v, s in figures if v is not None]
    return min(figures) if figures else (math.inf, "unknown")


def human_bytes(n: float) -> str:
    """``1536`` -> ``"1.5 KiB"``; very large figures in scientific notation."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}" if n < 1e6 else f"{n:.2e} {unit}"
        n /= 1024
    return f"{n:.3g} PiB"


def check_memory(what: str, need: float, fix: str) -> None:
    """A ``UserError`` when ``need`` bytes (a lower bound of what ``what`` allocates) exceed the memory
    available: ``<what> needs at least <need> of memory, more than the <avail> available (<source>): <fix>``."""
    avail, source = available_memory()
    if need > avail:
        raise UserError(
            f"{what} needs at least {human_bytes(need)} of memory, more than the {human_bytes(avail)} "
            f"available ({source}): {fix}"
        )


def check_snapshots(count: float, what: str, fix: str) -> None:
    """A ``UserError`` when ``count`` snapshots (estimated before any per-snapshot array exists) pass
    ``MAX_SNAPSHOTS``."""
    if not count <= MAX_SNAPSHOTS:  # nan / inf too
        shown = (f"{count:,.0f}" if count < 1e21 else f"{count:.3g}") if math.isfinite(count) else str(count)
        raise UserError(f"{what} gives {shown} snapshots, more than the {MAX_SNAPSHOTS:,} a run takes: {fix}")


def check_config(config) -> None:
    """Sizes known from the config alone: the synthetic graph (``data.dataset=synthetic``)."""
    d = config.data
    if d.dataset != "synthetic":
        return
    fix = "use smaller data.syn_nodes / data.syn_snapshots / data.syn_edges"
    check_snapshots(d.syn_snapshots, f"data.syn_snapshots={d.syn_snapshots}", fix)
    # the generator's per-node arrays, every snapshot's edges (both directions) and the windows'
    # snapshots x nodes degree table
    need = 48.0 * d.syn_nodes + 64.0 * d.syn_edges * d.syn_snapshots + 8.0 * d.syn_snapshots * d.syn_nodes
    check_memory(f"the synthetic graph ({d.syn_nodes:,} nodes, {d.syn_snapshots:,} snapshots)", need, fix)


def model_parameters(config, num_features: int) -> float:
    """A lower bound of the model's parameter count: the first layer's input weights (F x H), every
    further stacked layer's H x H, and the link head's 2H x head_hidden (node_reg: H x 1)."""
    m = config.model
    stacked = 1 if m.name == "mpnn_lstm" else m.layers - 1  # mpnn_lstm: a fixed two GCNs
    head = m.hidden if config.data.task == "node_reg" else 2.0 * m.hidden * m.head_hidden
    return float(num_features) * m.hidden + stacked * float(m.hidden) ** 2 + head


def _largest(ws, splits, column: int, neg_mult=0) -> float:
    values = [ws.costs(s, neg_mult)[:, column] for s in splits if len(ws.splits[s])]
    return float(max((v.max() for v in values if len(v)), default=0.0))


def check_run(ws, config, n_devices: int, candidates: str, host_devices: int) -> None:
    """The model, training pairs, planning horizon and evaluation of a run on windows ``ws`` over
    ``n_devices`` devices, ``host_devices`` of which keep their arrays in host memory (CPU devices),
    with evaluation ``candidates`` (``evaluation.candidate_mode``)."""
    _check_targets(ws)
    d, m = config.data, config.model
    params = model_parameters(config, ws.num_features)
    nodes = _largest(ws, ("train",), 0)
    check_memory(
        f"model.name={m.name} with model.hidden={m.hidden}, model.head_hidden={m.head_hidden}, "
        f"model.layers={m.layers} and {ws.num_features} input features (at least {params:.3g} parameters, "
        "kept with Adam's two moments)",
        12.0 * params + 4.0 * host_devices * nodes * m.hidden,  # + one embedding matrix per CPU device
        "use a smaller model.hidden, model.head_hidden or model.layers (or data.max_degree)",
    )
    pairs = _largest(ws, ("train",), 2, d.neg_mult)  # the largest window's training pairs
    check_memory(
        f"data.neg_mult={d.neg_mult} ({pairs:.3g} training pairs in the largest window, every one of "
        f"{n_devices} devices padded to it)",
        16.0 * n_devices * pairs,  # (src, dst, label, weight) per pair
        "use a smaller data.neg_mult",
    )
    _check_planning(ws, config)
    if candidates in ("all", "sampled"):
        _check_evaluation(ws, config, candidates)


def _check_targets(ws) -> None:
    """A UserError when a split's windows hold no target edge at all (link prediction, edge
    classification): training would run on padding alone (loss 0) and the metrics would be NaN —
    snapshots bucketed so finely, or a time range so far off, that the targets are empty."""
    if getattr(ws, "task", None) not in ("link", "edge_cls"):
        return
    for split in ("train", "val", "test"):
        k = len(ws.splits[split])
        if k and not ws.costs(split, 0)[:, 2].sum() > 0:
            raise UserError(
                f"the {k} {split} windows hold no target edge (their target snapshots are empty): bucket "
                "the edges into fewer, fuller snapshots (data.aggr_time, data.num_snapshots) or narrow "
                "data.start / data.end to where the edges are"
            )


def _check_planning(ws, config) -> None:
    from .config import WINDOW_METHODS
    from .plan import planned_epoch_count

    if config.parallel.budgets != "planned" or config.schedule.method not in WINDOW_METHODS:
        return
    k = len(ws.splits["train"])
    epochs = planned_epoch_count(config)
    steps = epochs * -(-k // max(1, min(config.train.batch_size, k)))
    if steps > MAX_PLANNED_STEPS:
        raise UserError(
            f"parallel.budgets=planned schedules every planned step before epoch 1: {epochs:,} epochs x "
            f"{steps // epochs:,} steps = {steps:,}, more than the {MAX_PLANNED_STEPS:,} it plans ahead: use "
            "parallel.plan_epochs=N (plans N epochs ahead), parallel.budgets=buckets or fewer train.epochs"
        )


def _check_evaluation(ws, config, candidates: str) -> None:
    """Link evaluation: ``all`` scores every pair of a window's L local nodes ([L, L] on the host, every
    cell weighed in float64); ``sampled`` draws eval.neg_per_source pairs per source and scores those alone."""
    e = config.eval
    local = _largest(ws, ("val", "test"), 0)
    sources = _largest(ws, ("val", "test"), 2)  # sources of true edges <= the target's edges
    if candidates == "all":
        what = f"eval.candidates=all (every pair of the largest window's {local:,.0f} local nodes)"
        need, fix = 60.0 * local**2, "use eval.candidates=sampled (or auto)"
    else:
        what = (
            f"eval.candidates=sampled with eval.neg_per_source={e.neg_per_source} (up to {sources:,.0f} "
            f"sources, {local:,.0f} local nodes in the largest window)"
        )
        need = 48.0 * sources * e.neg_per_source  # the candidates alone are scored (tasks.pair_scores)
        fix = "use a smaller eval.neg_per_source (or data.window / data.last_snapshots)"
    check_memory(what, need, fix)


def degree_table(num_snapshots: int, num_nodes: int, name: str) -> None:
    """The windows' per-snapshot degree table (snapshots x nodes int64) before it is allocated."""
    check_memory(
        f"dataset {name!r}: the snapshots x nodes degree table ({num_snapshots:,} x {num_nodes:,})",
        8.0 * num_snapshots * num_nodes,
        "use a larger data.aggr_time, a smaller data.num_snapshots or data.last_snapshots",
    )


def interval_rows(total: float, name: str) -> None:
    """The (row, snapshot) pairs an edge-interval file expands into, before they are allocated."""
    check_memory(
        f"dataset {name!r}: {total:,.0f} (edge, snapshot) pairs of its intervals",
        24.0 * total,
        "use a file with shorter intervals",
    )


def stream_snapshots(name: str, aggr_time: float, num_snapshots: int, t0: float, t1: float) -> None:
    """The snapshots an edge stream over times ``t0..t1`` is bucketed into, before any bucket exists
    (``aggr_time`` seconds each, else ``num_snapshots``; one per distinct time is checked after).
    """
    if aggr_time > 0:
        count = (t1 - t0) / aggr_time + 1
        what = f"dataset {name!r}: data.aggr_time={aggr_time:g} over its times {t0:.6g}..{t1:.6g}"
        fix = "use a larger data.aggr_time or data.num_snapshots=N (or fix the rows whose time is far off)"
    elif num_snapshots > 0:
        count = num_snapshots if t1 > t0 else 1
        what, fix = (
            f"dataset {name!r}: data.num_snapshots={num_snapshots}",
            "use a smaller data.num_snapshots",
        )
    else:
        return
    check_snapshots(count, what, fix)
