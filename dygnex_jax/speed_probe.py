"""The machine's speed now: a fixed small program timed in a few runs, to compare with its time when a
cost model was profiled.

This machine's speed wanders (``tools/bench_drift.py``: one step's median 134–224 ms over two minutes),
so a model profiled an hour before a run prices the run at the profile's speed. ``seconds()`` times a
fixed program shaped like a GCN step — gather node rows along random edges, sum them per destination,
a dense layer — on the first device, the median of ``runs`` runs: the ratio of its time now to its time
beside the profile's rounds (``profile.time_steps`` probes between rounds and the cost model keeps the
median, ``probe_seconds``) is how much slower (> 1) or faster the machine runs now than when it was
profiled. The program never changes with the run or the data, so the ratio carries the machine's speed
and nothing of the run's.
"""

from __future__ import annotations

import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

NODES, EDGES, WIDTH, ROUNDS = 2048, 16384, 32, 40


def _program():
    # small arrays (the largest buffer 2 MB, allocated once a run: the loop re-uses its buffers), so the
    # time is the CPU's and not the host allocator's (a probe on 33 MB buffers ran 1.5x slower in a fresh
    # process than in one whose heap earlier steps had grown)
    def step(x, w, src, dst):
        def body(_, h):
            msg = jnp.take(h, src, axis=0)
            return jnp.tanh(jax.ops.segment_sum(msg, dst, num_segments=NODES) @ w)

        return jax.lax.fori_loop(0, ROUNDS, body, x).sum()

    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((NODES, WIDTH), dtype=np.float32))
    w = jnp.asarray(rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) / np.sqrt(WIDTH))
    src = jnp.asarray(rng.integers(0, NODES, EDGES, dtype=np.int32))
    dst = jnp.asarray(np.sort(rng.integers(0, NODES, EDGES, dtype=np.int32)))
    fn = jax.jit(step)
    fn(x, w, src, dst).block_until_ready()  # compiles
    return lambda: fn(x, w, src, dst).block_until_ready()


_RUN = None
# runs before the timed ones: after 2 s idle the probe ran 1.3x slower than right after training steps
WARM_SECONDS = 0.3


def seconds(runs: int = 45) -> float:
    """Median seconds of ``runs`` runs of the probe's program (compiled on the first call)."""
    global _RUN
    if _RUN is None:
        _RUN = _program()
    warm = time.perf_counter() + WARM_SECONDS
    while time.perf_counter() < warm:  # an idle CPU runs slower for a while (see WARM_SECONDS)
        _RUN()
    times = []
    for _ in range(max(runs, 1)):
        t = time.perf_counter()
        _RUN()
        times.append(time.perf_counter() - t)
    return float(statistics.median(times))
