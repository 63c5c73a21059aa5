"""Bytes moved by collectives, read off the traced step (the shapes actually sent).

``collective_bytes(fn, *args)`` traces ``fn`` to a jaxpr and walks it, into ``shard_map`` bodies,
``scan`` bodies (times their length), ``cond`` branches (the largest, one runs) and nested calls,
and charges every collective by the size of its per-device operand ``s`` (bytes) on an axis of P
devices, summed over all devices, with ring algorithms:

=================  ======================  =====================================================
primitive           bytes sent (all devices)  why
=================  ======================  =====================================================
psum                2 (P - 1) s              ring all-reduce: reduce-scatter then all-gather
all_gather          P (P - 1) s              every device's s reaches the P - 1 others
reduce_scatter      (P - 1) s                ring reduce-scatter of an s-byte array per device
ppermute            L s                      L = number of (source, destination) pairs
all_to_all          (P - 1) s                each device keeps 1/P of its s
=================  ======================  =====================================================

Categories: ``gradients`` = the ``psum`` of the step's loss sums and gradients (a psum at the top
level of the ``shard_map`` body); ``states`` = ``ppermute`` (hidden states / evolving weights of
snapshot partition, forward and backward); ``features`` = everything else (all-gathers of node
embeddings and degrees of vertex partition, their transposes, psums inside the recurrence).
Counted at the jaxpr level, i.e. before XLA's optimisations: if XLA merges two identical gathers
(common-subexpression elimination) the device moves less than counted here.
"""

from __future__ import annotations

import math

import jax
import numpy as np
from jax.extend.core import ClosedJaxpr, Jaxpr

CATEGORIES = ("gradients", "states", "features")


def _nbytes(avals) -> int:
    return sum(int(math.prod(a.shape)) * np.dtype(a.dtype).itemsize for a in avals)


def _sub_jaxprs(eqn):
    """(jaxpr, multiplier, is_alternative) of every jaxpr nested in an equation's params."""
    name = eqn.primitive.name
    if name == "scan":
        yield eqn.params["jaxpr"].jaxpr, eqn.params["length"]
        return
    if name == "cond":
        return  # handled by the caller (largest branch)
    for value in eqn.params.values():
        for v in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(v, ClosedJaxpr):
                yield v.jaxpr, 1
            elif isinstance(v, Jaxpr):
                yield v, 1


def _axis_size(eqn, sizes: dict) -> int:
    axes = eqn.params.get("axes", eqn.params.get("axis_name"))
    axes = axes if isinstance(axes, (tuple, list)) else (axes,)
    return int(math.prod(sizes.get(a, 1) for a in axes))


def _walk(jaxpr, sizes: dict, depth: int, totals: dict, mult: float) -> None:
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "shard_map":
            inner = dict(sizes)
            inner.update(dict(eqn.params["mesh"].shape))
            _walk(eqn.params["jaxpr"], inner, 0, totals, mult)
            continue
        if name == "cond":
            branches = []
            for br in eqn.params["branches"]:
                t = dict.fromkeys(CATEGORIES, 0.0)
                _walk(br.jaxpr, sizes, depth + 1, t, mult)
                branches.append(t)
            best = max(branches, key=lambda t: sum(t.values()))
            for k in CATEGORIES:
                totals[k] += best[k]
            continue
        s = _nbytes([v.aval for v in eqn.invars if hasattr(v, "aval")])
        p = _axis_size(eqn, sizes) if name in ("psum", "all_gather", "reduce_scatter", "all_to_all") else 0
        if name == "psum":
            if p > 1:
                totals["gradients" if depth == 0 else "features"] += mult * 2 * (p - 1) * s
        elif name == "all_gather":
            totals["features"] += mult * p * (p - 1) * s
        elif name in ("reduce_scatter", "all_to_all"):
            totals["features"] += mult * (p - 1) * s
        elif name == "ppermute":
            totals["states"] += mult * len(eqn.params["perm"]) * s
        for sub, n in _sub_jaxprs(eqn):
            _walk(sub, sizes, depth + 1 if eqn.primitive.name == "scan" else depth, totals, mult * n)


def collective_bytes(fn, *args) -> dict[str, float]:
    """Bytes sent by the collectives of one call of ``fn(*args)``, per category and ``total``."""
    closed = jax.make_jaxpr(fn)(*args)
    totals = dict.fromkeys(CATEGORIES, 0.0)
    _walk(closed.jaxpr, {}, 0, totals, 1.0)
    totals["total"] = sum(totals[k] for k in CATEGORIES)
    return totals
