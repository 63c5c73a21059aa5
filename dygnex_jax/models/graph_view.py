"""A packed batch's graphs as jraph ``GraphsTuple``s: the form the graph operators (layers.py) take.

One time offset of a packed batch (graphs.py) is a disjoint union of graphs: window slot j's snapshot
graph on its contiguous node rows, then the padding rows. Its view ``offset_graph(batch, tau)``:

* ``nodes`` [N, ...]: the node rows (the model's inputs at that offset, or what a layer has made of them).
* ``edges`` [E]: ``edge_mask``, the edge weights (1, or the dataset's weight; 0 for padding edges).
* ``senders`` / ``receivers`` [E]: the packed ids of the edge ends (messages go sender -> receiver).
* ``n_node`` [K+1]: ``window_sizes``, the nodes of every window slot, the padding graph last: jraph's
  padding convention (``jraph.pad_with_graphs``) with the slots as graphs. Unused slots are empty
  graphs, and sum(n_node) == N since the padding graph holds every padding node (at least the last
  node, which all padding edges join to itself).
* ``n_edge`` [K+1]: the edges of every slot at that offset, the padding edges in the padding graph;
  sum(n_edge) == E. The packer lays a window's edges out after the previous windows' (padding edges
  last), so the edges are ordered by graph, as jraph's ``n_edge`` means.
* ``globals``: None.

n_edge is not a key of the batch: it is derived here, exactly, from what the batch holds (the slot of
every edge is that of its receiver, ``node_window[receivers]``; an edge never joins two windows), so the
packer's output, the host-to-device transfer and the partitioned paths (partition.py, parallel.py) stay
as they were. The graph operators read nodes, edges, senders and receivers only; what a model does
not read is removed by XLA's dead-code elimination, so n_node and n_edge cost a step nothing
(tools/bench_step.py measures the step and its compiled FLOPs against the code before this view).

Layouts (padding.py): ``scan`` and ``last`` give edges [T, E] per offset, and ``offset_graphs`` stacks
the T per-offset views along a leading axis (every field [T, ...]: ``nn.scan`` and ``jax.vmap`` slice it
per offset); ``flat`` gives one edge list over the W*N node-time rows (``tau * N + node``), and
``flat_graph`` views it as W x (K+1) graphs in row order, (offset, slot) with the slot fastest: the
slot-K graphs of offsets before W-1 hold that offset's padding rows and no edge, the last graph is the
padding graph of jraph's convention (all padding edges join node-time row W*N - 1). The packer orders
flat edges by offset, then window, so they are ordered by graph there too.

Vertex partition (``layers.Comm``): a device's batch holds its own node rows, window slots and the
edges it receives; ``senders`` then index the rows of ``comm.gather(nodes)`` (all devices' nodes), not
``nodes``: n_edge counts a device's edges by their (own) receivers, so it stays exact. A batch without
the window partition (``node_window`` / ``window_sizes``: the snapshot pipeline hands a model's
``advance`` the time keys alone) is viewed as one graph of all N rows and E edges.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import jraph


def _default_nodes(batch: Mapping):
    """The batch's own node rows: ``x`` (real-valued inputs) or ``feat`` (categories), [T, N, ...]."""
    return batch["x"] if "x" in batch else batch.get("feat")


def _count(ids: jax.Array, num: int) -> jax.Array:
    """[num] occurrences of every id of ``ids`` (int32)."""
    return jraph.segment_sum(jnp.ones(ids.shape, jnp.int32), ids, num_segments=num)


def offset_graphs(batch: Mapping, nodes=None) -> jraph.GraphsTuple:
    """The per-offset graphs of a ``scan`` or ``last`` layout batch (edges [T, E]), stacked: every field
    has a leading T axis (``nodes`` [T, N, ...], ``n_node`` / ``n_edge`` [T, K+1]); see the module doc.

    ``nodes``: [T, N, ...] node rows (default: the batch's ``x``, else its ``feat`` categories, of the
    last T offsets: a ``last`` layout batch's one row of edges is offset W-1's).
    """
    senders, receivers, edge_mask = batch["senders"], batch["receivers"], batch["edge_mask"]
    if senders.ndim != 2:
        raise ValueError(f"offset_graphs takes edges [T, E] (scan / last layout), got {senders.shape}")
    t, e = senders.shape
    if nodes is None:
        nodes = _default_nodes(batch)
        nodes = None if nodes is None else nodes[nodes.shape[0] - t :]  # last layout: offset W-1's rows
    if "window_sizes" in batch and "node_window" in batch:
        sizes, node_window = batch["window_sizes"], batch["node_window"]
        slots = sizes.shape[0]
        n_node = jnp.broadcast_to(sizes, (t, slots))
        ids = node_window[receivers] + (jnp.arange(t, dtype=jnp.int32) * slots)[:, None]
        n_edge = _count(ids.reshape(-1), t * slots).reshape(t, slots)
    else:  # no window partition: one graph
        n = (nodes if nodes is not None else batch["feat"]).shape[1]
        n_node = jnp.full((t, 1), n, jnp.int32)
        n_edge = jnp.full((t, 1), e, jnp.int32)
    return jraph.GraphsTuple(
        nodes=nodes,
        edges=edge_mask,
        senders=senders,
        receivers=receivers,
        n_node=n_node,
        n_edge=n_edge,
        globals=None,
    )


def at_offset(graphs: jraph.GraphsTuple, tau) -> jraph.GraphsTuple:
    """Offset ``tau`` of ``offset_graphs``' stacked view: one GraphsTuple (n_node [K+1], ...)."""
    return jax.tree.map(lambda a: a[tau], graphs)


def offset_graph(batch: Mapping, tau, nodes=None) -> jraph.GraphsTuple:
    """Time offset ``tau`` of a ``scan`` / ``last`` layout batch as one GraphsTuple (module doc);
    ``nodes``: that offset's node rows [N, ...] (default: the batch's ``x`` / ``feat`` at ``tau``)."""
    graph = at_offset(offset_graphs(batch), tau)
    return graph if nodes is None else graph._replace(nodes=nodes)


def flat_graph(batch: Mapping, nodes=None) -> jraph.GraphsTuple:
    """A ``flat`` layout batch (edges [E] over the W*N node-time rows) as one GraphsTuple of W x (K+1)
    graphs, (offset, slot) in row order (module doc).

    ``nodes``: [W*N, ...] node-time rows (default: the batch's ``x`` / ``feat`` rows, flattened).
    """
    senders, receivers, edge_mask = batch["senders"], batch["receivers"], batch["edge_mask"]
    if senders.ndim != 1:
        raise ValueError(f"flat_graph takes edges [E] (flat layout), got {senders.shape}")
    if nodes is None:
        own = _default_nodes(batch)
        nodes = own.reshape(-1, *own.shape[2:])
    sizes, node_window = batch["window_sizes"], batch["node_window"]
    n, slots = node_window.shape[0], sizes.shape[0]
    w_len = nodes.shape[0] // n
    ids = (receivers // n) * slots + node_window[receivers % n]
    return jraph.GraphsTuple(
        nodes=nodes,
        edges=edge_mask,
        senders=senders,
        receivers=receivers,
        n_node=jnp.tile(sizes, w_len),
        n_edge=_count(ids, w_len * slots),
        globals=None,
    )


def packed_graphs(batch: Mapping, nodes=None) -> jraph.GraphsTuple:
    """The graphs of a packed batch in its layout: ``offset_graphs`` (edges [T, E]: stacked per offset)
    or ``flat_graph`` (edges [E]). ``nodes``: [T, N, ...] node rows (the flat view flattens them to
    [T*N, ...]); default: the batch's own."""
    if batch["senders"].ndim == 1:
        if nodes is not None:
            nodes = nodes.reshape(-1, *nodes.shape[2:])
        return flat_graph(batch, nodes)
    return offset_graphs(batch, nodes)


def edge_list_graph(nodes: jax.Array, senders, receivers, edge_mask) -> jraph.GraphsTuple:
    """Node rows and one edge list (weights ``edge_mask``) as a GraphsTuple of a single graph (n_node
    [1] = N, n_edge [1] = E), for the layers.py operators."""
    return jraph.GraphsTuple(
        nodes=nodes,
        edges=edge_mask,
        senders=senders,
        receivers=receivers,
        n_node=jnp.array([nodes.shape[0]], jnp.int32),
        n_edge=jnp.array([senders.shape[0]], jnp.int32),
        globals=None,
    )
