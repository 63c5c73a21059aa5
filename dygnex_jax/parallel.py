"""Mesh, shardings and the ``shard_map`` train / eval steps. The only module that touches jax.sharding.

One mesh axis, ``data``: every device runs the same compiled step on its own packed windows
(arrays with a leading P axis, sharded along ``data``); parameters and optimiser state are replicated.
Exactness (DESIGN §3): each device returns the *sum* of its weighted per-pair losses, the sum of its
weights and the gradient of its loss sum; these are ``psum``-ed over ``data`` and divided once, so the
step equals one device on the same mini-batch.

``check_vma=False`` is deliberate: with ``check_vma=True`` the gradient w.r.t. a replicated input comes
back already summed over the axis (STACK-NOTES), and our own ``psum`` would then double count.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import shard_map
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .errors import UserError

AXIS = "data"

LossFn = Callable[[dict, dict], tuple[jax.Array, jax.Array]]  # (params, batch) -> (loss sum, weight sum)


def make_mesh(n_devices: int = 0) -> Mesh:
    """A 1-D ``data`` mesh over the first ``n_devices`` devices (0 = all)."""
    devices = jax.devices()
    n = n_devices or len(devices)
    if n > len(devices):
        raise UserError(
            f"parallel.devices={n} but JAX sees {len(devices)} device(s): use fewer, or on CPU set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={n}"
        )
    return Mesh(np.array(devices[:n]), (AXIS,))


def shard_batch(mesh: Mesh, batch: dict[str, np.ndarray]) -> dict[str, jax.Array]:
    """Place host arrays [P, ...] on the mesh, device p getting row p."""
    sharding = NamedSharding(mesh, P(AXIS))
    return {k: jax.device_put(v, sharding) for k, v in batch.items()}


def replicate(mesh: Mesh, tree):
    """Copy a pytree (params, optimiser state) to every device of the mesh."""
    return jax.device_put(tree, NamedSharding(mesh, P()))


def _local(batch: dict) -> dict:
    return {k: v[0] for k, v in batch.items()}


def make_grad_fn(loss_fn: LossFn, mesh: Mesh) -> Callable:
    """``(params, batch) -> (loss sum, weight sum, grad of loss sum)``, all psum-ed over devices."""

    def per_device(params, batch):
        (num, den), grads = jax.value_and_grad(lambda p: loss_fn(p, _local(batch)), has_aux=True)(params)
        return jax.lax.psum((num, den, grads), AXIS)

    return jax.jit(
        shard_map(per_device, mesh=mesh, in_specs=(P(), P(AXIS)), out_specs=(P(), P(), P()), check_vma=False)
    )


def make_train_step(loss_fn: LossFn, tx: optax.GradientTransformation, mesh: Mesh) -> Callable:
    """Jitted ``(params, opt_state, batch) -> (params, opt_state, stats)``.

    ``stats``: ``loss`` (weighted mean over the mini-batch), ``weight`` (sum of pair weights),
    ``grad_norm`` and ``finite`` (loss, gradient and updated parameters all finite). A non-finite step
    changes nothing: the parameters and optimiser state it returns are its inputs (the caller stops or
    counts the skip). The returned function has a ``traces`` attribute: a list that gets one entry per
    compilation (the shape tuple traced), for the bounded-recompilation check.
    """
    grad_fn = make_grad_fn(loss_fn, mesh)
    traces: list = []

    def step(params, opt_state, batch):
        traces.append(
            tuple(batch["senders"].shape) + tuple(batch["pair_src"].shape) + tuple(batch["feat"].shape)
        )
        num, den, grads = grad_fn(params, batch)
        den = jnp.maximum(den, 1e-12)
        grads = jax.tree.map(lambda g: g / den, grads)
        updates, new_opt_state = tx.update(grads, opt_state, params)
        new_params = optax.apply_updates(params, updates)
        loss, grad_norm = num / den, optax.tree.norm(grads)
        finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm) & jnp.isfinite(optax.tree.norm(new_params))
        keep = lambda new, old: jnp.where(finite, new, old)  # noqa: E731
        params = jax.tree.map(keep, new_params, params)
        opt_state = jax.tree.map(keep, new_opt_state, opt_state)
        return params, opt_state, {"loss": loss, "weight": den, "grad_norm": grad_norm, "finite": finite}

    jitted = jax.jit(step, donate_argnums=(0, 1))
    jitted.traces = traces
    return jitted


def make_embed_step(embed_fn: Callable[[dict, dict], jax.Array], mesh: Mesh) -> Callable:
    """Jitted ``(params, batch) -> [P, N, H]`` node embeddings of every device's packed windows."""

    def per_device(params, batch):
        return embed_fn(params, _local(batch))[None]

    return jax.jit(
        shard_map(per_device, mesh=mesh, in_specs=(P(), P(AXIS)), out_specs=P(AXIS), check_vma=False)
    )
