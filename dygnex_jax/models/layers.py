"""Graph operators on packed graphs (segment sums over edge lists) and the recurrent cells they share.

Every operator takes the edges of one time offset: ``senders``/``receivers`` int32 [E] and
``edge_mask`` float32 [E] (0 for padding edges, which connect the padding node to itself).

Vertex partition: the operators also run on one device's share of the nodes. ``h`` then holds the
device's own n nodes, ``receivers`` are local ids (a device holds the edges whose receiver it owns) and
``senders`` index the rows of ``comm.gather(h)`` (all devices' nodes). A ``Comm`` is how a model asks
for the other devices' rows without seeing a mesh; the default ``LOCAL`` is the identity (one device
holds everything), and then the operators are exactly the single-device ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp


def _identity(x: jax.Array) -> jax.Array:
    return x


@dataclasses.dataclass(frozen=True)
class Comm:
    """What a graph operator may ask of the other devices (parallel.py builds the collective one).

    Fields:
      gather: [n, ...] this device's rows -> [N, ...] the rows of all devices, in device order.
      sum: any array -> its elementwise sum over devices.
      own: [N, ...] rows of all devices -> [n, ...] this device's rows.
    """

    gather: Callable[[jax.Array], jax.Array] = _identity
    sum: Callable[[jax.Array], jax.Array] = _identity
    own: Callable[[jax.Array], jax.Array] = _identity


LOCAL = Comm()


def gcn_aggregate(
    h: jax.Array, senders: jax.Array, receivers: jax.Array, edge_mask: jax.Array, comm: Comm = LOCAL
) -> jax.Array:
    """``D^-1/2 (A + I) D^-1/2 h`` with D the in-degree + 1 over real edges (Kipf & Welling).

    Args: h [N, F] (own nodes); edges [E]; comm (see module doc). Returns [N, F].
    """
    n = h.shape[0]
    deg = jax.ops.segment_sum(edge_mask, receivers, num_segments=n) + 1.0  # receivers are own nodes
    inv = jax.lax.rsqrt(deg)
    coef = edge_mask * comm.gather(inv)[senders] * inv[receivers]
    agg = jax.ops.segment_sum(comm.gather(h)[senders] * coef[:, None], receivers, num_segments=n)
    return agg + h * (inv * inv)[:, None]


def scaled_laplacian(
    h: jax.Array, senders: jax.Array, receivers: jax.Array, edge_mask: jax.Array, comm: Comm = LOCAL
) -> jax.Array:
    """``L_hat h`` with ``L_hat = 2 L / lambda_max - I = -D^-1/2 A D^-1/2`` (sym. normalisation,
    lambda_max = 2, no self-loops), degrees over senders, messages sender -> receiver: the operator of
    PyG's ``ChebConv`` with its defaults.

    Args: h [N, F] (own nodes); edges [E]; comm (see module doc). Returns [N, F].
    """
    h_all = comm.gather(h)
    # out-degrees of all nodes; under vertex partition each device counts the edges it holds
    deg = comm.sum(jax.ops.segment_sum(edge_mask, senders, num_segments=h_all.shape[0]))
    inv = jnp.where(deg > 0, jax.lax.rsqrt(jnp.maximum(deg, 1e-12)), 0.0)
    coef = -edge_mask * inv[senders] * comm.own(inv)[receivers]
    return jax.ops.segment_sum(h_all[senders] * coef[:, None], receivers, num_segments=h.shape[0])


class ChebConv(nn.Module):
    """Chebyshev graph convolution of order K: ``sum_k T_k(L_hat) x Theta_k + b`` (Defferrard et al.)."""

    features: int
    k: int = 2
    comm: Comm = LOCAL

    @nn.compact
    def __call__(self, x: jax.Array, edges: tuple[jax.Array, jax.Array, jax.Array]) -> jax.Array:
        tx0 = x
        out = nn.Dense(self.features, use_bias=False, name="lin_0")(tx0)
        if self.k > 1:
            tx1 = scaled_laplacian(x, *edges, self.comm)
            out = out + nn.Dense(self.features, use_bias=False, name="lin_1")(tx1)
            for i in range(2, self.k):
                tx2 = 2.0 * scaled_laplacian(tx1, *edges, self.comm) - tx0
                out = out + nn.Dense(self.features, use_bias=False, name=f"lin_{i}")(tx2)
                tx0, tx1 = tx1, tx2
        return out + self.param("bias", nn.initializers.zeros, (self.features,))


class MatrixGRU(nn.Module):
    """GRU over a weight matrix Q [rows, cols] (EvolveGCN-O): input and hidden state are both Q.

    ``z = sig(W_z Q + U_z Q + B_z)``, ``r = sig(W_r Q + U_r Q + B_r)``,
    ``Q~ = tanh(W_h Q + U_h (r * Q) + B_h)``, ``Q' = (1 - z) Q + z Q~``.
    """

    rows: int
    cols: int

    @nn.compact
    def __call__(self, q: jax.Array) -> jax.Array:
        init = nn.initializers.glorot_uniform()

        def gate(name, act, x, h):
            w = self.param(f"{name}_W", init, (self.rows, self.rows))
            u = self.param(f"{name}_U", init, (self.rows, self.rows))
            b = self.param(f"{name}_b", nn.initializers.zeros, (self.rows, self.cols))
            return act(w @ x + u @ h + b)

        z = gate("update", jax.nn.sigmoid, q, q)
        r = gate("reset", jax.nn.sigmoid, q, q)
        q_tilde = gate("candidate", jnp.tanh, q, r * q)
        return (1.0 - z) * q + z * q_tilde
