"""Does a step's per-pair work cost more the wider a window's node span? (the cost model's locality terms)

    python tools/bench_locality.py --nodes 50000 --pairs 286720 --json runs/bench_locality.json

Times the link head's gather/scatter pass over ``--pairs`` pairs of ``--nodes`` rows of ``--hidden``
floats, the pairs inside blocks of each ``--spans`` consecutive nodes (``dygnex_jax.research.locality``):
one program per span, the same sizes, only how far apart the touched rows lie differs. Printed and saved:
each span's median (ms) and its ratio to the narrowest, with the load average; a PNG beside the JSON.
"""

from __future__ import annotations

import json
import os
import sys

from dygnex_jax.errors import ArgumentParser, run_tool
from dygnex_jax.files import atomic_write_text, output_file, save_figure
from dygnex_jax.research.locality import time_spans

SPANS = [128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]


def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=50_000, help="node rows N (default 50,000)")
    ap.add_argument(
        "--pairs", type=int, default=286_720, help="pairs Q, a multiple of 4,096 (default 286,720)"
    )
    ap.add_argument("--hidden", type=int, default=128, help="row width: model.head_hidden (default 128)")
    ap.add_argument("--spans", type=int, nargs="+", default=None, help="node spans (default 128 .. N)")
    ap.add_argument("--rounds", type=int, default=9, help="timed rounds (default 9)")
    ap.add_argument("--json", type=output_file, default=None)
    a = ap.parse_args(argv)
    if a.nodes < 2 or a.pairs < 1 or a.hidden < 1 or a.rounds < 1:
        ap.error("--nodes must be at least 2, --pairs, --hidden and --rounds at least 1")
    spans = a.spans or [s for s in SPANS if s < a.nodes] + [a.nodes]
    if min(spans) < 1:
        ap.error("--spans must be at least 1")
    load = [os.getloadavg()[0]]
    rows = time_spans(a.nodes, a.pairs, a.hidden, spans, a.rounds)
    load.append(os.getloadavg()[0])
    for r in rows:
        print(f"span {r['span']:7d} nodes: {r['ms']:8.1f} ms  {r['ratio']:.2f}x the narrowest")
    print(f"load average {load[0]:.1f} before, {load[1]:.1f} after")
    if a.json:
        payload = {"args": {k: str(v) for k, v in vars(a).items()}, "rows": rows, "load": load}
        atomic_write_text(a.json, json.dumps(payload, indent=1) + "\n")
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5.5, 3.5))
        ax.plot([r["span"] for r in rows], [r["ratio"] for r in rows], "o-")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("nodes a window's pairs span")
        ax.set_ylabel("pass time / narrowest span's")
        ax.set_title(f"gather/scatter of {a.pairs:,} pairs over {a.nodes:,} rows x {a.hidden}")
        fig.tight_layout()
        save_figure(fig, os.path.splitext(a.json)[0] + ".png")
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
