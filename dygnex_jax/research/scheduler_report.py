"""Tables and plots of ``tools/bench_schedulers.py``: the README table (``markdown_table``), the summary
figure (``plot_summary``: padding efficiency at the largest P, measured speed-up over psg, dygnex_g at
scale) and the cost-vector figure (``plot_cost_instances``). Matplotlib is imported when plotting."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..files import save_figure
from .schedulers import METHODS


def _num(x, fmt: str = ".3f") -> str:
    return "-" if x is None else format(x, fmt)


def markdown_table(suite_rows: list[dict], measured: list[dict]) -> str:
    """The README table: one line per dataset x P x B x method, measured columns where measured."""
    by_key = {(r["dataset"], r["devices"], r["batch_size"], r["method"]): r for r in measured}
    head = (
        "| dataset | P | B | method | pad-eff | packed pad-eff | imbalance | sched s "
        "| measured pad-eff | epoch s (measured) | speed-up vs psg |"
    )
    lines = [head, "|" + "---|" * 4 + "---:|" * 7]
    notes: list[str] = []
    sampled_any = False
    for r in suite_rows:
        key = (r["dataset"], r["devices"], r["batch_size"], r["method"])
        m = by_key.get(key)
        sched = f"{r['scheduler_seconds']:.3f}"
        if r["fallback"]:
            notes.append(r["fallback"])
            sched += f" [{len(notes)}]"
        epoch = speed = meas_pad = "-"
        if m is not None:
            epoch = f"{m['epoch_seconds']:.2f}"
            if any(m["sampled_steps"]):
                epoch += "*"
                sampled_any = True
            speed = _num(m["speedup_vs_psg"], ".2f")
            meas_pad = f"{m['measured_padding_efficiency']:.3f}"
        lines.append(
            f"| {r['label']} | {r['devices']} | {r['batch_size']} | {r['method']} "
            f"| {r['padding_efficiency']:.3f} | {r['packed_padding_efficiency']:.3f} | {r['imbalance']:.3f} "
            f"| {sched} | {meas_pad} | {epoch} | {speed} |"
        )
    text = "\n".join(lines) + "\n"
    if sampled_any:
        text += (
            "\n\\* estimated from a stratified sample of the epoch's steps (a smaller model for AS-733; "
            "see `sampled_steps` and `model` in the JSON); measured pad-eff is that of the sampled steps.\n"
        )
    if notes:
        text += "\n" + "\n".join(f"[{i}] dygnex_l fallback: {n}" for i, n in enumerate(notes, 1)) + "\n"
    return text


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _padding_panel(ax, suite_rows, colors) -> None:
    """(a) schedule padding efficiency (bars) and packed (dots) at the largest P."""
    if not suite_rows:
        _empty(ax, "no dataset rows")
        return
    p_max = max(r["devices"] for r in suite_rows)
    rows = [r for r in suite_rows if r["devices"] == p_max]
    groups = list(dict.fromkeys((r["label"], r["batch_size"]) for r in rows))
    methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    width = 0.8 / max(len(methods), 1)
    x = np.arange(len(groups))
    for i, m in enumerate(methods):
        sel = {(r["label"], r["batch_size"]): r for r in rows if r["method"] == m}
        eff = [sel[g]["padding_efficiency"] if g in sel else np.nan for g in groups]
        packed = [sel[g]["packed_padding_efficiency"] if g in sel else np.nan for g in groups]
        ax.bar(x + i * width, eff, width, color=colors[m], label=m)
        ax.plot(x + i * width, packed, "k.", ms=7, label="packed (SPMD budget)" if i == 0 else None)
    ax.set_xticks(x + width * (len(methods) - 1) / 2)
    ax.set_xticklabels([f"{d}\nB={b}" for d, b in groups], fontsize=8, rotation=30, ha="right")
    ax.set_ylim(0, 1.2)
    ax.axhline(1.0, color="k", lw=0.5)
    ax.legend(fontsize=8, ncol=4, loc="upper right")
    ax.set_title(f"(a) padding efficiency, P={p_max} (1 = perfect balance)")


def _speedup_panel(ax, measured, colors) -> None:
    """(b) measured epoch time: speed-up of every other method over psg."""
    others = [m for m in METHODS if m != "psg" and any(r["method"] == m for r in measured)]
    groups = list(dict.fromkeys((r["label"], r["devices"], r["batch_size"]) for r in measured))
    if groups and others and any(r["speedup_vs_psg"] is not None for r in measured):
        width = 0.8 / len(others)
        x = np.arange(len(groups))
        for i, m in enumerate(others):
            sel = {(r["label"], r["devices"], r["batch_size"]): r for r in measured if r["method"] == m}
            sp = [
                sel[g]["speedup_vs_psg"] if g in sel and sel[g]["speedup_vs_psg"] is not None else np.nan
                for g in groups
            ]
            ax.bar(x + i * width, sp, width, color=colors[m], label=m)
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
        ax.set_xticks(x + width * (len(others) - 1) / 2)
        ax.set_xticklabels([f"{d} B={b}" for d, p, b in groups], fontsize=8, rotation=30, ha="right")
        ax.legend(fontsize=8)
    else:
        _empty(ax, "not measured")
    ax.set_title("(b) measured epoch time: speed-up over psg")


def _scale_panel(ax, big, colors) -> None:
    """(c) dygnex_g's scheduler seconds at scale, with its and psg's padding efficiency."""
    if not big:
        _empty(ax, "skipped")
        ax.set_title("(c) dygnex_g at scale")
        return
    x = np.arange(len(big))
    ax.bar(x, [r["seconds_min"] for r in big], color=colors["dygnex_g"])
    for i, r in enumerate(big):
        ax.text(
            i,
            r["seconds_min"],
            f"eff {r['padding_efficiency']:.2f}\n(psg {r['psg_padding_efficiency']:.2f})",
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_xticks(x)
    ax.set_xticklabels([f"B={r['batch_size']}" for r in big])
    ax.set_ylabel("seconds per epoch schedule")
    ax.set_ylim(0, 1.3 * max(r["seconds_min"] for r in big))
    ax.set_title(f"(c) dygnex_g, {big[0]['windows']:,} windows x {big[0]['devices']:,} devices", fontsize=9)


def plot_summary(suite_rows, measured, big, path: Path) -> None:
    """(a) padding efficiency at the largest P, (b) measured speed-up over psg, (c) greedy at scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(18, 5), gridspec_kw={"width_ratios": [3, 2, 1]})
    colors = {m: f"C{i}" for i, m in enumerate(METHODS)}
    _padding_panel(axes[0], suite_rows, colors)
    _speedup_panel(axes[1], measured, colors)
    _scale_panel(axes[2], big, colors)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def plot_cost_instances(rows: list[dict], path: Path) -> None:
    """Part 2: mean padding efficiency and scheduler seconds per P x B, one bar per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = sorted({(r["devices"], r["batch_size"]) for r in rows})
    methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    x = np.arange(len(configs))
    width = 0.8 / max(len(methods), 1)
    for i, m in enumerate(methods):
        eff, sec = [], []
        for p, b in configs:
            sel = [r for r in rows if r["method"] == m and r["devices"] == p and r["batch_size"] == b]
            eff.append(np.mean([r["padding_efficiency"] for r in sel]) if sel else np.nan)
            sec.append(np.mean([r["scheduler_seconds"] for r in sel]) if sel else np.nan)
        axes[0].bar(x + i * width, eff, width, label=m)
        axes[1].bar(x + i * width, sec, width, label=m)
    labels = [f"P={p}\nB={b}" for p, b in configs]
    for ax in axes:
        ax.set_xticks(x + width * (len(methods) - 1) / 2)
        ax.set_xticklabels(labels)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="upper center", ncol=len(methods), frameon=False)
    axes[0].set_ylabel("padding efficiency (1 = perfect)")
    axes[0].set_ylim(0, 1.05)
    axes[0].set_title("load balance")
    axes[1].set_yscale("log")
    axes[1].set_ylabel("scheduler seconds per epoch")
    axes[1].set_title("scheduler time")
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    save_figure(fig, path, dpi=120)
    plt.close(fig)
