"""What a training step holds in memory, and how many micro-steps a step needs to fit (JAX-free).

Whole-window scheduling replicates every active node once per window in a step, so a step's memory
grows as its padded budget: nodes x W x widths for the encoder and what autodiff keeps of it, edges,
pairs, window slots. ``StepMemory`` is a linear model of the bytes one device holds while it runs a
compiled step of budget b::

    bytes(b) = constant + per_node * b.nodes + per_edge * b.edges + per_pair * b.pairs + per_window * b.windows

fitted (non-negative least squares) to XLA's own buffer assignment of compiled steps (``memory_analysis``
of the run's model, widths, layout and W: ``memory_plan.py`` compiles the probes): the per-node figure
carries W and the widths, the per-pair one the head's (constant since the head runs in rematerialised
chunks: ``model.head_chunk``).

The device budget (``parallel.memory_gb``; ``device_budget``) is a hard limit per device per step: a
run whose planned steps need more runs every optimiser step as ``k`` micro-steps of ``B / k`` windows
(``accumulation_counts``: k a divisor of B, so that every update still sums B windows), their gradient
sums added before one update: the same update as the whole step, up to float32 summation order. A
single window per device that does not fit is a ``UserError`` naming the estimate and the options.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .errors import UserError
from .padding import Budget
from .resources import available_memory, human_bytes

GIB = 2.0**30
CPU_SHARE = 0.5  # parallel.memory_gb=0 on CPU: this share of the memory available at start
ACCELERATOR_SHARE = 0.9  # ... on an accelerator: this share of what it reports
FIELDS = ("constant", "per_node", "per_edge", "per_pair", "per_window")


@dataclasses.dataclass(frozen=True)
class StepMemory:
    """Bytes per padded node, edge, pair and window slot of one device's step, and a constant."""

    constant: float
    per_node: float
    per_edge: float
    per_pair: float
    per_window: float

    def predict(self, budget: Budget) -> float:
        return float(np.dot(self.coefficients, (1.0, *budget.as_tuple())))

    @property
    def coefficients(self) -> np.ndarray:
        return np.array([getattr(self, f) for f in FIELDS])

    def describe(self) -> str:
        return (
            f"{human_bytes(self.per_node)} per padded node, {human_bytes(self.per_edge)} per edge, "
            f"{human_bytes(self.per_pair)} per pair, {human_bytes(self.per_window)} per window slot, "
            f"{human_bytes(self.constant)} constant"
        )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def fit(cls, budgets: list[Budget], measured: list[float]) -> StepMemory:
        """Non-negative least squares of ``measured`` bytes on the budgets' sizes (a dimension that does
        not vary among ``budgets`` gets no coefficient of its own: the constant carries it)."""
        from scipy.optimize import nnls

        x = np.array([(1.0, *b.as_tuple()) for b in budgets], np.float64)
        y = np.asarray(measured, np.float64)
        varies = np.r_[True, x[:, 1:].std(axis=0) > 0]
        scale = np.maximum(x[:, varies].max(axis=0), 1.0)  # comparable columns for the solver
        coef = np.zeros(len(FIELDS))
        coef[varies] = nnls(x[:, varies] / scale, y, maxiter=1000)[0] / scale
        return cls(*map(float, coef))


def probe_budgets(largest: Budget) -> list[Budget]:
    """Budgets to compile for ``StepMemory.fit`` around the run's largest step ``largest``: itself and
    each dimension in turn halved (nodes, edges, pairs, windows), so every coefficient is measured at
    the sizes the run has, and a quarter of everything, for the constant."""

    def half(x: int) -> int:
        return max(x // 2, 1)

    n, e, q, k = largest.as_tuple()
    return [
        largest,
        Budget(half(n), e, q, k),
        Budget(n, half(e), q, k),
        Budget(n, e, half(q), k),
        Budget(n, e, q, half(k)),
        Budget(max(n // 4, 2), max(e // 4, 1), max(q // 4, 1), k),
    ]


def device_budget(memory_gb: float, reported: float | None, cpu_devices: int) -> tuple[float, str]:
    """(bytes one device may use for a step, where the figure comes from). ``memory_gb`` is the
    config's (0 = auto); ``reported``: the accelerator's own limit in bytes (None on CPU);
    ``cpu_devices``: the CPU devices of this process sharing the host's memory."""
    if memory_gb > 0:
        return memory_gb * GIB, f"parallel.memory_gb={memory_gb:g}"
    if reported:
        return (
            ACCELERATOR_SHARE * reported,
            f"{ACCELERATOR_SHARE:.0%} of the {human_bytes(reported)} the device reports",
        )
    avail, source = available_memory()
    share = CPU_SHARE * avail / max(cpu_devices, 1)
    per = f" / {cpu_devices} CPU devices" if cpu_devices > 1 else ""
    return share, f"{CPU_SHARE:.0%} of the {human_bytes(avail)} available ({source}){per}"


def divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def accumulation_counts(batch: int, devices: int) -> list[int]:
    """The micro-step counts k > 1 a step of ``batch`` windows can be split into, fewest first: divisors
    of ``batch`` (every update still sums B windows) with ``batch / k >= devices`` (a micro-step still
    gives every device a window)."""
    return [k for k in divisors(batch)[1:] if batch // k >= devices]


def too_large(need: float, limit: float, source: str, window: int) -> UserError:
    """The error of a run whose smallest step (one window per device) does not fit one device."""
    return UserError(
        f"a training step of one window per device needs about {human_bytes(need)} per device, more than "
        f"the {human_bytes(limit)} memory budget ({source}): use a smaller data.window (now {window}), "
        "model.remat=scan, a smaller model.head_chunk or model.hidden, schedule.method=vertex (node ranges), more devices, "
        "or a larger parallel.memory_gb if the device has it"
    )


def gib(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x / GIB:.2f} GiB"
