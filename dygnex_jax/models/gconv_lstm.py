"""GConvLSTM (Seo et al., 2018, GCRN's LSTM; PyG-Temporal's ``GConvLSTM``): an LSTM with peepholes whose
gates are Chebyshev graph convolutions (order ``model.cheb_k``) of the input and of the hidden state.

``I = sig(Cheb(X) + Cheb(H) + w_i * C + b_i)``, ``F = sig(Cheb(X) + Cheb(H) + w_f * C + b_f)``,
``C' = F C + I tanh(Cheb(X) + Cheb(H) + b_c)``, ``O = sig(Cheb(X) + Cheb(H) + w_o * C' + b_o)``,
``H' = O tanh(C')``. States start at zero in every window; stacked cells read the previous cell's H'.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.typing import DTypeLike

from .cheb import ChebParams, cheb_convs
from .layers import GraphLSTMEncoder


class GConvLSTMCell(nn.Module):
    """One step: ``(x [N, F], (h, c) [N, H] each, graph) -> (h', c')`` (``graph``: the offset's
    GraphsTuple)."""

    hidden: int
    k: int = 2
    dtype: DTypeLike = jnp.float32  # compute dtype (model.dtype); h', c' in it

    @nn.compact
    def __call__(self, x, state, graph):
        """One ``ChebConv`` per gate and input (``x_i``, ``h_i``, ..., ``x_o``, ``h_o``), run fused: the four
        of ``x`` as one, the four of ``h`` as one."""
        h, c = state
        glorot = nn.initializers.glorot_uniform()
        gates = ("i", "f", "c", "o")
        p, peep, bias = {}, {}, {}
        for g in gates:  # the parameters in the order the unfused cell created them
            p[f"x_{g}"] = ChebParams(x.shape[-1], self.hidden, self.k, name=f"x_{g}")()
            p[f"h_{g}"] = ChebParams(self.hidden, self.hidden, self.k, name=f"h_{g}")()
            if g != "c":
                peep[g] = self.param(f"w_c_{g}", glorot, (1, self.hidden))[0].astype(self.dtype)
            bias[g] = self.param(f"b_{g}", nn.initializers.zeros, (self.hidden,)).astype(self.dtype)
        xs = cheb_convs(x, graph, [p[f"x_{g}"] for g in gates], self.k, dtype=self.dtype)
        hs = cheb_convs(h, graph, [p[f"h_{g}"] for g in gates], self.k, dtype=self.dtype)
        conv = {g: a + b for g, a, b in zip(gates, xs, hs)}
        i = jax.nn.sigmoid(conv["i"] + peep["i"] * c + bias["i"])
        f = jax.nn.sigmoid(conv["f"] + peep["f"] * c + bias["f"])
        c = f * c + i * jnp.tanh(conv["c"] + bias["c"])
        o = jax.nn.sigmoid(conv["o"] + peep["o"] * c + bias["o"])
        return o * jnp.tanh(c), c


class GConvLSTM(GraphLSTMEncoder):
    """Encoder: packed batch -> node embeddings [N, hidden] (last cell's H at the last history snapshot)."""

    cell = GConvLSTMCell
