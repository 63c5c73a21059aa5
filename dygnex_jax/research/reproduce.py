"""EvolveGCN's published link-prediction table under its own protocol (``configs/repro/``), and the same
cells trained the DyGNeX way: the runs, their resumption, and the table of mean +- sd per cell.

A *cell* is one ``configs/repro/<model>_<dataset>.yaml`` (IBM's parameter file of that run, early
stopping on val MAP); a *way* is how it trains: ``evolvegcn`` (the config as written: one window per
step, one device, psg in time order), ``dygnex`` (``schedule.method=dygnex_g`` on ``devices`` devices
with ``batch`` windows per step, the composition the plan chooses) or ``dygnex_chrono`` (the same with
``schedule.compose=chrono``: steps of consecutive windows in time order, as EvolveGCN trains), both
with the learning rate scaled by ``LR_SCALES[lr_scale](batch)``: B windows a
step make B times fewer updates an epoch; for Adam the square-root rule (Malladi et al., NeurIPS 2022,
"On the SDEs and scaling rules for adaptive gradient algorithms") is the default). Every (cell, way, seed) is one run folder ``OUT/<cell>/<way>/seed<s>``
trained by ``python -m dygnex_jax train`` in a child process (its own fake-device count); a folder with
``summary.json`` is done, one with ``config.yaml`` but no summary was interrupted and continues with
``train --resume`` (from its newest checkpoint), so a killed reproduction loses at most
``train.checkpoint_every`` epochs of one run. No JAX here: the children import it.

The reported figure of a run is EvolveGCN's: test MAP / MRR at the epoch of the best val MAP. A cell's
verdict against the published value (Pareja et al., AAAI 2020, Table 2): ``within`` when the published
value lies inside our mean +- 2 sd or ours is higher, else ``below`` with the gap; ``n=1`` when one seed
gives no spread. The published value counts as printed, to four decimals: ours is within when it reaches
the lowest value that rounds to it (.0001 stands for [.00005, .00015)).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..report import epoch_rows

# Pareja et al., AAAI 2020, Table 2 (link prediction, MAP / MRR), per (model.name, data.dataset).
PUBLISHED = {
    ("gcn_gru", "bitcoin_otc"): (0.0001, 0.0003),
    ("gcn_gru", "bitcoin_alpha"): (0.0001, 0.0004),
    ("gcn_gru", "uci_collegemsg"): (0.0114, 0.0985),
    ("gcn_gru", "as733"): (0.0713, 0.3388),
    ("egcn_h", "bitcoin_otc"): (0.0026, 0.0690),
    ("egcn_h", "bitcoin_alpha"): (0.0049, 0.1104),
    ("egcn_h", "uci_collegemsg"): (0.0126, 0.0899),
    ("egcn_h", "as733"): (0.1534, 0.3632),
    ("egcn_o", "bitcoin_otc"): (0.0028, 0.0968),
    ("egcn_o", "bitcoin_alpha"): (0.0036, 0.1185),
    ("egcn_o", "uci_collegemsg"): (0.0270, 0.1379),
    ("egcn_o", "as733"): (0.1139, 0.2746),
}
WAYS = ("evolvegcn", "dygnex", "dygnex_chrono")
PATIENCE_SCALES = ("none", "updates")
DEFAULT_WAYS = ("evolvegcn", "dygnex")
# The dygnex way's learning rate = the config's x LR_SCALES[name](B / the config's batch size).
LR_SCALES = {"none": lambda r: 1.0, "sqrt": lambda r: r**0.5, "linear": lambda r: float(r)}
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding this dygnex_jax
RUN_LOG = "reproduce_runs.jsonl"  # OUT/<cell>/<way>/seed<s>/: one line per attempt that ended (wall s)
REPRO_DIR = PACKAGE_ROOT / "configs" / "repro"  # one config per cell of Table 2


def cells() -> dict[str, Path]:
    """Every cell of ``configs/repro/``: its name (the config's stem) -> its config file, by name."""
    return {p.stem: p for p in sorted(REPRO_DIR.glob("*.yaml"))}


def cell_configs() -> dict[str, object]:
    """Every cell's loaded config (the config module is imported here: it holds no JAX)."""
    from ..config import load_config

    return {name: load_config(path, []) for name, path in cells().items()}


@dataclasses.dataclass(frozen=True)
class Run:
    cell: str  # the config's stem, e.g. egcn_o_uci
    config: Path
    way: str
    seed: int
    out: Path
    overrides: tuple[str, ...]
    devices: int  # fake CPU devices the child needs (1 for evolvegcn)

    @property
    def done(self) -> bool:
        return (self.out / "summary.json").is_file()

    @property
    def started(self) -> bool:
        return (self.out / "config.yaml").is_file()


def plan_runs(
    configs: list[Path],
    seeds: list[int],
    ways: list[str],
    out: Path,
    devices: int,
    batch: int,
    lr_scale: str = "sqrt",
    patience_scale: str = "none",
    sets: tuple[str, ...] = (),
) -> list[Run]:
    """Every (cell, way, seed) run: cells in the given order, then seeds, then ways (so that a partial
    reproduction has both ways of its first seeds). ``patience_scale`` "updates": the dygnex ways'
    ``train.patience`` x B / the config's batch size, so a run stops after
    as many optimiser updates without a better val metric as the EvolveGCN way; those runs are the way
    ``<way>-patience<N>`` (their own folders and table rows). ``sets``: ``key=value`` overrides of the
    config for every way (a deviation from IBM's protocol, e.g. ``data.neg_sampling=uniform``); those
    runs are the way ``<way>+<key=value>...`` (their own folders and table rows)."""
    from ..config import load_config

    runs = []
    for config in configs:
        train = load_config(config).train
        lr = train.learning_rate * LR_SCALES[lr_scale](batch / train.batch_size)
        scale = max(1, round(batch / train.batch_size)) if patience_scale == "updates" else 1
        for seed in seeds:
            for way in ways:
                over = [f"train.seed={seed}"]
                dygnex = way != "evolvegcn"
                n = devices if dygnex else 1
                if dygnex:
                    over += [
                        "schedule.method=dygnex_g",
                        f"parallel.devices={devices}",
                        f"train.batch_size={batch}",
                        f"train.learning_rate={lr:.6g}",
                        "parallel.plan_epochs=100",
                    ]
                    if way == "dygnex_chrono":
                        over.append("schedule.compose=chrono")
                name = way
                if dygnex and scale > 1 and train.patience:
                    over.append(f"train.patience={train.patience * scale}")
                    name = f"{way}-patience{train.patience * scale}"
                if sets:
                    over += list(sets)
                    name += "".join(f"+{kv}" for kv in sets)
                cell = config.stem
                runs.append(Run(cell, config, name, seed, out / cell / name / f"seed{seed}", tuple(over), n))
    return runs


def folder_runs(out: Path) -> list[Run]:
    """Every run folder under ``out`` (``CELL/WAY/seedN``), whichever call of the tool made it: the
    report is of the folder, so two calls into one ``--out`` (running side by side, or one after the
    other with other cells) both end on a table of every finished run. A run's config is its folder's
    own ``config.yaml`` (the one it trained with)."""
    runs = []
    for folder in sorted(out.glob("*/*/seed*")):
        seed = folder.name[len("seed") :]
        if folder.is_dir() and seed.isdigit():
            cell, way = folder.parent.parent.name, folder.parent.name
            runs.append(Run(cell, folder / "config.yaml", way, int(seed), folder, (), 1))
    return runs


def command(run: Run) -> tuple[list[str], dict]:
    """The child's argv and environment: a fresh run, or ``--resume`` of an interrupted one. The child
    imports the package this process runs (its folder first on PYTHONPATH), whatever the working
    directory holds: a run started from a snapshot trains that snapshot's code."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p)
    if run.devices > 1:
        flags = env.get("XLA_FLAGS", "")
        env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={run.devices}".strip()
    if run.started:
        return [sys.executable, "-m", "dygnex_jax", "train", "--resume", str(run.out)], env
    argv = [sys.executable, "-m", "dygnex_jax", "train", "--config", str(run.config), "--out", str(run.out)]
    return argv + list(run.overrides), env


FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # reach the training child as one Ctrl-C


def execute(run: Run, log=print) -> int:
    """Train (or resume) ``run`` in a child process, its output passed through; append the attempt's wall
    seconds to its ``RUN_LOG`` when it ends. Returns the child's exit code.

    The child runs in its own session, and a SIGINT, SIGTERM or SIGHUP to this process reaches it as one
    Ctrl-C (SIGINT): training stops at a safe point with its checkpoints whole, the attempt is logged, and
    ``KeyboardInterrupt`` is raised here (a child killed outright would lose its epoch; one left running,
    orphaned, would hold its folder's lock)."""
    argv, env = command(run)
    log(f"{'resuming' if run.started else 'starting'} {run.cell} / {run.way} / seed {run.seed} -> {run.out}")
    start = time.time()
    child = subprocess.Popen(argv, env=env, start_new_session=True)
    caught: list[int] = []

    def forward(signum, frame):
        caught.append(signum)
        if child.poll() is None:
            child.send_signal(signal.SIGINT)

    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if run.out.is_dir():
            attempt = {
                "seconds": time.time() - start,
                "exit": child.returncode,
                "resumed": "--resume" in argv,
            }
            with (run.out / RUN_LOG).open("a") as f:
                f.write(json.dumps(attempt) + "\n")
    if caught:
        raise KeyboardInterrupt
    return child.returncode


def run_result(run: Run) -> dict | None:
    """A finished run's figures: test MAP / MRR at the best val MAP, its epoch, the epochs trained, how it
    stopped, and the wall seconds of all its attempts; None while it is not finished."""
    if not run.done:
        return None
    summary = json.loads((run.out / "summary.json").read_text())
    best = summary["best"]
    attempts = (
        [json.loads(line) for line in (run.out / RUN_LOG).read_text().splitlines() if line.strip()]
        if (run.out / RUN_LOG).is_file()
        else []
    )
    logged = sum(a["seconds"] for a in attempts)
    epochs = epoch_seconds(run.out)
    return {
        "cell": run.cell,
        "model": summary["model"],
        "dataset": summary["dataset"],
        "way": run.way,
        "seed": run.seed,
        "best_epoch": best["epoch"],
        "val_map": best.get("val_map"),
        "test_map": best.get("test_map"),
        "test_mrr": best.get("test_mrr"),
        "epochs": summary["epochs"],
        "early_stop": summary.get("early_stop"),
        # each a lower bound of the run's wall time: an attempt killed before it could log is missing from
        # the first, start-up and compilation from the second; the larger stands for the run
        "wall_seconds": max(logged, epochs) or None,
        "attempt_seconds": logged,
        "epoch_seconds": epochs,
        "attempts": len(attempts),
    }


def epoch_seconds(out: Path) -> float:
    """Training plus evaluation seconds of the epochs a run's result is made of (its ``metrics.jsonl``,
    which a resume cuts back to the checkpoint: an epoch trained twice counts once)."""
    if not (out / "metrics.jsonl").is_file():
        return 0.0
    return float(sum(r["epoch_seconds"] + r.get("eval_seconds", 0.0) for r in epoch_rows(out)))


def _stats(values: list[float]) -> tuple[float, float | None]:
    mean = statistics.fmean(values)
    return mean, (statistics.stdev(values) if len(values) > 1 else None)


PUBLISHED_HALF_UNIT = 0.00005  # the table prints four decimals: .0001 stands for anything in [.00005, .00015)


def verdict(values: list[float], published: float) -> str:
    """``within`` (published inside mean +- 2 sd, or ours higher), ``below by X %``, or ``n=1 ...``."""
    return verdict_stats(*_stats(values), published)


def verdict_stats(mean: float, sd: float | None, published: float) -> str:
    """``verdict`` from the mean and sample sd (None: one seed). The published value is taken as printed,
    to four decimals: any value that rounds to it is the published one (``PUBLISHED_HALF_UNIT``), so
    ours is higher, or within, when it reaches the lowest of them; the gap is to the value as printed."""
    lowest = published - PUBLISHED_HALF_UNIT
    if mean >= published:
        return "within (ours higher)"
    if mean >= lowest:
        return "within (rounds to it)"
    if sd is None:
        return f"n=1, {100 * (1 - mean / published):.0f} % below"
    if lowest <= mean + 2 * sd:
        return "within"
    return f"below by {100 * (1 - mean / published):.0f} % (mean + 2 sd {mean + 2 * sd:.4f})"


def table(results: list[dict]) -> list[dict]:
    """One row per (cell, way) of finished runs: seeds, mean +- sd of test MAP / MRR, the published pair,
    the verdicts, the mean epochs and wall seconds."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in results:
        groups.setdefault((r["cell"], r["way"]), []).append(r)
    rows = []
    for (cell, way), rs in groups.items():
        rs = sorted(rs, key=lambda r: r["seed"])
        pub = PUBLISHED.get((rs[0]["model"], rs[0]["dataset"]))
        row = {"cell": cell, "way": way, "model": rs[0]["model"], "dataset": rs[0]["dataset"]}
        row["seeds"] = [r["seed"] for r in rs]
        for metric, i in (("map", 0), ("mrr", 1)):
            values = [r[f"test_{metric}"] for r in rs if r[f"test_{metric}"] is not None]
            mean, sd = _stats(values) if values else (math.nan, None)
            row[f"test_{metric}_mean"], row[f"test_{metric}_sd"] = mean, sd
            row[f"published_{metric}"] = pub[i] if pub else None
            row[f"verdict_{metric}"] = verdict(values, pub[i]) if pub and values else "no published value"
        row["best_epochs"] = [r["best_epoch"] for r in rs]
        row["epochs"] = [r["epochs"] for r in rs]
        walls = [r["wall_seconds"] for r in rs if r["wall_seconds"]]
        row["wall_seconds_mean"] = statistics.fmean(walls) if walls else None
        rows.append(row)
    return rows


def _pm(mean: float, sd: float | None) -> str:
    return f"{mean:.4f}" if sd is None else f"{mean:.4f} ± {sd:.4f}"


def markdown(rows: list[dict]) -> str:
    """The README's table: one line per (cell, way)."""
    lines = [
        "| cell | way | seeds | test MAP | published | verdict | test MRR | published | verdict "
        "| best epoch | epochs | wall s / run |",
        "|---|---|---|---:|---:|---|---:|---:|---|---|---|---:|",
    ]
    for r in rows:
        wall = f"{r['wall_seconds_mean']:.0f}" if r["wall_seconds_mean"] else "—"
        pub = lambda m, r=r: "—" if r[f"published_{m}"] is None else f"{r[f'published_{m}']:.4f}"  # noqa: E731
        lines.append(
            f"| {r['cell']} | {r['way']} | {','.join(map(str, r['seeds']))} "
            f"| {_pm(r['test_map_mean'], r['test_map_sd'])} | {pub('map')} | {r['verdict_map']} "
            f"| {_pm(r['test_mrr_mean'], r['test_mrr_sd'])} | {pub('mrr')} | {r['verdict_mrr']} "
            f"| {','.join(map(str, r['best_epochs']))} | {','.join(map(str, r['epochs']))} | {wall} |"
        )
    return "\n".join(lines) + "\n"
