"""GCRN-GRU (Seo et al., 2018; PyG-Temporal's GConvGRU): a GRU whose gates are Chebyshev graph
convolutions of the input and of the hidden node states. Hidden states start at zero in every window.
Stacked ``layers`` cells: cell l reads cell l-1's new state at the same time offset.

The recurrence is exposed in pieces for snapshot partition (parallel.py pipelines it over devices):
``initial_carry(n)`` (zero states), ``advance(carry, xs)`` over a slice of time offsets -> (states,
last cell's state); ``__call__`` = advance over all W offsets.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.typing import DTypeLike

from .cheb import ChebParams, cheb_convs
from .graph_view import offset_graphs
from .layers import LOCAL, Comm, compute_dtype, laplacian_coefficients, node_inputs, time_scan


class GConvGRUCell(nn.Module):
    """One step: ``(x [N, F], h [N, H], graph) -> h' [N, H]`` (``graph``: the offset's GraphsTuple)."""

    hidden: int
    k: int = 2
    comm: Comm = LOCAL
    dtype: DTypeLike = jnp.float32  # compute dtype (model.dtype); h' in it

    @nn.compact
    def __call__(self, x, h, graph, coef=None):
        """One ``ChebConv`` per gate and input (``x_z``, ``h_z``, ``x_r``, ``h_r``, ``x_h``, ``h_h``), run
        fused: the three of ``x`` as one, ``h_z`` and ``h_r`` as one, ``h_h`` (of ``h * r``) alone, all
        with the offset's Laplacian coefficients ``coef`` (``laplacian_coefficients``; ``None``: each
        convolution computes them, ``chebyshev_terms``)."""
        fan = {"x": x.shape[-1], "h": self.hidden}
        p = {
            f"{v}_{g}": ChebParams(fan[v], self.hidden, self.k, name=f"{v}_{g}")()
            for g in ("z", "r", "h")
            for v in ("x", "h")
        }

        def convs(v, names):
            return cheb_convs(v, graph, [p[n] for n in names], self.k, self.comm, self.dtype, coef)

        x_z, x_r, x_h = convs(x, ("x_z", "x_r", "x_h"))
        h_z, h_r = convs(h, ("h_z", "h_r"))
        z = jax.nn.sigmoid(x_z + h_z)
        r = jax.nn.sigmoid(x_r + h_r)
        h_tilde = jnp.tanh(x_h + convs(h * r, ("h_h",))[0])
        return z * h + (1.0 - z) * h_tilde


class _Step(nn.Module):
    hidden: int
    layers: int
    k: int
    comm: Comm = LOCAL
    dtype: DTypeLike = jnp.float32

    @nn.compact
    def __call__(self, states, xs):
        graph, valid = xs  # graph: this offset's GraphsTuple, nodes = the inputs
        x = graph.nodes
        # every cell's convolutions at this offset share its Laplacian (one degree psum under vertex partition)
        coef = laplacian_coefficients(graph, self.comm) if self.k > 1 else None
        new = []
        for i, h in enumerate(states):
            x = GConvGRUCell(self.hidden, self.k, self.comm, self.dtype, name=f"cell_{i}")(x, h, graph, coef)
            new.append(jnp.where(valid, x, h))  # a padded (invalid) time offset keeps the state
        return tuple(new), None


class GCRNGRU(nn.Module):
    """Encoder: packed batch -> node embeddings [N, hidden] at the last history snapshot."""

    num_features: int
    hidden: int
    layers: int = 1
    cheb_k: int = 2
    comm: Comm = LOCAL  # vertex partition: how to reach other devices' nodes (identity by default)
    remat: str = "none"  # model.remat: rematerialise the time scan's body (layers.time_scan)
    dtype: str = "float32"  # model.dtype: the activations' dtype (layers.compute_dtype)

    def setup(self):
        dtype = compute_dtype(self.dtype)
        self.step = time_scan(_Step, self.remat)(self.hidden, self.layers, self.cheb_k, self.comm, dtype)

    def initial_carry(self, n: int):
        """Zero hidden states [N, hidden] of every layer (in the compute dtype)."""
        return tuple(jnp.zeros((n, self.hidden), compute_dtype(self.dtype)) for _ in range(self.layers))

    def advance(self, carry, xs: dict):
        """Run the time offsets of ``xs`` (feat [T, N] or x [T, N, F], senders/receivers/edge_mask [T, E],
        optional valid [T]) from ``carry``. Returns (states after them, last layer's state [N, hidden])."""
        x = node_inputs(xs, self.num_features, self.dtype)  # [T, N, F]
        valid = xs.get("valid", jnp.ones(x.shape[0], bool))
        seq = (offset_graphs(xs, x), valid)
        states, _ = self.step(carry, seq)
        return states, states[-1]

    def __call__(self, batch: dict) -> jax.Array:
        return self.advance(self.initial_carry(batch["node_window"].shape[0]), batch)[1]
