"""Model registry: a DGNN encoder by name + the task's head (link prediction, or node regression).

Adding a model = one new file with a Flax linen encoder ``(batch) -> [N, hidden]`` + one line here.
"""

from __future__ import annotations

import flax.linen as nn
import jax

from ..config import ModelConfig
from ..errors import UserError
from .egcn_h import EvolveGCNH
from .egcn_o import EvolveGCNO
from .gc_lstm import GCLSTM
from .gcn_gru import GCNGRU
from .gconv_lstm import GConvLSTM
from .gcrn_gru import GCRNGRU
from .head import LinkHead, NodeHead, dense_pair_scores
from .mpnn_lstm import MPNNLSTM
from .tgcn import TGCN

ENCODERS = {
    "egcn_o": lambda cfg, f: EvolveGCNO(f, cfg.hidden, cfg.layers, cfg.egcn_gru),
    "egcn_h": lambda cfg, f: EvolveGCNH(f, cfg.hidden, cfg.layers),
    "gcrn_gru": lambda cfg, f: GCRNGRU(f, cfg.hidden, cfg.layers, cfg.cheb_k),
    "gconv_lstm": lambda cfg, f: GConvLSTM(f, cfg.hidden, cfg.layers, cfg.cheb_k),
    "gc_lstm": lambda cfg, f: GCLSTM(f, cfg.hidden, cfg.layers, cfg.cheb_k),
    "tgcn": lambda cfg, f: TGCN(f, cfg.hidden, cfg.layers),
    "gcn_gru": lambda cfg, f: GCNGRU(f, cfg.hidden, cfg.layers),
    "mpnn_lstm": lambda cfg, f: MPNNLSTM(f, cfg.hidden),
}


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


def create_model(cfg: ModelConfig, num_features: int, task: str = "link") -> nn.Module:
    """The encoder ``model.name`` with the head of ``data.task``."""
    if cfg.name not in ENCODERS:
        raise UserError(f"unknown model.name {cfg.name!r}: choose one of {', '.join(sorted(ENCODERS))}")
    encoder = ENCODERS[cfg.name](cfg, num_features)
    if task == "node_reg":
        return NodeRegressor(encoder, NodeHead())
    return LinkPredictor(encoder, LinkHead(cfg.head_hidden))


__all__ = ["ENCODERS", "LinkPredictor", "NodeRegressor", "create_model", "dense_pair_scores"]
