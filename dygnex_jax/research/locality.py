"""Does a gather/scatter pass cost more the wider the node range its indices span? (the cost model's
locality terms, ``schedule.cost.locality``)

The pass is the link head's training work per pair (models/head.py): gather the src half ``a[s]`` and
dst half ``b[d]`` of [N, hidden] node rows, ``relu(a[s] + b[d]) @ v``, summed, and its gradient with
respect to a and b (two scatter-adds of [Q, hidden] rows), in chunks of 4,096 pairs under
``jax.checkpoint`` as the head runs them. The Q pairs fall in blocks of ``span`` consecutive nodes (a
window's nodes are consecutive in a packed step, and its pairs index only them); every span is timed on
the same N, Q and hidden, so the passes differ only in how far apart the rows they touch lie.
Timed in rounds (every span once per round, ``rounds`` rounds after a warm-up round), medians.
"""

from __future__ import annotations

import time

import numpy as np

CHUNK = 4096


def pass_fn(hidden: int):
    """The jitted gradient of the pair pass with respect to the node halves (a, b)."""
    import jax
    import jax.numpy as jnp

    def loss(a, b, v, ends):
        def chunk(e):
            return jnp.sum(jax.nn.relu(a[e[0]] + b[e[1]]) @ v)

        return jnp.sum(jax.lax.map(jax.checkpoint(chunk), ends))

    return jax.jit(jax.grad(loss, argnums=(0, 1)))


def pairs_within(nodes: int, pairs: int, span: int, rng: np.random.Generator) -> np.ndarray:
    """[Q / CHUNK, 2, CHUNK] pair ends, each pair inside one block of ``span`` consecutive nodes (the
    blocks drawn at random, sorted as a packed step's windows are)."""
    span = min(span, nodes)
    block = np.sort(rng.integers(0, nodes // span, pairs)) * span
    ends = np.stack([block + rng.integers(0, span, pairs), block + rng.integers(0, span, pairs)])
    return ends.reshape(2, -1, CHUNK).transpose(1, 0, 2).astype(np.int32)


def time_spans(
    nodes: int, pairs: int, hidden: int, spans: list[int], rounds: int, seed: int = 0
) -> list[dict]:
    """[{"span", "ms"}] the median seconds (ms) of the pass at each span, and its ratio to the narrowest."""
    import jax
    import jax.numpy as jnp

    pairs = max(CHUNK, pairs // CHUNK * CHUNK)
    rng = np.random.default_rng(seed)
    a = jnp.asarray(rng.standard_normal((nodes, hidden)), jnp.float32)
    b, v = a + 1.0, jnp.ones(hidden, jnp.float32)
    grad = pass_fn(hidden)
    ends = {s: jnp.asarray(pairs_within(nodes, pairs, s, rng)) for s in spans}
    seconds = {s: [] for s in spans}
    for r in range(rounds + 1):  # round 0 compiles and warms up
        for s in spans:
            start = time.perf_counter()
            jax.block_until_ready(grad(a, b, v, ends[s]))
            if r:
                seconds[s].append(time.perf_counter() - start)
    base = float(np.median(seconds[spans[0]]))
    return [
        {
            "span": int(min(s, nodes)),
            "ms": 1e3 * float(np.median(seconds[s])),
            "ratio": float(np.median(seconds[s])) / base,
        }
        for s in spans
    ]
