"""Resuming a run: the config it continues with (``resume_config``: which keys may change), the paths
a run stores so that ``--resume`` finds its files from any folder (``absolute_paths``), and data that
moved or changed (``check_data``).

Data that moved or changed: ``data.path`` and ``data.root`` may name a new place on ``--resume`` (the
files were moved or copied); the data loaded must be the data the run trained on: every checkpoint
records the loaded graph's SHA-256 (``DynamicGraph.digest``), and a resume that loads anything else
(moved or not: a file edited in place) is refused before anything is written. After a move the run's
``config.yaml`` names the new place, so that later resumes need no override.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
from pathlib import Path

import yaml

from .checkpoint import FOLDER, RESUMABLE_CHANGES, newest, none_restores, write_config
from .config import Config, changed_keys, load_config, to_dict
from .errors import UserError
from .files import atomic_write_text

MOVABLE = ("data.path", "data.root")  # may change on --resume to data equal to the trained (check_data)


def absolute_paths(config: Config) -> Config:
    """``config`` with ``data.path`` and ``data.root`` absolute (``~`` expanded; a glob stays a glob)."""
    data = config.data
    fixed = {k: os.path.abspath(os.path.expanduser(v)) for k in ("path", "root") if (v := getattr(data, k))}
    if all(fixed[k] == getattr(data, k) for k in fixed):
        return config
    return dataclasses.replace(config, data=dataclasses.replace(data, **fixed))


def resume_config(run_dir: str | Path, config_path: str | None, overrides: list[str]) -> Config:
    """The config of the run in ``run_dir`` with the allowed ``overrides``; UserErrors otherwise. A run
    without any checkpoint (interrupted before its first) is resumed from epoch 1 with its config.yaml."""
    run = Path(run_dir)
    if not run.is_dir():
        what = "is a file, not a folder" if run.exists() else "does not exist"
        raise UserError(f"--resume {str(run)!r} {what}: pass the --out directory of a run")
    if config_path is not None:
        raise UserError("--resume continues a run with its own config: drop --config")
    ckpt, skipped = newest(run)
    has_config = (run / "config.yaml").is_file()
    if ckpt is None and not has_config:
        raise UserError(
            f"--resume {str(run)!r} holds no complete checkpoint (looked in {str(run / FOLDER)!r}): "
            "start the run again with --out"
        )
    if ckpt is None and skipped:
        raise UserError(none_restores(run, skipped))
    if ckpt is not None and not has_config:  # deleted: the checkpoint holds the config it trained with
        has_config = _restore_config(run, ckpt)
    if not has_config:
        raise UserError(f"--resume {str(run)!r} has no config.yaml: pass the --out directory of a run")
    config = load_config(run / "config.yaml", overrides)
    trained = ckpt.meta["config"] if ckpt else to_dict(load_config(run / "config.yaml"))
    changed = changed_keys(config, trained)
    refused = [k for k in changed if k not in RESUMABLE_CHANGES + MOVABLE]
    if refused:
        raise UserError(
            f"--resume cannot change {', '.join(refused)} (the checkpoint was trained with other values): "
            f"only {', '.join(RESUMABLE_CHANGES)} may change, and {' and '.join(MOVABLE)} to where the "
            "same data moved"
        )
    moved = [k for k in changed if k in MOVABLE]
    if moved and ckpt is not None and "data_digest" not in ckpt.meta:
        raise UserError(
            f"--resume cannot change {', '.join(moved)}: the checkpoints of {str(run)!r} record no digest "
            "of their data (an older dygnex_jax wrote them): put the data back where its config.yaml says"
        )
    if ckpt is not None and config.train.epochs < ckpt.epoch:
        raise UserError(
            f"train.epochs={config.train.epochs} but the checkpoint is at epoch {ckpt.epoch}: "
            "resume with train.epochs >= that"
        )
    return config


def _restore_config(run: Path, ckpt) -> bool:
    """Write ``run/config.yaml`` back from the checkpoint's config (a note on stderr); False, nothing
    written (checked in a temp folder first), when that config does not load here (older keys)."""
    path = run / "config.yaml"
    text = yaml.safe_dump(ckpt.meta["config"], sort_keys=False)
    with tempfile.TemporaryDirectory(prefix="dygnex-restore-") as tmp:  # checked before the run sees it
        probe = atomic_write_text(Path(tmp) / "config.yaml", text)
        try:
            load_config(probe)
        except UserError:
            return False
    atomic_write_text(path, text)
    print(f"{path} was missing: restored from the checkpoint of epoch {ckpt.epoch}", file=sys.stderr)
    return True


def check_data(trainer, ckpt, out: Path) -> list[str]:
    """Before a resume restores anything: the keys among ``data.path`` / ``data.root`` that name another
    place than ``out/config.yaml``. The graph loaded must be the one ``ckpt`` (the newest checkpoint;
    None: none, the run starts over) recorded, moved or not (a file edited in place since would train
    the rest of the run on other data): a UserError otherwise."""
    config = trainer.config
    moved = [k for k in changed_keys(config, to_dict(load_config(out / "config.yaml"))) if k in MOVABLE]
    recorded = ckpt.meta.get("data_digest") if ckpt is not None else None
    if recorded is None or recorded == trainer.graph.digest:
        return moved
    if moved:
        where = ", ".join(f"{k}={getattr(config.data, k.split('.')[1])}" for k in moved)
        raise UserError(
            f"the data loaded from {where} is not the data this run trained on (its checkpoints record "
            f"another SHA-256): point {' / '.join(moved)} at the files the run trained on"
        )
    where = config.data.path or config.data.root or config.data.dataset
    raise UserError(
        f"the data at {where!r} changed since this run trained on it (its checkpoints record another "
        "SHA-256): put back the files it trained on, or start a new run with --out"
    )


def record_moved_data(config: Config, out: Path) -> None:
    """``out/config.yaml`` names the data's new place (``data.path``, ``data.root`` of ``config``), so
    that later resumes need no override."""
    disk = load_config(out / "config.yaml")
    data = dataclasses.replace(disk.data, path=config.data.path, root=config.data.root)
    write_config(dataclasses.replace(disk, data=data), out)
