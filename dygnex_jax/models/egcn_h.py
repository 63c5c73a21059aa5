"""EvolveGCN-H (Pareja et al., AAAI 2020; PyG-Temporal's ``EvolveGCNH``): the GCN weights of every layer are
the hidden state of a GRU whose input is the top-k pooled node embeddings of the layer's input.

Per layer and time offset: ``y = tanh(X p / |p|)``; the k nodes of highest score (k = the layer's input
width, PyG-Temporal's ``ratio = in_channels / num_nodes``), in descending score order, give
``X~ = X[top] * y[top]`` [k, in]; ``Q' = GRU(X~, Q)`` with ``torch.nn.GRU``'s gates over the rows of
Q [in, out]; ``H = GCN(X, Q')``. ReLU after every layer (the paper: RReLU).

Pooling is per window: each of the K packed window slots evolves its own weights (``[K, in, out]``), and
the node matmul is a ``ragged_dot`` over the window-contiguous nodes. The padding nodes (slot K, no edge
to a window's node) borrow slot K-1's weights instead of evolving their own: their embeddings are never
read, and a GRU of [in, out] rows per slot is the largest cost of an EGCN-H step at one window a device;
they join slot K-1's group of the ``ragged_dot`` (K groups, not K + 1: its lowering on CPU and GPU is one
masked dense product per group). A window's
background node stands for ``node_count`` inactive nodes, all with the same embedding, and fills that
many top-k slots, so the pooled rows are those of the full graph. The weights restart from the learned
initial matrices in every window (EvolveGCN's protocol; PyG-Temporal keeps them across calls).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
from jax.typing import DTypeLike

from .graph_view import offset_graphs
from .layers import (
    GRUCell,
    activation,
    compute_dtype,
    gcn_aggregate,
    is_codes,
    node_inputs,
    rows_times,
    scan_steps,
)


def window_topk_index(
    score: jax.Array, node_window: jax.Array, node_count: jax.Array, num_slots: int, k: int
) -> tuple[jax.Array, jax.Array]:
    """The k highest-scoring nodes of every window slot, a node counted ``node_count`` times.

    Args: score [N] (already squashed); node_window [N] slot of every node (0..num_slots-1); node_count
      [N] int multiplicities. Returns (idx [num_slots, k] node ids in descending score order, keep
      [num_slots, k] bool: False past the slot's node count, where the pooled row is zero).
    """
    n = score.shape[0]
    order = jnp.lexsort((-score, node_window))  # by slot, then descending score (stable)
    cum = jnp.cumsum(node_count[order])  # inclusive running count in that order
    totals = jraph.segment_sum(node_count, node_window, num_segments=num_slots)
    start = jnp.cumsum(totals) - totals
    ranks = jnp.arange(k)
    pos = jnp.searchsorted(cum, start[:, None] + ranks[None, :], side="right")  # [slots, k]
    return order[jnp.minimum(pos, n - 1)], ranks[None, :] < totals[:, None]


def _uniform(bound: float):
    return lambda key, shape, dtype=jnp.float32: jax.random.uniform(key, shape, dtype, -bound, bound)


class _Step(nn.Module):
    dims: tuple[int, ...]
    dtype: DTypeLike = jnp.float32  # compute dtype (model.dtype): of the evolved weights too
    act: str = "relu"  # model.activation (layers.ACTIVATIONS)

    @nn.compact
    def __call__(self, carry, xs):
        weights, _ = carry
        graph, node_window, node_count = xs  # graph: this offset's GraphsTuple, n_node = window_sizes
        h, real = graph.nodes, graph.n_node.shape[0] - 1  # the K window slots; slot K: the padding nodes
        # the padding nodes (last in the node order) use slot K-1's weights: K groups for the ragged_dot,
        # whose CPU/GPU lowering is a masked dense product per group (K + 1 groups cost K + 1 products)
        groups = graph.n_node[:-1].at[-1].add(graph.n_node[-1])
        node_slot = jnp.minimum(node_window, real - 1)
        new_weights = []
        for i, w in enumerate(weights):
            fan_in = self.dims[i]
            p = self.param(f"pool_{i}", _uniform(fan_in**-0.5), (fan_in,))  # PyG's TopKPooling init
            # scores in float32 whatever h's dtype: bfloat16 would tie nodes the top-k must order
            score = jnp.tanh(rows_times(h if is_codes(h) else h.astype(jnp.float32), p) / jnp.linalg.norm(p))
            # the pooled rows [K, in, in]: the top-k rows (or codes) times their scores, zero past a slot's nodes
            idx, keep = window_topk_index(score, node_window, node_count, real, fan_in)
            gru = GRUCell(self.dims[i + 1], self.dtype, fan_in, name=f"evolve_{i}")
            w = gru(h[idx], w, jnp.where(keep, score[idx], 0.0))  # [K, in, out]
            if is_codes(h):  # the one-hot rows times their slot's weights: a gather
                hw = w[node_slot, h]
            else:  # every window slot (graph) by its own weights
                hw = jax.lax.ragged_dot(h, w, groups)
            new_weights.append(w)
            h = activation(self.act)(gcn_aggregate(graph._replace(nodes=hw)))
        return (tuple(new_weights), h), None


class EvolveGCNH(nn.Module):
    """Encoder: packed batch -> node embeddings [N, hidden] at the last history snapshot."""

    num_features: int
    hidden: int
    layers: int = 2
    remat: str = "none"  # model.remat: rematerialise the time scan's body (layers.time_scan)
    dtype: str = "float32"  # model.dtype: the activations' dtype (layers.compute_dtype)
    act: str = "relu"  # model.activation after every GCN layer (layers.ACTIVATIONS)

    @nn.compact
    def __call__(self, batch: dict) -> jax.Array:
        x = node_inputs(batch, self.num_features, self.dtype, codes=True)
        dt = compute_dtype(self.dtype)
        dims = (self.num_features,) + (self.hidden,) * self.layers
        n = batch["node_window"].shape[0]
        slots = batch["window_sizes"].shape[0] - 1  # the window slots; the padding nodes evolve no weights
        init = nn.initializers.glorot_uniform()
        weights = tuple(
            jnp.broadcast_to(
                self.param(f"gcn_{i}", init, (dims[i], dims[i + 1])).astype(dt),
                (slots, dims[i], dims[i + 1]),
            )
            for i in range(self.layers)
        )
        w_len = batch["senders"].shape[0]
        per_tau = lambda a: jnp.broadcast_to(a, (w_len, *a.shape))  # noqa: E731
        xs = (
            offset_graphs(batch, x),
            per_tau(batch["node_window"]),
            per_tau(batch["node_count"]),
        )
        step = scan_steps(_Step, remat=self.remat, dims=dims, dtype=dt, act=self.act)
        (_, h), _ = step((weights, jnp.zeros((n, self.hidden), dt)), xs)
        return h
