"""PyTorch Geometric Temporal reference for node regression: PyG-T's own GConvGRU layer, trained the way its
chickenpox example trains (one full-batch Adam step per epoch on the mean of the per-sample node MSEs,
ReLU + Linear head, the recurrent state restarted in every sample), on the samples of *our* loader and
windows (window 1; PyG-T's dataset loaders download from the network), with our config's split.

    python tools/pygt_node_reg.py --config configs/chickenpox_hungary.yaml [--cheb-k 1] [--json out.json]

Prints the val / test MSE every ``eval.every`` epochs, the best-by-val epoch and, for PyG-T's own
protocol, the final MSE on everything after the training part (val + test: PyG-T's test set).
Needs the ``torch`` extra.
"""

from __future__ import annotations

import json
import time

import numpy as np

from dygnex_jax.errors import ArgumentParser
from dygnex_jax.files import output_file


def main() -> None:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--cheb-k", type=int, default=0, help="Chebyshev order (0 = the config's model.cheb_k)")
    ap.add_argument("--json", type=output_file, default=None)
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)  # tiny graphs: threads only contend
    from dygnex_jax.baselines.pyg_compat import recurrent
    from dygnex_jax.config import load_config
    from dygnex_jax.data.datasets import load_dataset
    from dygnex_jax.data.node_windows import NodeWindowSet

    cfg = load_config(args.config, args.overrides)
    if cfg.data.window != 1 or cfg.data.task != "node_reg":
        raise SystemExit("this reference runs node_reg configs with data.window=1 (PyG-T's examples)")
    windows = NodeWindowSet(load_dataset(cfg.data), cfg.data)
    k = args.cheb_k or cfg.model.cheb_k
    torch.manual_seed(cfg.train.seed)

    def tensors(ids):
        out = []
        for i in ids:
            w = windows.get(int(i))
            ei = torch.tensor(w.edges[0].T.astype(np.int64))
            out.append((torch.tensor(w.x[0]), ei, torch.tensor(w.weights[0]), torch.tensor(w.y)))
        return out

    data = {s: tensors(ids) for s, ids in windows.splits.items()}

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.recurrent = recurrent().GConvGRU(windows.num_features, cfg.model.hidden, k)
            self.linear = torch.nn.Linear(cfg.model.hidden, 1)

        def forward(self, x, ei, ew):
            return self.linear(torch.relu(self.recurrent(x, ei, ew)))[:, 0]

    model = Model()
    opt = torch.optim.Adam(model.parameters(), lr=cfg.train.learning_rate)

    def mse(samples):
        return torch.stack([torch.mean((model(x, ei, ew) - y) ** 2) for x, ei, ew, y in samples]).mean()

    rows, start = [], time.perf_counter()
    for epoch in range(1, cfg.train.epochs + 1):
        model.train()
        loss = mse(data["train"])
        loss.backward()
        opt.step()
        opt.zero_grad()
        if epoch % cfg.eval.every == 0 or epoch == cfg.train.epochs:
            model.eval()
            with torch.no_grad():
                row = {"epoch": epoch, "loss": float(loss)}
                row.update({f"{s}_mse": float(mse(data[s])) for s in ("val", "test") if data[s]})
            # PyG-T's test set is everything after training (equal node counts: a sample-weighted mean)
            nv, nt = len(data["val"]), len(data["test"])
            row["after_train_mse"] = (row.get("val_mse", 0.0) * nv + row["test_mse"] * nt) / (nv + nt)
            rows.append(row)
    best = min(rows, key=lambda r: r["val_mse"]) if data["val"] else rows[-1]
    result = {
        "config": args.config,
        "cheb_k": k,
        "seconds": time.perf_counter() - start,
        "best": best,
        "final": rows[-1],
        "pygt_protocol_final_test_mse": rows[-1]["after_train_mse"],
        "rows": rows,
    }
    print(json.dumps({key: v for key, v in result.items() if key != "rows"}, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
