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
from jax.typing import DTypeLike

from .graph_view import flat_graph, offset_graphs
from .layers import (
    TORCH_LINEAR_KERNEL,
    DenseParams,
    GCNConv,
    compute_dtype,
    gcn_aggregate,
    is_codes,
    node_inputs,
    rows_times,
    scan_steps,
    time_scan,
    torch_linear,
    torch_uniform,
)


class TGCNCell(nn.Module):
    """One step: ``(x [N, F], h [N, H], graph) -> h' [N, H]`` (``graph``: the offset's GraphsTuple)."""

    hidden: int
    dtype: DTypeLike = jnp.float32  # compute dtype (model.dtype); h' in it
    in_features: int = 0  # > 0: x may be category codes [N] of this one-hot width

    @nn.compact
    def __call__(self, x, h, graph):
        def gate(name, state):
            conv = GCNConv(self.hidden, dtype=self.dtype, in_features=self.in_features, name=f"conv_{name}")
            gate_in = jnp.concatenate([conv(x, graph), state], axis=-1)
            return torch_linear(self.hidden, 2 * self.hidden, f"linear_{name}", self.dtype)(gate_in)

        z = jax.nn.sigmoid(gate("z", h))
        r = jax.nn.sigmoid(gate("r", h))
        h_tilde = jnp.tanh(gate("h", h * r))
        return z * h + (1.0 - z) * h_tilde


class _GCNParams(nn.Module):
    """``GCNConv``'s parameters (``lin/kernel``, ``bias``) without its call."""

    fan_in: int
    features: int

    def setup(self):
        self.lin = DenseParams(self.fan_in, self.features, nn.initializers.glorot_uniform())
        self.bias = self.param("bias", nn.initializers.zeros, (self.features,))


class _FlatCell(nn.Module):
    """``TGCNCell``'s parameters under the same names, its work split in two for the flat layout:

    ``convs`` (no recurrent state, any number of node-time rows): the three GCNs fused, one product of the
    input with the concatenated kernels [F, 3H] and one aggregation of its 3H columns (one normalisation and
    one gather / scatter instead of three: UCI step at 2 devices 2.96 -> 2.64 s); ``gates`` (one time offset).
    Splitting the gate layers' input halves out of the time scan as well was measured slower (3.7 s)."""

    hidden: int
    fan_in: int

    def setup(self):
        h = self.hidden
        self.conv_z, self.conv_r, self.conv_h = (_GCNParams(self.fan_in, h) for _ in range(3))
        self.linear_z, self.linear_r, self.linear_h = (
            DenseParams(2 * h, h, TORCH_LINEAR_KERNEL, torch_uniform(2 * h)) for _ in range(3)
        )

    def convs(self, x, graph, dtype):
        """x [R, F] (or category codes [R]) on the flat graph (any number of node-time rows) -> [R, 3, H]:
        the z, r, h GCNs, in ``dtype`` (the compute dtype)."""
        convs = (self.conv_z, self.conv_r, self.conv_h)
        kernel = jnp.concatenate([c.lin() for c in convs], axis=1).astype(dtype)
        bias = jnp.concatenate([c.bias for c in convs]).astype(dtype)
        out = gcn_aggregate(graph._replace(nodes=rows_times(x, kernel))) + bias
        return out.reshape(x.shape[0], 3, self.hidden)

    def gates(self, convs, h):
        """convs [N, 3, H] (``convs`` at one time offset), h [N, H] -> h' [N, H] (in h's dtype)."""

        def linear(lin, a, b):
            kernel, bias = lin()
            return jnp.concatenate([a, b], axis=-1) @ kernel.astype(h.dtype) + bias.astype(h.dtype)

        z = jax.nn.sigmoid(linear(self.linear_z, convs[:, 0], h))
        r = jax.nn.sigmoid(linear(self.linear_r, convs[:, 1], h))
        h_tilde = jnp.tanh(linear(self.linear_h, convs[:, 2], h * r))
        return z * h + (1.0 - z) * h_tilde


def _gate_step(cell: _FlatCell, h, convs_tau):
    h = cell.gates(convs_tau, h)
    return h, h


class _FlatSteps(nn.Module):
    """The flat layout's ``step``: x [W, N, F] and the flat GraphsTuple over the W*N rows -> last cell's
    states [W, N, hidden] at every offset."""

    hidden: int
    layers: int
    remat: str = "none"
    dtype: DTypeLike = jnp.float32
    num_features: int = 0  # the inputs' one-hot width when they are category codes

    @nn.compact
    def __call__(self, x, graph):
        w_len, n = x.shape[:2]
        gate_scan = time_scan(_gate_step, self.remat)
        for i in range(self.layers):
            fan_in = self.num_features if is_codes(x) else x.shape[-1]  # codes [W, N] or rows [W, N, F]
            cell = _FlatCell(self.hidden, fan_in, name=f"cell_{i}")
            rows = x.reshape(w_len * n, *x.shape[2:])
            convs = cell.convs(rows, graph, self.dtype).reshape(w_len, n, 3, self.hidden)
            _, x = gate_scan(cell, jnp.zeros((n, self.hidden), self.dtype), convs)
        return x


class _Step(nn.Module):
    hidden: int
    layers: int
    dtype: DTypeLike = jnp.float32
    num_features: int = 0  # the inputs' one-hot width when they are category codes

    @nn.compact
    def __call__(self, states, graph):
        x = graph.nodes  # graph: this offset's GraphsTuple, nodes = the inputs (or their codes)
        new = []
        for i, h in enumerate(states):
            x = TGCNCell(self.hidden, self.dtype, self.num_features if i == 0 else 0, name=f"cell_{i}")(
                x, h, graph
            )
            new.append(x)
        return tuple(new), None


class TGCN(nn.Module):
    """Encoder: packed batch -> node embeddings [N, hidden] at the last history snapshot."""

    num_features: int
    hidden: int
    layers: int = 1
    remat: str = "none"  # model.remat: rematerialise the time scan's body (layers.time_scan)
    dtype: str = "float32"  # model.dtype: the activations' dtype (layers.compute_dtype)

    @nn.compact
    def __call__(self, batch: dict) -> jax.Array:
        x = node_inputs(batch, self.num_features, self.dtype, codes=True)  # [W, N, F] or codes [W, N]
        dt = compute_dtype(self.dtype)
        if batch["senders"].ndim == 1:  # flat layout
            graph = flat_graph(batch, x.reshape(-1, *x.shape[2:]))
            steps = _FlatSteps(self.hidden, self.layers, self.remat, dt, self.num_features, name="step")
            return steps(x, graph)[-1]
        n = batch["node_window"].shape[0]
        states = tuple(jnp.zeros((n, self.hidden), dt) for _ in range(self.layers))
        xs = offset_graphs(batch, x)
        sizes = {"hidden": self.hidden, "layers": self.layers, "num_features": self.num_features}
        step = scan_steps(_Step, remat=self.remat, dtype=dt, **sizes)
        states, _ = step(states, xs)
        return states[-1]
