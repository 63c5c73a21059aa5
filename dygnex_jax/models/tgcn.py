"""T-GCN (Zhao et al., 2019; PyG-Temporal's ``TGCN``): a GRU whose gates read a GCN of the input
concatenated with the hidden state.

``Z = sig([GCN_z(X), H] W_z + b_z)``, ``R = sig([GCN_r(X), H] W_r + b_r)``,
``H~ = tanh([GCN_h(X), H * R] W_h + b_h)``, ``H' = Z H + (1 - Z) H~``.
Hidden states start at zero in every window; stacked ``layers`` cells, cell l reads cell l-1's new state.
Initialised as PyG-T's ``TGCN``: the GCNs' weights Glorot uniform (PyG's ``GCNConv``), their biases zero,
the gate layers as ``torch.nn.Linear`` (uniform in +-1/sqrt(2 hidden), bias too).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from .layers import GCNConv, node_inputs, scan_steps, torch_linear


class TGCNCell(nn.Module):
    """One step: ``(x [N, F], h [N, H], edges) -> h' [N, H]``."""

    hidden: int

    @nn.compact
    def __call__(self, x, h, edges):
        def gate(name, state):
            conv = GCNConv(self.hidden, name=f"conv_{name}")
            gate_in = jnp.concatenate([conv(x, edges), state], axis=-1)
            return torch_linear(self.hidden, 2 * self.hidden, name=f"linear_{name}")(gate_in)

        z = jax.nn.sigmoid(gate("z", h))
        r = jax.nn.sigmoid(gate("r", h))
        h_tilde = jnp.tanh(gate("h", h * r))
        return z * h + (1.0 - z) * h_tilde


class _Step(nn.Module):
    hidden: int
    layers: int

    @nn.compact
    def __call__(self, states, xs):
        x, senders, receivers, edge_mask = xs
        new = []
        for i, h in enumerate(states):
            x = TGCNCell(self.hidden, name=f"cell_{i}")(x, h, (senders, receivers, edge_mask))
            new.append(x)
        return tuple(new), None


class TGCN(nn.Module):
    """Encoder: packed batch -> node embeddings [N, hidden] at the last history snapshot."""

    num_features: int
    hidden: int
    layers: int = 1

    @nn.compact
    def __call__(self, batch: dict) -> jax.Array:
        n = batch["node_window"].shape[0]
        states = tuple(jnp.zeros((n, self.hidden)) for _ in range(self.layers))
        xs = (node_inputs(batch, self.num_features), batch["senders"], batch["receivers"], batch["edge_mask"])
        states, _ = scan_steps(_Step, hidden=self.hidden, layers=self.layers)(states, xs)
        return states[-1]
