"""The one place that imports PyTorch Geometric Temporal, with a documented stand-in for ``torch_sparse``.

PyG-Temporal 0.56.2 declares ``torch-sparse`` and ``torch-scatter`` as dependencies. PyPI has them only as
source distributions (30+ minutes to compile on 2 cores), so the ``torch`` extra installs PyG-Temporal with
``--no-deps``. Of all its modules only ``nn/recurrent/evolvegcno.py`` imports ``torch_sparse`` at import time,
and only for the name ``SparseTensor`` in a type annotation. When ``torch_sparse`` is not installed, this
module registers a module named ``torch_sparse`` whose only attribute is PyTorch Geometric's own stand-in
class ``torch_geometric.typing.SparseTensor`` (what PyG itself uses when torch-sparse is absent: any use
raises ImportError). No computation goes through it: every layer we use runs on dense ``edge_index``
tensors. Where the real ``torch_sparse`` is installed (PyG's prebuilt wheels), it is used as is.
"""

from __future__ import annotations

import importlib
import sys
import types


def install_torch_sparse_shim() -> bool:
    """Make ``import torch_sparse`` succeed; returns True when the stand-in was registered."""
    if "torch_sparse" in sys.modules:
        return getattr(sys.modules["torch_sparse"], "__dygnex_shim__", False)
    try:
        importlib.import_module("torch_sparse")
        return False
    except ImportError:
        pass
    from torch_geometric.typing import SparseTensor  # PyG's placeholder class when torch-sparse is absent

    shim = types.ModuleType("torch_sparse")
    shim.__doc__ = (
        "dygnex_jax stand-in: only torch_geometric.typing.SparseTensor (see baselines/pyg_compat.py)"
    )
    shim.SparseTensor = SparseTensor
    shim.__dygnex_shim__ = True
    sys.modules["torch_sparse"] = shim
    return True


def recurrent():
    """``torch_geometric_temporal.nn.recurrent``, importable without torch-sparse / torch-scatter."""
    install_torch_sparse_shim()
    return importlib.import_module("torch_geometric_temporal.nn.recurrent")
