"""PyTorch twins' weights -> our Flax params: the state-dict names of ``torch_models``' twins (PyG-Temporal's
layers, stacked as ``cells.i`` / ``layers.i``) mapped onto our encoders' and heads' parameter trees.

Used by the parity tests (same weights, same outputs) and by ``tools/same_init.py`` (both systems trained
from the same initial values). Every map takes ``t``: a dict of numpy arrays keyed by the twin's
``named_parameters()`` names. Kernels are transposed (torch's Linear stores [out, in]).
"""

from __future__ import annotations

import numpy as np


def dense(t: dict, prefix: str, bias: bool = True) -> dict:
    """A ``torch.nn.Linear`` -> ``nn.Dense`` params."""
    out = {"kernel": t[f"{prefix}.weight"].T}
    if bias:
        out["bias"] = t[f"{prefix}.bias"]
    return out


def cheb(t: dict, prefix: str, k: int) -> dict:
    """PyG's ``ChebConv`` (K ``lins`` + bias) -> our ``ChebConv``."""
    return {
        **{f"lin_{i}": {"kernel": t[f"{prefix}.lins.{i}.weight"].T} for i in range(k)},
        "bias": t[f"{prefix}.bias"],
    }


def gru(t: dict, prefix: str, suffix: str = "") -> dict:
    """A ``torch.nn.GRU`` / ``LSTM`` layer (``suffix`` "_l0") or ``GRUCell`` -> our ``GRUCell`` / ``LSTMCell``."""
    return {
        "ih": {"kernel": t[f"{prefix}.weight_ih{suffix}"].T, "bias": t[f"{prefix}.bias_ih{suffix}"]},
        "hh": {"kernel": t[f"{prefix}.weight_hh{suffix}"].T, "bias": t[f"{prefix}.bias_hh{suffix}"]},
    }


def map_gcrn_gru(t, layers, k):
    cells = {
        f"cell_{i}": {f"{s}_{g}": cheb(t, f"cells.{i}.conv_{s}_{g}", k) for s in "xh" for g in "zrh"}
        for i in range(layers)
    }
    return {"step": cells}


def _lstm_cells(t, layers, cell) -> dict:
    """Stacked LSTM cells of PyG-T (``cells.i``): ``cell(i)`` maps cell i's convolutions and weights; every
    cell also has the four gate biases ``b_{i,f,c,o}`` (stored [1, H] by PyG-T)."""
    cells = {}
    for i in range(layers):
        biases = {f"b_{g}": t[f"cells.{i}.b_{g}"][0] for g in "ifco"}
        cells[f"cell_{i}"] = {**cell(i), **biases}
    return {"step": cells}


def map_gconv_lstm(t, layers, k):
    def cell(i):
        convs = {f"{s}_{g}": cheb(t, f"cells.{i}.conv_{s}_{g}", k) for s in "xh" for g in "ifco"}
        return {**convs, **{f"w_c_{g}": t[f"cells.{i}.w_c_{g}"] for g in "ifo"}}

    return _lstm_cells(t, layers, cell)


def map_gc_lstm(t, layers, k):
    def cell(i):
        convs = {f"conv_{g}": cheb(t, f"cells.{i}.conv_{g}", k) for g in "ifco"}
        return {**convs, **{f"W_{g}": t[f"cells.{i}.W_{g}"] for g in "ifco"}}

    return _lstm_cells(t, layers, cell)


def map_tgcn(t, layers, k):
    cells = {}
    for i in range(layers):
        c = {}
        for g in "zrh":
            c[f"conv_{g}"] = {
                "lin": {"kernel": t[f"cells.{i}.conv_{g}.lin.weight"].T},
                "bias": t[f"cells.{i}.conv_{g}.bias"],
            }
            c[f"linear_{g}"] = dense(t, f"cells.{i}.linear_{g}")
        cells[f"cell_{i}"] = c
    return {"step": cells}


def map_egcn(t, layers, pool):
    out = {f"gcn_{i}": t[f"layers.{i}.initial_weight"][0] for i in range(layers)}
    step = {f"evolve_{i}": gru(t, f"layers.{i}.recurrent_layer", "_l0") for i in range(layers)}
    if pool:
        step.update({f"pool_{i}": t[f"layers.{i}.pooling_layer.select.weight"][0] for i in range(layers)})
    out["step"] = step
    return out


def map_gcn_gru(t, layers, k):
    out = {
        f"gcn_{i}": {"lin": {"kernel": t[f"convs.{i}.lin.weight"].T}, "bias": t[f"convs.{i}.bias"]}
        for i in range(layers)
    }
    return {"step": {**out, "gru": gru(t, "gru")}}


def map_mpnn_lstm(t, layers, k):
    out = {}
    for i in (1, 2):
        out[f"conv_{i}_lin"] = {"kernel": t[f"inner._convolution_{i}.lin.weight"].T}
        out[f"conv_{i}_bias"] = t[f"inner._convolution_{i}.bias"]
        out[f"bn_{i}"] = {
            "scale": t[f"inner._batch_norm_{i}.weight"],
            "bias": t[f"inner._batch_norm_{i}.bias"],
        }
    out["step"] = {f"lstm_{i}": gru(t, f"inner._recurrent_{i}", "_l0") for i in (1, 2)}
    return out


def map_egcn_o(t, layers, k):
    return map_egcn(t, layers, pool=False)


def map_egcn_h(t, layers, k):
    return map_egcn(t, layers, pool=True)


ENCODER_MAPS = {
    "egcn_o": map_egcn_o,
    "egcn_h": map_egcn_h,
    "gcrn_gru": map_gcrn_gru,
    "gconv_lstm": map_gconv_lstm,
    "gc_lstm": map_gc_lstm,
    "tgcn": map_tgcn,
    "gcn_gru": map_gcn_gru,
    "mpnn_lstm": map_mpnn_lstm,
}


def link_model_params(name: str, state: dict, layers: int, k: int) -> dict:
    """A ``torch_models.LinkModel``'s ``named_parameters()`` (numpy) -> our ``LinkPredictor``'s variables
    ``{"params": {"encoder": ..., "head": ...}}`` (float32)."""
    enc = {key[len("encoder.") :]: v for key, v in state.items() if key.startswith("encoder.")}
    head = {"hidden": dense(state, "head.hidden"), "out": dense(state, "head.out")}
    params = {"encoder": ENCODER_MAPS[name](enc, layers, k), "head": head}
    return {"params": _float32(params)}


def _float32(tree):
    if isinstance(tree, dict):
        return {key: _float32(v) for key, v in tree.items()}
    return np.asarray(tree, np.float32)
