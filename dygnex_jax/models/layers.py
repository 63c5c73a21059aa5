"""Graph operators on packed graphs (jraph segment sums over edge lists) and the recurrent cells they
share.

Every operator takes the graph of one time offset as a ``jraph.GraphsTuple`` (graph_view.py): ``nodes``
[N, F] the rows it transforms, ``senders``/``receivers`` int32 [E], ``edges`` float32 [E] the edge
weights (``edge_mask``: 0 for padding edges, which connect the padding node to itself); ``n_node`` /
``n_edge`` (the window slots as graphs, the padding graph last) are not read. An edge list alone is
viewed as one graph by ``graph_view.edge_list_graph``.

Vertex partition: the operators also run on one device's share of the nodes. ``h`` (the graph's nodes)
then holds the device's own n nodes, ``receivers`` are local ids (a device holds the edges whose
receiver it owns) and ``senders`` index the rows of ``comm.gather(h)`` (all devices' nodes). A ``Comm``
is how a model asks for the other devices' rows without seeing a mesh; the default ``LOCAL`` is the
identity (one device holds everything), and then the operators are exactly the single-device ones.

Compute dtype (``model.dtype``, ``compute_dtype``): every layer here takes a ``dtype``, the dtype of its
activations and of its matmul / aggregation inputs; parameters are float32 in either (flax's
``param_dtype``) and cast to ``dtype`` where they are used, so the parameter tree is one and the same.
The operators return rows in the dtype of their input rows; degrees, normalisation coefficients and the
segment sums over edges are float32 (a bfloat16 sum of a hub's hundreds of messages would keep 8 bits).
With "float32" every cast is the identity: the program is the float32 one, bit for bit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
from jax.typing import DTypeLike

from .graph_view import offset_graphs


def _identity(x: jax.Array) -> jax.Array:
    return x


def _same_ids(ids: jax.Array, n: int) -> jax.Array:
    return ids


@dataclasses.dataclass(frozen=True)
class Comm:
    """What a graph operator may ask of the other devices (parallel.py builds the collective one).

    Fields:
      gather: [n, ...] this device's rows -> [N, ...] the rows of all devices, in device order.
      sum: any array -> its elementwise sum over devices.
      own: [N, ...] rows of all devices -> [n, ...] this device's rows.
      to_global: (own node ids, n own nodes) -> their ids among all devices' nodes (self-loop tests).
    """

    gather: Callable[[jax.Array], jax.Array] = _identity
    sum: Callable[[jax.Array], jax.Array] = _identity
    own: Callable[[jax.Array], jax.Array] = _identity
    to_global: Callable[[jax.Array, int], jax.Array] = _same_ids


LOCAL = Comm()

# ``model.dtype`` (config.py) -> the compute dtype of activations
COMPUTE_DTYPES: dict[str, jnp.dtype] = {
    "float32": jnp.dtype(jnp.float32),
    "bfloat16": jnp.dtype(jnp.bfloat16),
}


def compute_dtype(name: str) -> jnp.dtype:
    """The activations' dtype of ``model.dtype`` ``name`` ("float32" or "bfloat16")."""
    if name not in COMPUTE_DTYPES:
        raise ValueError(f"model.dtype must be one of {', '.join(COMPUTE_DTYPES)}, got {name!r}")
    return COMPUTE_DTYPES[name]


def _segment_sum(data: jax.Array, segment_ids: jax.Array, num_segments: int) -> jax.Array:
    """``jraph.segment_sum`` accumulated in float32, returned in ``data``'s dtype (the identity's cast
    for float32 data)."""
    out = jraph.segment_sum(data.astype(jnp.float32), segment_ids, num_segments=num_segments)
    return out.astype(data.dtype)


def gcn_coefficients(graph: jraph.GraphsTuple, comm: Comm = LOCAL) -> tuple[jax.Array, jax.Array]:
    """float32 (edge coefficients [E], self-loop coefficients [N]) of ``gcn_aggregate``'s operator, which
    depend on the graph alone: a model running several GCN layers on one time offset computes them once
    (under vertex partition the inverse degrees are an all-gather: one per offset instead of one per
    layer). ``graph.nodes`` only gives the own node count N."""
    senders, receivers, edge_mask = graph.senders, graph.receivers, graph.edges
    n = graph.nodes.shape[0]
    loop = senders == comm.to_global(receivers, n)  # receivers are own nodes
    w = jnp.where(loop, 0.0, edge_mask)
    has_loop = jraph.segment_sum((loop & (edge_mask != 0)).astype(jnp.float32), receivers, num_segments=n) > 0
    loop_w = jraph.segment_sum(jnp.where(loop, edge_mask, 0.0), receivers, num_segments=n)
    self_w = jnp.where(has_loop, loop_w, 1.0)
    deg = jraph.segment_sum(w, receivers, num_segments=n) + self_w
    inv = jnp.where(deg > 0, jax.lax.rsqrt(jnp.maximum(deg, 1e-30)), 0.0)
    return w * comm.gather(inv)[senders] * inv[receivers], self_w * inv * inv


def gcn_aggregate(
    graph: jraph.GraphsTuple, comm: Comm = LOCAL, coef: tuple[jax.Array, jax.Array] | None = None
) -> jax.Array:
    """``D^-1/2 (A + S) D^-1/2 h`` (Kipf & Welling) with PyG ``gcn_norm``'s edge weights, ``h`` =
    ``graph.nodes``: ``graph.edges`` weighs every edge (0 for padding), D is the weighted in-degree
    including the self-loop, and S is ``add_remaining_self_loops``: a node's self-loop weight is that of
    its own self-loop edge when the graph has one, else 1.

    Args: graph: a ``jraph.GraphsTuple`` (graph_view.py), nodes [N, F] (own nodes), edges / senders /
      receivers [E] (an edge list alone: ``graph_view.edge_list_graph``); comm (see module doc); coef:
      this graph's ``gcn_coefficients`` when the caller has them (else computed here).
      Returns [N, F] in ``h``'s dtype (degrees and the sums over edges in float32).
    """
    h, senders, receivers = graph.nodes, graph.senders, graph.receivers
    edge_coef, self_coef = gcn_coefficients(graph, comm) if coef is None else coef
    msg = comm.gather(h)[senders] * edge_coef.astype(h.dtype)[:, None]  # messages in h's dtype
    agg = jraph.segment_sum(msg.astype(jnp.float32), receivers, num_segments=h.shape[0])  # summed in float32
    return (agg + h * self_coef.astype(h.dtype)[:, None]).astype(h.dtype)


def laplacian_coefficients(graph: jraph.GraphsTuple, comm: Comm = LOCAL) -> jax.Array:
    """float32 [E]: ``L_hat``'s entry of every edge (``scaled_laplacian``), which depends on the graph alone
    — a cell that applies ``L_hat`` to several inputs of one time offset computes it once (under vertex
    partition the degrees are a psum over devices: one collective per offset instead of one per input).
    ``graph.nodes`` only gives the own node count N."""
    senders, receivers, edge_mask = graph.senders, graph.receivers, graph.edges
    n = graph.nodes.shape[0]
    w = jnp.where(senders == comm.to_global(receivers, n), 0.0, edge_mask)
    # out-degrees of all nodes; under vertex partition each device counts the edges it holds
    # all devices' node count: the size comm.gather would return, found without running a collective
    n_all = jax.eval_shape(comm.gather, jax.ShapeDtypeStruct((n,), jnp.float32)).shape[0]
    deg = comm.sum(jraph.segment_sum(w, senders, num_segments=n_all))
    inv = jnp.where(deg > 0, jax.lax.rsqrt(jnp.maximum(deg, 1e-12)), 0.0)
    return -w * inv[senders] * comm.own(inv)[receivers]


def scaled_laplacian(
    graph: jraph.GraphsTuple, comm: Comm = LOCAL, coef: jax.Array | None = None
) -> jax.Array:
    """``L_hat h`` (``h`` = ``graph.nodes``) with ``L_hat = 2 L / lambda_max - I = -D^-1/2 A D^-1/2``
    (sym. normalisation, lambda_max = 2), self-loops removed, ``graph.edges`` as edge weights (0 for
    padding), weighted degrees over senders, messages sender -> receiver: the operator of PyG's
    ``ChebConv`` with its defaults (``remove_self_loops`` + ``get_laplacian(edge_weight, "sym")``).

    Args: graph: a ``jraph.GraphsTuple`` (graph_view.py), nodes [N, F] (own nodes), edges / senders /
      receivers [E] (an edge list alone: ``graph_view.edge_list_graph``); comm (see module doc); coef:
      this graph's ``laplacian_coefficients`` when the caller has them (else computed here).
      Returns [N, F] in ``h``'s dtype (degrees and the sums over edges in float32).
    """
    h, senders, receivers = graph.nodes, graph.senders, graph.receivers
    if coef is None:
        coef = laplacian_coefficients(graph, comm)
    h_all = comm.gather(h)
    return _segment_sum(h_all[senders] * coef.astype(h.dtype)[:, None], receivers, h.shape[0])


def node_inputs(batch: dict, num_features: int, dtype: str = "float32", codes: bool = False) -> jax.Array:
    """[W, N, F] node inputs of a packed batch in the compute dtype ``dtype`` (``model.dtype``, checked
    here: every encoder's entry): ``batch["x"]`` when the task has real-valued features, else the
    one-hot of the categories ``batch["feat"]`` (degree buckets). ``codes``: return the categories
    themselves (int32 [W, N]) instead of their one-hot, for an encoder whose first layers read them
    through ``CodeDense`` / ``rows_times`` (a row gather instead of a matmul by one-hot rows)."""
    dt = compute_dtype(dtype)
    if "x" in batch:
        return batch["x"].astype(dt)
    if codes:
        return batch["feat"]
    return jax.nn.one_hot(batch["feat"], num_features, dtype=dt)


def is_codes(x: jax.Array) -> bool:
    """Whether node rows ``x`` are category codes (integers: ``node_inputs(..., codes=True)``) rather than
    feature rows."""
    return jnp.issubdtype(x.dtype, jnp.integer)


def rows_times(x: jax.Array, w: jax.Array) -> jax.Array:
    """``x @ w`` for feature rows ``x`` [..., F]; for category codes ``x`` [...] the rows ``w[x]`` — what
    the one-hot of ``x`` times ``w`` is, exactly (a sum of one product and zeros), at the cost of a
    gather instead of F multiply-adds per output (the uncapped degree one-hot is 1,459 wide on AS-733)."""
    if is_codes(x):
        return jnp.take(w, x, axis=0, mode="clip")
    return x @ w


class CodeDense(nn.Dense):
    """``nn.Dense`` (same parameters, same names, same values) that also takes category codes: for an
    integer ``x`` [...] it returns ``kernel[x] * scale[..., None] + bias`` — the dense layer of the one-hot
    rows of ``x`` (scaled by ``scale``, default 1), exactly, without the one-hot. ``in_features``: the
    one-hot width (the kernel's rows), needed for codes; feature rows use ``nn.Dense`` as it is."""

    in_features: int = 0

    @nn.compact
    def __call__(self, x: jax.Array, scale: jax.Array | None = None) -> jax.Array:
        if not is_codes(x):
            if scale is not None:
                x = x * scale[..., None].astype(x.dtype)
            return super().__call__(x)
        if self.in_features < 1:
            raise ValueError("CodeDense needs in_features (the one-hot width) to take category codes")
        kernel = self.param("kernel", self.kernel_init, (self.in_features, self.features), self.param_dtype)
        dt = self.dtype or self.param_dtype
        y = rows_times(x, kernel.astype(dt))
        if scale is not None:
            y = y * scale[..., None].astype(dt)
        if self.use_bias:
            y = y + self.param("bias", self.bias_init, (self.features,), self.param_dtype).astype(dt)
        return y


# ``model.remat`` (config.py) -> the ``jax.checkpoint`` policy of the time scan's body: "none" is no
# checkpoint at all (the body's activations of every offset are kept); "scan" saves nothing inside the
# body (the backward pass keeps the carry and inputs of every offset and recomputes the rest, one offset
# at a time).
REMAT_POLICIES: dict[str, Callable | None] = {"none": None, "scan": jax.checkpoint_policies.nothing_saveable}


def time_scan(body, remat: str = "none"):
    """``nn.scan`` over the leading time axis of ``body`` (a module class, or a function whose first
    argument is a module: ``(module, carry, xs_tau) -> (carry, out)``), the parameters shared by every
    time offset. ``remat`` (``model.remat``): "scan" wraps the body in ``nn.remat`` first, which changes
    neither the parameter tree nor the values, only what the backward pass keeps (``REMAT_POLICIES``)."""
    if remat not in REMAT_POLICIES:
        raise ValueError(f"model.remat must be one of {', '.join(REMAT_POLICIES)}, got {remat!r}")
    if remat != "none":
        # prevent_cse=False: inside a scan XLA cannot merge the recomputation into the forward pass
        body = nn.remat(body, prevent_cse=False, policy=REMAT_POLICIES[remat])
    return nn.scan(body, variable_broadcast="params", split_rngs={"params": False}, in_axes=0)


# ``model.activation`` after a GCN layer (EvolveGCN-O / -H, GCN-GRU): ReLU, or RReLU at its expected
# slope (torch.nn.RReLU(1/8, 1/3) in evaluation mode: a leaky ReLU of slope (1/8 + 1/3) / 2).
RRELU_MEAN_SLOPE = (1.0 / 8.0 + 1.0 / 3.0) / 2.0
ACTIVATIONS: dict[str, Callable] = {
    "relu": jax.nn.relu,
    "rrelu_mean": lambda x: jax.nn.leaky_relu(x, RRELU_MEAN_SLOPE),
}


def activation(name: str) -> Callable:
    """The function of ``model.activation`` ``name``."""
    if name not in ACTIVATIONS:
        raise ValueError(f"model.activation must be one of {', '.join(ACTIVATIONS)}, got {name!r}")
    return ACTIVATIONS[name]


def scan_steps(step_cls, name: str = "step", remat: str = "none", **kwargs):
    """``time_scan`` of a ``(carry, xs_tau) -> (carry, out)`` module (``remat``: ``model.remat``), built
    with ``kwargs`` under ``name``."""
    return time_scan(step_cls, remat)(name=name, **kwargs)


def torch_uniform(fan_in: int) -> Callable:
    """Initialiser of ``torch.nn.Linear``'s bias and of every weight and bias of ``torch.nn.GRU`` / ``LSTM``
    / ``GRUCell``: uniform in ``+-1/sqrt(fan_in)`` (``fan_in``: the Linear's inputs, the RNN's hidden size)."""
    bound = fan_in**-0.5

    def init(key, shape, dtype=jnp.float32):
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


# torch.nn.Linear's weight: kaiming-uniform with a = sqrt(5), i.e. uniform in +-1/sqrt(fan_in)
TORCH_LINEAR_KERNEL = nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")


def torch_linear(
    features: int, fan_in: int, name: str | None = None, dtype: DTypeLike = jnp.float32
) -> nn.Dense:
    """``nn.Dense`` initialised as ``torch.nn.Linear(fan_in, features)``: kernel and bias uniform in
    ``+-1/sqrt(fan_in)`` (torch's kaiming-uniform with ``a = sqrt(5)``, and its bias rule). ``name``: None
    inside ``setup`` (the attribute names it). ``dtype``: the compute dtype (float32 parameters, as in
    every ``nn.Dense`` here)."""
    return nn.Dense(
        features, kernel_init=TORCH_LINEAR_KERNEL, bias_init=torch_uniform(fan_in), name=name, dtype=dtype
    )


class DenseParams(nn.Module):
    """The parameters of an ``nn.Dense`` — ``kernel`` [fan_in, features], then with ``bias_init`` a ``bias``
    [features] — under its names, order and initialisers, returned instead of applied (a fused or chunked
    product reads them): ``() -> kernel``, or ``(kernel, bias)`` with ``bias_init``."""

    fan_in: int
    features: int
    kernel_init: Callable
    bias_init: Callable | None = None

    @nn.compact
    def __call__(self):
        kernel = self.param("kernel", self.kernel_init, (self.fan_in, self.features))
        if self.bias_init is None:
            return kernel
        return kernel, self.param("bias", self.bias_init, (self.features,))


def pyg_linear(features: int, name: str, dtype: DTypeLike = jnp.float32, in_features: int = 0) -> nn.Dense:
    """``nn.Dense`` without bias, initialised as the ``Linear(..., bias=False, weight_initializer="glorot")``
    inside PyG's ``GCNConv`` and ``ChebConv``: Glorot-uniform kernel; ``dtype``: the compute dtype;
    ``in_features`` > 0: a ``CodeDense`` of that width (it takes category codes too)."""
    return CodeDense(
        features,
        use_bias=False,
        kernel_init=nn.initializers.glorot_uniform(),
        name=name,
        dtype=dtype,
        in_features=in_features,
    )


def torch_rnn_dense(
    features: int, hidden: int, name: str, dtype: DTypeLike = jnp.float32, in_features: int = 0
) -> nn.Dense:
    """``nn.Dense`` initialised as one of ``torch.nn.GRU`` / ``LSTM``'s ``weight_*`` + ``bias_*`` pairs:
    kernel and bias uniform in ``+-1/sqrt(hidden)``; ``dtype``: the compute dtype; ``in_features`` > 0:
    a ``CodeDense`` of that width (it takes category codes too)."""
    init = torch_uniform(hidden)
    return CodeDense(
        features, kernel_init=init, bias_init=init, name=name, dtype=dtype, in_features=in_features
    )


class GCNConv(nn.Module):
    """PyG's ``GCNConv``: ``D^-1/2 (A + I) D^-1/2 x Theta + b``, initialised as PyG's (Glorot-uniform
    weight, zero bias)."""

    features: int
    use_bias: bool = True
    dtype: DTypeLike = jnp.float32  # compute dtype (model.dtype)
    in_features: int = 0  # > 0: x may be category codes [N] of this one-hot width (``CodeDense``)

    @nn.compact
    def __call__(self, x: jax.Array, graph: jraph.GraphsTuple) -> jax.Array:
        """``x`` [N, F] (or codes [N]) on the edges of ``graph`` (its nodes are not read) -> [N, features]
        in ``dtype``."""
        lin = pyg_linear(self.features, "lin", self.dtype, self.in_features)
        out = gcn_aggregate(graph._replace(nodes=lin(x)))
        if self.use_bias:
            out = out + self.param("bias", nn.initializers.zeros, (self.features,)).astype(self.dtype)
        return out


class GRUCell(nn.Module):
    """``torch.nn.GRU``'s cell, one step, gates in torch's order (r, z, n):

    ``r = sig(x W_ir + b_ir + h W_hr + b_hr)``, ``z = sig(x W_iz + b_iz + h W_hz + b_hz)``,
    ``n = tanh(x W_in + b_in + r * (h W_hn + b_hn))``, ``h' = (1 - z) n + z h``.
    Params ``ih`` / ``hh``: Dense kernels [in, 3H] / [H, 3H] (torch's ``weight_ih_l0.T``) with biases,
    initialised as torch's (uniform in +-1/sqrt(H)).
    """

    hidden: int
    dtype: DTypeLike = jnp.float32  # compute dtype (model.dtype); h' in it
    in_features: int = 0  # > 0: x may be category codes of this one-hot width (``CodeDense``)

    @nn.compact
    def __call__(self, x: jax.Array, h: jax.Array, scale: jax.Array | None = None) -> jax.Array:
        """One step from ``h``; ``x``: input rows (or codes), times ``scale`` [...] if given."""
        h = h.astype(self.dtype)
        gi = torch_rnn_dense(3 * self.hidden, self.hidden, "ih", self.dtype, self.in_features)(x, scale)
        gh = torch_rnn_dense(3 * self.hidden, self.hidden, "hh", self.dtype)(h)
        ir, iz, i_n = jnp.split(gi, 3, axis=-1)
        hr, hz, hn = jnp.split(gh, 3, axis=-1)
        r = jax.nn.sigmoid(ir + hr)
        z = jax.nn.sigmoid(iz + hz)
        n = jnp.tanh(i_n + r * hn)
        return (1.0 - z) * n + z * h


class LSTMCell(nn.Module):
    """``torch.nn.LSTM``'s cell, one step, gates in torch's order (i, f, g, o); ``ih`` / ``hh`` as in
    ``GRUCell`` with 4H columns (and torch's initialisation). Returns ``(h', c')``."""

    hidden: int
    dtype: DTypeLike = jnp.float32  # compute dtype (model.dtype); h', c' in it

    @nn.compact
    def __call__(self, x: jax.Array, h: jax.Array, c: jax.Array) -> tuple[jax.Array, jax.Array]:
        g = torch_rnn_dense(4 * self.hidden, self.hidden, "ih", self.dtype)(x)
        g = g + torch_rnn_dense(4 * self.hidden, self.hidden, "hh", self.dtype)(h)
        i, f, gg, o = jnp.split(g, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(gg)
        return jax.nn.sigmoid(o) * jnp.tanh(c), c


class MatrixGRU(nn.Module):
    """GRU over a weight matrix Q [rows, cols] (EvolveGCN-O): input and hidden state are both Q.

    ``z = sig(W_z Q + U_z Q + B_z)``, ``r = sig(W_r Q + U_r Q + B_r)``,
    ``Q~ = tanh(W_h Q + U_h (r * Q) + B_h)``, ``Q' = (1 - z) Q + z Q~``.
    """

    rows: int
    cols: int
    dtype: DTypeLike = jnp.float32  # compute dtype (model.dtype); Q' in it

    @nn.compact
    def __call__(self, q: jax.Array) -> jax.Array:
        init = nn.initializers.glorot_uniform()
        q = q.astype(self.dtype)

        def gate(name, act, x, h):
            w = self.param(f"{name}_W", init, (self.rows, self.rows)).astype(self.dtype)
            u = self.param(f"{name}_U", init, (self.rows, self.rows)).astype(self.dtype)
            b = self.param(f"{name}_b", nn.initializers.zeros, (self.rows, self.cols)).astype(self.dtype)
            return act(w @ x + u @ h + b)

        z = gate("update", jax.nn.sigmoid, q, q)
        r = gate("reset", jax.nn.sigmoid, q, q)
        q_tilde = gate("candidate", jnp.tanh, q, r * q)
        return (1.0 - z) * q + z * q_tilde


class _LSTMStackStep(nn.Module):
    """One time offset of stacked graph-LSTM cells (``cell(hidden, k)``: ``(x, (h, c), graph) -> (h', c')``);
    cell l reads cell l-1's new H. ``xs``: the offset's GraphsTuple, nodes = the inputs."""

    cell: type
    hidden: int
    layers: int
    k: int
    dtype: DTypeLike = jnp.float32
    num_features: int = 0  # > 0: the inputs are category codes of this one-hot width (cell 0 reads them)

    @nn.compact
    def __call__(self, states, graph):
        x = graph.nodes
        new = []
        for i, state in enumerate(states):
            width = {"in_features": self.num_features} if i == 0 and self.num_features else {}
            h, c = self.cell(self.hidden, self.k, self.dtype, name=f"cell_{i}", **width)(x, state, graph)
            new.append((h, c))
            x = h
        return tuple(new), None


class GraphLSTMEncoder(nn.Module):
    """Encoder of stacked graph-LSTM cells (the subclass sets ``cell``): packed batch -> node embeddings
    [N, hidden], the last cell's H at the last history snapshot; states start at zero in every window."""

    num_features: int
    hidden: int
    layers: int = 1
    cheb_k: int = 2
    remat: str = "none"  # model.remat: rematerialise the time scan's body (``time_scan``)
    dtype: str = "float32"  # model.dtype: the activations' dtype (``compute_dtype``)
    cell = None  # a class attribute of the subclass, not a field
    takes_codes = False  # class attribute: the cell's input transform reads category codes (``rows_times``)

    @nn.compact
    def __call__(self, batch: dict) -> jax.Array:
        n = batch["node_window"].shape[0]
        x = node_inputs(batch, self.num_features, self.dtype, codes=self.takes_codes)
        dt = compute_dtype(self.dtype)
        zeros = jnp.zeros((n, self.hidden), dt)
        states = tuple((zeros, zeros) for _ in range(self.layers))
        xs = offset_graphs(batch, x)
        step = scan_steps(
            _LSTMStackStep,
            remat=self.remat,
            cell=self.cell,
            hidden=self.hidden,
            layers=self.layers,
            k=self.cheb_k,
            dtype=dt,
            num_features=self.num_features if self.takes_codes else 0,
        )
        states, _ = step(states, xs)
        return states[-1][0]
