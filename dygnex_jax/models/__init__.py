"""Model registry: a DGNN encoder by name + the task's head (link prediction, or node regression).

Adding a model = one new file with a Flax linen encoder ``(batch) -> [N, hidden]`` + one line here.

Edge layouts of a packed batch (one device): ``scan`` (every model): ``senders``/``receivers``/``edge_mask``
[W, E], the edges of each time offset padded to the largest offset's count, the graph operators run per
offset inside the recurrence. ``flat`` (``FLAT_LAYOUT_MODELS``): the same keys [E_total], one edge list over
the W*N node-time rows (id ``tau * N + node``; padding edges ``W*N - 1 -> W*N - 1`` with mask 0), so the
device pays the sum of the offsets' edges instead of W times the largest. Only models whose graph operators
never read their recurrent state can take it: their GCNs then run once over all offsets and the recurrence
runs node-wise afterwards. A model tells the layouts apart by ``batch["senders"].ndim`` (1: flat, 2: scan);
both take the same parameters. ``last`` (``LAST_OFFSET_MODELS``: EvolveGCN-O): edges [1, E] of the last
offset alone in packed node ids, told apart from ``scan`` by their one row against W offsets of node inputs;
a model that reads every offset rejects it (its scan sees mismatched time axes).

The graph operators (layers.py) take these edges as ``jraph.GraphsTuple``s (graph_view.py): per offset in
``scan`` / ``last`` (the window slots as graphs, the padding graph last), one over the node-time rows in
``flat``.
"""

from __future__ import annotations

import flax.linen as nn
import jax

from ..config import FLAT_LAYOUT_MODELS, ModelConfig
from ..errors import UserError
from .egcn_h import EvolveGCNH
from .egcn_o import EvolveGCNO
from .gc_lstm import GCLSTM
from .gcn_gru import GCNGRU
from .gconv_lstm import GConvLSTM
from .gcrn_gru import GCRNGRU
from .head import LinkHead, NodeHead, dense_pair_scores, head_chunk
from .mpnn_lstm import MPNNLSTM
from .tgcn import TGCN


def _common(cfg: ModelConfig) -> dict:
    """The keys every encoder takes alike: ``model.remat`` and ``model.dtype``."""
    return {"remat": cfg.remat, "dtype": cfg.dtype}


ENCODERS = {
    "egcn_o": lambda cfg, f: EvolveGCNO(
        f, cfg.hidden, cfg.layers, cfg.egcn_gru, **_common(cfg), act=cfg.activation
    ),
    "egcn_h": lambda cfg, f: EvolveGCNH(f, cfg.hidden, cfg.layers, **_common(cfg), act=cfg.activation),
    "gcrn_gru": lambda cfg, f: GCRNGRU(f, cfg.hidden, cfg.layers, cfg.cheb_k, **_common(cfg)),
    "gconv_lstm": lambda cfg, f: GConvLSTM(f, cfg.hidden, cfg.layers, cfg.cheb_k, **_common(cfg)),
    "gc_lstm": lambda cfg, f: GCLSTM(f, cfg.hidden, cfg.layers, cfg.cheb_k, **_common(cfg)),
    "tgcn": lambda cfg, f: TGCN(f, cfg.hidden, cfg.layers, **_common(cfg)),
    "gcn_gru": lambda cfg, f: GCNGRU(f, cfg.hidden, cfg.layers, **_common(cfg), act=cfg.activation),
    "mpnn_lstm": lambda cfg, f: MPNNLSTM(f, cfg.hidden, **_common(cfg)),
}

# Models whose graph convolutions read only their inputs, never the recurrent carry (see each module):
# EvolveGCN-O (the weights evolve without the graph), T-GCN (GCNs of the cell input), GCN-GRU (GCN stack,
# then a GRU), MPNN-LSTM (GCNs per snapshot, then LSTMs). Not egcn_h (its weights evolve from pooled node
# embeddings of each offset), gcrn_gru / gconv_lstm / gc_lstm (Chebyshev convolutions of the hidden state).
# (declared in config.py, which the JAX-free planner reads)


def _check_name(name: str) -> None:
    if name not in ENCODERS:
        raise UserError(f"unknown model.name {name!r}: choose one of {', '.join(sorted(ENCODERS))}")


def model_layout(name: str) -> str:
    """The edge layout the model ``name`` is best run with: "flat" for ``FLAT_LAYOUT_MODELS``, else "scan"."""
    _check_name(name)
    return "flat" if name in FLAT_LAYOUT_MODELS else "scan"


class LinkPredictor(nn.Module):
    """Encoder + head. ``__call__`` -> [Q, 2] logits of the batch's target pairs; ``embed`` -> [N, H].

    The partitioned steps (parallel.py) call the pieces: ``initial_carry`` / ``advance`` (the
    encoder's recurrence over a slice of time offsets, snapshot partition) and ``logits`` (the head on
    embeddings gathered from all devices, vertex partition).
    """

    encoder: nn.Module
    head: LinkHead

    def __call__(self, batch: dict) -> jax.Array:
        return self.logits(self.encoder(batch), batch)

    def embed(self, batch: dict) -> jax.Array:
        return self.encoder(batch)

    def logits(self, h: jax.Array, batch: dict) -> jax.Array:
        """[N, H] embeddings -> [Q, 2] logits of the pairs ``batch["pair_src"/"pair_dst"]``."""
        return self.head(h, batch["pair_src"], batch["pair_dst"])

    def initial_carry(self, n: int):
        return self.encoder.initial_carry(n)

    def advance(self, carry, xs: dict):
        return self.encoder.advance(carry, xs)


class NodeRegressor(nn.Module):
    """Encoder + ``NodeHead`` (``data.task: node_reg``): ``__call__`` -> [N] predicted value of every
    packed node at the target step; ``embed`` -> [N, H]."""

    encoder: nn.Module
    head: NodeHead

    def __call__(self, batch: dict) -> jax.Array:
        return self.head(self.encoder(batch))

    def embed(self, batch: dict) -> jax.Array:
        return self.encoder(batch)


def set_matmul_precision(choice: str) -> None:
    """``model.matmul_precision`` for every float32 product traced from now on in this process (JAX's
    ``jax_default_matmul_precision``): "highest" = true float32 (XLA:CPU computes that anyway; on NVIDIA
    GPUs JAX's default is TF32, which put every PyG-T parity case 1e-4..1e-3 off on an H200), "default" =
    the backend's own choice."""
    jax.config.update("jax_default_matmul_precision", None if choice == "default" else choice)


def create_model(cfg: ModelConfig, num_features: int, task: str = "link") -> nn.Module:
    """The encoder ``model.name`` with the head of ``data.task``; sets ``model.matmul_precision`` for the
    process (``set_matmul_precision``: the steps are traced after the model is made)."""
    _check_name(cfg.name)
    set_matmul_precision(cfg.matmul_precision)
    encoder = ENCODERS[cfg.name](cfg, num_features)
    if task == "node_reg":
        return NodeRegressor(encoder, NodeHead(cfg.dtype))
    chunk = head_chunk(cfg.head_chunk, jax.default_backend())
    return LinkPredictor(encoder, LinkHead(cfg.head_hidden, chunk, cfg.dtype))


__all__ = [
    "ENCODERS",
    "FLAT_LAYOUT_MODELS",
    "LinkPredictor",
    "NodeRegressor",
    "create_model",
    "dense_pair_scores",
    "model_layout",
    "set_matmul_precision",
]
