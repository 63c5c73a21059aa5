"""EvolveGCN-O (Pareja et al., AAAI 2020; PyG-Temporal's ``EvolveGCNO``): GCN weights evolved over time by
a GRU that reads the previous weights only.

``gru="rows"`` (default, PyG-Temporal's form): ``torch.nn.GRU`` applied to the rows of the weight matrix
Q [in, out], Q as both input and hidden state (``Q' = GRU(Q, Q)``). ``gru="matrix"`` (IBM's reference code):
the matrix GRU of ``layers.MatrixGRU`` (left-multiplied [in, in] gate weights).

The weights restart from the learned initial matrices in every window (the EvolveGCN protocol; PyG-Temporal
keeps them across calls until ``reinitialize_weight``), and their evolution does not depend on the graph, so
all windows packed on a device share the weights of time offset tau: one matrix per layer per tau serves every
window exactly. Activation: ReLU after every layer (the paper: RReLU).

The recurrence is exposed in pieces for snapshot partition (parallel.py pipelines it over devices):
``initial_carry(n)`` (the learned initial weights), ``advance(carry, xs)`` over a slice of time offsets
-> (evolved weights, embeddings at the slice's last valid offset); ``__call__`` = advance over all W.

Flat layout (``batch["senders"]`` [E_total] over the node-time grid, ids ``tau * N + node``; see
``models.FLAT_LAYOUT_MODELS``): the same scan evolves the weights alone (no graph), then every layer runs one
batched matmul ``[W, N, in] x [W, in, out]`` and one GCN over all W*N node-time rows at once, so the edges
cost their sum over offsets instead of W times the largest offset. Same parameters, same values.

Last layout (edges [1, E] of the last offset alone, ``config.LAST_OFFSET_MODELS``): the output at offset
W-1 reads only that offset's graph and inputs (layer l at tau uses layer l-1 at tau and the evolved
weights of tau), so after the weights evolve, each layer runs once on N node rows.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.typing import DTypeLike

from .graph_view import at_offset, flat_graph, offset_graphs
from .layers import (
    LOCAL,
    Comm,
    GRUCell,
    MatrixGRU,
    activation,
    compute_dtype,
    gcn_aggregate,
    gcn_coefficients,
    node_inputs,
    rows_times,
    time_scan,
)


def _offsets(batch: dict) -> int:
    """W, the time offsets of a packed batch's node inputs."""
    return (batch["x"] if "x" in batch else batch["feat"]).shape[0]


class _Step(nn.Module):
    dims: tuple[int, ...]
    gru: str
    comm: Comm = LOCAL
    dtype: DTypeLike = jnp.float32  # compute dtype (model.dtype): of the evolved weights too
    act: str = "relu"  # model.activation (layers.ACTIVATIONS)

    @nn.compact
    def __call__(self, carry, xs):
        weights, h_prev = carry
        graph, valid = xs  # graph: this offset's GraphsTuple (nodes = inputs); None: the weights alone
        if self.gru == "rows":
            new_weights = tuple(
                GRUCell(w.shape[1], self.dtype, name=f"evolve_{i}")(w, w) for i, w in enumerate(weights)
            )
        else:
            new_weights = tuple(
                MatrixGRU(self.dims[i], self.dims[i + 1], self.dtype, name=f"evolve_{i}")(w)
                for i, w in enumerate(weights)
            )
        # a padded (invalid) time offset leaves the carry as it was
        keep = lambda new, old: jnp.where(valid, new, old)  # noqa: E731
        if graph is None:
            # flat layout: the weights alone; ys = the weights the GCN of this offset uses
            return (jax.tree.map(keep, new_weights, weights), None), new_weights
        h = graph.nodes
        coef = gcn_coefficients(graph, self.comm)  # the offset's, shared by every layer
        for w in new_weights:
            h = activation(self.act)(gcn_aggregate(graph._replace(nodes=rows_times(h, w)), self.comm, coef))
        return (jax.tree.map(keep, new_weights, weights), keep(h, h_prev)), None


class EvolveGCNO(nn.Module):
    """Encoder: packed batch -> node embeddings [N, hidden] at the last history snapshot."""

    num_features: int
    hidden: int
    layers: int = 2
    gru: str = "rows"
    comm: Comm = LOCAL  # vertex partition: how to reach other devices' nodes (identity by default)
    remat: str = "none"  # model.remat: rematerialise the time scan's body (layers.time_scan)
    dtype: str = "float32"  # model.dtype: the activations' dtype (layers.compute_dtype)
    act: str = "relu"  # model.activation after every GCN layer (layers.ACTIVATIONS)

    def setup(self):
        dims = (self.num_features,) + (self.hidden,) * self.layers
        init = nn.initializers.glorot_uniform()
        self.initial_weights = tuple(
            self.param(f"gcn_{i}", init, (dims[i], dims[i + 1])) for i in range(self.layers)
        )
        self.step = time_scan(_Step, self.remat)(
            dims, self.gru, self.comm, compute_dtype(self.dtype), self.act
        )

    def initial_carry(self, n: int):
        """The carry at the start of a window: the learned initial GCN weights in the compute dtype (``n``
        is unused)."""
        del n
        return tuple(w.astype(compute_dtype(self.dtype)) for w in self.initial_weights)

    def advance(self, carry, xs: dict):
        """Run the time offsets of ``xs`` (feat [T, N] or x [T, N, F], senders/receivers/edge_mask [T, E],
        optional valid [T]) from ``carry``. Returns (carry after them, [N, hidden] embeddings at the last
        valid offset; zeros if none is valid)."""
        x = node_inputs(xs, self.num_features, self.dtype, codes=True)  # [T, N, F] or codes [T, N]
        valid = xs.get("valid", jnp.ones(x.shape[0], bool))
        seq = (offset_graphs(xs, x), valid)
        h0 = jnp.zeros((x.shape[1], self.hidden), compute_dtype(self.dtype))
        (weights, h), _ = self.step((carry, h0), seq)
        return weights, h

    def __call__(self, batch: dict) -> jax.Array:
        if batch["senders"].ndim == 1:
            return self.flat(batch)
        if batch["senders"].shape[0] < _offsets(batch):
            return self.last(batch)
        return self.advance(self.initial_carry(batch["node_window"].shape[0]), batch)[1]

    def evolved_weights(self, valid: jax.Array) -> tuple[jax.Array, ...]:
        """The GCN weights of every time offset, per layer [W, in, out] (``valid`` [W]: a padded offset
        keeps the previous weights): the recurrence alone, which never reads the graph."""
        _, per_tau = self.step((self.initial_carry(0), None), (None, valid))
        return per_tau

    def last(self, batch: dict) -> jax.Array:
        """``__call__`` on a last-layout batch (``graphs``: edges [1, E] of the last offset alone, node
        inputs of all W offsets): the weights evolve over all W offsets, then each layer's GCN runs on
        the last offset's graph alone — the only one the output reads — so the node work is N rows, not
        W x N. The last offset of a whole-window step is always valid. Returns [N, hidden]."""
        if self.comm != LOCAL:
            raise ValueError(
                "the last-offset layout holds one device's whole graph: vertex partition needs 'scan'"
            )
        last = {k: batch[k][-1:] for k in ("x", "feat") if k in batch}
        x = node_inputs(last, self.num_features, self.dtype, codes=True)
        graph = at_offset(offset_graphs(batch, x), 0)  # W-1
        per_tau = self.evolved_weights(jnp.ones(_offsets(batch), bool))
        h = graph.nodes  # [N, F]
        for w in per_tau:
            h = activation(self.act)(gcn_aggregate(graph._replace(nodes=rows_times(h, w[-1]))))
        return h

    def flat(self, batch: dict) -> jax.Array:
        """``__call__`` on a flat-layout batch (edges [E_total] over the W*N node-time rows): the weights
        of every offset first (their evolution never reads the graph), then each layer's GCN over all
        offsets at once. Returns the [N, hidden] embeddings at the last valid offset (zeros if none)."""
        if self.comm != LOCAL:
            raise ValueError(
                "the flat edge layout holds one device's whole graph: vertex partition needs 'scan'"
            )
        x = node_inputs(batch, self.num_features, self.dtype, codes=True)  # [W, N, F] or codes [W, N]
        w_len, n = x.shape[:2]
        valid = batch.get("valid", jnp.ones(w_len, bool))
        per_tau = self.evolved_weights(valid)  # per layer [W, in, out]
        graph = flat_graph(batch, x.reshape(w_len * n, *x.shape[2:]))  # the W x (K+1) node-time graphs
        h = x
        for w in per_tau:
            hw = jax.vmap(rows_times)(h, w).reshape(w_len * n, w.shape[-1])
            h = activation(self.act)(gcn_aggregate(graph._replace(nodes=hw))).reshape(w_len, n, -1)
        last = w_len - 1 - jnp.argmax(valid[::-1])  # the last valid offset
        return jnp.where(valid.any(), h[last], 0.0)
