"""Training and evaluation, top-down: data -> mesh -> model & optimiser -> steps -> loop.

``train_and_evaluate(config, out_dir)`` is the whole recipe; the CLI only calls it. It builds a
``Trainer`` (trainer.py: data, mesh, model, strategy, packer, evaluator), plans the run's training
budgets and compiles them, then per epoch trains (``Trainer.train_epoch``), re-fits the cost model and
evaluates when due, writes the epoch's rows and a checkpoint, and at the end ``summary.json``.

The run directory is locked for the run's duration (runlock.py: a second ``train`` of it is refused), and
Ctrl-C ends the run within seconds, the last complete checkpoint intact (a save in progress completes
first); ``KeyboardInterrupt`` then reaches the caller (the CLI exits with 130).
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

from . import checkpoint, distributed, host_memory, memstats, runlock
from .config import Config
from .errors import UserError
from .eval_estimate import evaluation_note
from .files import atomic_write_text, json_text
from .resume import absolute_paths, check_data, record_moved_data
from .runlog import (
    Progress,
    best_epoch,
    check_run_names,
    claim_out_dir,
    default_out_dir,
    early_stop_note,
    ended_early,
    epoch_line,
    header_line,
    is_new_best,
    logged_rows,
    prepare_out_dir,
    summarize_run,
)
from .tasks import get_task, make_loss_fn, node_loss, pair_loss
from .trainer import NonFiniteStep, Trainer, create_optimizer

__all__ = [
    "NonFiniteStep",
    "Progress",
    "Trainer",
    "create_optimizer",
    "make_loss_fn",
    "node_loss",
    "pair_loss",
    "summarize_run",
    "train_and_evaluate",
]


COST_MODEL_FILE = "cost_model.json"  # OUT/: the cost model the run started with (schedule.cost_model)
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EFBIG)


def train_and_evaluate(
    config: Config, out_dir: str | Path | None = None, *, stream=None, resume: bool = False
) -> dict:
    """Train ``config`` and write ``config.yaml``, ``metrics.jsonl`` and ``summary.json`` to ``out_dir``,
    with checkpoints under ``out_dir/checkpoints`` (see checkpoint.py).

    Everything that can fail on bad input (data, config, devices) is checked before ``out_dir`` is
    created. With ``resume``, ``out_dir`` is an earlier run (``resume.resume_config`` checked it):
    training continues after its newest checkpoint that restores cleanly, or from epoch 1 if it has none.
    In a multi-process run every process trains; only process 0 prints, writes files and holds the
    run directory's lock. Returns the summary dict.
    """
    # the host allocator before any thread of the run exists (the interrupt watcher below, XLA's pools):
    # glibc fixes its arena limit when a second thread first allocates (host_memory.configure)
    host_memory.configure(config.parallel.host_malloc)
    main = distributed.is_main_process()
    progress = Progress(stream, quiet=not main)
    out = Path(out_dir) if out_dir is not None else default_out_dir(config)
    # config.yaml names its files so that --resume finds them from any folder (a resume's moved data too)
    config = absolute_paths(config)
    # the lock's notes (a stale lock taken over) wait until the folder is accepted: a refused run prints
    # its one error line alone
    held_notes: list[str] = []
    lock = runlock.RunLock(out, held_notes.append, active=main)

    def forced_exit() -> str:  # the interrupt backstop's last words (runlock.Interrupts)
        lock.release()
        return _continue_with(out)

    created = not out.exists()
    try:
        with runlock.Interrupts(on_forced_exit=forced_exit), lock:
            if out.is_dir() and os.access(out, os.W_OK | os.X_OK):
                lock.acquire()  # an existing folder: a second run of it is refused before anything loads
            try:
                return _train(config, out, resume, progress, lock, held_notes)
            except KeyboardInterrupt:
                progress.line(f"interrupted: {_continue_with(out)}")
                raise
            except OSError as e:  # the run folder's disk: full, read-only, failing
                if e.errno not in WRITE_ERRNOS:
                    raise
                raise UserError(
                    f"cannot write to {str(out)!r} ({e.strerror}): free space there (or fix the disk), then "
                    f"{_continue_with(out)}"
                ) from None
    except UserError:
        if created and lock.active and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # a new folder the run could not start in (a full disk): not left behind
        raise


def _train(
    config: Config, out: Path, resume: bool, progress: Progress, lock: runlock.RunLock, held_notes: list[str]
) -> dict:
    """The run itself: build, plan and compile, then train, evaluate and checkpoint epoch after epoch."""
    main = lock.active
    kept = out / COST_MODEL_FILE  # the model a run started with: its resume plans with the same one
    own = resume and config.schedule.cost_model == "auto" and kept.is_file()
    trainer = Trainer(config, cost_model=str(kept) if own else None)  # the config itself is unchanged
    trainer.plan_budgets()  # before a resume restores re-fitted weights: the same plan
    early: list[str] = []
    if main:  # what checkpoints will hold resident (orbax), counted in the memory estimate
        import orbax.checkpoint  # noqa: F401
    if not resume:  # the steps fitted to the memory budget (an error there) before the folder exists
        trainer.compile_planned(early.append)
    history, first = _start(trainer, out, resume, progress, lock)
    for line in held_notes:  # the folder was accepted: the lock's notes now
        progress.line(line)
    for line in [trainer.cost_note, trainer.plan_note, trainer.range_note, *early]:
        if line:
            progress.line(line)
    trainer.compile_planned(progress.line)  # a resumed run's budgets (the others are compiled)
    if main and (note := evaluation_note(trainer)):
        progress.line(note)
    trainer.eval_log, trainer.eval_log_every = progress.line, progress.every
    metrics_file = (out / "metrics.jsonl").open("a") if main else open(os.devnull, "w")
    steps_file = (out / "steps.jsonl").open("a") if main else open(os.devnull, "w")
    with metrics_file, steps_file:
        stop = early_stop_note(config, history)  # a resumed run that had stopped early stays stopped
        for epoch in range(first, config.train.epochs + 1) if stop is None else ():
            runlock.pause_point("epoch", epoch)  # a test hook, inert by default
            row = _run_epoch(trainer, epoch, out, progress, history)
            history.append(row)
            stop = early_stop_note(config, history)
            metrics_file.write(json_text(row) + "\n")
            metrics_file.flush()
            steps_file.write("".join(json_text(r) + "\n" for r in trainer.last_steps))
            steps_file.flush()
            progress.line(epoch_line(row, config.train.epochs, trainer.task))
            best = best_epoch(config.data.task, history) if config.train.checkpoint_best else None
            if main and (checkpoint.is_due(epoch, config.train) or stop or best == epoch):  # process 0 writes
                path = checkpoint.save(trainer, out, epoch, history, config.train.keep_checkpoints, best)
                progress.line(f"checkpoint {path}" + (" (best val so far)" if best == epoch else ""))
            if stop:
                break
        if ended_early(config, history):
            progress.line(stop)
    summary = summarize_run(config, trainer, history)
    if main:
        atomic_write_text(out / "summary.json", json_text(summary, indent=2))
    progress.line(f"wrote {out}/summary.json")
    return summary


def _start(trainer: Trainer, out: Path, resume: bool, progress: Progress, lock) -> tuple[list, int]:
    """A new run's folder, or a resumed run's restored state and rewound logs -> (history, first epoch).
    A new run into a folder holding this run interrupted before its first checkpoint starts it over; a
    resumed run without a checkpoint starts from epoch 1 (runlog.claim_out_dir / checkpoint.restore_newest)."""
    config = trainer.config
    history, first = [], 1
    check_run_names(out)
    if resume:
        lock.acquire()  # taken already unless the folder is not writable: then this says so
        logged = logged_rows(out)
        moved = check_data(trainer, checkpoint.newest(out)[0], out)  # data.path / data.root moved?
        ckpt, history = checkpoint.restore_newest(trainer, out, progress.line)
        if moved and lock.active:
            record_moved_data(config, out)
        first = ckpt.epoch + 1 if ckpt is not None else 1
        if lock.active:
            checkpoint.rewind_logs(out, history, config)
        stopped = early_stop_note(config, history) is not None
        todo = (
            "nothing to run: it stopped early" if stopped else f"epochs {first}..{config.train.epochs} to run"
        )
        progress.line(
            f"resuming {out} from {ckpt.path.name}: {todo}"
            if ckpt is not None
            else f"restarting {out} from epoch 1: it holds no checkpoint (interrupted before its first, or its "
            f"checkpoints were removed; the {logged} logged epoch(s) are trained again)"
            if logged
            else f"restarting {out} from epoch 1: it holds no checkpoint (interrupted before its first)"
        )
    elif lock.active:
        prepare_out_dir(out)
        lock.acquire()
        claim_out_dir(out, config, progress.line)
        checkpoint.write_config(config, out)
        trainer.cost_model.save(out / COST_MODEL_FILE)
    progress.line(
        header_line(trainer.graph, trainer.windows, trainer.n_devices, config, trainer.candidate_mode)
    )
    for done in range(1, first):  # schedules planned for epochs a resumed run has already trained
        trainer.schedules.pop(done, None)
    return history, first


def _continue_with(out: Path) -> str:
    """After a Ctrl-C: how to go on."""
    if not (out / "config.yaml").is_file():
        return f"run the same command again (nothing of the run was written to {out} yet)"
    done = checkpoint.complete(out)
    where = f"from {done[-1][1].name}" if done else "from epoch 1: no checkpoint yet"
    return f"continue with `python -m dygnex_jax train --resume {out}` ({where})"


def _run_epoch(trainer: Trainer, epoch: int, out: Path, progress: Progress, history: list[dict]) -> dict:
    """Train one epoch, re-fit the cost model when due, evaluate when due -> the epoch's metrics row.
    Evaluation is due every ``eval.every`` epochs from ``eval.start`` on, and after the last epoch; with
    ``eval.test: at_best`` the test split only where the val metric beats every earlier one."""
    config, epochs = trainer.config, trainer.config.train.epochs
    try:
        row = {"epoch": epoch, **trainer.train_epoch(epoch, progress.bar(epoch, epochs))}
    except NonFiniteStep as e:
        last = checkpoint.latest(out)
        where = (
            f"last good checkpoint {last.path} (epoch {last.epoch}): fix the config and continue "
            f"with `train --resume {out}` (e.g. train.learning_rate=...)"
            if last
            else "no checkpoint yet: fix the config (e.g. lower train.learning_rate) and start again"
        )
        raise UserError(f"{e}; {where}; or set train.on_nonfinite=skip") from None
    every = config.schedule.reschedule_every
    if every and epoch % every == 0 and epoch < epochs:
        model = trainer.refit_cost_model()
        if model is not None:
            row["refit_mape"] = model.mape
            progress.line(
                f"re-fitted the cost model on {model.n_samples} measured steps (held-out error "
                f"{100 * model.mape:.1f}%); re-scheduling with its weights"
            )
    e = config.eval
    if (epoch >= e.start and epoch % e.every == 0) or epoch == epochs:
        start = time.perf_counter()
        names = get_task(trainer.task).metrics
        for split in ("val", "test"):
            if not len(trainer.windows.splits[split]):
                continue
            if split == "test" and e.test == "at_best" and f"val_{names[0]}" in row:
                if not is_new_best(trainer.task, history, row[f"val_{names[0]}"]):
                    continue
            m = trainer.evaluate(split)
            row.update({f"{split}_{k}": m[k] for k in names})
        row["eval_seconds"] = time.perf_counter() - start
    return row | memstats.peak_memory()  # this process's peaks so far (host RSS, device bytes or None)
