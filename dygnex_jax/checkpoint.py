"""Checkpoints of a training run: written atomically, checked before they are read, and resume.

Layout under the run directory ``OUT``::

    OUT/checkpoints/epoch_000004/state/      orbax PyTree: params, optimiser state leaves (exact float32)
    OUT/checkpoints/epoch_000004/meta.json   epoch, config, seeds, metric rows so far, cost model,
                                             measured step times, compiled budgets, and ``files``: the
                                             size and SHA-256 of every file under ``state/``

A checkpoint is first written to ``OUT/checkpoints/.tmp-epoch_000004-<pid>/`` (orbax's synchronous
``PyTreeCheckpointer``; every file of ``state/`` is fsync-ed and hashed into ``meta.json``, which is written
last and fsync-ed) and only then renamed to ``epoch_000004``; a rename within one directory is atomic on
POSIX filesystems. Only folders named ``epoch_NNNNNN`` are ever read, so a checkpoint cut short by a kill
is never picked up (its temporary folder is removed by the next save). Old checkpoints are renamed away
before they are deleted, for the same reason. A Ctrl-C during a save is held until the save is complete
(``runlock.deferred``).

Resume (``restore_newest``) takes the newest checkpoint that restores cleanly: one whose ``meta.json``
reads, whose files are all there with the sizes and hashes written (``check``) and which orbax reads; a
newer one that does not is skipped with a one-line note saying why. No checkpoint at all: the run starts
over from epoch 1 (it was interrupted before its first); checkpoints none of which restores: a
``UserError``. A new run into a folder holding a run interrupted before its first checkpoint starts it
over (``runlog.claim_out_dir``).

Exact resume: every random stream of a run is derived from ``(train.seed, epoch)`` (schedule jitter and
shuffles, training negatives), ``train.seed`` (parameter init) or ``eval.seed`` (sampled candidates),
so restoring the parameters, the optimiser state, the scheduler's weights (re-fitted cost model), the
set of compiled shape budgets (a step may run on a larger compiled budget; float sums depend on the
padding by ~1e-7) and the epoch reproduces the remaining epochs bit for bit. Granularity is one epoch:
a run killed in the middle of an epoch restarts that epoch from the last checkpoint.

Test hook: ``runlock.pause_point`` at ``save-start``, ``-state``, ``-meta``, ``-commit`` (``DYGNEX_TEST_PAUSE``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import shutil
import sys
from pathlib import Path

import jax
import numpy as np

from . import parallel, runlock
from .config import Config, TrainConfig, dump_config, to_dict
from .errors import UserError
from .files import atomic_write_text, json_text
from .graphs import Budget
from .schedule.cost import CostModel

FOLDER = "checkpoints"
FORMAT = "dygnex_jax-checkpoint"
VERSION = 2  # 2: meta.json lists the size and SHA-256 of every file of state/ ("files")
READABLE = (1, 2)
_NAME = re.compile(r"^epoch_(\d{6,})$")
# Config keys a resumed run may change: they do not alter the epochs already run (learning_rate does
# alter the ones to come: the way out after a non-finite step).
RESUMABLE_CHANGES = (
    *("train.epochs", "train.checkpoint_every", "train.keep_checkpoints", "train.on_nonfinite"),
    "train.checkpoint_best",
    "train.learning_rate",
    "parallel.compile_cache",
    "parallel.prefetch",
    "parallel.host_malloc",
)


@dataclasses.dataclass
class Checkpoint:
    """A checked checkpoint on disk: its folder, epoch and ``meta.json`` contents."""

    path: Path
    epoch: int
    meta: dict


class Damaged(Exception):
    """A checkpoint that does not restore cleanly; the message says why, in one line."""


def is_due(epoch: int, cfg: TrainConfig) -> bool:
    """Checkpoint after this epoch? Every ``checkpoint_every`` epochs and after the last."""
    return epoch == cfg.epochs or (cfg.checkpoint_every > 0 and epoch % cfg.checkpoint_every == 0)


def candidates(out_dir: str | Path) -> list[tuple[int, Path]]:
    """``(epoch, folder)`` of every ``epoch_NNNNNN`` folder under ``out_dir``, newest first."""
    root = Path(out_dir) / FOLDER
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _NAME.match(p.name)) and p.is_dir()]
    return sorted(found, reverse=True)


def complete(out_dir: str | Path) -> list[tuple[int, Path]]:
    """``(epoch, folder)`` of every checkpoint folder holding ``meta.json`` and ``state/``, oldest first
    (not checked: see ``check``)."""
    return [
        (e, p) for e, p in candidates(out_dir)[::-1] if (p / "meta.json").is_file() and (p / "state").is_dir()
    ]


def check(path: Path) -> Checkpoint:
    """The checkpoint in folder ``path`` if its ``meta.json`` reads and its files are those written (sizes
    and SHA-256 in ``meta.json``; checkpoints of format version 1 have none); ``Damaged`` otherwise."""
    epoch = int(_NAME.match(path.name).group(1))
    meta = _read_meta(path / "meta.json")
    version = meta.get("version", 1)
    if version not in READABLE:
        raise Damaged(f"meta.json has format version {version!r}, this dygnex_jax reads {READABLE}")
    if meta.get("epoch") != epoch or not isinstance(meta.get("config"), dict):
        raise Damaged(f"meta.json is not this checkpoint's (epoch {meta.get('epoch')!r}, or no config)")
    if not isinstance(meta.get("history"), list):
        raise Damaged("meta.json has no metric rows ('history')")
    if not (path / "state").is_dir():
        raise Damaged("its state/ folder is missing")
    files = meta.get("files", {})
    try:
        listed = sorted((str(rel), int(size), str(digest)) for rel, (size, digest) in files.items())
    except (AttributeError, TypeError, ValueError):
        raise Damaged("meta.json's list of files is garbled") from None
    for rel, size, digest in listed:
        f = path / rel
        if not f.is_file():
            raise Damaged(f"{rel} is missing")
        got = f.stat().st_size
        if got != size:
            cut = "is empty" if got == 0 else "is cut short" if got < size else "is longer"
            raise Damaged(f"{rel} {cut} ({got} bytes; {size} were written)")
        if _digest(f) != digest:
            raise Damaged(f"{rel} is corrupt (its SHA-256 differs from the one written)")
    return Checkpoint(path, epoch, meta)


def _read_meta(path: Path) -> dict:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise Damaged("meta.json is missing") from None
    except OSError as e:
        raise Damaged(f"meta.json cannot be read ({e.strerror})") from None
    if not raw.strip():
        raise Damaged("meta.json is empty")
    try:
        meta = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        where = f" at byte {e.pos}" if isinstance(e, json.JSONDecodeError) else ""
        raise Damaged(f"meta.json is not valid JSON{where} (cut short or overwritten)") from None
    if not isinstance(meta, dict):
        raise Damaged("meta.json is not a JSON object")
    return meta


def newest(out_dir: str | Path) -> tuple[Checkpoint | None, list[str]]:
    """The newest checkpoint that passes ``check`` (or None) and ``"epoch_NNNNNN: why"`` of each newer
    one that does not."""
    skipped = []
    for _, path in candidates(out_dir):
        try:
            return check(path), skipped
        except Damaged as e:
            skipped.append(f"{path.name}: {e}")
    return None, skipped


def latest(out_dir: str | Path) -> Checkpoint | None:
    """The newest checkpoint that passes ``check``, or None."""
    return newest(out_dir)[0]


# ------------------------------------------------------------------------------------------ saving


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _digest(path: Path, sync: bool = False) -> str:
    """SHA-256 of a file's bytes (hex); with ``sync``, the file is fsync-ed first."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        if sync:
            os.fsync(f.fileno())
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _manifest(folder: Path) -> dict[str, list]:
    """``{"state/...": [size, sha256]}`` of every file under ``folder/state``, each fsync-ed."""
    return {
        p.relative_to(folder).as_posix(): [p.stat().st_size, _digest(p, sync=True)]
        for p in sorted((folder / "state").rglob("*"))
        if p.is_file()
    }


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
        "data_digest": trainer.graph.digest,  # resume.check_data: moved data must be this data
        "rng": {
            "init": f"train.seed={c.train.seed}",
            "schedule_and_negatives": f"(train.seed={c.train.seed}, epoch); next epoch {epoch + 1}",
            "eval_candidates": f"eval.seed={c.eval.seed}",
        },
        "history": history,
        "scheduler_weights": [trainer.settings.alpha, trainer.settings.beta, trainer.settings.gamma],
        "cost_model": trainer.cost_model.to_dict(),
        "step_log": [[[float(x) for x in work], float(s), bool(a)] for work, s, a in trainer.step_log],
        **trainer.packer.state_dict(),  # "budgets" used so far and the "rent" paid (Packer)
        # the run's planned training budgets and step composition: a resumed run keeps them (even with
        # more epochs, whose steps then fit these budgets), so its shapes are the run's own
        "plan": {
            "budgets": [list(b.as_tuple()) for b in trainer.planned or []],
            "compose": trainer.compose,
            "accumulate": trainer.accumulate,  # micro-steps per update (memory.py)
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


def save(
    trainer, out_dir: str | Path, epoch: int, history: list[dict], keep: int, best: int | None = None
) -> Path:
    """Write the checkpoint of ``epoch`` atomically; keep the newest ``keep``, and the one of epoch ``best``
    (the best validation epoch so far) when there is one. Returns its folder. A Ctrl-C meanwhile is raised
    once the checkpoint is complete."""
    with runlock.deferred():
        root = Path(out_dir) / FOLDER
        root.mkdir(parents=True, exist_ok=True)
        for stale in root.glob(".tmp-*"):  # left by a run killed while saving
            shutil.rmtree(stale, ignore_errors=True)
        final = root / f"epoch_{epoch:06d}"
        tmp = root / f".tmp-{final.name}-{os.getpid()}"
        state = _state_tree(trainer)
        _check_space(root, state, final.name)
        try:
            tmp.mkdir()
            runlock.pause_point("save-start", epoch)
            _checkpointer().save((tmp / "state").absolute(), state)  # orbax: absolute paths
            runlock.pause_point("save-state", epoch)
            meta = tmp / "meta.json"
            meta.write_text(
                json.dumps({**trainer_meta(trainer, epoch, history), "files": _manifest(tmp)}) + "\n"
            )
            _fsync(meta)
        except (OSError, ValueError, RuntimeError) as e:
            shutil.rmtree(tmp, ignore_errors=True)
            if not _write_failure(e, root):
                raise
            raise UserError(
                f"cannot write checkpoint {final.name} under {str(root)!r} ({_write_failure(e, root)}): free "
                f"space there, then {_resume_hint(root.parent)}"
            ) from None
        runlock.pause_point("save-meta", epoch)
        old = root / f".tmp-old-{final.name}-{os.getpid()}"
        if final.exists():  # a re-run of an epoch (its checkpoint was skipped as damaged): replace it
            final.rename(old)
        tmp.rename(final)
        _fsync(root)
        shutil.rmtree(old, ignore_errors=True)
        runlock.pause_point("save-commit", epoch)
        # the newest `keep` up to this epoch and the best one; later ones (skipped as damaged by the
        # resume) are replaced when this run gets there
        for e, path in [(e, p) for e, p in complete(out_dir) if e <= epoch][:-keep]:
            if e == best:
                continue
            doomed = root / f".tmp-del-{path.name}"
            path.rename(doomed)
            shutil.rmtree(doomed, ignore_errors=True)
    return final


SPACE_MARGIN = 1.25  # a checkpoint's files: its arrays' bytes plus orbax's metadata, with room to spare


def _check_space(root: Path, state, name: str) -> None:
    """Refuse a checkpoint the disk cannot hold before writing any of it (a write that runs out of space
    half-way is caught too, but orbax's writer threads print their own tracebacks then)."""
    need = SPACE_MARGIN * sum(np.asarray(x).nbytes for x in jax.tree.leaves(state)) + (1 << 16)
    free = shutil.disk_usage(root).free
    if free < need:
        raise UserError(
            f"cannot write checkpoint {name}: it needs about {need / 2**20:.1f} MiB but {str(root)!r} has "
            f"{free / 2**20:.1f} MiB free: free space there, then {_resume_hint(root.parent)}"
        )


def _resume_hint(out: Path) -> str:
    done = complete(out)
    where = f"from {done[-1][1].name}, intact" if done else "from epoch 1: no checkpoint yet"
    return f"continue with --resume {str(out)!r} ({where})"


def _write_failure(e: Exception, root: Path) -> str | None:
    """Why writing under ``root`` failed, when it is the file system's doing (full, read-only, I/O);
    None for other errors (re-raised as they are)."""
    text = str(e)
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    if "No space left" in text or "RESOURCE_EXHAUSTED" in text or shutil.disk_usage(root).free < (1 << 20):
        return "no space left on the device"
    if "Read-only file system" in text or "Permission denied" in text:
        return text.split("\n")[0][:200]
    return None


# ----------------------------------------------------------------------------------------- resuming


def none_restores(run: Path, skipped: list[str]) -> str:
    """The message for a run directory whose checkpoints all fail to restore."""
    why = "; ".join(skipped[:3]) + ("; ..." if len(skipped) > 3 else "")
    return (
        f"--resume {str(run)!r}: none of its checkpoints restores ({why}): move them out of "
        f"{str(run / FOLDER)!r} to start the run over from epoch 1 with --resume, "
        "or start a new run with --out"
    )


def restore_newest(trainer, out_dir: str | Path, note) -> tuple[Checkpoint | None, list[dict]]:
    """Restore the newest checkpoint of ``out_dir`` that restores cleanly into ``trainer``; ``note`` says
    which newer ones were skipped and why. -> (that checkpoint, its metric rows), or (None, []) when
    there is no checkpoint at all; a UserError when none of them restores. A Ctrl-C meanwhile is raised
    after the restore (orbax would turn it into a read error, taken for a damaged checkpoint)."""
    skipped = []
    for _, path in candidates(out_dir):
        try:
            with runlock.deferred():
                ckpt = check(path)
                return ckpt, restore(trainer, ckpt)
        except Damaged as e:
            skipped.append(f"{path.name}: {e}")
            note(f"skipping checkpoint {path.name}: {e}; trying the one before")
    if skipped:
        raise UserError(none_restores(Path(out_dir), skipped))
    return None, []


def restore_epoch(trainer, out_dir: str | Path, epoch: int) -> Checkpoint:
    """Restore ``out_dir``'s checkpoint of ``epoch`` into ``trainer`` (e.g. the best validation epoch's,
    kept with ``train.checkpoint_best``); a UserError naming the epochs there are when it is missing, or
    when it does not restore cleanly. A Ctrl-C meanwhile is raised after the restore, as in
    ``restore_newest``."""
    kept = dict(candidates(out_dir))
    if epoch not in kept:
        have = ", ".join(map(str, sorted(kept))) or "none"
        raise UserError(f"{out_dir} has no checkpoint of epoch {epoch} (it has {have}): name one of those")
    try:
        with runlock.deferred():
            ckpt = check(kept[epoch])
            restore(trainer, ckpt)
    except Damaged as e:
        raise UserError(f"{kept[epoch]} is damaged ({e}): name another epoch") from None
    return ckpt


def _unretrieved(record) -> bool:
    """``logging`` filter: False for asyncio's "Task exception was never retrieved" of a tensorstore read
    (its error names its ``tensorstore_spec``); any other task's goes out (``_quiet_closed_loop_callbacks``)."""
    exc = record.exc_info[1] if record.exc_info else None
    unread = str(record.msg).startswith("Task exception was never retrieved")
    return not (unread and "tensorstore" in str(exc))


def _quiet_closed_loop_callbacks() -> None:
    """Once orbax has given up on a read, tensorstore's other reads of that checkpoint still finish and post
    their results to the asyncio loop orbax has closed by then: each would print a traceback on stderr (an
    unraisable ``RuntimeError: Event loop is closed``, or, when a failed read's task is collected unread,
    asyncio's "Task exception was never retrieved" with the read's error) after the one line that says
    the checkpoint is skipped. From then on those are dropped; every other unraisable exception and
    asyncio message (another task's unread error too) goes out as before."""
    previous = sys.unraisablehook
    if getattr(previous, "drops_closed_loop_callbacks", False):
        return
    logging.getLogger("asyncio").addFilter(_unretrieved)

    def hook(unraisable) -> None:
        exc = unraisable.exc_value
        if not (isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed"):
            previous(unraisable)

    hook.drops_closed_loop_callbacks = True
    sys.unraisablehook = hook


def restore(trainer, ckpt: Checkpoint) -> list[dict]:
    """Load ``ckpt`` into ``trainer`` (arrays, scheduler weights, step times, budgets); its metric rows.
    ``Damaged`` (and ``trainer`` unchanged) when orbax cannot read it or ``meta.json`` lacks a field."""
    import orbax.checkpoint as ocp

    target = _state_tree(trainer)
    args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), target)
    try:
        state = _checkpointer().restore(
            (ckpt.path / "state").absolute(), args=ocp.args.PyTreeRestore(restore_args=args)
        )
    except Exception as e:  # a damaged checkpoint of format 1 (no file hashes): orbax, zarr, OCDBT errors
        _quiet_closed_loop_callbacks()
        raise Damaged(f"orbax cannot read its arrays ({_one_line(e)})") from None
    want = jax.tree.map(lambda x: (x.shape, str(x.dtype)), target)
    got = jax.tree.map(lambda x: (x.shape, str(x.dtype)), state)
    if jax.tree.structure(want) != jax.tree.structure(got) or jax.tree.leaves(want) != jax.tree.leaves(got):
        raise UserError(f"checkpoint {str(ckpt.path)!r} does not match this model's shapes: start a new run")
    meta = ckpt.meta
    packer_state = trainer.packer.state_dict()
    try:
        d = meta["cost_model"]
        cost_model = CostModel.from_dict(d)
        alpha, beta, gamma = meta["scheduler_weights"]
        # [work, seconds, alone]; checkpoints before the alone flag: [work, seconds] (beside)
        step_log = [
            (np.array(e[0]), float(e[1]), bool(e[2]) if len(e) > 2 else False) for e in meta["step_log"]
        ]
        plan = meta.get("plan")
        planned = None
        if plan is not None:
            planned = ([Budget(*b) for b in plan["budgets"]], plan["compose"], int(plan.get("accumulate", 1)))
        trainer.packer.load_state_dict(meta)
    except (KeyError, TypeError, ValueError) as e:
        trainer.packer.load_state_dict(packer_state)
        raise Damaged(f"meta.json lacks or garbles a field ({_one_line(e)})") from None
    trainer.params = parallel.replicate(trainer.mesh, state["params"])
    treedef = jax.tree.structure(trainer.opt_state)
    trainer.opt_state = parallel.replicate(trainer.mesh, jax.tree.unflatten(treedef, state["opt_state"]))
    trainer.cost_model = cost_model
    trainer.settings = dataclasses.replace(trainer.config.schedule, alpha=alpha, beta=beta, gamma=gamma)
    trainer.step_log = step_log
    if planned is not None and trainer.plans_budgets:
        trainer.restore_plan(*planned)
    return list(meta["history"])


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def rewind_logs(out_dir: str | Path, history: list[dict], config: Config) -> None:
    """Make ``metrics.jsonl``/``steps.jsonl``/``config.yaml`` those of the checkpoint's epoch (a kill
    may have left rows of later epochs, or half a line), each file replaced atomically; a
    ``summary.json`` (of a later state) is removed until the run ends again."""
    out = Path(out_dir)
    (out / "summary.json").unlink(missing_ok=True)
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
        ("metrics.jsonl", "".join(json_text(r) + "\n" for r in history)),
        ("steps.jsonl", "".join(steps)),
    ):
        atomic_write_text(out / name, text)
    write_config(config, out)


def write_config(config: Config, out: str | Path) -> None:
    """``OUT/config.yaml``, replaced atomically (a kill never leaves half of it)."""
    dump_config(config, Path(out) / "config.yaml")
