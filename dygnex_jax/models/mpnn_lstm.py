"""MPNN-LSTM (Panagopoulos et al., AAAI 2021; PyG-Temporal's ``MPNNLSTM``): two GCN layers embed every
snapshot of the window, their outputs are batch-normalised over the whole window and read by two stacked
LSTMs over time.

``H1_t = BN1(ReLU(GCN1(X_t)))``, ``H2_t = BN2(ReLU(GCN2(H1_t)))``, ``LSTM1`` over ``[H1_t, H2_t]``,
``LSTM2`` over LSTM1's outputs; output ``[h1_W, h2_W, S]`` of width ``2 hidden + F + W - 1`` where S is the
first snapshot's features followed by the last feature of every later snapshot (PyG-Temporal's skip).

By design: batch-norm statistics are those of each window (every node of every snapshot, a background node
counted ``node_count`` times), in training and in evaluation alike, as one PyG-Temporal forward call in
training mode computes them; there are no running averages, so windows stay independent samples and a
packed step equals its windows run one by one. No dropout (PyG-Temporal's ``dropout=0``).

The GCNs read each snapshot's features only, so under the flat layout (edges [E_total] over the W*N
node-time rows, ``models.FLAT_LAYOUT_MODELS``) each runs once over all offsets instead of per offset.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
from jax.typing import DTypeLike

from .graph_view import packed_graphs
from .layers import LSTMCell, gcn_aggregate, node_inputs, pyg_linear, scan_steps


class WindowBatchNorm(nn.Module):
    """Batch norm of [W, N, H] with statistics per window slot over time and nodes, nodes weighted by
    ``node_count`` (biased variance, eps 1e-5, as ``torch.nn.BatchNorm1d`` in training mode). The
    statistics are float32 whatever h's dtype (counts beyond 256 are not exact in bfloat16); the
    output is in h's dtype."""

    eps: float = 1e-5

    @nn.compact
    def __call__(self, h, node_window, node_count, num_slots: int):
        dt = h.dtype
        w = node_count.astype(jnp.float32)
        steps = h.shape[0]
        seg = lambda v: jraph.segment_sum(v, node_window, num_segments=num_slots)  # noqa: E731
        total = seg(w) * steps  # [S]
        mean = seg(jnp.einsum("n,tnh->nh", w, h)) / jnp.maximum(total, 1.0)[:, None]  # [S, H]
        centred = h - mean[node_window][None].astype(dt)
        var = seg(jnp.einsum("n,tnh->nh", w, centred * centred)) / jnp.maximum(total, 1.0)[:, None]
        scale = self.param("scale", nn.initializers.ones, (h.shape[-1],)).astype(dt)
        bias = self.param("bias", nn.initializers.zeros, (h.shape[-1],)).astype(dt)
        return centred * jax.lax.rsqrt(var[node_window] + self.eps).astype(dt)[None] * scale + bias


class _LSTMs(nn.Module):
    hidden: int
    dtype: DTypeLike = jnp.float32

    @nn.compact
    def __call__(self, carry, r):
        (h1, c1), (h2, c2) = carry
        h1, c1 = LSTMCell(self.hidden, self.dtype, name="lstm_1")(r, h1, c1)
        h2, c2 = LSTMCell(self.hidden, self.dtype, name="lstm_2")(h1, h2, c2)
        return ((h1, c1), (h2, c2)), None


class MPNNLSTM(nn.Module):
    """Encoder: packed batch -> node embeddings [N, 2 hidden + F + W - 1]."""

    num_features: int
    hidden: int
    remat: str = "none"  # model.remat: rematerialise the time scan's body (layers.time_scan)
    dtype: str = "float32"  # model.dtype: the activations' dtype (layers.compute_dtype)

    @nn.compact
    def __call__(self, batch: dict) -> jax.Array:
        x = node_inputs(batch, self.num_features, self.dtype)  # [W, N, F]
        graphs = packed_graphs(batch, x)  # flat: one GraphsTuple over the W*N rows; scan: one per offset
        node_window, node_count = batch["node_window"], batch["node_count"]
        slots = batch["window_sizes"].shape[0]
        if batch["senders"].ndim == 1:  # flat layout: one GCN over the W*N node-time rows

            def conv(v):
                return gcn_aggregate(graphs._replace(nodes=v.reshape(-1, v.shape[-1]))).reshape(v.shape)

        else:

            def conv(v):  # over time offsets
                return jax.vmap(gcn_aggregate)(graphs._replace(nodes=v))

        def gcn(name, v):
            out = conv(pyg_linear(self.hidden, f"{name}_lin", x.dtype)(v))  # PyG GCNConv's init
            bias = self.param(f"{name}_bias", nn.initializers.zeros, (self.hidden,))
            return jax.nn.relu(out + bias.astype(x.dtype))

        h1 = WindowBatchNorm(name="bn_1")(gcn("conv_1", x), node_window, node_count, slots)
        h2 = WindowBatchNorm(name="bn_2")(gcn("conv_2", h1), node_window, node_count, slots)
        n = x.shape[1]
        zeros = jnp.zeros((n, self.hidden), x.dtype)
        lstms = scan_steps(_LSTMs, remat=self.remat, hidden=self.hidden, dtype=x.dtype)
        ((h1_last, _), (h2_last, _)), _ = lstms(
            ((zeros, zeros), (zeros, zeros)), jnp.concatenate([h1, h2], axis=-1)
        )
        skip = jnp.concatenate([x[0], x[1:, :, -1].T], axis=-1)  # [N, F + W - 1]
        return jnp.concatenate([h1_last, h2_last, skip], axis=-1)
