"""Mesh, shardings and the ``shard_map`` train / eval steps. The only module that touches jax.sharding.

One mesh axis, ``data``: every device runs the same compiled step on its own packed windows
(arrays with a leading P axis, sharded along ``data``); parameters and optimiser state are replicated.
Exactness (DESIGN §3): each device returns the *sum* of its weighted per-pair losses, the sum of its
weights and the gradient of its loss sum; these are ``psum``-ed over ``data`` and divided once, so the
step equals one device on the same mini-batch.

Multi-process (``distributed.initialize`` first): the mesh spans every process's devices; each process
packs only the rows of the devices it owns (``local_rows``) and ``shard_batch`` assembles the global
array from them; replicated trees are built from host values every process holds alike; ``to_host``
gathers a sharded result onto every process.

``check_vma=False`` is deliberate: with ``check_vma=True`` the gradient w.r.t. a replicated input comes
back already summed over the axis (STACK-NOTES), and our own ``psum`` would then double count.

The two communication-bound baselines use the same step with another per-device loss:

* snapshot partition (``pipeline_loss``): device p owns a contiguous range of the W time offsets; the
  micro-batches of a step flow through the devices GPipe-style over M + P - 1 clock ticks, the
  recurrent carry (evolving weights or hidden states) going to device p + 1 by ``lax.ppermute``; the
  last device computes the head's loss. Gradients come back through the transposed permutes, so each
  device's gradient is that of the *total* loss w.r.t. its copy of the parameters, and the ``psum``
  of those is the full gradient.
* vertex partition (``vertex_loss``): device p owns a range of the packed nodes in every snapshot and
  the edges they receive; the graph operators reach the sender side through ``VERTEX_COMM``
  (``all_gather`` / ``psum``), the final embeddings are gathered and every device scores its share
  of the target pairs.
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
from .models.layers import Comm
from .partition import TIME_KEYS

AXIS = "data"

LossFn = Callable[[dict, dict], tuple[jax.Array, jax.Array]]  # (params, batch) -> (loss sum, weight sum)
PairLoss = Callable[[jax.Array, dict], tuple[jax.Array, jax.Array]]  # (logits, batch) -> (sum, weights)


def make_mesh(n_devices: int = 0) -> Mesh:
    """A 1-D ``data`` mesh over the first ``n_devices`` devices (0 = all, of every process)."""
    devices = jax.devices()
    n = n_devices or len(devices)
    if jax.process_count() > 1 and n != len(devices):
        raise UserError(
            f"parallel.devices={n} but the {jax.process_count()} processes hold {len(devices)} devices: "
            "a multi-process run uses all of them (parallel.devices=0)"
        )
    if n > len(devices):
        raise UserError(
            f"parallel.devices={n} but JAX sees {len(devices)} device(s): use fewer, or on CPU set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={n}"
        )
    return Mesh(np.array(devices[:n]), (AXIS,))


def local_rows(mesh: Mesh) -> list[int]:
    """Positions along ``data`` of the devices this process owns (all of them in one process)."""
    me = jax.process_index()
    return [i for i, d in enumerate(mesh.devices.flat) if d.process_index == me]


def shard_batch(mesh: Mesh, batch: dict[str, np.ndarray]) -> dict[str, jax.Array]:
    """Place this process's rows on the mesh: ``batch`` arrays are [L, ...] for the L devices of
    ``local_rows(mesh)`` (L = P in one process), and the result is the global [P, ...] array."""
    sharding = NamedSharding(mesh, P(AXIS))
    rows = local_rows(mesh)
    if len(rows) == mesh.size:
        return {k: jax.device_put(v, sharding) for k, v in batch.items()}
    devices = [mesh.devices.flat[i] for i in rows]

    def place(v: np.ndarray) -> jax.Array:
        if len(v) != len(rows):
            raise ValueError(f"{len(v)} rows for the {len(rows)} devices of this process")
        shards = [jax.device_put(v[j : j + 1], d) for j, d in enumerate(devices)]
        return jax.make_array_from_single_device_arrays((mesh.size, *v.shape[1:]), sharding, shards)

    return {k: place(v) for k, v in batch.items()}


def replicate(mesh: Mesh, tree):
    """Copy a pytree of host values (params, optimiser state) to every device of the mesh. In a
    multi-process run every process must pass the same values (same seed, same init)."""
    sharding = NamedSharding(mesh, P())
    if len(local_rows(mesh)) == mesh.size:
        return jax.device_put(tree, sharding)

    def place(x):
        host = np.asarray(x)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

    return jax.tree.map(place, tree)


def to_host(tree):
    """numpy copies of a pytree of (possibly multi-process sharded) arrays, whole on every process."""
    if jax.process_count() == 1:
        return jax.tree.map(np.asarray, tree)
    from jax.experimental import multihost_utils

    return jax.tree.map(
        lambda x: (
            np.asarray(x.addressable_data(0))
            if x.is_fully_replicated
            else np.asarray(multihost_utils.process_allgather(x, tiled=True))
        ),
        tree,
    )


def sum_over_processes(value: float) -> float:
    """A host number summed over the processes of a multi-process run (itself in one process)."""
    return value if jax.process_count() == 1 else float(np.sum(_gathered(value)))


def _gathered(value: float) -> np.ndarray:
    """[processes] a host number of every process of a multi-process run."""
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(np.asarray([value], np.float64))


def min_over_processes(value: float) -> float:
    """A host number's minimum over the processes of a multi-process run (itself in one process)."""
    return value if jax.process_count() == 1 else float(np.min(_gathered(value)))


def max_over_processes(value: float) -> float:
    """A host number's maximum over the processes of a multi-process run (itself in one process)."""
    return value if jax.process_count() == 1 else float(np.max(_gathered(value)))


def host_devices(mesh: Mesh) -> tuple[int, int]:
    """(devices, processes) of the mesh on this machine: this process's devices plus those of the
    processes that share its host name (they share its cores)."""
    local = len(local_rows(mesh))
    if jax.process_count() == 1:
        return local, 1
    import hashlib
    import socket

    from jax.experimental import multihost_utils

    # 24 bits: without jax_enable_x64 the gather carries int32, and a wider value came back truncated,
    # matching no process (a 2-process run on one host counted 0 devices there)
    me = int(hashlib.sha256(socket.gethostname().encode()).hexdigest()[:6], 16)
    table = np.asarray(multihost_utils.process_allgather(np.asarray([me, local], np.int64))).reshape(-1, 2)
    mine = table[:, 0] == me
    return int(table[mine, 1].sum()), int(mine.sum())


def same_on_all_processes(digest: str) -> bool:
    """Whether every process holds the same ``digest`` (a hex string; True in one process)."""
    if jax.process_count() == 1:
        return True
    from jax.experimental import multihost_utils

    # 24 bits per int32 entry: without jax_enable_x64 the gather carries int32, and a wider value
    # would come back truncated and never equal itself (every multi-process run fell back to analytic)
    value = np.asarray([int(digest[i : i + 6], 16) for i in range(0, 24, 6)], np.int32)
    gathered = np.asarray(multihost_utils.process_allgather(value)).reshape(-1, len(value))
    return bool(np.all(gathered == value[None]))


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


def _apply(tx: optax.GradientTransformation, params, opt_state, num, den, grads):
    """The optimiser update from psum-ed sums: one division by the weight sum, then optax; a non-finite
    loss, gradient or update changes nothing (module doc of ``make_train_step``)."""
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


def make_train_step(loss_fn: LossFn, tx: optax.GradientTransformation, mesh: Mesh) -> Callable:
    """Jitted ``(params, opt_state, batch) -> (params, opt_state, stats)``.

    ``stats``: ``loss`` (weighted mean over the mini-batch), ``weight`` (sum of pair weights),
    ``grad_norm`` and ``finite`` (loss, gradient and updated parameters all finite). A non-finite step
    changes nothing: the parameters and optimiser state it returns are its inputs (the caller stops or
    counts the skip). The returned function has a ``traces`` attribute: a list that gets one entry per
    compilation (the shape tuple traced), for the bounded-recompilation check; and ``accumulate`` /
    ``apply``: the same step in micro-steps (``make_accumulate_steps``).
    """
    grad_fn = make_grad_fn(loss_fn, mesh)
    traces: list = []

    def step(params, opt_state, batch):
        traces.append(tuple((k, tuple(v.shape)) for k, v in sorted(batch.items())))
        return _apply(tx, params, opt_state, *grad_fn(params, batch))

    jitted = jax.jit(step, donate_argnums=(0, 1))
    jitted.traces = traces
    jitted.grad_fn = grad_fn  # for tracing the collectives (comm.collective_bytes)
    jitted.accumulate, jitted.apply = make_accumulate_steps(grad_fn, tx, traces)
    return jitted


def make_accumulate_steps(grad_fn: Callable, tx: optax.GradientTransformation, traces: list):
    """A train step split into micro-steps (memory: parallel.memory_gb): ``accumulate(params, sums,
    batch) -> sums`` adds a micro-batch's psum-ed (loss sum, weight sum, gradient of the loss sum) to
    ``sums`` (start from ``zero_sums``; donated), and ``apply(params, opt_state, sums)`` is the update of
    ``make_train_step`` from the totals. Sums of sums, one division: the update of the whole step up to
    float32 summation order (tests/test_memory.py). Tracing ``accumulate`` appends to ``traces``."""

    def accumulate(params, sums, batch):
        traces.append(tuple((k, tuple(v.shape)) for k, v in sorted(batch.items())))
        return jax.tree.map(jnp.add, sums, grad_fn(params, batch))

    return (
        jax.jit(accumulate, donate_argnums=(1,)),
        jax.jit(lambda params, opt_state, sums: _apply(tx, params, opt_state, *sums), donate_argnums=(0, 1)),
    )


def zero_sums(mesh: Mesh, params):
    """The (loss sum, weight sum, gradient) accumulator of ``make_accumulate_steps``, zero, replicated
    like ``params`` (made on the devices: no host transfer)."""
    del mesh  # the zeros follow the params' replicated sharding
    return _zeros(params)


@jax.jit
def _zeros(params):
    return jnp.float32(0.0), jnp.float32(0.0), jax.tree.map(jnp.zeros_like, params)


def compile_step(step, params, opt_state, mesh: Mesh, host_batch: dict[str, np.ndarray]):
    """Compile the jitted train ``step`` ahead of time for batches shaped like ``host_batch`` (this
    process's rows [L, ...], as ``shard_batch`` takes them). Returns the compiled executable, called
    like ``step`` with batches of that shape (no tracing, no compilation at the call). ``step`` may
    be a train step's ``accumulate`` (then ``opt_state`` stands for its sums)."""
    return lower_step(step, params, opt_state, mesh, host_batch).compile()


def lower_step(step, params, opt_state, mesh: Mesh, host_batch: dict[str, np.ndarray]):
    """``compile_step`` up to XLA: the traced and lowered step (``.compile()`` finishes it; XLA's part,
    which runs outside Python's lock, so several may compile at once on threads)."""
    sharding = NamedSharding(mesh, P(AXIS))
    abstract = {
        k: jax.ShapeDtypeStruct((mesh.size, *v.shape[1:]), v.dtype, sharding=sharding)
        for k, v in host_batch.items()
    }
    return step.lower(params, opt_state, abstract)


def step_bytes(compiled) -> float | None:
    """Bytes one device holds while running a compiled step (XLA's buffer assignment: temporaries,
    arguments and outputs, aliased ones once); None where the backend does not say."""
    try:
        m = compiled.memory_analysis()
    except (AttributeError, NotImplementedError, RuntimeError):
        return None
    if m is None:
        return None
    return float(
        m.temp_size_in_bytes + m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes
    )


def make_embed_step(embed_fn: Callable[[dict, dict], jax.Array], mesh: Mesh) -> Callable:
    """Jitted ``(params, batch) -> [P, N, H]`` node embeddings of every device's packed windows."""

    def per_device(params, batch):
        return embed_fn(params, _local(batch))[None]

    return jax.jit(
        shard_map(per_device, mesh=mesh, in_specs=(P(), P(AXIS)), out_specs=P(AXIS), check_vma=False)
    )


def make_sum_step(loss_fn: LossFn, mesh: Mesh) -> Callable:
    """Jitted ``(params, batch) -> (loss sum, weight sum)`` psum-ed over devices, no gradient: the
    evaluation of a task whose metric is a mean of per-example losses (node regression's MSE)."""

    def per_device(params, batch):
        return jax.lax.psum(loss_fn(params, _local(batch)), AXIS)

    return jax.jit(
        shard_map(per_device, mesh=mesh, in_specs=(P(), P(AXIS)), out_specs=(P(), P()), check_vma=False)
    )


# --- vertex partition -------------------------------------------------------------------------------


def _own_rows(x: jax.Array) -> jax.Array:
    n = x.shape[0] // jax.lax.axis_size(AXIS)
    return jax.lax.dynamic_slice_in_dim(x, jax.lax.axis_index(AXIS) * n, n)


# The models' view of the other devices under vertex partition (only valid inside a shard_map step).
VERTEX_COMM = Comm(
    gather=lambda x: jax.lax.all_gather(x, AXIS, tiled=True),
    sum=lambda x: jax.lax.psum(x, AXIS),
    own=_own_rows,
    to_global=lambda ids, n: ids + jax.lax.axis_index(AXIS) * n,
)


def vertex_loss(model, pair_loss: PairLoss) -> LossFn:
    """Per-device loss of vertex partition (batch from ``partition.vertex_batch``).

    The encoder runs on the device's own nodes with ``VERTEX_COMM``; the final embeddings [n, H] are
    gathered to [P n, H] and the device scores its own share of the target pairs (global ids).
    """
    vmodel = model.clone(encoder=model.encoder.clone(comm=VERTEX_COMM))

    def loss_fn(params, batch):
        h = vmodel.apply(params, batch, method=type(vmodel).embed)
        logits = vmodel.apply(params, VERTEX_COMM.gather(h), batch, method=type(vmodel).logits)
        return pair_loss(logits, batch)

    return loss_fn


# --- snapshot partition (pipeline over time) ----------------------------------------------------------

# a pipeline batch's per-time-offset keys: partition.TIME_KEYS and the valid-offset mask
PIPELINE_TIME_KEYS = (*TIME_KEYS, "valid")
PAIR_KEYS = ("pair_src", "pair_dst", "pair_label", "pair_weight")


def pipeline_loss(model, pair_loss: PairLoss, n_devices: int) -> LossFn:
    """Per-device loss of snapshot partition (batch from ``partition.pipeline_batch``).

    Local batch: ``feat`` [M, T, N], ``senders``/``receivers``/``edge_mask`` [M, T, E], ``valid``
    [M, T] (this device's T time offsets of each of the M micro-batches; invalid offsets pad W up to
    P T and keep the carry), pair arrays [M, Q]. Clock tick t: device p runs micro-batch t - p when it
    exists (else its work is the bubble, computed and discarded), takes its carry from device p - 1
    (device 0: the model's initial carry) and sends its new carry to device p + 1. The last device
    adds the head's loss of the micro-batch it finished. Returns (loss sum, weight sum) of this device
    (zero except on the last device).
    """
    last = n_devices - 1
    perm = [(i, i + 1) for i in range(last)]
    cls = type(model)

    def loss_fn(params, batch):
        m, n = batch["feat"].shape[0], batch["feat"].shape[2]
        p = jax.lax.axis_index(AXIS)
        init = model.apply(params, n, method=cls.initial_carry)

        def head(h, j):
            pb = {k: batch[k][j] for k in PAIR_KEYS}
            return pair_loss(model.apply(params, h, pb, method=cls.logits), pb)

        def skip(h, j):
            return jnp.zeros((), jnp.float32), jnp.zeros((), jnp.float32)

        def tick(state, t):
            received, num, den = state
            micro = t - p
            j = jnp.clip(micro, 0, m - 1)
            xs = {k: batch[k][j] for k in PIPELINE_TIME_KEYS}
            carry = jax.tree.map(lambda a, r: jnp.where(p == 0, a, r), init, received)
            carry, h = model.apply(params, carry, xs, method=cls.advance)
            done = (micro >= 0) & (micro < m) & (p == last)
            n_t, d_t = jax.lax.cond(done, head, skip, h, j)
            sent = jax.tree.map(lambda x: jax.lax.ppermute(x, AXIS, perm), carry)
            return (sent, num + n_t, den + d_t), None

        zeros = jax.tree.map(jnp.zeros_like, init)
        start = (zeros, jnp.zeros((), jnp.float32), jnp.zeros((), jnp.float32))
        (_, num, den), _ = jax.lax.scan(tick, start, jnp.arange(m + last))
        return num, den

    return loss_fn
