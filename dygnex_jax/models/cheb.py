"""Chebyshev graph convolutions (Defferrard et al.; PyG's ``ChebConv``) and their fused form: the recurrent
cells of GCRN-GRU, GConvLSTM and GC-LSTM convolve one input with several gates' kernels, so the terms
``T_i(L_hat) x`` are computed once and multiplied by every gate's kernels side by side in one product.
The parameter tree is ``ChebConv``'s per gate (``lin_i/kernel``, ``bias``): checkpoints, PyG-T weight maps
and initial values are those of one ``ChebConv`` per gate.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
import numpy as np
from jax.typing import DTypeLike

from .layers import LOCAL, Comm, DenseParams, laplacian_coefficients, scaled_laplacian


def cheb_params(module: nn.Module, fan_in: int, features: int, k: int) -> tuple[jax.Array, jax.Array]:
    """Inside ``module``'s compact call: ``ChebConv``'s parameters — kernels ``lin_0 .. lin_{k-1}``
    [fan_in, features], then ``bias`` [features] — under its names, order and initialisers. -> (kernels
    [k, fan_in, features], bias), float32."""
    glorot = nn.initializers.glorot_uniform()  # pyg_linear's
    kernels = jnp.stack([DenseParams(fan_in, features, glorot, name=f"lin_{i}")() for i in range(k)])
    return kernels, module.param("bias", nn.initializers.zeros, (features,))


class ChebParams(nn.Module):
    """A named ``ChebConv``'s parameters without its call: ``() -> (kernels [k, fan_in, features], bias)``,
    for ``cheb_convs`` to run several convolutions of one input as one product."""

    fan_in: int
    features: int
    k: int = 2

    @nn.compact
    def __call__(self) -> tuple[jax.Array, jax.Array]:
        return cheb_params(self, self.fan_in, self.features, self.k)


def chebyshev_terms(
    x: jax.Array, graph: jraph.GraphsTuple, k: int, comm: Comm = LOCAL, coef: jax.Array | None = None
) -> jax.Array:
    """[N, k * F]: ``T_0(L_hat) x, ..., T_{k-1}(L_hat) x`` side by side (``T_0 x = x``, ``T_1 x = L_hat x``,
    ``T_i x = 2 L_hat T_{i-1} x - T_{i-2} x``) on the edges of ``graph`` (its nodes are not read);
    ``coef``: the graph's ``laplacian_coefficients`` if the caller has them (else computed once here)."""
    terms = [x]
    if k > 1:
        if coef is None:
            coef = laplacian_coefficients(graph._replace(nodes=x), comm)
        terms.append(scaled_laplacian(graph._replace(nodes=x), comm, coef))
    for _ in range(2, k):
        terms.append(2.0 * scaled_laplacian(graph._replace(nodes=terms[-1]), comm, coef) - terms[-2])
    return terms[0] if k == 1 else jnp.concatenate(terms, axis=-1)


def cheb_convs(
    x: jax.Array,
    graph: jraph.GraphsTuple,
    params: list,
    k: int,
    comm: Comm = LOCAL,
    dtype: DTypeLike = jnp.float32,
    coef: jax.Array | None = None,
) -> list[jax.Array]:
    """The Chebyshev convolutions of one input ``x`` [N, F] with each of ``params`` (``cheb_params``' (kernels,
    bias) pairs): the terms ``T_i x`` once, and one product of them [N, k * F] with every convolution's
    kernels side by side [k * F, sum of widths] — one gather / scatter per term and one matrix product
    (and one of each in the backward pass) instead of one per convolution. -> their outputs [N, width]
    in ``dtype``, in the order of ``params``. ``coef``: as for ``chebyshev_terms``."""
    terms = chebyshev_terms(x.astype(dtype), graph, k, comm, coef)
    kernel = jnp.concatenate([w.reshape(-1, w.shape[-1]) for w, _ in params], axis=1).astype(dtype)
    out = terms @ kernel + jnp.concatenate([b for _, b in params]).astype(dtype)
    cuts = np.cumsum([b.shape[0] for _, b in params])[:-1].tolist()
    return jnp.split(out, cuts, axis=-1)


class ChebConv(nn.Module):
    """Chebyshev graph convolution of order K: ``sum_k T_k(L_hat) x Theta_k + b`` (Defferrard et al.); the
    parameters of PyG's ``ChebConv`` (``lin_k/kernel``, ``bias``). Cells with several convolutions of one
    input run them fused (``ChebParams`` + ``cheb_convs``)."""

    features: int
    k: int = 2
    comm: Comm = LOCAL
    dtype: DTypeLike = jnp.float32  # compute dtype (model.dtype)

    @nn.compact
    def __call__(self, x: jax.Array, graph: jraph.GraphsTuple) -> jax.Array:
        """``x`` [N, F] on the edges of ``graph`` (its nodes are not read) -> [N, features] in ``dtype``."""
        params = cheb_params(self, x.shape[-1], self.features, self.k)
        return cheb_convs(x, graph, [params], self.k, self.comm, self.dtype)[0]
