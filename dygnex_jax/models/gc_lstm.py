"""GC-LSTM (Chen et al., 2018; PyG-Temporal's ``GCLSTM``): an LSTM whose input transform is dense and
whose hidden-state transform is a Chebyshev graph convolution (order ``model.cheb_k``).

``I = sig(X W_i + Cheb_i(H) + b_i)``, ``F = sig(X W_f + Cheb_f(H) + b_f)``,
``C' = F C + I tanh(X W_c + Cheb_c(H) + b_c)``, ``O = sig(X W_o + Cheb_o(H) + b_o)``, ``H' = O tanh(C')``.
States start at zero in every window; stacked cells read the previous cell's H'.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from .layers import ChebConv, node_inputs, scan_steps


class GCLSTMCell(nn.Module):
    """One step: ``(x [N, F], (h, c) [N, H] each, edges) -> (h', c')``."""

    hidden: int
    k: int = 2

    @nn.compact
    def __call__(self, x, state, edges):
        h, c = state
        glorot = nn.initializers.glorot_uniform()

        def pre(gate):
            w = self.param(f"W_{gate}", glorot, (x.shape[-1], self.hidden))
            b = self.param(f"b_{gate}", nn.initializers.zeros, (self.hidden,))
            return x @ w + ChebConv(self.hidden, self.k, name=f"conv_{gate}")(h, edges) + b

        i = jax.nn.sigmoid(pre("i"))
        f = jax.nn.sigmoid(pre("f"))
        c = f * c + i * jnp.tanh(pre("c"))
        o = jax.nn.sigmoid(pre("o"))
        return o * jnp.tanh(c), c


class _Step(nn.Module):
    hidden: int
    layers: int
    k: int

    @nn.compact
    def __call__(self, states, xs):
        x, senders, receivers, edge_mask = xs
        new = []
        for i, state in enumerate(states):
            h, c = GCLSTMCell(self.hidden, self.k, name=f"cell_{i}")(
                x, state, (senders, receivers, edge_mask)
            )
            new.append((h, c))
            x = h
        return tuple(new), None


class GCLSTM(nn.Module):
    """Encoder: packed batch -> node embeddings [N, hidden] (last cell's H at the last history snapshot)."""

    num_features: int
    hidden: int
    layers: int = 1
    cheb_k: int = 2

    @nn.compact
    def __call__(self, batch: dict) -> jax.Array:
        n = batch["node_window"].shape[0]
        zeros = jnp.zeros((n, self.hidden))
        states = tuple((zeros, zeros) for _ in range(self.layers))
        xs = (node_inputs(batch, self.num_features), batch["senders"], batch["receivers"], batch["edge_mask"])
        states, _ = scan_steps(_Step, hidden=self.hidden, layers=self.layers, k=self.cheb_k)(states, xs)
        return states[-1][0]
