"""Both systems from the same initial values: the PyG-Temporal twin's initial weights (the baseline
runner's, seeded by ``train.seed``) copied into our model, then both trained on one device / one rank
with the PSG mini-batches for ``--epochs`` epochs; prints each epoch's training loss and validation
metric side by side with their relative differences, and writes them to ``--json``.

    python tools/same_init.py --config configs/egcn_o_uci.yaml --epochs 3 model.name=tgcn model.egcn_gru=rows

What it tells: whether the two systems compute the same training (same windows, negatives, loss,
optimiser, evaluation), apart from the random draws of initialisation, which ``bench_torch.py``'s seeds
compare. float32 reassociation makes the trajectories drift apart slowly; a bug shows as a jump.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from dygnex_jax.errors import ArgumentParser
from dygnex_jax.files import output_file

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=1")


def rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b), 1e-30)


def main(argv=None) -> int:
    from dygnex_jax.errors import UserError, run_tool

    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="configs/egcn_o_uci.yaml")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--json", type=output_file, help="write the rows here")
    p.add_argument("overrides", nargs="*", help="key=value config overrides (both systems)")
    a = p.parse_args(argv)

    def run() -> int:
        if a.epochs < 1:
            raise UserError(f"--epochs {a.epochs}: give at least 1")
        import jax
        import torch

        from dygnex_jax import parallel
        from dygnex_jax.baselines.torch_runner import Runner
        from dygnex_jax.baselines.weights import link_model_params
        from dygnex_jax.config import load_config, selection_metric
        from dygnex_jax.train import Trainer

        torch.set_num_threads(1)
        cfg = load_config(a.config, [*a.overrides, "schedule.method=psg", "parallel.devices=1"])
        if cfg.data.task != "link":
            raise UserError(f"data.task={cfg.data.task}: the PyTorch runner trains link prediction only")
        metric = selection_metric(cfg.data.task)[0]
        runner = Runner(cfg, rank=0, world=1, layout="packed")
        tr = Trainer(cfg)
        state = {k: v.detach().numpy() for k, v in runner.model.named_parameters()}
        params = link_model_params(cfg.model.name, state, cfg.model.layers, cfg.model.cheb_k)
        ours = jax.device_get(tr.params)
        if jax.tree.structure(params) != jax.tree.structure(ours):
            raise UserError(f"model.name={cfg.model.name}: its twin's weights do not map onto our parameters")
        tr.params = parallel.replicate(tr.mesh, params)
        tr.opt_state = parallel.replicate(tr.mesh, tr.tx.init(params))
        rows = []
        print(
            f"{'epoch':>5} {'loss ours':>11} {'loss torch':>11} {'rel':>8} {metric + ' ours':>12} "
            f"{metric + ' torch':>12} {'rel':>8}"
        )
        for epoch in range(1, a.epochs + 1):
            lo, lt = tr.train_epoch(epoch)["loss"], runner.train_epoch(epoch)["loss"]
            vo, vt = tr.evaluate("val")[metric], runner.evaluate("val")[metric]
            row = {
                "epoch": epoch,
                "loss_ours": lo,
                "loss_torch": lt,
                "loss_rel_diff": rel(lo, lt),
                f"val_{metric}_ours": vo,
                f"val_{metric}_torch": vt,
                "val_rel_diff": rel(vo, vt),
            }
            rows.append(row)
            print(
                f"{epoch:>5} {lo:>11.7f} {lt:>11.7f} {rel(lo, lt):>8.1e} {vo:>12.6f} {vt:>12.6f} "
                f"{rel(vo, vt):>8.1e}",
                flush=True,
            )
        if a.json:
            Path(a.json).write_text(
                json.dumps({"config": a.config, "overrides": a.overrides, "rows": rows}, indent=1)
            )
        return 0

    return run_tool(run)


if __name__ == "__main__":
    sys.exit(main())
