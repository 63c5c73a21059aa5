"""Before epoch 1: what one evaluation will cost against one training epoch, said when it costs more.

Link prediction scores every candidate pair of a val / test window on the host: every pair of its L local
nodes (``eval.candidates: all``, L² pairs) or ``eval.neg_per_source`` sampled non-edges per source. That
part is *measured*: the run's own compiled scoring function is timed on one shape (the median window's
bucket, capped), after one untimed call that compiles it, and the seconds per pair are scaled to the
pairs of every evaluated window. The windows' forward passes (the encoder) and the training epoch are
the cost model's predictions (``Trainer.step_seconds``: what ``schedule`` prints as predicted seconds).
An evaluation estimated under ``QUIET_BELOW`` seconds is never noted.
Other tasks evaluate forward passes only, cheaper than training: no estimate.
"""

from __future__ import annotations

import time

import jax.numpy as jnp
import numpy as np

from .graphs import bucket

MAX_MEASURED_NODES = 1024  # the timed shape: at most this many nodes (a 1M-pair [L, L] block)
MAX_MEASURED_PAIRS = 1 << 16  # sampled: at most this many pairs
QUIET_BELOW = 10.0  # seconds: an evaluation estimated shorter than this is never worth a note


def _timed(fn, *args) -> float:
    """Seconds of ``fn(*args)`` after one untimed call (its compilation)."""
    np.asarray(fn(*args))
    start = time.perf_counter()
    np.asarray(fn(*args))
    return time.perf_counter() - start


def scoring_seconds(trainer, local_nodes: np.ndarray, sources: np.ndarray) -> tuple[float, float]:
    """(seconds, pairs) of scoring the candidates of windows with ``local_nodes`` [K] and true-edge
    ``sources`` [K] (an upper bound: every target edge's source), measured on one shape."""
    ev, p = trainer.evaluator, trainer.config.parallel
    head = ev.host_head(trainer)  # as evaluation scores: on the host
    width = int(np.asarray(head["hidden"]["kernel"]).shape[0] // 2)
    if trainer.candidate_mode == "all":
        padded = np.array([bucket(int(n), p.bucket_ratio, p.min_bucket) for n in local_nodes], float)
        n = bucket(int(min(np.median(local_nodes), MAX_MEASURED_NODES)), p.bucket_ratio, p.min_bucket)
        emb = jnp.zeros((n, width), jnp.float32)
        per_pair = _timed(ev.score_fn, head, emb, emb) / float(n * n)
        pairs = float(np.sum(padded**2))
        return per_pair * pairs, pairs
    pairs = float(np.sum(sources) * trainer.config.eval.neg_per_source)
    per_window = max(pairs / max(len(local_nodes), 1), 1.0)
    c = bucket(int(min(per_window, MAX_MEASURED_PAIRS)), p.bucket_ratio, p.min_bucket)
    n = bucket(int(min(np.median(local_nodes), MAX_MEASURED_NODES)), p.bucket_ratio, p.min_bucket)
    ends = jnp.zeros((c,), jnp.int32)
    per_pair = _timed(ev.pair_fn, head, jnp.zeros((n, width), jnp.float32), ends, ends) / float(c)
    return per_pair * pairs, pairs


def training_epoch_seconds(trainer) -> float:
    """The cost model's seconds of training epoch 1: its steps on the run's planned budgets (their mean),
    or, without planned budgets, the training windows' work spread over the devices."""
    steps = trainer.epoch_schedule(1).num_steps
    if trainer.planned:
        return steps * float(np.mean([trainer.step_seconds(b) for b in trainer.planned]))
    costs = trainer.windows.costs("train", trainer.config.data.neg_mult)
    total = float(np.sum(trainer.cost_model.predict_costs(costs, trainer.windows.window)))
    return trainer.slowdown * total / trainer.n_devices


def evaluation_note(trainer) -> str | None:
    """One line when an evaluation (val + test) is estimated to cost more than a training epoch, with
    the figures and what makes it cheaper; None otherwise (or for tasks other than link)."""
    if trainer.task != "link":
        return None
    ws = trainer.windows
    splits = [s for s in ("val", "test") if len(ws.splits[s])]
    if not splits:
        return None
    costs = np.concatenate([ws.costs(s, 0) for s in splits])  # (nodes, edges, pairs = target edges)
    local, sources = costs[:, 0], costs[:, 2]
    scoring, pairs = scoring_seconds(trainer, local, sources)
    encode = float(np.sum(trainer.cost_model.predict_costs(costs * [1, 1, 0], ws.window)))
    encode *= trainer.slowdown / (3.0 * trainer.n_devices)  # a forward pass: ~1/3 of forward + backward
    evaluate = scoring + encode
    if evaluate <= QUIET_BELOW:  # before the training side: it may schedule epoch 1 (dygnex_l: seconds)
        return None
    train = training_epoch_seconds(trainer)
    if evaluate <= train:
        return None
    every = trainer.config.eval.every
    cheaper = (
        "eval.candidates=sampled scores far fewer pairs"
        if trainer.candidate_mode == "all"
        else "a smaller eval.neg_per_source scores fewer pairs"
    )
    return (
        f"note: one evaluation (val + test, {len(costs)} windows, {pairs:,.0f} candidate pairs, "
        f"{trainer.candidate_mode}) is estimated at {evaluate:.1f} s, more than a training epoch "
        f"({train:.1f} s predicted); it runs every {every} epoch(s) and after the last: eval.every=N "
        f"evaluates less often, {cheaper}"
    )
