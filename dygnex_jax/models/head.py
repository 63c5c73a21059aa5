"""Heads. Link prediction (EvolveGCN): MLP on the concatenated embeddings of the two end nodes -> 2 logits.

The first layer on ``[h_src, h_dst]`` splits into a src half and a dst half, ``h_src W_s + h_dst W_d + b``:
it is computed once per node and gathered per pair, so its cost scales with the N nodes instead of the Q
target pairs (Q is 5-25x N with 10 negatives per positive). Same parameters and values as a ``Dense`` on
the concatenation (``hidden/kernel`` [2H, hidden]), up to float32 reassociation.

Compute dtype (``model.dtype``): a head computes in its ``dtype`` (the embeddings' and the [Q, hidden]
pair activations'; float32 parameters cast where used) and returns float32 logits / values, so the loss
is float32 in either. The evaluation scorers (``dense_pair_scores``, ``pair_scores``) run in float32.

Both heads start as their PyTorch twins do (``torch.nn.Linear``'s uniform weights and biases; EvolveGCN's
classifier and PyG-Temporal's examples use it), like the encoders start as PyG-T's layers.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from .layers import TORCH_LINEAR_KERNEL, DenseParams, compute_dtype, torch_linear, torch_uniform

HEAD_CHUNK_AUTO = {"cpu": 4096}  # model.head_chunk=-1 (auto) per JAX backend; others: HEAD_CHUNK_ACCELERATOR
HEAD_CHUNK_ACCELERATOR = 65536
DENSE_ROWS = 256  # rows of the [rows, D] block dense_pair_scores accumulates (fastest of 64-256 on CPU)


class _SplitDense(nn.Module):
    """``Dense(features)`` on ``[h_src, h_dst]`` as per-node src and dst halves (``nn.Dense``'s params,
    initialised as ``torch.nn.Linear(2 * half, features)``)."""

    features: int

    @nn.compact
    def __call__(self, h: jax.Array) -> tuple[jax.Array, jax.Array]:
        """[N, H] -> the src and dst halves [N, features], in h's dtype."""
        half = h.shape[-1]
        kernel = self.param("kernel", TORCH_LINEAR_KERNEL, (2 * half, self.features)).astype(h.dtype)
        bias = self.param("bias", torch_uniform(2 * half), (self.features,)).astype(h.dtype)
        return h @ kernel[:half] + bias, h @ kernel[half:]


def head_chunk(setting: int, backend: str) -> int:
    """The pairs per chunk of ``model.head_chunk``: the setting, or for -1 (auto) the backend's
    (``HEAD_CHUNK_AUTO``: measured best of 1,024-65,536 for AS-733's 2.3M-pair step on 2 CPU cores)."""
    return HEAD_CHUNK_AUTO.get(backend, HEAD_CHUNK_ACCELERATOR) if setting == -1 else setting


def _pair_logits(
    a: jax.Array, b: jax.Array, kernel: jax.Array, bias: jax.Array, src: jax.Array, dst: jax.Array
) -> jax.Array:
    """Logits [C, 2] of the pairs (src, dst) [C] from the per-node halves a, b [N, hidden].

    The output layer runs as one matrix-vector product per logit, not as a [C, hidden] @ [hidden, 2]
    matmul: the transpose of a matrix-vector product is an outer product (a fused broadcast multiply),
    where the matmul's backward is a [C, 2] @ [2, hidden] product that XLA's CPU dot runs slowly. Same
    values up to float32 summation order; AS-733's EGCN-O step under IBM's protocol (2.4M pairs, hidden
    113) 0.80x the time on 2 CPU cores (README, What a step pays)."""
    r = jax.nn.relu(a[src] + b[dst])
    return jnp.stack([r @ kernel[:, j] for j in range(kernel.shape[1])], axis=-1) + bias


class LinkHead(nn.Module):
    """``hidden``: the MLP's width. ``chunk``: with more than this many pairs (0: never) the pairs run in
    chunks of ``chunk`` under ``jax.checkpoint``: the backward pass recomputes a chunk's [chunk, hidden]
    activations instead of keeping [Q, hidden] of them, so the head's memory no longer grows with Q
    beyond its [Q, 2] logits (Q is 10-25x the nodes with 10 training negatives per positive). Same
    parameters; the logits are the unchunked ones row by row, gradients equal up to float32 summation order.
    ``dtype``: the compute dtype (``model.dtype``); the logits are float32."""

    hidden: int
    chunk: int = 0
    dtype: str = "float32"  # model.dtype

    @nn.compact
    def __call__(self, h: jax.Array, src: jax.Array, dst: jax.Array) -> jax.Array:
        """Node embeddings [N, H], pair ends [Q] -> [Q, 2] float32 logits (class 0: non-edge, class 1: edge)."""
        dt = compute_dtype(self.dtype)
        a, b = _SplitDense(self.hidden, name="hidden")(h.astype(dt))
        out = DenseParams(self.hidden, 2, TORCH_LINEAR_KERNEL, torch_uniform(self.hidden), name="out")()
        kernel, bias = (p.astype(dt) for p in out)
        if not 0 < self.chunk < src.shape[0]:
            return _pair_logits(a, b, kernel, bias, src, dst).astype(jnp.float32)
        ends = jnp.stack([src, dst], axis=1)
        logits = jax.checkpoint(_pair_logits)
        out = jax.lax.map(lambda e: logits(a, b, kernel, bias, e[:1], e[1:])[0], ends, batch_size=self.chunk)
        return out.astype(jnp.float32)


def _score_parts(head_params: dict, h_src: jax.Array, h_dst: jax.Array):
    """A pair's score ``relu(a[s] + b[d]) @ v + c`` in parts: a [S, hidden] (first layer's src half and
    bias), b [D, hidden] (its dst half), v [hidden] (edge minus non-edge output column) and c (their bias)."""
    w1, b1 = head_params["hidden"]["kernel"], head_params["hidden"]["bias"]
    w2, b2 = head_params["out"]["kernel"], head_params["out"]["bias"]
    half = h_src.shape[-1]
    return h_src @ w1[:half] + b1, h_dst @ w1[half:], w2[:, 1] - w2[:, 0], b2[1] - b2[0]


def dense_pair_scores(head_params: dict, h_src: jax.Array, h_dst: jax.Array) -> jax.Array:
    """Scores of every (src, dst) pair, ``logit_edge - logit_nonedge`` [S, D], without materialising
    the [S*D, 2H] concatenation: the first layer splits into a src half and a dst half.

    The score is ``sum_k relu(a[s, k] + b[d, k]) * v[k]``, summed one hidden unit k at a time into an
    [R, D] block of R rows (a loop over k, not a matmul over an [R, D, hidden] activation): every pass
    stays in cache, 4.6-5.3x faster than the matmul form on 2 CPU cores (L = 2,000-6,000, hidden
    100-128; ``tools/bench_eval_scores.py``). Same values up to float32 summation order.

    Args: head_params: the LinkHead's params; h_src [S, H]; h_dst [D, H].
    """
    a, b, v, c = _score_parts(head_params, h_src, h_dst)
    b_t = b.T  # [hidden, D]

    def row(a_i):
        def unit(k, acc):
            return acc + jax.nn.relu(a_i[k] + b_t[k]) * v[k]

        return jax.lax.fori_loop(0, v.shape[0], unit, jnp.zeros(b_t.shape[1], a.dtype), unroll=4)

    return jax.lax.map(row, a, batch_size=DENSE_ROWS) + c


def dense_pair_scores_matmul(head_params: dict, h_src: jax.Array, h_dst: jax.Array) -> jax.Array:
    """``dense_pair_scores`` in the matmul form (64 rows at a time: ``relu(a_i + b) @ v`` over an
    [64, D, hidden] activation): the reference its values are tested against and its speed measured
    beside (``tools/bench_eval_scores.py``)."""
    a, b, v, c = _score_parts(head_params, h_src, h_dst)
    return jax.lax.map(lambda a_i: jax.nn.relu(a_i[None, :] + b) @ v, a, batch_size=64) + c


def pair_scores(head_params: dict, h: jax.Array, src: jax.Array, dst: jax.Array) -> jax.Array:
    """``dense_pair_scores`` of the pairs (src[i], dst[i]) alone: [C] scores from embeddings h [L, H] and
    pair ends [C], in chunks of pairs, never an [L, L] array (sampled evaluation candidates)."""
    h = jnp.asarray(h)
    a, b, v, c = _score_parts(head_params, h, h)  # [L, hidden] each

    def one(ends):
        return jax.nn.relu(a[ends[0]] + b[ends[1]]) @ v

    return jax.lax.map(one, jnp.stack([src, dst], axis=1), batch_size=8192) + c


class NodeHead(nn.Module):
    """Node-regression head of PyG-Temporal's examples: ReLU, then ``Linear(hidden, 1)``.
    Node embeddings [N, H] -> [N] float32 predicted values (computed in ``dtype``, ``model.dtype``)."""

    dtype: str = "float32"  # model.dtype

    @nn.compact
    def __call__(self, h: jax.Array) -> jax.Array:
        dt = compute_dtype(self.dtype)
        return torch_linear(1, h.shape[-1], "out", dt)(jax.nn.relu(h.astype(dt)))[:, 0].astype(jnp.float32)
