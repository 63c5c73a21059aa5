"""Training-step compilations one at a time against several at once, per config (the protocol:
``dygnex_jax/research/compile_bench.py``). Writes ``--json`` with every arm and the medians.

    XLA_FLAGS=--xla_force_host_platform_device_count=8 python tools/bench_compile.py \\
        --configs configs/egcn_o_bitcoin_otc.yaml --set data.dataset=uci_collegemsg train.batch_size=32
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")


def main(argv=None) -> int:
    from dygnex_jax.config import load_config
    from dygnex_jax.cost_cache import available_cores
    from dygnex_jax.errors import ArgumentParser
    from dygnex_jax.files import atomic_write_text, output_file
    from dygnex_jax.research.compile_bench import measure

    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configs", nargs="+", required=True)
    p.add_argument("--set", nargs="*", default=[], help="key=value overrides for every config")
    p.add_argument("--workers", type=int, default=0, help="threads of the parallel arm (0: the cores)")
    p.add_argument("--budgets", type=int, default=4, help="budgets compiled per arm (parallel.max_budgets)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--json", type=output_file, default=None)
    a = p.parse_args(argv)
    fixed = ["parallel.compile_cache=off", f"parallel.max_budgets={a.budgets}", "parallel.compile_steps=0"]
    results = []
    for path in a.configs:
        config = load_config(path, [*a.set, *fixed])
        res = measure(
            config,
            a.workers or available_cores(),
            a.repeats,
            log=lambda s: print(s, file=sys.stderr),
        )
        results.append({"config": path, "overrides": a.set, **res})
        print(
            f"{path} ({res['model']}, {res['dataset']}, {res['devices']} devices, {res['budgets']} budgets): "
            f"compile {res['median_compile_seconds_1']:.2f} s on 1 thread, "
            f"{res['median_compile_seconds_w']:.2f} s on {res['workers']} ({res['compile_speedup']:.2f}x); "
            f"tracing {res['median_trace_seconds']:.2f} s ({res['trace_share']:.0%} of the sequential whole)"
        )
        if a.json:
            atomic_write_text(a.json, json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    from dygnex_jax.errors import run_tool

    sys.exit(run_tool(main))
