"""One process of the multi-process exactness test (tests/test_multihost.py), run by tools/launch_local.py.

    python tests/multihost_worker.py OUT.npz [key=value ...] --coordinator H:P --num-processes N --process-id I

Trains one epoch of ``configs/smoke.yaml`` (2 steps) on the global mesh of all processes and, on
process 0, writes every step's loss and the final parameters (gathered to the host) to OUT.npz.
"""

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dygnex_jax import distributed  # noqa: E402


def run(out: str, overrides: list[str]) -> None:
    import jax
    import numpy as np

    from dygnex_jax import parallel
    from dygnex_jax.config import load_config
    from dygnex_jax.train import Trainer

    trainer = Trainer(load_config(REPO / "configs" / "smoke.yaml", overrides))
    trainer.train_epoch(1)
    losses = np.array([s["loss"] for s in trainer.last_steps])
    params = parallel.to_host(trainer.params)
    if distributed.is_main_process():
        flat = {jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_leaves_with_path(params)}
        np.savez(
            out,
            losses=losses,
            devices=trainer.n_devices,
            processes=jax.process_count(),
            cost_source=trainer.cost_model.source,
            cost_note=trainer.cost_note,
            **flat,
        )


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("overrides", nargs="*")
    p.add_argument("--coordinator")
    p.add_argument("--num-processes", type=int)
    p.add_argument("--process-id", type=int)
    a = p.parse_args()
    distributed.initialize(distributed.resolve(a.coordinator, a.num_processes, a.process_id, 60))
    run(a.out, a.overrides)
