"""EvolveGCN-O (Pareja et al., AAAI 2020): GCN weights evolved over time by a matrix GRU.

The weights restart from the learned initial matrices in every window (the EvolveGCN protocol), and
their evolution does not depend on the graph (the GRU reads the previous weights only), so all windows
packed on a device share the weights of time offset tau: one matrix per layer per tau serves every
window exactly. Node inputs: one-hot categories (degree buckets). Activation: ReLU (the paper: RReLU).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from .layers import MatrixGRU, gcn_aggregate


class _Step(nn.Module):
    dims: tuple[int, ...]

    @nn.compact
    def __call__(self, carry, xs):
        weights, _ = carry
        feat, senders, receivers, edge_mask = xs
        new_weights = tuple(
            MatrixGRU(self.dims[i], self.dims[i + 1], name=f"evolve_{i}")(w) for i, w in enumerate(weights)
        )
        h = jax.nn.one_hot(feat, self.dims[0], dtype=jnp.float32)
        for w in new_weights:
            h = jax.nn.relu(gcn_aggregate(h @ w, senders, receivers, edge_mask))
        return (new_weights, h), None


class EvolveGCNO(nn.Module):
    """Encoder: packed batch -> node embeddings [N, hidden] at the last history snapshot."""

    num_features: int
    hidden: int
    layers: int = 2

    @nn.compact
    def __call__(self, batch: dict) -> jax.Array:
        dims = (self.num_features,) + (self.hidden,) * self.layers
        init = nn.initializers.glorot_uniform()
        weights = tuple(self.param(f"gcn_{i}", init, (dims[i], dims[i + 1])) for i in range(self.layers))
        n = batch["feat"].shape[1]
        scan = nn.scan(_Step, variable_broadcast="params", split_rngs={"params": False}, in_axes=0)
        xs = (batch["feat"], batch["senders"], batch["receivers"], batch["edge_mask"])
        (_, h), _ = scan(dims, name="step")((weights, jnp.zeros((n, self.hidden))), xs)
        return h
