"""The ``simulate`` command's output and arguments: the result table, the efficiency plot and the
``--devices`` list. Re-exported from ``simulate``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .errors import UserError
from .files import save_figure
from .simulate_setup import ALL_METHODS


def print_table(rows: list[dict], stream=None) -> None:
    """One line per row; ``shapes`` is the budget policy charged (planned / buckets / exact, or the
    analytic models' own), ``pad-eff`` the packer's padding efficiency on the paid budgets."""
    stream = sys.stdout if stream is None else stream  # the stdout of the call, not of the import
    print(
        f"{'method':<10} {'P':>5} {'B':>6} {'layout':>6} {'shapes':>8} {'steps':>5} {'step ms':>9} "
        f"{'epoch s':>9} {'allred ms':>9} {'eff':>6} {'par-eff':>7} {'pad-eff':>7}",
        file=stream,
    )
    for r in rows:
        head = f"{r['method']:<10} {r['devices']:>5} {r['batch_size']:>6} {r.get('layout', '-'):>6} "
        head += f"{r.get('budget_policy', '-'):>8}"
        if "skipped" in r:
            print(f"{head}  skipped: {r['skipped']}", file=stream)
            continue
        pad = r.get("padding_efficiency")
        print(
            f"{head} {r['steps']:>5} {1e3 * r['mean_step_seconds']:>9.2f} {r['epoch_seconds']:>9.3f} "
            f"{1e3 * r['allreduce_seconds_per_step']:>9.3f} {r['efficiency']:>6.3f} {r['parallel_efficiency']:>7.3f} "
            f"{'-' if pad is None else f'{pad:.3f}':>7}",
            file=stream,
        )


def plot(rows: list[dict], path: str | Path, title: str = "") -> None:
    """Efficiency and parallel efficiency vs P, one line per method (log2 x axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    methods = [m for m in ALL_METHODS if any(r["method"] == m and "skipped" not in r for r in rows)]
    for ax, key, label in (
        (axes[0], "efficiency", "efficiency (ideal incl. all-reduce / simulated)"),
        (axes[1], "parallel_efficiency", "parallel efficiency (work / P / simulated)"),
    ):
        for m in methods:
            pts = sorted((r["devices"], r[key]) for r in rows if r["method"] == m and "skipped" not in r)
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=m)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("devices P")
        ax.set_ylabel(label)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[0].legend()
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def parse_devices(text: str) -> list[int]:
    """``"4,8,16"`` or ``"4..1024"`` (powers of two) -> device counts."""
    try:
        if ".." in text:
            lo, hi = (int(x) for x in text.split(".."))
            out, p = [], lo
            while p <= hi:
                out.append(p)
                p *= 2
        else:
            out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(
            f"--devices {text!r} must be a comma list (4,8,16) or a range of powers of two (4..1024)"
        ) from None
    if not out or min(out) < 1:
        raise UserError(
            f"--devices {text!r} lists no device count >= 1: give counts >= 1 (4,8,16) or a range low..high "
            "with 1 <= low <= high (4..1024)"
        )
    return out
