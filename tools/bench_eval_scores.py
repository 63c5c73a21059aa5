"""All-pairs evaluation scoring measured: ``models.head.dense_pair_scores`` (one hidden unit at a time into
[rows, D] blocks) beside the matmul form it replaced (``dense_pair_scores_matmul``), on random embeddings
of the sizes an evaluation window has (L local nodes scored against each other, the head's width).

    python tools/bench_eval_scores.py                          # L 2,000 / 6,000, hidden 100 / 128
    python tools/bench_eval_scores.py --sizes 6000x100 --repeats 7 --json /tmp/scores.json

Each case is compiled apart (``compile_s``), run once to warm up, then both forms timed in turn
``--repeats`` times (median; in turn, so that a change in the machine's load hits both alike); the
largest absolute difference of their scores and the 1-minute load average before and after are recorded
beside the figures. Prints a table and writes ``--json`` (default docs/bench_eval_scores.json).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

from dygnex_jax.errors import ArgumentParser, UserError, run_tool
from dygnex_jax.files import atomic_write_text, json_text, output_file

REPO = Path(__file__).resolve().parents[1]
FORMS = ("dense_pair_scores", "dense_pair_scores_matmul")


def _size(text: str) -> tuple[int, int]:
    try:
        nodes, hidden = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise UserError(f"--sizes {text!r} is not LxH: write e.g. 6000x100") from None
    if not (1 <= nodes <= 50_000 and 1 <= hidden <= 4096):
        raise UserError(f"--sizes {text!r}: L must be in [1, 50000] and H in [1, 4096]")
    return nodes, hidden


def measure(nodes: int, hidden: int, repeats: int, width: int = 32) -> dict:
    """Both forms on one (L, hidden) case: compile seconds, median seconds, their largest difference."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from dygnex_jax.models import head as heads

    rng = np.random.default_rng(nodes + hidden)
    params = {
        "hidden": {"kernel": rng.normal(size=(2 * width, hidden)), "bias": rng.normal(size=hidden)},
        "out": {"kernel": rng.normal(size=(hidden, 2)), "bias": rng.normal(size=2)},
    }
    params = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), params)
    emb = jnp.asarray(rng.normal(size=(nodes, width)), jnp.float32)
    fns, row = {}, {"nodes": nodes, "hidden": hidden, "load_before": os.getloadavg()[0]}
    for form in FORMS:
        start = time.perf_counter()
        fns[form] = jax.jit(getattr(heads, form)).lower(params, emb, emb).compile()
        row[f"{form}_compile_s"] = time.perf_counter() - start
    outs = {form: np.asarray(fn(params, emb, emb)) for form, fn in fns.items()}
    row["max_abs_difference"] = float(np.max(np.abs(outs[FORMS[0]] - outs[FORMS[1]])))
    times = {form: [] for form in FORMS}
    for _ in range(repeats):
        for form, fn in fns.items():
            start = time.perf_counter()
            jax.block_until_ready(fn(params, emb, emb))
            times[form].append(time.perf_counter() - start)
    for form in FORMS:
        row[f"{form}_s"] = statistics.median(times[form])
    row["speedup"] = row[f"{FORMS[1]}_s"] / row[f"{FORMS[0]}_s"]
    row["load_after"] = os.getloadavg()[0]
    return row


def main(argv=None) -> dict:
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", nargs="+", default=["2000x100", "2000x128", "6000x100", "6000x128"])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", type=output_file, default=REPO / "docs" / "bench_eval_scores.json")
    args = p.parse_args(argv)
    if not 1 <= args.repeats <= 100:
        raise UserError(f"--repeats {args.repeats} is out of range: give 1 to 100")
    sizes = [_size(text) for text in args.sizes]
    import jax

    rows = []
    print("L       hidden  new s    matmul s  speedup  max |diff|  load before/after", flush=True)
    for nodes, hidden in sizes:
        r = measure(nodes, hidden, args.repeats)
        rows.append(r)
        print(
            f"{nodes:<7} {hidden:<7} {r['dense_pair_scores_s']:<8.3f} {r['dense_pair_scores_matmul_s']:<9.3f} "
            f"{r['speedup']:<8.2f} {r['max_abs_difference']:<11.2e} {r['load_before']:.1f} / {r['load_after']:.1f}",
            flush=True,
        )
    out = {"backend": jax.default_backend(), "cpus": os.cpu_count(), "repeats": args.repeats, "rows": rows}
    atomic_write_text(args.json, json_text(out, indent=1))
    print(f"wrote {args.json}")
    return out


if __name__ == "__main__":
    sys.exit(run_tool(lambda: main() and 0))
