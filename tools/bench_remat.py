"""``model.remat`` and ``model.dtype`` measured: for every model, XLA's temp bytes of the compiled gradient
step and its median time, without and with the time scan rematerialised, with float32 and bfloat16
activations (``--dtypes``), on one packed batch the size of a big graph.

    python tools/bench_remat.py                                   # all models, docs/bench_remat.json
    python tools/bench_remat.py --models gcrn_gru tgcn --nodes 5000 --json /tmp/remat.json
    python tools/bench_remat.py --dtypes float32                  # the float32 rows alone

The batch is random (``synthetic_work``): ``--windows`` windows of ``--nodes / --windows`` nodes each,
``--edges`` edges per time offset and ``--pairs`` target pairs in all (defaults: a quarter of a
20,000-node, 100,000-edge, 200,000-pair step, so that all models run in minutes on 2 CPU cores; temp
bytes grow about linearly with nodes and edges), packed by ``graphs.pack_device``
in the layout the trainer picks for the model (``config.step_layout`` of ``parallel.layout: auto``;
``--layout scan`` forces the scan layout). The step is the jit'd ``value_and_grad`` of the link-prediction
loss (no optimiser update): compiled once (``compile_s``, apart), run once to warm up, then timed
``--repeats`` times (median). ``temp_bytes`` is ``memory_analysis().temp_size_in_bytes`` of that compiled
step: what XLA allocates beyond the arguments and outputs, the activations the backward pass keeps
included. The 1-minute load average is recorded with every case (the machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from dygnex_jax.errors import ArgumentParser
from dygnex_jax.files import atomic_write_text, output_file

REPO = Path(__file__).resolve().parents[1]


def synthetic_work(
    nodes: int, window: int, edges: int, pairs: int, windows: int, features: int, seed: int = 0
):
    """A ``graphs.DeviceWork`` of ``windows`` random windows (the totals split evenly): each window's
    nodes all active (plus its background node), ``edges / windows`` random edges per time offset,
    ``pairs / windows`` random target pairs labelled 1 and 0 in turn, node categories in [0, features)."""
    import numpy as np

    from dygnex_jax.data.windows import LocalWindow
    from dygnex_jax.graphs import DeviceWork

    rng = np.random.default_rng(seed)
    wins, pair_lists, labels = [], [], []
    for j in range(windows):
        a = nodes // windows - 1  # active nodes; local id a is the background node
        wins.append(
            LocalWindow(
                index=j,
                target=window,
                nodes=np.arange(a),
                edges=[rng.integers(0, a, (edges // windows, 2)).astype(np.int32) for _ in range(window)],
                feat=rng.integers(0, features, (window, a + 1)).astype(np.int32),
                positives=np.zeros((0, 2), np.int32),
                positive_codes=np.zeros(0, np.int64),
            )
        )
        q = pairs // windows
        pair_lists.append(rng.integers(0, a, (q, 2)).astype(np.int32))
        labels.append((np.arange(q) % 2).astype(np.int32))
    return DeviceWork(wins, pair_lists, labels)


def measure(name: str, remat: str, layout: str, work, args, dtype: str = "float32") -> dict:
    """Compile and time one (model, remat, dtype) case on ``work`` packed in ``layout``."""
    import jax
    import jax.numpy as jnp

    from dygnex_jax.config import ModelConfig
    from dygnex_jax.graphs import exact_need, pack_device
    from dygnex_jax.models import create_model
    from dygnex_jax.tasks import make_loss_fn

    packed = pack_device(work, exact_need([work], layout=layout), args.window, (0.1, 0.9), layout)
    batch = {k: jnp.asarray(v) for k, v in packed.items()}
    cfg = ModelConfig(name=name, hidden=args.hidden, head_hidden=args.head_hidden, remat=remat, dtype=dtype)
    model = create_model(cfg, args.features)
    params = jax.jit(model.init)(jax.random.key(0), batch)
    loss_fn = make_loss_fn(model)
    step = jax.jit(jax.value_and_grad(lambda p, b: loss_fn(p, b)[0]))
    start = time.perf_counter()
    compiled = step.lower(params, batch).compile()
    compile_s = time.perf_counter() - start
    mem = compiled.memory_analysis()
    jax.block_until_ready(compiled(params, batch))  # warm-up
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(params, batch))
        times.append(time.perf_counter() - start)
    return {
        "model": name,
        "remat": remat,
        "dtype": dtype,
        "layout": layout,
        "temp_bytes": int(mem.temp_size_in_bytes),
        "argument_bytes": int(mem.argument_size_in_bytes),
        "output_bytes": int(mem.output_size_in_bytes),
        "step_s": statistics.median(times),
        "times_s": times,
        "compile_s": compile_s,
        "loadavg": os.getloadavg()[0],
        "batch_shapes": {k: list(v.shape) for k, v in sorted(batch.items())},
    }


def main(argv=None) -> dict:
    from dygnex_jax.config import Config, ModelConfig, step_layout
    from dygnex_jax.models import ENCODERS

    p = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=sorted(ENCODERS), choices=sorted(ENCODERS))
    p.add_argument("--remat", nargs="+", default=["none", "scan"])
    p.add_argument("--dtypes", default="float32,bfloat16", help="model.dtype values, comma-separated")
    p.add_argument("--layout", default="auto", choices=("auto", "scan"))
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--window", type=int, default=10)
    p.add_argument("--edges", type=int, default=25000, help="edges per time offset, all windows")
    p.add_argument("--pairs", type=int, default=50000)
    p.add_argument("--windows", type=int, default=8)
    p.add_argument("--features", type=int, default=64, help="one-hot node categories (data.max_degree)")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--head-hidden", type=int, default=128)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", type=output_file, default=REPO / "docs" / "bench_remat.json")
    args = p.parse_args(argv)

    work = synthetic_work(args.nodes, args.window, args.edges, args.pairs, args.windows, args.features)
    rows = []
    dtypes = [d for d in args.dtypes.split(",") if d]
    print(
        f"{'model':<11} {'layout':<6} {'remat':<5} {'dtype':<8} {'temp MB':>9} {'step s':>7} "
        f"{'compile s':>9} {'load':>5}"
    )
    for name in args.models:
        layout = step_layout(Config(model=ModelConfig(name=name))) if args.layout == "auto" else "scan"
        for dtype in dtypes:
            for remat in args.remat:
                r = measure(name, remat, layout, work, args, dtype)
                rows.append(r)
                print(
                    f"{name:<11} {layout:<6} {remat:<5} {dtype:<8} {r['temp_bytes'] / 1e6:>9.1f} "
                    f"{r['step_s']:>7.3f} {r['compile_s']:>9.1f} {r['loadavg']:>5.2f}",
                    flush=True,
                )
    out = {
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "cpu_count": os.cpu_count(),
        "rows": rows,
    }
    atomic_write_text(args.json, json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.json}")
    return out


if __name__ == "__main__":
    main()
