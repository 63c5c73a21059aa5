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
from jax.typing import DTypeLike

from .cheb import ChebParams, cheb_convs
from .layers import GraphLSTMEncoder, is_codes, rows_times


class GCLSTMCell(nn.Module):
    """One step: ``(x [N, F], (h, c) [N, H] each, graph) -> (h', c')`` (``graph``: the offset's
    GraphsTuple)."""

    hidden: int
    k: int = 2
    dtype: DTypeLike = jnp.float32  # compute dtype (model.dtype); h', c' in it
    in_features: int = 0  # > 0: x may be category codes [N] of this one-hot width

    @nn.compact
    def __call__(self, x, state, graph):
        """Per gate ``W_g``, ``b_g`` and a ``ChebConv`` ``conv_g`` of ``h``, run fused: one product of ``x``
        (or one row gather of its codes) with the four ``W`` side by side, one of the four convolutions."""
        h, c = state
        glorot = nn.initializers.glorot_uniform()
        fan_in = self.in_features if is_codes(x) else x.shape[-1]
        x = x if is_codes(x) else x.astype(self.dtype)
        gates = ("i", "f", "c", "o")
        w, b, p = [], [], []
        for g in gates:  # the parameters in the order the unfused cell created them
            w.append(self.param(f"W_{g}", glorot, (fan_in, self.hidden)))
            b.append(self.param(f"b_{g}", nn.initializers.zeros, (self.hidden,)))
            p.append(ChebParams(self.hidden, self.hidden, self.k, name=f"conv_{g}")())
        kernel = jnp.concatenate(w, axis=1).astype(self.dtype)
        dense = rows_times(x, kernel) + jnp.concatenate(b).astype(self.dtype)
        convs = cheb_convs(h, graph, p, self.k, dtype=self.dtype)
        pre = {g: d + cv for g, d, cv in zip(gates, jnp.split(dense, 4, axis=-1), convs)}
        i = jax.nn.sigmoid(pre["i"])
        f = jax.nn.sigmoid(pre["f"])
        c = f * c + i * jnp.tanh(pre["c"])
        o = jax.nn.sigmoid(pre["o"])
        return o * jnp.tanh(c), c


class GCLSTM(GraphLSTMEncoder):
    """Encoder: packed batch -> node embeddings [N, hidden] (last cell's H at the last history snapshot)."""

    cell = GCLSTMCell
    takes_codes = True  # the input transform is dense: one-hot degree inputs read as codes
