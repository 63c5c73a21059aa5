"""What tests share: the small in-process ``Trainer`` factory and its base overrides, and, for the tests
that run the CLI or a tool in a subprocess, the runner and its assertions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

# --- small in-process trainers ----------------------------------------------------------------------

# Window 4 and a model 8 wide: the link-prediction runs on the toy graph (conftest.make_toy_graph).
SMALL = ["data.window=4", "model.hidden=8", "model.head_hidden=8"]
# The training-loop tests (test_train.py, test_checkpoint.py): 2 negatives per positive, 2 devices.
LOOP = [*SMALL, "data.neg_mult=2", "parallel.devices=2"]
# The exactness tests (test_parallel.py, test_partition.py): 3 negatives, 8 windows a step; the model and
# the device count are each test's own.
EXACT = [*SMALL, "train.batch_size=8", "data.neg_mult=3"]


def make_trainer(
    *overrides: str, base=SMALL, graph=None, model: str | None = None, devices: int | None = None
):
    """A ``Trainer`` of ``load_config(None, [*base, model.name=MODEL, parallel.devices=DEVICES,
    *overrides])`` (``model`` / ``devices`` only when given) on ``graph`` (default: the toy graph)."""
    from conftest import make_toy_graph

    from dygnex_jax.config import load_config
    from dygnex_jax.train import Trainer

    keys = [f"model.name={model}"] if model is not None else []
    keys += [f"parallel.devices={devices}"] if devices is not None else []
    config = load_config(None, [*base, *keys, *overrides])
    return Trainer(config, graph=graph if graph is not None else make_toy_graph())


def run_python(args, *, timeout: float, fake_devices: int = 0, cwd=REPO) -> subprocess.CompletedProcess:
    """``python ARGS`` on the CPU platform (``fake_devices`` > 0: that many fake CPU devices), output
    captured as text."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    if fake_devices:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={fake_devices}"
    cmd = [sys.executable, *map(str, args)]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def run_cli(*args, timeout: float = 300, fake_devices: int = 0, cwd=REPO) -> subprocess.CompletedProcess:
    """``python -m dygnex_jax ARGS``."""
    return run_python(["-m", "dygnex_jax", *args], timeout=timeout, fake_devices=fake_devices, cwd=cwd)


def run_tool(script: str, *args, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python tools/SCRIPT ARGS`` with 8 fake CPU devices."""
    return run_python([REPO / "tools" / script, *args], timeout=timeout, fake_devices=8)


def smoke_run(out, *overrides: str) -> tuple[list[list], dict]:
    """``train --config configs/smoke.yaml --out OUT OVERRIDES train.checkpoint_every=0`` on 8 fake
    devices -> (every epoch's loss and val / test MAP and MRR, summary.json)."""
    import json

    proc = run_cli(
        "train", "--config", "configs/smoke.yaml", "--out", out, *overrides, "train.checkpoint_every=0",
        timeout=900, fake_devices=8,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    keys = ("loss", "val_map", "val_mrr", "test_map", "test_mrr")
    rows = [[r[k] for k in keys] for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())]
    return rows, json.loads((out / "summary.json").read_text())


def assert_one_line_error(proc, *fragments):
    """``proc`` exited 2 with exactly one ``error: ...`` line on stderr that contains every fragment."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


def dense_adjacency(n: int, s, r, w) -> tuple[np.ndarray, np.ndarray]:
    """(A [n, n], loops [n]) of a weighted edge list: A[dst, src] the summed weights of the edges without
    self-loops, loops the graph's own self-loop weight of every node, 1 where it has none (PyG's
    ``add_remaining_self_loops``); zero-weight (padding) edges are dropped."""
    a, loops = np.zeros((n, n)), np.ones(n)
    for si, ri, wi in zip(s, r, w):
        if wi == 0:
            continue
        if si == ri:
            loops[ri] = wi
        else:
            a[ri, si] += wi
    return a, loops


def dense_laplacian(n: int, s, r, w) -> np.ndarray:
    """L_hat = -D^-1/2 A D^-1/2 of PyG's ``ChebConv`` (``dense_adjacency``: self-loops removed; D the degrees
    over sources, A's column sums), float64."""
    a, _ = dense_adjacency(n, s, r, w)  # a[dst, src]: message src -> dst
    deg = a.sum(0)
    inv = np.divide(1.0, np.sqrt(deg), out=np.zeros(n), where=deg > 0)
    return -(np.diag(inv) @ a @ np.diag(inv))


def dense_gcn(h, s, r, w) -> np.ndarray:
    """D^-1/2 (A + S) D^-1/2 h in numpy (``dense_adjacency``; D the row sums of A + S)."""
    a, loops = dense_adjacency(len(h), s, r, w)
    d = (a + np.diag(loops)).sum(1)
    return np.diag(d**-0.5) @ (a + np.diag(loops)) @ np.diag(d**-0.5) @ h
