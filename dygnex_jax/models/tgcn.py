"""T-GCN (Zhao et al., 2019; PyG-Temporal's ``TGCN``): a GRU whose gates read a GCN of the input
concatenated with the hidden state.

``Z = sig([GCN_z(X), H] W_z + b_z)``, ``R = sig([GCN_r(X), H] W_r + b_r)``,
``H~ = tanh([GCN_h(X), H * R] W_h + b_h)``, ``H' = Z H + (1 - Z) H~``.
Hidden states start at zero in every window; stacked ``layers`` cells, cell l reads cell l-1's new state.
Initialised as PyG-T's ``TGCN``: the GCNs' weights Glorot uniform (PyG's ``GCNConv``), their biases zero,
the gate layers as ``torch.nn.Linear`` (uniform in +-1/sqrt(2 hidden), bias too).

The GCNs read the cell's input only (the input snapshot, or the previous cell's states), never the cell's own
state, so the flat layout (edges [E_total] over the W*N node-time rows, ``models.FLAT_LAYOUT_MODELS``) runs
each cell's three GCNs once over all offsets, then its gates over time node-wise. Same parameters and values.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from .graph_view import flat_graph, offset_graphs
from .layers import GCNConv, node_inputs, scan_steps, torch_linear


class TGCNCell(nn.Module):
    """One step: ``(x [N, F], h [N, H], graph) -> h' [N, H]`` (``graph``: the offset's GraphsTuple)."""

    hidden: int

    @nn.compact
    def __call__(self, x, h, graph):
        def gate(name, state):
            conv = GCNConv(self.hidden, name=f"conv_{name}")
            gate_in = jnp.concatenate([conv(x, graph), state], axis=-1)
            return torch_linear(self.hidden, 2 * self.hidden, name=f"linear_{name}")(gate_in)

        z = jax.nn.sigmoid(gate("z", h))
        r = jax.nn.sigmoid(gate("r", h))
        h_tilde = jnp.tanh(gate("h", h * r))
        return z * h + (1.0 - z) * h_tilde


class _FlatCell(nn.Module):
    """``TGCNCell``'s parameters under the same names, its work split in two for the flat layout:
    ``convs`` (the three GCNs of the input, any number of rows) and ``gates`` (one time offset)."""

    hidden: int

    def setup(self):
        self.conv_z, self.conv_r, self.conv_h = (GCNConv(self.hidden) for _ in range(3))
        self.linear_z, self.linear_r, self.linear_h = (
            torch_linear(self.hidden, 2 * self.hidden) for _ in range(3)
        )

    def convs(self, x, graph):
        return self.conv_z(x, graph), self.conv_r(x, graph), self.conv_h(x, graph)

    def gates(self, convs, h):
        cz, cr, ch = convs
        z = jax.nn.sigmoid(self.linear_z(jnp.concatenate([cz, h], axis=-1)))
        r = jax.nn.sigmoid(self.linear_r(jnp.concatenate([cr, h], axis=-1)))
        h_tilde = jnp.tanh(self.linear_h(jnp.concatenate([ch, h * r], axis=-1)))
        return z * h + (1.0 - z) * h_tilde


def _gate_step(cell: _FlatCell, h, convs_tau):
    h = cell.gates(convs_tau, h)
    return h, h


class _FlatSteps(nn.Module):
    """The flat layout's ``step``: x [W, N, F] and the flat GraphsTuple over the W*N rows -> last cell's
    states [W, N, hidden] at every offset."""

    hidden: int
    layers: int

    @nn.compact
    def __call__(self, x, graph):
        w_len, n = x.shape[:2]
        time_scan = nn.scan(_gate_step, variable_broadcast="params", split_rngs={"params": False})
        for i in range(self.layers):
            cell = _FlatCell(self.hidden, name=f"cell_{i}")
            convs = cell.convs(x.reshape(w_len * n, x.shape[-1]), graph)
            convs = tuple(c.reshape(w_len, n, self.hidden) for c in convs)
            _, x = time_scan(cell, jnp.zeros((n, self.hidden)), convs)
        return x


class _Step(nn.Module):
    hidden: int
    layers: int

    @nn.compact
    def __call__(self, states, graph):
        x = graph.nodes  # graph: this offset's GraphsTuple, nodes = the inputs
        new = []
        for i, h in enumerate(states):
            x = TGCNCell(self.hidden, name=f"cell_{i}")(x, h, graph)
            new.append(x)
        return tuple(new), None


class TGCN(nn.Module):
    """Encoder: packed batch -> node embeddings [N, hidden] at the last history snapshot."""

    num_features: int
    hidden: int
    layers: int = 1

    @nn.compact
    def __call__(self, batch: dict) -> jax.Array:
        x = node_inputs(batch, self.num_features)
        if batch["senders"].ndim == 1:  # flat layout
            graph = flat_graph(batch, x.reshape(-1, x.shape[-1]))
            return _FlatSteps(self.hidden, self.layers, name="step")(x, graph)[-1]
        n = batch["node_window"].shape[0]
        states = tuple(jnp.zeros((n, self.hidden)) for _ in range(self.layers))
        xs = offset_graphs(batch, x)
        states, _ = scan_steps(_Step, hidden=self.hidden, layers=self.layers)(states, xs)
        return states[-1]
