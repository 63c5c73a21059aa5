"""One training step of the same windows in both systems, on one device: CPU seconds of forward + backward
(process CPU time, min of ``--repeat``; robust when other jobs share the machine), ours with and without
the head, PyG-T on our layout and on the whole node set (the baseline runner's two layouts), a gather + segment-sum over the step's edges, and the two GEMM forms of a dense layer on the
step's node rows — forward ``x @ W`` and the weight gradient ``x.T @ g`` (contraction over the nodes) — in
XLA and in torch.

    python tools/profile_vs_torch.py --config configs/egcn_o_uci.yaml model.name=tgcn model.egcn_gru=rows
    python tools/profile_vs_torch.py --json runs/profile.json model.name=gcrn_gru   # the figures as JSON too
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from dygnex_jax.errors import ArgumentParser  # noqa: E402
from dygnex_jax.files import atomic_write_text, output_file  # noqa: E402


def cpu_seconds(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def main(argv=None) -> int:
    import torch

    from dygnex_jax.baselines.torch_runner import Runner
    from dygnex_jax.config import load_config
    from dygnex_jax.models import LinkPredictor
    from dygnex_jax.train import Trainer, make_loss_fn

    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="configs/egcn_o_uci.yaml")
    p.add_argument("--windows", type=int, nargs=2, default=[40, 48], help="training window range [lo, hi)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument(
        "--json",
        type=output_file,
        help="also write the figures here (with the load average and the checkout)",
    )
    p.add_argument("overrides", nargs="*")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    cfg = load_config(a.config, [*a.overrides, "parallel.devices=1"])
    tr = Trainer(cfg)
    runners = {layout: Runner(cfg, 0, 1, layout) for layout in ("packed", "full")}
    ids = list(range(*a.windows))
    batch, work, budget = tr.pack([ids], "train", epoch=1)
    local = {k: jnp.asarray(v[0]) for k, v in batch.items()}
    params = jax.device_get(tr.params)
    full = jax.jit(jax.value_and_grad(make_loss_fn(tr.model), has_aux=True))
    enc = jax.jit(jax.grad(lambda q, b: jnp.sum(tr.model.apply(q, b, method=LinkPredictor.embed))))

    def torch_step(layout):
        rn = runners[layout]
        num, _ = rn.forward(tr.windows.splits["train"][ids], 1)
        rn.opt.zero_grad()
        num.backward()

    n = budget.nodes
    s, r = local["senders"][0], local["receivers"][0]
    x = jnp.ones((n, cfg.model.hidden))
    seg = jax.jit(lambda v: jax.ops.segment_sum(v[s], r, num_segments=n))
    ht = torch.ones(n, cfg.model.hidden)
    st, rt = (torch.as_tensor(np.array(v), dtype=torch.long) for v in (s, r))
    f_in, h = 2 * cfg.model.hidden, cfg.model.hidden
    xa, ga, wa = (
        np.random.default_rng(0).random(shape, dtype=np.float32) for shape in ((n, f_in), (n, h), (f_in, h))
    )
    fwd_mm, wgrad_mm = jax.jit(lambda x, w: x @ w), jax.jit(lambda x, g: x.T @ g)
    xj, gj, wj = map(jnp.asarray, (xa, ga, wa))
    xt, gt, wt = map(torch.from_numpy, (xa, ga, wa))
    d = work[0]
    print(
        f"budget {budget}; real nodes {d.real_nodes()}, edges per offset {d.real_edges_per_tau().tolist()}, "
        f"pairs {d.real_pairs()}"
    )
    rows = {
        "ours fwd+bwd": lambda: jax.block_until_ready(full(params, local)),
        "ours encoder only": lambda: jax.block_until_ready(enc(params, local)),
        "PyG-T fwd+bwd, our layout (1 thread)": lambda: torch_step("packed"),
        "PyG-T fwd+bwd, whole node set (1 thread)": lambda: torch_step("full"),
        "ours gather+segment_sum": lambda: jax.block_until_ready(seg(x)),
        "torch gather+index_add_": lambda: torch.zeros(n, cfg.model.hidden).index_add_(0, rt, ht[st]),
        f"ours x @ W [{n},{f_in}]x[{f_in},{h}]": lambda: jax.block_until_ready(fwd_mm(xj, wj)),
        "torch x @ W": lambda: xt @ wt,
        f"ours x.T @ g [{f_in},{n}]x[{n},{h}]": lambda: jax.block_until_ready(wgrad_mm(xj, gj)),
        "torch x.T @ g": lambda: xt.T @ gt,
    }
    load = os.getloadavg()[0]
    seconds = {}
    for name, fn in rows.items():
        seconds[name] = cpu_seconds(fn, a.repeat)
        print(f"{name:40s} {seconds[name]:.5f} CPU s")
    if a.json:
        write_json(a, budget, seconds, load)
    return 0


def write_json(a, budget, seconds: dict, load: float) -> None:
    """The figures, the step's budget, the load before / after and the checkout measured."""
    import dygnex_jax.train

    out = {
        "config": a.config,
        "overrides": a.overrides,
        "windows": a.windows,
        "budget": list(budget.as_tuple()),
        "cpu_seconds": seconds,
        "load_average": [load, os.getloadavg()[0]],
        "dygnex_jax": os.path.dirname(os.path.dirname(dygnex_jax.train.__file__)),
    }
    atomic_write_text(a.json, json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
