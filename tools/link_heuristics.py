"""Parameter-free link predictors on the reproduction cells' data, scored by the trainer's evaluator.

For each config (default: one per distinct data section of ``configs/repro/``), every heuristic of
``dygnex_jax.research.heuristics`` scores the val and test windows from their history snapshots alone;
the table puts each beside the published MAP / MRR of the cells with that data (Pareja et al., Table 2).
Prints a markdown table with the load average and writes JSON.

    python tools/link_heuristics.py --json docs/link_heuristics.json
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dygnex_jax.config import load_config
from dygnex_jax.data.datasets import load_dataset
from dygnex_jax.data.windows import WindowSet
from dygnex_jax.errors import ArgumentParser, UserError, run_tool
from dygnex_jax.evaluation import candidate_mode
from dygnex_jax.files import atomic_write_text, json_text, output_file
from dygnex_jax.research.heuristics import KINDS, evaluate
from dygnex_jax.research.reproduce import PUBLISHED, REPRO_DIR, cell_configs

DEFAULT_CELLS = ("egcn_o_bitcoin_otc", "egcn_o_bitcoin_alpha", "egcn_o_uci", "egcn_o_as733", "egcn_h_as733")


def published_with(data, configs: dict) -> list[str]:
    """'model MAP / MRR' of every reproduction cell (``configs``: name -> config) whose data section
    equals ``data``."""
    out = []
    for cfg in configs.values():
        if cfg.data == data and (cfg.model.name, cfg.data.dataset) in PUBLISHED:
            m, r = PUBLISHED[(cfg.model.name, cfg.data.dataset)]
            out.append(f"{cfg.model.name} {m:.4f} / {r:.4f}")
    return out


def measure(cell: str, splits: list[str], kinds: list[str], configs: dict) -> list[dict]:
    path = Path(cell) if cell.endswith(".yaml") else REPRO_DIR / f"{cell}.yaml"
    if not path.is_file():
        raise UserError(f"no config {path}: name a file, or a cell of configs/repro/ (e.g. egcn_o_uci)")
    cfg = load_config(path, [])
    if cfg.data.task != "link":
        raise UserError(
            f"{path} has data.task={cfg.data.task}: the heuristics predict links (data.task=link)"
        )
    load = os.getloadavg()[0]
    ws = WindowSet(load_dataset(cfg.data), cfg.data)
    pub = published_with(cfg.data, configs)
    rows = []
    for split in splits:
        for r in evaluate(ws, split, kinds, cfg.eval, candidate_mode(ws, cfg)):
            rows.append(
                {
                    "cell": cell,
                    "dataset": cfg.data.dataset,
                    "window": cfg.data.window,
                    **r,
                    "published": pub,
                    "load_average": [load, os.getloadavg()[0]],
                }
            )
    return rows


def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--cells", nargs="+", default=list(DEFAULT_CELLS), help="cells of configs/repro/ or config files"
    )
    ap.add_argument("--splits", nargs="+", default=["val", "test"], choices=["train", "val", "test"])
    ap.add_argument("--heuristics", nargs="+", default=list(KINDS), choices=list(KINDS))
    ap.add_argument("--json", type=output_file, help="write the rows here")
    a = ap.parse_args(argv)
    print(
        "| dataset | W | split | heuristic | MAP | MRR | snapshots | published (model MAP / MRR) | s | load |"
    )
    print("|---|---:|---|---|---:|---:|---:|---|---:|---|")
    rows, configs = [], cell_configs()
    for cell in a.cells:
        for r in measure(cell, a.splits, a.heuristics, configs):
            rows.append(r)
            print(
                f"| {r['dataset']} | {r['window']} | {r['split']} | {r['heuristic']} | {r['map']:.4f} | "
                f"{r['mrr']:.4f} | {r['snapshots']} | {'; '.join(r['published'])} | {r['seconds']:.0f} | "
                f"{r['load_average'][0]:.1f} / {r['load_average'][1]:.1f} |",
                flush=True,
            )
    if a.json:
        atomic_write_text(a.json, json_text(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(lambda: main()))
