"""Fused Chebyshev convolutions (models/cheb.py): several convolutions of one input run as one product equal
the dense-matrix definition, one ``ChebConv`` per gate, and keep ``ChebConv``'s parameter tree."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import dense_laplacian
from test_node_reg import weighted_graph

from dygnex_jax.models.cheb import ChebConv, ChebParams, cheb_convs, chebyshev_terms
from dygnex_jax.models.graph_view import edge_list_graph


def dense_cheb(x, lap, kernels, bias) -> np.ndarray:
    """sum_i T_i(L_hat) x Theta_i + b with the recurrence written out on dense matrices (float64)."""
    t = [x, lap @ x]
    while len(t) < len(kernels):
        t.append(2.0 * lap @ t[-1] - t[-2])
    return sum(ti @ k for ti, k in zip(t, kernels)) + bias


class Gates(nn.Module):
    """Three convolutions of one input (widths 4, 2, 5), fused."""

    k: int

    @nn.compact
    def __call__(self, x, graph):
        widths = {"a": 4, "b": 2, "c": 5}
        params = [ChebParams(x.shape[-1], f, self.k, name=n)() for n, f in widths.items()]
        return cheb_convs(x, graph, params, self.k)


class Separate(nn.Module):
    """The same three as ``ChebConv`` modules of the same names."""

    k: int

    @nn.compact
    def __call__(self, x, graph):
        return [ChebConv(f, self.k, name=n)(x, graph) for n, f in {"a": 4, "b": 2, "c": 5}.items()]


@pytest.mark.parametrize("k", [1, 2, 3])
def test_fused_convolutions_equal_the_dense_definition_and_separate_chebconvs(k):
    h, s, r, w = weighted_graph(seed=2)
    n = len(h)
    graph = edge_list_graph(jnp.asarray(h), s, r, jnp.asarray(w))
    x = jnp.asarray(h)
    key = jax.random.PRNGKey(k)
    fused = Gates(k).init(key, x, graph)
    separate = Separate(k).init(key, x, graph)
    # one tree: the same names, shapes and initial values as one ChebConv per gate
    assert jax.tree.structure(fused) == jax.tree.structure(separate)
    for p, q in zip(jax.tree.leaves(fused), jax.tree.leaves(separate), strict=True):
        np.testing.assert_array_equal(np.asarray(p), np.asarray(q))
    # non-zero biases, so a bias in the wrong column would show
    params = jax.tree.map(lambda v: v + 0.1 * jnp.arange(v.size, dtype=v.dtype).reshape(v.shape), fused)
    got = Gates(k).apply(params, x, graph)
    alone = Separate(k).apply(params, x, graph)
    lap = dense_laplacian(n, s, r, w)
    for name, g, a in zip("abc", got, alone, strict=True):
        p = params["params"][name]
        kernels = [np.asarray(p[f"lin_{i}"]["kernel"], np.float64) for i in range(k)]
        want = dense_cheb(h.astype(np.float64), lap, kernels, np.asarray(p["bias"], np.float64))
        np.testing.assert_allclose(np.asarray(g), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(g), np.asarray(a), rtol=1e-6, atol=1e-6)


def test_chebyshev_terms_are_the_recurrence_side_by_side():
    h, s, r, w = weighted_graph(seed=4)
    graph = edge_list_graph(jnp.asarray(h), s, r, jnp.asarray(w))
    lap = dense_laplacian(len(h), s, r, w)
    terms = np.asarray(chebyshev_terms(jnp.asarray(h), graph, 4))
    x = h.astype(np.float64)
    t = [x, lap @ x]
    t += [2 * lap @ t[1] - t[0]]
    t += [2 * lap @ t[2] - t[1]]
    np.testing.assert_allclose(terms, np.concatenate(t, axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(chebyshev_terms(jnp.asarray(h), graph, 1)), h)
