"""What the prediction tasks (``data.task``) differ in, one class each, so the trainer has no task branches.

A ``Task`` owns: its loss (model output, batch) -> (loss sum, weight sum), summed over real targets only
so that padding never counts; which targets a device's windows carry (``device_work``: sampled pairs in
training, target edges, or every node); how they are packed on the host (``pack``); and its evaluation
(``evaluator``: the compiled evaluation steps and the metrics of a split). The metric names and which
one picks the best epoch are ``config.TASK_METRICS`` (the config validates against them).

  * ``link`` — link prediction of the next snapshot: training pairs are its edges and sampled
    non-edges; evaluation embeds the windows on all devices and ranks every candidate pair per
    snapshot (MAP, MRR; EvolveGCN's definitions, evaluation.py).
  * ``edge_cls`` — classification of the window's last-snapshot edges: the target edges everywhere;
    F1 pooled over the split on the host.
  * ``node_reg`` — regression of every node's next signal value: squared error summed over the mesh
    (MSE, one division at the end).

Adding a task: a subclass here, one line in ``TASKS``, its metrics in ``config.TASK_METRICS``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import parallel
from .config import TASK_METRICS
from .errors import UserError
from .evaluation import (
    CandidateCache,
    candidate_mode,
    confusion,
    edge_cls_metrics,
    evaluate_link_windows,
    mse_from_sums,
)
from .graphs import Budget, DeviceWork, bucket, node_offsets, pack_device, pack_node_device, stack_devices
from .models import LinkPredictor, dense_pair_scores
from .models.head import pair_scores


def pair_loss(logits: jax.Array, batch: dict) -> tuple[jax.Array, jax.Array]:
    """[Q, 2] logits -> (sum of class-weighted CE over real pairs, sum of their weights)."""
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, batch["pair_label"])
    w = batch["pair_weight"]
    return jnp.sum(w * ce), jnp.sum(w)


def node_loss(pred: jax.Array, batch: dict) -> tuple[jax.Array, jax.Array]:
    """[N] predicted node values -> (sum of squared errors over real target nodes, their count)."""
    err = pred[batch["target_node"]] - batch["target_value"]
    w = batch["target_weight"]
    return jnp.sum(w * err * err), jnp.sum(w)


def make_loss_fn(model, loss=pair_loss):
    """``(params, batch) -> (loss sum, weight sum)`` of the task's ``loss`` (default: link prediction,
    the sum of class-weighted CE over real pairs and the sum of their weights)."""

    def loss_fn(params, batch):
        return loss(model.apply(params, batch), batch)

    return loss_fn


def split_steps(n_windows: int, per_step: int, n_devices: int):
    """An evaluation split's window positions, ``per_step`` per step, each step's spread evenly over the
    devices: yields [P] lists of positions."""
    ids = np.arange(n_windows)
    for lo in range(0, n_windows, per_step):
        yield [list(part) for part in np.array_split(ids[lo : lo + per_step], n_devices)]


def eval_outputs(trainer, split: str, step_fn):
    """Every evaluation step of a split run on the mesh by ``step_fn(params, batch)``: yields (work of
    the P devices, host outputs [P, ...]). A long evaluation says it is alive: every
    ``trainer.eval_log_every`` seconds a line to ``trainer.eval_log`` (when set) with the steps done and
    the estimated time left (host-side scoring of a yielded step included)."""
    n = len(trainer.windows.splits[split])
    steps = list(split_steps(n, trainer.eval_per_step, trainer.n_devices))
    start = last = time.monotonic()
    for i, step in enumerate(steps):
        batch, work, _ = trainer.packer.pack(step, split, epoch=0)
        yield work, parallel.to_host(step_fn(trainer.params, parallel.shard_batch(trainer.mesh, batch)))
        now = time.monotonic()
        if trainer.eval_log and i + 1 < len(steps) and now - last >= trainer.eval_log_every:
            last = now
            left = (now - start) / (i + 1) * (len(steps) - i - 1)
            trainer.eval_log(
                f"evaluating {split}: step {i + 1}/{len(steps)} after {now - start:.0f} s, about {left:.0f} s left"
            )


class Task:
    """The pair tasks' defaults (link prediction); see the module doc for what a task owns."""

    name = "link"
    loss = staticmethod(pair_loss)

    @property
    def metrics(self) -> tuple[str, ...]:
        """The metric names of an evaluated split (``metrics.jsonl`` keys ``{split}_{name}``)."""
        return TASK_METRICS[self.name][0]

    def device_work(self, windows, window_ids, split: str, epoch: int, config) -> DeviceWork:
        """One device's windows and their targets: in training, each window's edges and sampled
        non-edges (``data.neg_mult``; fixed by seed and epoch); in evaluation none (scored apart)."""
        wins = [windows.get(int(k)) for k in window_ids]
        if split != "train":
            empty = [np.zeros((0, 2), np.int32) for _ in wins]
            return DeviceWork(wins, empty, [np.zeros(0, np.int32) for _ in wins])
        samples = [
            windows.training_pairs(w.index, config.data.neg_mult, config.train.seed, epoch) for w in wins
        ]
        return DeviceWork(wins, [s[0] for s in samples], [s[1] for s in samples])

    def pack(self, work: list[DeviceWork], budget: Budget, windows, config, layout: str) -> dict:
        """Host batch [len(work), ...] of these devices' work under ``budget`` (graphs.pack_device)."""
        cw = config.train.class_weights
        return stack_devices([pack_device(d, budget, windows.window, cw, layout) for d in work])

    def evaluator(self, trainer):
        return LinkEvaluator(trainer)

    def candidate_mode(self, windows, config) -> str:
        """What evaluation scores (link: ``eval.candidates``, ``auto`` resolved)."""
        return candidate_mode(windows, config)


class EdgeClsTask(Task):
    name = "edge_cls"

    def device_work(self, windows, window_ids, split, epoch, config):
        # the target edges are the labelled pairs in every split (training and evaluation alike)
        return super().device_work(windows, window_ids, "train", epoch, config)

    def evaluator(self, trainer):
        return EdgeClsEvaluator(trainer)

    def candidate_mode(self, windows, config):
        check_two_classes(windows)  # checked here, once per run, before anything trains
        return "target_edges"  # every edge of the target snapshot is classified


def check_two_classes(windows) -> None:
    """A UserError when every training edge of an ``edge_cls`` run has the same label (F1 would be
    0 or undefined, whatever the model learns)."""
    labels = [windows.edge_labels(int(k)) for k in windows.splits["train"]]
    seen = np.unique(np.concatenate(labels)) if labels else np.zeros(0, np.int32)
    if len(seen) == 1:
        what = (
            "a majority of positive ratings" if seen[0] else "no majority of positive ratings (ratings <= 0)"
        )
        raise UserError(
            f"data.task=edge_cls: every training edge has label {int(seen[0])} ({what}), so there is "
            "nothing to classify: the rating column needs positive and negative values (a pair's label "
            "is the sign of its ratings' majority)"
        )


class NodeRegTask(Task):
    name = "node_reg"
    loss = staticmethod(node_loss)

    def device_work(self, windows, window_ids, split, epoch, config):
        # every node is a target, in training and evaluation alike
        wins = [windows.get(int(k)) for k in window_ids]
        return DeviceWork(wins, [np.arange(w.num_local, dtype=np.int32) for w in wins], [w.y for w in wins])

    def pack(self, work, budget, windows, config, layout):
        nf = windows.num_features
        return stack_devices([pack_node_device(d, budget, windows.window, nf, layout) for d in work])

    def evaluator(self, trainer):
        return NodeRegEvaluator(trainer)

    def candidate_mode(self, windows, config):
        return "none"  # every node is a target


TASKS: dict[str, Task] = {"link": Task(), "edge_cls": EdgeClsTask(), "node_reg": NodeRegTask()}


def get_task(name: str) -> Task:
    return TASKS[name]


# --- evaluation: the compiled steps of a task, built once per run and shareable between trainers of the
# same model and mesh (a benchmark runs several trainers on one evaluator). ``evaluate(trainer, split)``
# reads the trainer's parameters, windows and packer.


class LinkEvaluator:
    """Link prediction: embeddings of every window on all devices, then every candidate pair of its
    target snapshot scored per process on the host (``trainer.candidate_mode``: all pairs, or sampled
    ones fixed by ``eval.seed`` for the run). Streamed: a step's windows are scored as soon as its
    embeddings come back, and sampled candidates are kept for the run up to a bounded number, the rest
    re-drawn per evaluation (the same ones), so host memory holds one step's embeddings and a bounded
    number of candidates, whatever the split's size."""

    def __init__(self, trainer):
        model = trainer.model
        self.embed_step = parallel.make_embed_step(
            lambda p, b: model.apply(p, b, method=LinkPredictor.embed), trainer.mesh
        )
        self.score_fn = jax.jit(dense_pair_scores)
        self.pair_fn = jax.jit(pair_scores)
        self.candidates = CandidateCache()  # sampled candidates kept for the run, up to a bounded number

    def embeddings(self, trainer, split: str) -> Iterator[tuple[int, np.ndarray]]:
        """(window id, [num_local, H] embeddings at the last history snapshot) of a split's windows, one
        evaluation step at a time: the next step runs when this one's windows have been consumed."""
        for work, emb in eval_outputs(trainer, split, self.embed_step):
            for p, dev in enumerate(work):
                for win, off in zip(dev.windows, node_offsets(dev)):
                    yield win.index, emb[p, off : off + win.num_local]

    def local_scores(self, trainer, emb: np.ndarray, head) -> np.ndarray:
        """[L, H] embeddings -> [L, L] pair scores, padded to a shape bucket (few compilations)."""
        n = len(emb)
        p = trainer.config.parallel
        padded = np.zeros((bucket(n, p.bucket_ratio, p.min_bucket), emb.shape[1]), np.float32)
        padded[:n] = emb
        s = self.score_fn(head, jnp.asarray(padded), jnp.asarray(padded))
        return np.asarray(s)[:n, :n]

    def pair_scores(self, trainer, emb: np.ndarray, src: np.ndarray, dst: np.ndarray, head) -> np.ndarray:
        """[L, H] embeddings, local pair ends [C] -> [C] scores of those pairs alone (sampled candidates:
        no [L, L] matrix), L and C padded to shape buckets."""
        p = trainer.config.parallel
        n, c = len(emb), len(src)
        padded = np.zeros((bucket(n, p.bucket_ratio, p.min_bucket), emb.shape[1]), np.float32)
        padded[:n] = emb
        ends = np.zeros((2, bucket(c, p.bucket_ratio, p.min_bucket)), np.int32)
        ends[:, :c] = src, dst
        s = self.pair_fn(head, jnp.asarray(padded), jnp.asarray(ends[0]), jnp.asarray(ends[1]))
        return np.asarray(s)[:c]

    @staticmethod
    def host_head(trainer):
        """A host copy of the link head's parameters: scoring runs on the host, per process."""
        return parallel.to_host(trainer.params["params"]["head"])

    def evaluate(self, trainer, split: str) -> dict:
        head = self.host_head(trainer)
        return evaluate_link_windows(
            trainer.windows,
            self.embeddings(trainer, split),
            lambda emb: self.local_scores(trainer, emb, head),
            trainer.candidate_mode,
            trainer.config.eval,
            self.candidates,
            pair_scores=lambda emb, src, dst: self.pair_scores(trainer, emb, src, dst, head),
        )


class EdgeClsEvaluator:
    """Edge classification: the windows packed with their target edges, ``eval.batch_size`` per step
    over all devices; the logits of a device's real pairs (the first ``real_pairs``, padding after
    them) are compared with their labels on the host and pooled into one confusion matrix."""

    def __init__(self, trainer):
        model = trainer.model
        self.logits_step = parallel.make_embed_step(lambda p, b: model.apply(p, b), trainer.mesh)

    def evaluate(self, trainer, split: str) -> dict:
        counts = np.zeros((2, 2), np.int64)
        for work, logits in eval_outputs(trainer, split, self.logits_step):
            for p, dev in enumerate(work):
                q = dev.real_pairs()
                if q:
                    counts += confusion(np.concatenate(dev.labels), logits[p, :q].argmax(-1))
        return edge_cls_metrics(counts)


class NodeRegEvaluator:
    """Node regression: every step's loss sum and target count psum-ed on the mesh, summed over steps,
    divided once (MSE)."""

    def __init__(self, trainer):
        self.sum_step = parallel.make_sum_step(make_loss_fn(trainer.model, node_loss), trainer.mesh)

    def evaluate(self, trainer, split: str) -> dict:
        return mse_from_sums([sums for _, sums in eval_outputs(trainer, split, self.sum_step)])
