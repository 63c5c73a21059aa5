"""Checkpoints of a training run: written atomically, read only when complete, and resume.

Layout under the run directory ``OUT``::

    OUT/checkpoints/epoch_000004/state/      orbax PyTree: params, optimiser state leaves (exact float32)
    OUT/checkpoints/epoch_000004/meta.json   epoch, config, seeds, metric rows so far, cost model,
                                             measured step times, compiled budgets

A checkpoint is first written to ``OUT/checkpoints/.tmp-epoch_000004-<pid>/`` (orbax's synchronous
``PyTreeCheckpointer``, then ``meta.json`` last, fsync-ed) and only then renamed to ``epoch_000004``;
a rename within one directory is atomic on POSIX filesystems. Only folders named ``epoch_NNNNNN`` that
hold ``meta.json`` are ever read, so a checkpoint cut short by a kill is never picked up (its temporary
folder is removed by the next save). Old checkpoints are renamed away before they are deleted, for the
same reason.

Exact resume: every random stream of a run is derived from ``(train.seed, epoch)`` (schedule jitter and
shuffles, training negatives), ``train.seed`` (parameter init) or ``eval.seed`` (sampled candidates),
so restoring the parameters, the optimiser state, the scheduler's weights (re-fitted cost model), the
set of compiled shape budgets (a step may run on a larger compiled budget; float sums depend on the
padding by ~1e-7) and the epoch reproduces the remaining epochs bit for bit. Granularity is one epoch:
a run killed in the middle of an epoch restarts that epoch from the last checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
from pathlib import Path

import jax
import numpy as np

from . import parallel
from .config import Config, TrainConfig, dump_config, load_config, to_dict
from .errors import UserError
from .graphs import Budget
from .schedule.cost import CostModel

FOLDER = "checkpoints"
FORMAT = "dygnex_jax-checkpoint"
VERSION = 1
_NAME = re.compile(r"^epoch_(\d{6,})$")
# Config keys a resumed run may change: they do not alter the epochs already run (learning_rate does
# alter the ones to come: the way out after a non-finite step).
RESUMABLE_CHANGES = (
    "train.epochs",
    "train.checkpoint_every",
    "train.keep_checkpoints",
    "train.on_nonfinite",
    "train.learning_rate",
    "parallel.compile_cache",
    "parallel.prefetch",
)


@dataclasses.dataclass
class Checkpoint:
    """A complete checkpoint on disk: its folder, epoch and ``meta.json`` contents."""

    path: Path
    epoch: int
    meta: dict


def is_due(epoch: int, cfg: TrainConfig) -> bool:
    """Checkpoint after this epoch? Every ``checkpoint_every`` epochs and after the last."""
    return epoch == cfg.epochs or (cfg.checkpoint_every > 0 and epoch % cfg.checkpoint_every == 0)


def complete(out_dir: str | Path) -> list[tuple[int, Path]]:
    """``(epoch, folder)`` of every complete checkpoint under ``out_dir``, oldest first."""
    root = Path(out_dir) / FOLDER
    if not root.is_dir():
        return []
    found = []
    for p in root.iterdir():
        m = _NAME.match(p.name)
        if m and p.is_dir() and (p / "meta.json").is_file() and (p / "state").is_dir():
            found.append((int(m.group(1)), p))
    return sorted(found)


def latest(out_dir: str | Path) -> Checkpoint | None:
    """The newest complete checkpoint, or None."""
    found = complete(out_dir)
    if not found:
        return None
    epoch, path = found[-1]
    return Checkpoint(path, epoch, json.loads((path / "meta.json").read_text()))


# ------------------------------------------------------------------------------------------ saving


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _state_tree(trainer) -> dict:
    """Host copies (whole on every process, also in a multi-process run) of what the arrays hold."""
    return parallel.to_host({"params": trainer.params, "opt_state": jax.tree.leaves(trainer.opt_state)})


def trainer_meta(trainer, epoch: int, history: list[dict]) -> dict:
    """Everything but the arrays that the epochs after ``epoch`` depend on."""
    c = trainer.config
    return {
        "format": FORMAT,
        "version": VERSION,
        "epoch": epoch,
        "config": to_dict(c),
        "rng": {
            "init": f"train.seed={c.train.seed}",
            "schedule_and_negatives": f"(train.seed={c.train.seed}, epoch); next epoch {epoch + 1}",
            "eval_candidates": f"eval.seed={c.eval.seed}",
        },
        "history": history,
        "scheduler_weights": [trainer.settings.alpha, trainer.settings.beta, trainer.settings.gamma],
        "cost_model": trainer.cost_model.to_dict(),
        "step_log": [[[float(x) for x in work], float(s)] for work, s in trainer.step_log],
        **trainer.packer.state_dict(),  # "budgets" used so far and the "rent" paid (Packer)
        # the run's planned training budgets and step composition: a resumed run keeps them (even with
        # more epochs, whose steps then fit these budgets), so its shapes are the run's own
        "plan": {
            "budgets": [list(b.as_tuple()) for b in trainer.planned or []],
            "compose": trainer.compose,
        },
    }


def _checkpointer():
    """An orbax PyTree checkpointer for this process alone. In a multi-process run process 0 saves
    (from host copies of the replicated state) and every process restores by itself; orbax's default
    would wait at a barrier for all processes inside ``save``, which the others never reach (they are in
    the next training step's collective): a deadlock."""
    import orbax.checkpoint as ocp

    me = jax.process_index()
    alone = ocp.options.MultiprocessingOptions(primary_host=me, active_processes={me})
    return ocp.Checkpointer(
        ocp.PyTreeCheckpointHandler(multiprocessing_options=alone), multiprocessing_options=alone
    )


def save(trainer, out_dir: str | Path, epoch: int, history: list[dict], keep: int) -> Path:
    """Write the checkpoint of ``epoch`` atomically; keep the newest ``keep``. Returns its folder."""

    root = Path(out_dir) / FOLDER
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(".tmp-*"):  # left by a run killed while saving
        shutil.rmtree(stale, ignore_errors=True)
    final = root / f"epoch_{epoch:06d}"
    tmp = root / f".tmp-{final.name}-{os.getpid()}"
    tmp.mkdir()
    _checkpointer().save((tmp / "state").absolute(), _state_tree(trainer))  # orbax: absolute paths only
    meta = tmp / "meta.json"
    meta.write_text(json.dumps(trainer_meta(trainer, epoch, history)) + "\n")
    _fsync(meta)
    if final.exists():  # a re-run of an epoch after a resume: replace it, never half of it
        old = root / f".tmp-old-{final.name}-{os.getpid()}"
        final.rename(old)
        shutil.rmtree(old)
    tmp.rename(final)
    _fsync(root)
    for _, path in complete(out_dir)[:-keep]:
        doomed = root / f".tmp-del-{path.name}"
        path.rename(doomed)
        shutil.rmtree(doomed, ignore_errors=True)
    return final


# ----------------------------------------------------------------------------------------- resuming


def resume_config(run_dir: str | Path, config_path: str | None, overrides: list[str]) -> Config:
    """The config of the run in ``run_dir`` with the allowed ``overrides``; UserErrors otherwise."""
    run = Path(run_dir)
    if not run.is_dir():
        raise UserError(f"--resume {str(run)!r} does not exist: pass the --out directory of a run")
    if config_path is not None:
        raise UserError("--resume continues a run with its own config: drop --config")
    ckpt = latest(run)
    if ckpt is None:
        raise UserError(
            f"--resume {str(run)!r} holds no complete checkpoint (looked in {str(run / FOLDER)!r}): "
            "start the run again with --out"
        )
    config = load_config(run / "config.yaml", overrides) if (run / "config.yaml").is_file() else None
    if config is None:
        raise UserError(f"--resume {str(run)!r} has no config.yaml: pass the --out directory of a run")
    changed = sorted(_differences(to_dict(config), ckpt.meta["config"]))
    refused = [k for k in changed if k not in RESUMABLE_CHANGES]
    if refused:
        raise UserError(
            f"--resume cannot change {', '.join(refused)} (the checkpoint was trained with other values): "
            f"only {', '.join(RESUMABLE_CHANGES)} may change"
        )
    if config.train.epochs < ckpt.epoch:
        raise UserError(
            f"train.epochs={config.train.epochs} but the checkpoint is at epoch {ckpt.epoch}: "
            "resume with train.epochs >= that"
        )
    return config


def _differences(a: dict, b: dict, prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            out += _differences(x, y, f"{prefix}{key}.")
        elif x != y:
            out.append(f"{prefix}{key}")
    return out


def restore(trainer, ckpt: Checkpoint) -> list[dict]:
    """Load ``ckpt`` into ``trainer`` (arrays, scheduler weights, step times, budgets); its metric rows."""
    import orbax.checkpoint as ocp

    target = _state_tree(trainer)
    args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), target)
    state = _checkpointer().restore(
        (ckpt.path / "state").absolute(), args=ocp.args.PyTreeRestore(restore_args=args)
    )
    want = jax.tree.map(lambda x: (x.shape, str(x.dtype)), target)
    got = jax.tree.map(lambda x: (x.shape, str(x.dtype)), state)
    if jax.tree.structure(want) != jax.tree.structure(got) or jax.tree.leaves(want) != jax.tree.leaves(got):
        raise UserError(f"checkpoint {str(ckpt.path)!r} does not match this model's shapes: start a new run")
    meta = ckpt.meta
    trainer.params = parallel.replicate(trainer.mesh, state["params"])
    treedef = jax.tree.structure(trainer.opt_state)
    trainer.opt_state = parallel.replicate(trainer.mesh, jax.tree.unflatten(treedef, state["opt_state"]))
    d = meta["cost_model"]
    trainer.cost_model = CostModel(
        coef=np.array(d["coef"]),
        window=d["window"],
        mape=d["mape"],
        n_samples=d["n_samples"],
        source=d["source"],
    )
    alpha, beta, gamma = meta["scheduler_weights"]
    trainer.settings = dataclasses.replace(trainer.config.schedule, alpha=alpha, beta=beta, gamma=gamma)
    trainer.step_log = [(np.array(work), seconds) for work, seconds in meta["step_log"]]
    trainer.packer.load_state_dict(meta)
    plan = meta.get("plan")
    if plan is not None and trainer.plans_budgets:
        trainer.restore_plan([Budget(*b) for b in plan["budgets"]], plan["compose"])
    return list(meta["history"])


def rewind_logs(out_dir: str | Path, history: list[dict], config: Config) -> None:
    """Make ``metrics.jsonl``/``steps.jsonl``/``config.yaml`` those of the checkpoint's epoch (a kill
    may have left rows of later epochs, or half a line), each file replaced atomically."""
    out = Path(out_dir)
    last = history[-1]["epoch"] if history else 0
    steps = []
    if (out / "steps.jsonl").is_file():
        for line in (out / "steps.jsonl").read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by the kill
            if row.get("epoch", last + 1) <= last:
                steps.append(line + "\n")
    for name, text in (
        ("metrics.jsonl", "".join(json.dumps(r) + "\n" for r in history)),
        ("steps.jsonl", "".join(steps)),
    ):
        tmp = out / f".{name}.tmp"
        tmp.write_text(text)
        tmp.replace(out / name)
    dump_config(config, out / ".config.yaml.tmp")
    (out / ".config.yaml.tmp").replace(out / "config.yaml")
