"""PyTorch twins of our encoders, built from PyG-Temporal's layers with our window semantics.

Every module maps ``(xs, es)`` -- W node-feature tensors [N, F] and W ``edge_index`` tensors [2, E] of one
graph per time offset (one window, or several windows as a disjoint union) -- to the embeddings [N, H] at
the last offset. The recurrent state restarts on every call (EvolveGCN's protocol; PyG-Temporal keeps it
across calls unless reset), stacked cells read the previous cell's new state at the same offset, and
EvolveGCN layers are followed by ReLU, as in ``dygnex_jax/models``.
"""

from __future__ import annotations

import torch

from ..config import ModelConfig
from ..errors import UserError
from .pyg_compat import recurrent


class RecurrentStack(torch.nn.Module):
    """Stacked PyG-T cells (GConvGRU, TGCN: ``lstm=False``; GConvLSTM, GCLSTM: ``lstm=True``)."""

    def __init__(self, cells, lstm: bool):
        super().__init__()
        self.cells, self.lstm = torch.nn.ModuleList(cells), lstm

    def forward(self, xs, es):
        states = [None] * len(self.cells)
        for x, e in zip(xs, es):
            for i, cell in enumerate(self.cells):
                if self.lstm:
                    h, c = (None, None) if states[i] is None else states[i]
                    states[i] = cell(x, e, H=h, C=c)
                    x = states[i][0]
                else:
                    states[i] = x = cell(x, e, H=states[i])
        return x


class EvolveStack(torch.nn.Module):
    """Stacked EvolveGCN-O / -H layers with ReLU; evolved weights restart on every call."""

    def __init__(self, layers):
        super().__init__()
        self.layers = torch.nn.ModuleList(layers)

    def forward(self, xs, es):
        for layer in self.layers:
            layer.reinitialize_weight()
        for x, e in zip(xs, es):
            for layer in self.layers:
                x = torch.relu(layer(x, e))
        return x


class GCNGRU(torch.nn.Module):
    """PyG ``GCNConv`` stack (ReLU) per offset, then ``torch.nn.GRUCell`` over time (no PyG-T layer)."""

    def __init__(self, f: int, h: int, layers: int):
        super().__init__()
        from torch_geometric.nn import GCNConv

        self.convs = torch.nn.ModuleList([GCNConv(f if i == 0 else h, h) for i in range(layers)])
        self.gru = torch.nn.GRUCell(h, h)

    def forward(self, xs, es):
        h = None
        for x, e in zip(xs, es):
            for conv in self.convs:
                x = torch.relu(conv(x, e))
            h = self.gru(x, h)
        return h


class LinkHead(torch.nn.Module):
    """EvolveGCN's link head, as ``dygnex_jax.models.head.LinkHead``: MLP on [h_src, h_dst] -> 2 logits."""

    def __init__(self, h: int, hidden: int):
        super().__init__()
        self.hidden, self.out = torch.nn.Linear(2 * h, hidden), torch.nn.Linear(hidden, 2)

    def forward(self, h_src, h_dst):
        return self.out(torch.relu(self.hidden(torch.cat([h_src, h_dst], dim=-1))))

    @torch.no_grad()
    def pair_scores(self, h: torch.Tensor, chunk: int = 256) -> torch.Tensor:
        """[L, L] ``logit_edge - logit_nonedge`` of every local pair, in row chunks."""
        w1, b1 = self.hidden.weight, self.hidden.bias
        half = h.shape[1]
        a = h @ w1[:, :half].T + b1
        b = h @ w1[:, half:].T
        v = self.out.weight[1] - self.out.weight[0]
        c = self.out.bias[1] - self.out.bias[0]
        rows = [torch.relu(a[i : i + chunk, None, :] + b[None]) @ v for i in range(0, len(a), chunk)]
        return torch.cat(rows) + c


class LinkModel(torch.nn.Module):
    """Encoder + head: ``(xs, es, src, dst) -> [Q, 2]`` logits (one ``forward`` for DDP)."""

    def __init__(self, encoder: torch.nn.Module, head: LinkHead):
        super().__init__()
        self.encoder, self.head = encoder, head

    def forward(self, xs, es, src, dst):
        h = self.encoder(xs, es)
        return self.head(h[src], h[dst])


def build_encoder(cfg: ModelConfig, num_features: int) -> torch.nn.Module:
    """The PyG-T twin of ``cfg.name`` (see the module docstring)."""
    rec = recurrent()
    f, h, n = num_features, cfg.hidden, cfg.layers
    dims = [f] + [h] * (n - 1)
    if cfg.name == "egcn_o":
        if f != h or cfg.egcn_gru != "rows":
            raise UserError(
                "PyG-Temporal's EvolveGCNO is square with a row-wise GRU: set data.max_degree = model.hidden "
                "and model.egcn_gru=rows"
            )
        return EvolveStack([rec.EvolveGCNO(h) for _ in range(n)])
    if cfg.name == "gcrn_gru":
        return RecurrentStack([rec.GConvGRU(d, h, cfg.cheb_k) for d in dims], lstm=False)
    if cfg.name == "gconv_lstm":
        return RecurrentStack([rec.GConvLSTM(d, h, cfg.cheb_k) for d in dims], lstm=True)
    if cfg.name == "gc_lstm":
        return RecurrentStack([rec.GCLSTM(d, h, cfg.cheb_k) for d in dims], lstm=True)
    if cfg.name == "tgcn":
        return RecurrentStack([rec.TGCN(d, h) for d in dims], lstm=False)
    if cfg.name == "gcn_gru":
        return GCNGRU(f, h, n)
    raise UserError(
        f"model {cfg.name!r} has no PyTorch baseline runner twin (egcn_h and mpnn_lstm need one PyG-T module "
        "per graph size): use egcn_o, gcrn_gru, gconv_lstm, gc_lstm, tgcn or gcn_gru"
    )
