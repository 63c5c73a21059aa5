"""Link-prediction head (EvolveGCN): MLP on the concatenated embeddings of the two end nodes -> 2 logits."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp


class LinkHead(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, h_src: jax.Array, h_dst: jax.Array) -> jax.Array:
        """[Q, H] x [Q, H] -> [Q, 2] logits (class 0: non-edge, class 1: edge)."""
        z = jax.nn.relu(nn.Dense(self.hidden, name="hidden")(jnp.concatenate([h_src, h_dst], axis=-1)))
        return nn.Dense(2, name="out")(z)


def dense_pair_scores(head_params: dict, h_src: jax.Array, h_dst: jax.Array) -> jax.Array:
    """Scores of every (src, dst) pair, ``logit_edge - logit_nonedge`` [S, D], without materialising
    the [S*D, 2H] concatenation: the first layer splits into a src half and a dst half.

    Args: head_params: the LinkHead's params; h_src [S, H]; h_dst [D, H].
    """
    w1, b1 = head_params["hidden"]["kernel"], head_params["hidden"]["bias"]
    w2, b2 = head_params["out"]["kernel"], head_params["out"]["bias"]
    half = h_src.shape[-1]
    a = h_src @ w1[:half] + b1  # [S, hidden]
    b = h_dst @ w1[half:]  # [D, hidden]
    v = w2[:, 1] - w2[:, 0]

    def row(a_i):
        return jax.nn.relu(a_i[None, :] + b) @ v

    return jax.lax.map(row, a, batch_size=64) + (b2[1] - b2[0])
