"""The ``schedule`` command's output: its table, a per-device load plot, the JSON file."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from .files import atomic_write_text, json_text, save_figure


def print_table(rows: list[dict], stream=None) -> None:
    stream = sys.stdout if stream is None else stream  # the stdout of the call, not of the import
    head = (
        f"{'method':<10} {'P':>4} {'B':>4} {'layout':>6} {'compose':>14} {'pad-eff':>8} {'packed':>8} "
        f"{'run mean':>8} {'budgets':>7} {'imbal':>7} {'pred s':>8} {'sched s':>8}  fallback"
    )
    print(head, file=stream)
    for r in rows:
        compose = (
            r.get("compose", "") + ("+fit" if r.get("fitted") else "") + ("+rep" if r.get("repeated") else "")
        )
        print(
            f"{r['method']:<10} {r['devices']:>4} {r['batch_size']:>4} {r['layout']:>6} {compose:>14} "
            f"{r['padding_efficiency']:>8.3f} {r['packed_padding_efficiency']:>8.3f} "
            f"{r.get('mean_packed_padding_efficiency', r['packed_padding_efficiency']):>8.3f} {len(r['budgets']):>7} "
            f"{r['imbalance']:>7.3f} {r['predicted_epoch_seconds']:>8.3f} "
            f"{r['scheduler_seconds']:>8.3f}  {r['fallback'] or '-'}",
            file=stream,
        )


def plot_loads(result: dict, path: str | Path) -> None:
    """Per-device weighted load of every step (bars), one panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loads = np.asarray(result["step_loads"])  # [S, P]
    s, p = loads.shape
    fig, ax = plt.subplots(figsize=(max(6, s * 0.5), 3.5))
    width = 0.8 / p
    for d in range(p):
        ax.bar(np.arange(s) + d * width, loads[:, d], width, label=f"device {d}" if p <= 8 else None)
    ax.set_xticks(np.arange(s) + 0.4 - width / 2, [str(i) for i in range(s)])
    ax.set_xlabel("step")
    ax.set_ylabel("load (a·nodes + b·edges + g·pairs)")
    ax.set_title(
        f"{result['dataset']}: {result['method']}, P={p}, B={result['batch_size']}, "
        f"padding efficiency {result['padding_efficiency']:.3f}"
    )
    if p <= 8:
        ax.legend(fontsize=7, ncol=4)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def write_json(result: dict, path: str | Path) -> None:
    atomic_write_text(path, json_text(result, indent=2) + "\n")
