"""GCRN-GRU (Seo et al., 2018; PyG-Temporal's GConvGRU): a GRU whose gates are Chebyshev graph
convolutions of the input and of the hidden node states. Hidden states start at zero in every window.
Stacked ``layers`` cells: cell l reads cell l-1's new state at the same time offset.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from .layers import ChebConv


class GConvGRUCell(nn.Module):
    """One step: ``(x [N, F], h [N, H], edges) -> h' [N, H]``."""

    hidden: int
    k: int = 2

    @nn.compact
    def __call__(self, x, h, edges):
        def conv(name, v):
            return ChebConv(self.hidden, self.k, name=name)(v, edges)

        z = jax.nn.sigmoid(conv("x_z", x) + conv("h_z", h))
        r = jax.nn.sigmoid(conv("x_r", x) + conv("h_r", h))
        h_tilde = jnp.tanh(conv("x_h", x) + conv("h_h", h * r))
        return z * h + (1.0 - z) * h_tilde


class _Step(nn.Module):
    num_features: int
    hidden: int
    layers: int
    k: int

    @nn.compact
    def __call__(self, states, xs):
        feat, senders, receivers, edge_mask = xs
        edges = (senders, receivers, edge_mask)
        x = jax.nn.one_hot(feat, self.num_features, dtype=jnp.float32)
        new = []
        for i, h in enumerate(states):
            x = GConvGRUCell(self.hidden, self.k, name=f"cell_{i}")(x, h, edges)
            new.append(x)
        return tuple(new), None


class GCRNGRU(nn.Module):
    """Encoder: packed batch -> node embeddings [N, hidden] at the last history snapshot."""

    num_features: int
    hidden: int
    layers: int = 1
    cheb_k: int = 2

    @nn.compact
    def __call__(self, batch: dict) -> jax.Array:
        n = batch["feat"].shape[1]
        states = tuple(jnp.zeros((n, self.hidden)) for _ in range(self.layers))
        scan = nn.scan(_Step, variable_broadcast="params", split_rngs={"params": False}, in_axes=0)
        xs = (batch["feat"], batch["senders"], batch["receivers"], batch["edge_mask"])
        states, _ = scan(self.num_features, self.hidden, self.layers, self.cheb_k, name="step")(states, xs)
        return states[-1]
