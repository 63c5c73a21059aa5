"""Side by side: dygnex_jax (SPMD; its DyGNeX-G schedule, and the PSG split) vs PyTorch Geometric Temporal
+ DDP (gloo, PSG split, the split window-level DDP uses) on the same config, model, data and CPU. Prints
per-epoch training time (median after the first, warm-up, epoch; our compilations charged as steady steps),
the ratios, and the validation / test MAP of each; then the *time to result*: the training wall seconds
a user waits for, compilations included, on a cold compilation cache (each case gets a fresh one) and,
with ``--warm``, on the same cache again; writes the rows to ``--json``.

    python tools/bench_torch.py --procs 2 --epochs 4 --seeds 0 1 2 --json docs/bench_torch.json

Systems (``--systems``): ``ours:dygnex_g`` and ``ours:psg`` (our trainer with that ``schedule.method``);
``ours2p:dygnex_g`` (the same on P processes of 1 device each, multi-host on one machine, as DDP runs P
processes; ``ours`` runs P fake devices in one process); ``torch:full`` (PyG-T as its users run it:
each window on the whole node set, a rank's windows one after the other) and ``torch:packed`` (PyG-T
given our data layout: active nodes + one background node per window, a rank's windows as one disjoint
union). The table gives PyTorch's epoch time over each of ours (the speed-up), and the val MAP of every
seed.

Each case is ``model:dataset``; the dataset's config is ``configs/egcn_o_bitcoin_otc.yaml`` or
``configs/egcn_o_uci.yaml`` with ``model.name`` replaced (EvolveGCN-O with PyG-T's row-wise GRU, as its twin).
Both systems run as subprocesses, one after the other, so they do not share the cores.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from dygnex_jax.errors import ArgumentParser
from dygnex_jax.files import atomic_write_text, output_file
from dygnex_jax.research.torch_bench import (
    DEFAULT_CASES,
    SYSTEMS,
    plot,
    run_case,
    speedups,
    table,
    ttr_table,
)


def parser() -> ArgumentParser:
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", nargs="*", default=DEFAULT_CASES, help="model:dataset pairs")
    p.add_argument(
        "--systems", nargs="*", default=list(SYSTEMS), choices=SYSTEMS, help="systems of the first seed"
    )
    p.add_argument(
        "--seed-systems",
        nargs="*",
        default=["ours:dygnex_g", "torch:full"],
        choices=SYSTEMS,
        help="systems of the further seeds (the accuracy comparison)",
    )
    p.add_argument("--procs", type=int, default=2, help="devices (ours) = DDP processes (PyTorch)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per DDP process")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--seeds", type=int, nargs="*", default=[0])
    p.add_argument("--json", type=output_file, default=None, help="write the rows here (and a PNG beside it)")
    p.add_argument(
        "--append",
        action="store_true",
        help="keep the rows already in --json; a run of the same model, dataset and seed adds its systems to that row",
    )
    p.add_argument(
        "--table-only", action="store_true", help="print the table and plot of --json, run nothing"
    )
    p.add_argument(
        "--work",
        default="",
        help="keep the run directories here (default: a temporary one); a finished run found there is reused",
    )
    p.add_argument(
        "--warm",
        action="store_true",
        help="run each of ours a second time on its (then warm) compilation cache; the first run is cold",
    )
    p.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="cpu: P fake devices / P CPU processes; cuda: ours on JAX's GPU devices, PyTorch one GPU per process",
    )
    p.add_argument("override", nargs="*", help="extra key=value overrides for both systems")
    return p


def main(argv=None) -> int:
    p = parser()
    a = p.parse_args(argv)
    if a.device == "cuda" and a.systems == list(SYSTEMS):  # the default set: every system a GPU runs
        a.systems = [x for x in SYSTEMS if not x.startswith("ours2p")]
    if a.device == "cuda" and any(x.startswith("ours2p") for x in [*a.systems, *a.seed_systems]):
        p.error("ours2p (P processes on one host's devices) is a CPU system: drop it with --device cuda")
    path = Path(a.json) if a.json else None
    rows = json.loads(path.read_text()) if path and (a.append or a.table_only) and path.exists() else []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(a.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        # every case's first seed before any further seed: the timing rows come first
        for i, seed in enumerate([] if a.table_only else a.seeds):
            for case in a.cases:
                model, dataset = case.split(":")
                key = {"model": model, "dataset": dataset, "seed": seed}
                old = [r for r in rows if all(r[k] == v for k, v in key.items())]
                row = old[0] if old else {**key, "load_average": os.getloadavg()[0], "device": a.device}
                if not old:
                    rows.append(row)
                for system in a.systems if i == 0 else a.seed_systems:
                    row[system] = run_case(system, model, dataset, seed, a, work)
                    row["speedup"] = speedups(row)
                    row["cpu_speedup"] = speedups(row, "epoch_cpu_seconds")
                    row["speedup_2p"] = speedups(row, ref="ours2p:dygnex_g")
                    row["cpu_speedup_2p"] = speedups(row, "epoch_cpu_seconds", "ours2p:dygnex_g")
                    if path:  # after every system: a run stopped later keeps what finished
                        atomic_write_text(path, json.dumps(rows, indent=1))
                print(
                    json.dumps({k: row[k] for k in ("model", "dataset", "seed", "speedup", "speedup_2p")}),
                    file=sys.stderr,
                )
    cases = list(dict.fromkeys(f"{r['model']}:{r['dataset']}" for r in rows))
    systems = [s for s in SYSTEMS if any(s in r for r in rows)]
    print(table(rows, cases, systems))
    print()
    print(ttr_table(rows, cases))
    if path:
        plot(rows, cases, systems, path.with_suffix(".png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
