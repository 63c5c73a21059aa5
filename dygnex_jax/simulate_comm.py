"""The simulator's communication model: interconnects (``Link``, the α–β model), ring collectives, and
what a step sends (the parameters' gradients, a time boundary's recurrent state). Re-exported from
``simulate``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .config import ModelConfig
from .errors import UserError


@dataclasses.dataclass(frozen=True)
class Link:
    """An interconnect for the α–β model: seconds = alpha + bytes / bandwidth per message."""

    name: str
    alpha: float  # seconds per message (latency)
    bandwidth: float  # bytes per second per direction

    def describe(self) -> str:
        return f"{self.name} (alpha {self.alpha * 1e6:.1f} us, {self.bandwidth / 1e9:.2f} GB/s)"


LINKS = {
    # NVLink-class (one node's GPUs; NVLink 4 gives ~450 GB/s per direction, rings reach about a third)
    "nvlink": Link("nvlink", 5e-6, 150e9),
    # Ethernet-class (10 GbE with TCP latency): a cheap cluster
    "ethernet": Link("ethernet", 50e-6, 1.25e9),
    # gloo over loopback TCP between processes of one machine (STACK-NOTES: a 4 MB psum of 2 processes
    # took ~23 ms)
    "loopback": Link("loopback", 200e-6, 0.2e9),
    # fake devices of one process: XLA's in-memory collectives, counted in the profiled constant
    "none": Link("none", 0.0, math.inf),
}


def ring_allreduce_seconds(n_bytes: float, p: int, link: Link) -> float:
    """Ring all-reduce of ``n_bytes`` over p devices: reduce-scatter + all-gather."""
    if p <= 1 or n_bytes <= 0:
        return 0.0
    return 2 * (p - 1) * link.alpha + 2 * (p - 1) / p * n_bytes / link.bandwidth


def ring_allgather_seconds(n_bytes: float, p: int, link: Link) -> float:
    """Ring all-gather (or reduce-scatter) whose result is ``n_bytes`` on every device."""
    if p <= 1 or n_bytes <= 0:
        return 0.0
    return (p - 1) * link.alpha + (p - 1) / p * n_bytes / link.bandwidth


def resolve_link(name: str, alpha: float | None = None, bandwidth: float | None = None) -> Link:
    if name not in LINKS:
        raise UserError(f"unknown --link {name!r}: choose one of {', '.join(LINKS)}")
    link = LINKS[name]
    if alpha is not None or bandwidth is not None:
        link = Link(
            f"{name}*",
            link.alpha if alpha is None else alpha,
            link.bandwidth if bandwidth is None else bandwidth * 1e9,
        )
    if not (0 <= link.alpha < math.inf and 0 < link.bandwidth < math.inf):
        raise UserError(
            f"--alpha {link.alpha:g} s / --bandwidth {link.bandwidth / 1e9:g} GB/s: the latency must be a finite "
            "number >= 0 and the bandwidth finite and > 0"
        )
    return link


def param_count(model: ModelConfig, num_features: int) -> int:
    """Trainable parameters of ``models.create_model(model, num_features)`` (tested against Flax)."""
    h, hh, layers = model.hidden, model.head_hidden, model.layers
    head = 2 * h * hh + hh + hh * 2 + 2
    if model.name == "egcn_o":
        dims = [num_features] + [h] * layers
        if model.egcn_gru == "matrix":  # IBM's matrix GRU: W, U [r, r] and B [r, c] per gate
            enc = sum(r * c + 3 * (2 * r * r + r * c) for r, c in zip(dims[:-1], dims[1:]))
        else:  # PyG-T's rows form: torch.nn.GRU(c, c) over the rows, ih and hh [c, 3c] with biases
            enc = sum(r * c + 6 * c * c + 6 * c for r, c in zip(dims[:-1], dims[1:]))
    elif model.name == "gcrn_gru":
        k = model.cheb_k
        enc = sum(3 * (k * x * h + h) + 3 * (k * h * h + h) for x in [num_features] + [h] * (layers - 1))
    else:
        raise UserError(f"the simulator has no parameter count for model.name {model.name!r}")
    return enc + head


def state_bytes(model: ModelConfig, num_features: int, nodes: np.ndarray) -> np.ndarray:
    """Bytes of recurrent state a time boundary passes on, per window: EvolveGCN-O's evolved weight
    matrices (independent of the graph), GCRN's hidden node states (nodes × hidden × layers)."""
    nodes = np.asarray(nodes, np.float64)
    if model.name == "egcn_o":
        dims = [num_features] + [model.hidden] * model.layers
        return np.full(nodes.shape, 4.0 * sum(r * c for r, c in zip(dims[:-1], dims[1:])))
    return 4.0 * nodes * model.hidden * model.layers
