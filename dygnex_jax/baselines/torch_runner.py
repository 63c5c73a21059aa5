"""PyTorch baseline: the same model from PyG-Temporal, trained on the same windows, splits, negatives,
mini-batches and evaluation as ``dygnex_jax.train``, on P processes with ``torch.distributed`` DDP and
the even PSG split of every step's windows (``schedule.method=psg``): CPU processes over gloo, or with
``--device cuda`` one GPU per process over NCCL.

Two layouts of a rank's windows (``--layout``):

* ``full`` (what PyG-Temporal users run): every window on the whole node set of the graph (all N nodes'
  features and the snapshots' global edge lists, as a ``DynamicGraphTemporalSignal`` holds them), the
  rank's windows one after the other, their losses summed before one backward pass;
* ``packed`` (our data layout given to PyTorch): each window on its active nodes plus one background node
  (``data/windows.py``), the rank's windows as one disjoint-union graph per time offset (as PyG's
  ``Batch`` does).

Both compute the same loss (tested). Each rank runs the twin encoder (``torch_models.build_encoder``)
and the link head and returns ``P * sum(w * CE) / sum_all(w)`` so that DDP's gradient average is the exact mini-batch gradient, as in our
SPMD step. Rank 0 evaluates with ``evaluation.evaluate_link_windows`` (the trainer's MAP / MRR) and writes
``metrics.jsonl`` and ``summary.json`` in the trainer's format. ``epoch_seconds`` covers the training
steps of an epoch (host packing included), as ours does.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import socket
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from ..config import Config, dump_config, load_config, to_dict
from ..data import datasets
from ..data.windows import WindowSet
from ..errors import UserError
from ..evaluation import candidate_mode, evaluate_link_windows
from ..files import atomic_write_text, json_text
from ..schedule import schedule

LAYOUTS = ("full", "packed")
DEVICES = ("cpu", "cuda")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _union(wins, pairs=None):
    """Windows -> per-offset disjoint union: (feat [W, N], edge lists [W][2, E], node offsets, pairs)."""
    offsets = np.cumsum([0] + [w.num_local for w in wins])
    feat = np.concatenate([w.feat for w in wins], axis=1)
    es = []
    for tau in range(wins[0].feat.shape[0]):
        e = np.concatenate([w.edges[tau] + off for w, off in zip(wins, offsets)])
        es.append(_edge_index(e))
    packed_pairs = None
    if pairs is not None:
        packed_pairs = np.concatenate([p + off for p, off in zip(pairs, offsets)])
    return feat, es, offsets, packed_pairs


def _edge_index(edges: np.ndarray):
    import torch

    return torch.as_tensor(np.asarray(edges).T.astype(np.int64).reshape(2, -1)).contiguous()


def _ends(pairs: np.ndarray):
    import torch

    p = torch.as_tensor(pairs.astype(np.int64))
    return p[:, 0], p[:, 1]


# Settings our trainer implements and this baseline does not: any other value than the one here is refused
# rather than silently trained without (unit edges, ReLU, every epoch, every evaluation with test).
SUPPORTED = {
    "data.task": "link",
    "data.edge_weight": "none",
    "model.activation": "relu",
    "train.patience": 0,
    "eval.start": 1,
    "eval.test": "always",
}


def check_supported(config: Config) -> None:
    """UserError naming the first setting of ``config`` this baseline does not implement."""
    for key, want in SUPPORTED.items():
        section, name = key.split(".")
        got = getattr(getattr(config, section), name)
        if got != want:
            raise UserError(
                f"the PyTorch baseline does not implement {key}={got}: use {key}={want} for it "
                "(dygnex_jax train runs the setting)"
            )


class Runner:
    """One rank's model, optimiser and data (``rank`` 0 also evaluates and writes)."""

    def __init__(self, config: Config, rank: int, world: int, layout: str = "full", device: str = "cpu"):
        import torch

        from .torch_models import LinkHead, LinkModel, build_encoder

        if layout not in LAYOUTS:
            raise UserError(f"unknown layout {layout!r}: choose one of {', '.join(LAYOUTS)}")
        check_supported(config)
        self.config, self.rank, self.world, self.layout = config, rank, world, layout
        self.device = torch.device(f"cuda:{rank}" if device == "cuda" else "cpu")
        c = config
        torch.manual_seed(c.train.seed)
        self.graph = datasets.load_dataset(c.data)
        self.windows = WindowSet(self.graph, c.data)
        self.costs = self.windows.schedule_costs("train", c.data.neg_mult, c.schedule.time_resolved)
        self.encoder = build_encoder(c.model, self.windows.num_features)
        self.head = LinkHead(c.model.hidden, c.model.head_hidden)
        self.model = LinkModel(self.encoder, self.head).to(self.device)
        if world > 1:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.ddp = torch.nn.parallel.DistributedDataParallel(
                self.model, device_ids=ids, find_unused_parameters=False
            )
        else:
            self.ddp = self.model
        opt = torch.optim.AdamW if c.train.weight_decay > 0 else torch.optim.Adam
        kwargs = {"weight_decay": c.train.weight_decay} if c.train.weight_decay > 0 else {}
        self.opt = opt(self.model.parameters(), lr=c.train.learning_rate, **kwargs)
        self.settings = dataclasses.replace(c.schedule, method="psg")
        self.mode = candidate_mode(self.windows, c)
        self._cands: dict = {}

    def _features(self, feat):
        import torch

        f = torch.as_tensor(feat.astype(np.int64)).to(self.device)
        return [torch.nn.functional.one_hot(f[t], self.windows.num_features).float() for t in range(len(f))]

    def forward(self, ids, epoch, scale: float = 1.0):
        """Sum of class-weighted CE over this rank's windows (times ``scale``), and the sum of weights."""

        c = self.config
        if self.layout == "full":
            num = den = 0.0
            for k in ids:
                pairs, labels = self.windows.global_training_pairs(
                    int(k), c.data.neg_mult, c.train.seed, epoch
                )
                xs = self._features(self.windows.global_features(int(k)))
                t = int(self.windows.targets[int(k)])
                es = [_edge_index(s).to(self.device) for s in self.graph.snapshots[self.windows.history(t)]]
                src, dst = (e.to(self.device) for e in _ends(pairs))
                n, d = self._weighted_ce(self.ddp(xs, es, src, dst), labels, scale)
                num, den = num + n, den + d
            return num, den
        wins = [self.windows.get(int(k)) for k in ids]
        samples = [self.windows.training_pairs(w.index, c.data.neg_mult, c.train.seed, epoch) for w in wins]
        feat, es, _, pairs = _union(wins, [s[0] for s in samples])
        es = [e.to(self.device) for e in es]
        logits = self.ddp(self._features(feat), es, *(e.to(self.device) for e in _ends(pairs)))
        return self._weighted_ce(logits, np.concatenate([s[1] for s in samples]), scale)

    def _weighted_ce(self, logits, labels: np.ndarray, scale: float):
        import torch

        labels = torch.as_tensor(labels.astype(np.int64)).to(self.device)
        weights = torch.as_tensor(np.asarray(self.config.train.class_weights, np.float32), device=self.device)
        weights = weights[labels] * scale
        ce = torch.nn.functional.cross_entropy(logits, labels, reduction="none")
        return (weights * ce).sum(), weights.sum()

    def train_epoch(self, epoch: int) -> dict:
        import torch
        import torch.distributed as dist

        c = self.config
        sched = schedule(
            self.costs, self.world, c.train.batch_size, self.settings, seed=c.train.seed, epoch=epoch
        )
        split = self.windows.splits["train"]
        start, start_cpu = time.perf_counter(), time.process_time()
        loss_total = weight_total = 0.0
        self.model.train()
        for step in sched.steps:
            mine = split[np.asarray(step[self.rank], np.int64)] if self.rank < len(step) else []
            if len(mine):
                num, den = self.forward(mine, epoch)
            else:  # no window on this rank (a short last step): run one with weight 0 for DDP's all-reduce
                num, den = self.forward(split[np.asarray(step[0][:1], np.int64)], epoch, scale=0.0)
            stats = torch.stack([num.detach(), den.detach()])
            if self.world > 1:
                dist.all_reduce(stats)
            loss = num * self.world / stats[1].clamp_min(1e-12)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()  # DDP averages over ranks: sum over all windows / all weights
            self.opt.step()
            loss_total += float(stats[0])
            weight_total += float(stats[1])
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # the last step's optimiser update inside the epoch
        seconds = time.perf_counter() - start
        cpu = torch.tensor([time.process_time() - start_cpu], dtype=torch.float64, device=self.device)
        if self.world > 1:
            dist.all_reduce(cpu)  # CPU seconds of all ranks
        return {
            "loss": loss_total / max(weight_total, 1e-12),
            "epoch_seconds": seconds,
            "epoch_cpu_seconds": float(cpu),
        }

    def evaluate(self, split: str) -> dict:
        import torch

        self.model.eval()
        emb = {}
        ids = np.arange(len(self.windows.splits[split]))
        with torch.no_grad():
            size = self.config.eval.batch_size
            for lo in range(0, len(ids), size):
                wins = [self.windows.get(int(self.windows.splits[split][k])) for k in ids[lo : lo + size]]
                feat, es, offsets, _ = _union(wins)
                h = self.encoder(self._features(feat), [e.to(self.device) for e in es])
                for w, off in zip(wins, offsets):
                    emb[w.index] = h[off : off + w.num_local]
        scores = lambda e: self.head.pair_scores(e).cpu().numpy()  # noqa: E731
        return evaluate_link_windows(self.windows, emb, scores, self.mode, self.config.eval, self._cands)


def _worker(
    rank: int, world: int, config: Config, out: str, port: int, threads: int, layout: str, device: str = "cpu"
) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    if device == "cuda":
        torch.cuda.set_device(rank)
    if world > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("nccl" if device == "cuda" else "gloo", rank=rank, world_size=world)
    runner = Runner(config, rank, world, layout, device)
    history = []
    out_dir = Path(out)
    metrics = (out_dir / "metrics.jsonl").open("w") if rank == 0 else None
    epochs = config.train.epochs
    for epoch in range(1, epochs + 1):
        row = {"epoch": epoch, **runner.train_epoch(epoch)}
        if rank == 0 and (epoch % config.eval.every == 0 or epoch == epochs):
            for split in ("val", "test"):
                r = runner.evaluate(split)
                row[f"{split}_map"], row[f"{split}_mrr"] = r["map"], r["mrr"]
        if world > 1:
            dist.barrier()
        if rank == 0:
            history.append(row)
            metrics.write(json_text(row) + "\n")
            metrics.flush()
            evals = f"  val MAP {row['val_map']:.4f}" if "val_map" in row else ""
            print(f"epoch {epoch}  loss {row['loss']:.4f}{evals}  {row['epoch_seconds']:.2f}s", flush=True)
    if rank == 0:
        metrics.close()
        atomic_write_text(
            out_dir / "summary.json", json_text(summarize(config, runner, history, world), indent=2)
        )
    if world > 1:
        dist.destroy_process_group()


def summarize(config: Config, runner: Runner, history: list[dict], world: int) -> dict:
    evaluated = [r for r in history if "val_map" in r and not math.isnan(r["val_map"])]
    best = max(evaluated, key=lambda r: r["val_map"]) if evaluated else history[-1]
    timed = [r["epoch_seconds"] for r in history[1:]] or [history[0]["epoch_seconds"]]
    pick = ("loss", "val_map", "val_mrr", "test_map", "test_mrr")
    return {
        "name": config.name,
        "system": "pytorch-geometric-temporal+ddp",
        "layout": runner.layout,
        "dataset": runner.graph.name,
        "model": config.model.name,
        "schedule": "psg",
        "devices": world,
        "device": str(runner.device.type),
        "windows": {s: int(len(v)) for s, v in runner.windows.splits.items()},
        "eval_candidates": runner.mode,
        "epochs": len(history),
        "final": {k: history[-1].get(k) for k in pick},
        "best": {"epoch": best["epoch"], **{k: best.get(k) for k in pick}},
        "median_epoch_seconds": statistics.median(timed),
        "first_epoch_seconds": history[0]["epoch_seconds"],
        "config": to_dict(config),
    }


def run(
    config: Config,
    out_dir: str | Path,
    procs: int = 1,
    threads: int = 1,
    layout: str = "full",
    device: str = "cpu",
) -> dict:
    """Train ``config`` with PyG-Temporal + DDP on ``procs`` processes (CPU, or one GPU each with
    ``device="cuda"``), windows in ``layout`` (see the module doc); returns the summary."""
    import torch
    import torch.multiprocessing as mp

    if layout not in LAYOUTS:
        raise UserError(f"unknown --layout {layout!r}: choose one of {', '.join(LAYOUTS)}")
    if device not in DEVICES:
        raise UserError(f"unknown --device {device!r}: choose one of {', '.join(DEVICES)}")
    if device == "cuda" and torch.cuda.device_count() < procs:
        raise UserError(
            f"--device cuda --procs {procs} needs {procs} GPU(s) but torch sees {torch.cuda.device_count()}: "
            "use fewer processes, or --device cpu"
        )
    check_supported(config)  # before the run's folder exists
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    dump_config(config, out / "config.yaml")
    args = (procs, config, str(out), _free_port(), threads, layout, device)
    if procs == 1:
        _worker(0, *args)
    else:
        mp.spawn(_worker, args=args, nprocs=procs, join=True)
    return json.loads((out / "summary.json").read_text())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=None, help="our YAML config (default: the embedded default)")
    p.add_argument("--out", required=True, help="run directory (metrics.jsonl, summary.json)")
    p.add_argument("--procs", type=int, default=2, help="DDP processes (gloo on CPU, NCCL on GPU)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="full",
        help="full: each window on the whole node set, one after the other (PyG-T's usual loop); "
        "packed: active nodes + background node, a rank's windows as one disjoint union",
    )
    p.add_argument(
        "--device", choices=DEVICES, default="cpu", help="cpu, or cuda: one GPU per process (NCCL)"
    )
    p.add_argument("overrides", nargs="*", help="key=value config overrides")
    a = p.parse_args(argv)
    config = load_config(a.config, a.overrides)
    summary = run(config, a.out, a.procs, a.threads, a.layout, a.device)
    print(json.dumps({k: summary[k] for k in ("best", "median_epoch_seconds")}), file=sys.stderr)
    return 0
