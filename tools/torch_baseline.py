"""PyTorch baseline runner: the same model from PyG-Temporal on the same windows, splits, negatives and
evaluation as ``python -m dygnex_jax train``, on P CPU processes with torch.distributed (gloo) DDP and the
even PSG split. Writes ``metrics.jsonl`` / ``summary.json`` like the trainer.

    python tools/torch_baseline.py --config configs/gcrn_uci.yaml --procs 2 --out runs/torch-gcrn train.epochs=5

Needs the torch extra (README: PyTorch baseline). Library code: dygnex_jax/baselines/torch_runner.py.
"""

import sys

from dygnex_jax.baselines.torch_runner import main
from dygnex_jax.errors import run_tool

if __name__ == "__main__":
    sys.exit(run_tool(main))
