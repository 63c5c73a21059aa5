"""Window-to-device schedulers (numpy/scipy/cvxpy only, never JAX). Methods register by name."""

from . import greedy, ilp, psg  # noqa: F401  (register "dygnex_g", "dygnex_l", "psg")
from .base import COST_COLUMNS, Schedule, available_methods, cost_weights, register, schedule

__all__ = ["COST_COLUMNS", "Schedule", "available_methods", "cost_weights", "register", "schedule"]
