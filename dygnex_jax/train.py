"""Training and evaluation, top-down: data -> mesh -> model & optimiser -> steps -> loop.

``train_and_evaluate(config, out_dir)`` is the whole recipe; the CLI only calls it. It builds a
``Trainer`` (trainer.py: data, mesh, model, strategy, packer, evaluator), plans the run's training
budgets and compiles them, then per epoch trains (``Trainer.train_epoch``), re-fits the cost model and
evaluates when due, writes the epoch's rows and a checkpoint, and at the end ``summary.json``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from . import checkpoint, distributed
from .config import Config, dump_config
from .errors import UserError
from .runlog import Progress, default_out_dir, epoch_line, header_line, prepare_out_dir, summarize_run
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


def train_and_evaluate(
    config: Config, out_dir: str | Path | None = None, *, stream=None, resume: bool = False
) -> dict:
    """Train ``config`` and write ``config.yaml``, ``metrics.jsonl`` and ``summary.json`` to ``out_dir``,
    with checkpoints under ``out_dir/checkpoints`` (see checkpoint.py).

    Everything that can fail on bad input (data, config, devices) is checked before ``out_dir`` is
    created. With ``resume``, ``out_dir`` is an earlier run (``checkpoint.resume_config`` checked it):
    training continues after its latest complete checkpoint. In a multi-process run every process
    trains; only process 0 prints and writes files. Returns the summary dict.
    """
    main = distributed.is_main_process()
    progress = Progress(stream, quiet=not main)
    trainer = Trainer(config)
    trainer.plan_budgets()  # before a resume restores re-fitted weights: the same plan
    out = Path(out_dir) if out_dir is not None else default_out_dir(config)
    history, first = _start(trainer, out, resume, main, progress)
    if trainer.plan_note:
        progress.line(trainer.plan_note)
    trainer.compile_planned(progress.line)
    trainer.eval_log, trainer.eval_log_every = progress.line, progress.every
    metrics_file = (out / "metrics.jsonl").open("a") if main else open(os.devnull, "w")
    steps_file = (out / "steps.jsonl").open("a") if main else open(os.devnull, "w")
    with metrics_file, steps_file:
        for epoch in range(first, config.train.epochs + 1):
            row = _run_epoch(trainer, epoch, out, progress)
            history.append(row)
            metrics_file.write(json.dumps(row) + "\n")
            metrics_file.flush()
            steps_file.write("".join(json.dumps(r) + "\n" for r in trainer.last_steps))
            steps_file.flush()
            progress.line(epoch_line(row, config.train.epochs, trainer.task))
            if main and checkpoint.is_due(epoch, config.train):  # replicated state: process 0 writes it
                path = checkpoint.save(trainer, out, epoch, history, config.train.keep_checkpoints)
                progress.line(f"checkpoint {path}")
    summary = summarize_run(config, trainer, history)
    if main:
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
    progress.line(f"wrote {out}/summary.json")
    return summary


def _start(trainer: Trainer, out: Path, resume: bool, main: bool, progress: Progress) -> tuple[list, int]:
    """A new run's folder, or a resumed run's restored state and rewound logs -> (history, first epoch)."""
    config = trainer.config
    history, first = [], 1
    if resume:
        ckpt = checkpoint.latest(out)
        history, first = checkpoint.restore(trainer, ckpt), ckpt.epoch + 1
        if main:
            checkpoint.rewind_logs(out, history, config)
        progress.line(f"resuming {out} from {ckpt.path.name}: epochs {first}..{config.train.epochs} to run")
    elif main:
        prepare_out_dir(out)
        dump_config(config, out / "config.yaml")
    progress.line(
        header_line(trainer.graph, trainer.windows, trainer.n_devices, config, trainer.candidate_mode)
    )
    for done in range(1, first):  # schedules planned for epochs a resumed run has already trained
        trainer.schedules.pop(done, None)
    return history, first


def _run_epoch(trainer: Trainer, epoch: int, out: Path, progress: Progress) -> dict:
    """Train one epoch, re-fit the cost model when due, evaluate when due -> the epoch's metrics row."""
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
    if epoch % config.eval.every == 0 or epoch == epochs:
        start = time.perf_counter()
        for split in ("val", "test"):
            if len(trainer.windows.splits[split]):
                m = trainer.evaluate(split)
                row.update({f"{split}_{k}": m[k] for k in get_task(trainer.task).metrics})
        row["eval_seconds"] = time.perf_counter() - start
    return row
