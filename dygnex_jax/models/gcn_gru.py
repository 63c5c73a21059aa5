"""GCN-GRU (EvolveGCN's "GCN-GRU" baseline, WD-GCN of Manessi et al. 2020): a GCN stack, shared by every
time offset, embeds each snapshot; a per-node GRU (``torch.nn.GRU``'s gates) carries the embeddings over
time. ``E_t = ReLU(GCN(... ReLU(GCN(X_t))))``, ``H_t = GRU(E_t, H_{t-1})``; H starts at zero in every window.
Its PyTorch twin is PyG's ``GCNConv`` stack followed by ``torch.nn.GRUCell`` (PyG-Temporal has no such layer).

The GCNs never read the GRU state, so the flat layout (edges [E_total] over the W*N node-time rows,
``models.FLAT_LAYOUT_MODELS``) runs the GCN stack once over all offsets, then the GRU over time node-wise.
Same parameters and values.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.typing import DTypeLike

from .graph_view import flat_graph, offset_graphs
from .layers import GCNConv, GRUCell, activation, compute_dtype, node_inputs, scan_steps, time_scan


class _Step(nn.Module):
    hidden: int
    layers: int
    dtype: DTypeLike = jnp.float32
    act: str = "relu"  # model.activation (layers.ACTIVATIONS)
    num_features: int = 0  # the inputs' one-hot width when they are category codes

    @nn.compact
    def __call__(self, h, graph):
        x = graph.nodes  # graph: this offset's GraphsTuple, nodes = the inputs (or their codes)
        for i in range(self.layers):
            conv = GCNConv(self.hidden, dtype=self.dtype, in_features=self.num_features, name=f"gcn_{i}")
            x = activation(self.act)(conv(x, graph))
        return GRUCell(self.hidden, self.dtype, name="gru")(x, h), None


def _gru_step(gru: GRUCell, h, e_tau):
    return gru(e_tau, h), None


class _FlatStep(nn.Module):
    """The flat layout's ``step`` (``_Step``'s parameters): x [W, N, F] and the flat GraphsTuple over
    the W*N rows -> GRU state [N, hidden] after the last offset."""

    hidden: int
    layers: int
    remat: str = "none"
    act: str = "relu"
    dtype: DTypeLike = jnp.float32
    num_features: int = 0  # the inputs' one-hot width when they are category codes

    @nn.compact
    def __call__(self, x, graph):
        w_len, n = x.shape[:2]
        e = x.reshape(w_len * n, *x.shape[2:])
        for i in range(self.layers):
            conv = GCNConv(self.hidden, dtype=self.dtype, in_features=self.num_features, name=f"gcn_{i}")
            e = activation(self.act)(conv(e, graph))
        gru, h0 = GRUCell(self.hidden, self.dtype, name="gru"), jnp.zeros((n, self.hidden), self.dtype)
        h, _ = time_scan(_gru_step, self.remat)(gru, h0, e.reshape(w_len, n, -1))
        return h


class GCNGRU(nn.Module):
    """Encoder: packed batch -> node embeddings [N, hidden] (GRU state at the last history snapshot)."""

    num_features: int
    hidden: int
    layers: int = 2
    remat: str = "none"  # model.remat: rematerialise the time scan's body (layers.time_scan)
    dtype: str = "float32"  # model.dtype: the activations' dtype (layers.compute_dtype)
    act: str = "relu"  # model.activation after every GCN layer (layers.ACTIVATIONS)

    @nn.compact
    def __call__(self, batch: dict) -> jax.Array:
        x = node_inputs(batch, self.num_features, self.dtype, codes=True)  # [W, N, F] or codes [W, N]
        dt = compute_dtype(self.dtype)
        if batch["senders"].ndim == 1:  # flat layout
            graph = flat_graph(batch, x.reshape(-1, *x.shape[2:]))
            step = _FlatStep(
                self.hidden, self.layers, self.remat, self.act, dt, self.num_features, name="step"
            )
            return step(x, graph)
        n = batch["node_window"].shape[0]
        xs = offset_graphs(batch, x)
        sizes = {"hidden": self.hidden, "layers": self.layers, "num_features": self.num_features}
        step = scan_steps(_Step, remat=self.remat, dtype=dt, act=self.act, **sizes)
        h, _ = step(jnp.zeros((n, self.hidden), dt), xs)
        return h
