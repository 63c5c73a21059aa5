"""EvolveGCN-O (Pareja et al., AAAI 2020; PyG-Temporal's ``EvolveGCNO``): GCN weights evolved over time by
a GRU that reads the previous weights only.

``gru="rows"`` (default, PyG-Temporal's form): ``torch.nn.GRU`` applied to the rows of the weight matrix
Q [in, out], Q as both input and hidden state (``Q' = GRU(Q, Q)``). ``gru="matrix"`` (IBM's reference code):
the matrix GRU of ``layers.MatrixGRU`` (left-multiplied [in, in] gate weights).

The weights restart from the learned initial matrices in every window (the EvolveGCN protocol; PyG-Temporal
keeps them across calls until ``reinitialize_weight``), and their evolution does not depend on the graph, so
all windows packed on a device share the weights of time offset tau: one matrix per layer per tau serves every
window exactly. Activation: ReLU after every layer (the paper: RReLU).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from .layers import GRUCell, MatrixGRU, gcn_aggregate, node_inputs, scan_steps


class _Step(nn.Module):
    dims: tuple[int, ...]
    gru: str

    @nn.compact
    def __call__(self, carry, xs):
        weights, _ = carry
        h, senders, receivers, edge_mask = xs
        if self.gru == "rows":
            new_weights = tuple(GRUCell(w.shape[1], name=f"evolve_{i}")(w, w) for i, w in enumerate(weights))
        else:
            new_weights = tuple(
                MatrixGRU(self.dims[i], self.dims[i + 1], name=f"evolve_{i}")(w)
                for i, w in enumerate(weights)
            )
        for w in new_weights:
            h = jax.nn.relu(gcn_aggregate(h @ w, senders, receivers, edge_mask))
        return (new_weights, h), None


class EvolveGCNO(nn.Module):
    """Encoder: packed batch -> node embeddings [N, hidden] at the last history snapshot."""

    num_features: int
    hidden: int
    layers: int = 2
    gru: str = "rows"

    @nn.compact
    def __call__(self, batch: dict) -> jax.Array:
        dims = (self.num_features,) + (self.hidden,) * self.layers
        init = nn.initializers.glorot_uniform()
        weights = tuple(self.param(f"gcn_{i}", init, (dims[i], dims[i + 1])) for i in range(self.layers))
        n = batch["node_window"].shape[0]
        xs = (node_inputs(batch, self.num_features), batch["senders"], batch["receivers"], batch["edge_mask"])
        (_, h), _ = scan_steps(_Step, dims=dims, gru=self.gru)((weights, jnp.zeros((n, self.hidden))), xs)
        return h
