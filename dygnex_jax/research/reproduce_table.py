"""EvolveGCN's whole Table 2 from the per-call tables of ``tools/reproduce.py`` (``tools/reproduce_table.py``).

Each call of ``tools/reproduce.py`` writes the (cell, way) rows of the runs in its OUT folder: seeds,
mean and sample sd of test MAP / MRR, epochs, wall seconds. Calls made at different times (other seeds
of a cell, other cells) are pooled here: rows of one (cell, way) with disjoint seeds merge exactly (the
pooled mean and sample sd follow from each row's count, mean and sd); a row whose seeds all appear in
another row of the same (cell, way) is superseded by it (a later call that re-ran and extended it);
seeds that overlap otherwise are refused, as the rows cannot say which values are whose. Every
published cell without a row of the protocol as written (way ``evolvegcn``) is listed as not run.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..errors import UserError
from .reproduce import PUBLISHED, markdown, verdict_stats

DATASET_ORDER = ("bitcoin_otc", "bitcoin_alpha", "uci_collegemsg", "as733")  # Table 2's columns
MODEL_ORDER = ("gcn_gru", "egcn_h", "egcn_o")  # its rows
KEYS = ("cell", "way", "model", "dataset", "seeds", "test_map_mean", "test_map_sd", "test_mrr_mean")


def _is_row(x) -> bool:
    return isinstance(x, dict) and all(k in x for k in KEYS)


def load_rows(paths: list[str | Path]) -> list[dict]:
    """The rows of each file: a list of rows (``reproduce.json``), or a dict whose list values hold rows."""
    rows = []
    for path in map(Path, paths):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise UserError(
                f"cannot read {path}: {e}: pass reproduce.json files of tools/reproduce.py"
            ) from None
        lists = [data] if isinstance(data, list) else [v for v in data.values() if isinstance(v, list)]
        found = [dict(x, source=str(path)) for v in lists for x in v if _is_row(x)]
        if not found:
            raise UserError(
                f"{path} holds no reproduce rows: pass reproduce.json files of tools/reproduce.py"
            )
        rows += found
    return rows


def _sums(row: dict, metric: str) -> tuple[int, float, float]:
    """(n, sum, sum of squares) of a row's test metric, from its count, mean and sample sd."""
    n, mean, sd = len(row["seeds"]), row[f"test_{metric}_mean"], row[f"test_{metric}_sd"]
    var = 0.0 if n < 2 or sd is None else sd * sd
    return n, n * mean, (n - 1) * var + n * mean * mean


def _pool(rows: list[dict]) -> dict:
    rows = sorted(rows, key=lambda r: min(r["seeds"]))
    out = {k: rows[0][k] for k in ("cell", "way", "model", "dataset")}
    out["seeds"] = [s for r in rows for s in r["seeds"]]
    pub = PUBLISHED.get((out["model"], out["dataset"]))
    for i, metric in enumerate(("map", "mrr")):
        n, s, ss = (sum(x) for x in zip(*(_sums(r, metric) for r in rows)))
        mean = s / n
        sd = math.sqrt(max(ss - n * mean * mean, 0.0) / (n - 1)) if n > 1 else None
        out[f"test_{metric}_mean"], out[f"test_{metric}_sd"] = mean, sd
        out[f"published_{metric}"] = pub[i] if pub else None
        out[f"verdict_{metric}"] = verdict_stats(mean, sd, pub[i]) if pub else "no published value"
    out["best_epochs"] = [e for r in rows for e in r.get("best_epochs", [])]
    out["epochs"] = [e for r in rows for e in r.get("epochs", [])]
    walls = [(len(r["seeds"]), r["wall_seconds_mean"]) for r in rows if r.get("wall_seconds_mean")]
    out["wall_seconds_mean"] = sum(n * w for n, w in walls) / sum(n for n, _ in walls) if walls else None
    out["sources"] = sorted({r["source"] for r in rows if "source" in r})
    return out


def merge(rows: list[dict]) -> list[dict]:
    """One row per (cell, way), pooled over the given rows (see the module docstring)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["cell"], r["way"]), []).append(r)
    merged = []
    for (cell, way), rs in groups.items():
        _check_same_runs(cell, way, rs)
        keep = [r for r in rs if not any(set(r["seeds"]) < set(o["seeds"]) for o in rs if o is not r)]
        unique = []
        for r in keep:  # the same seeds twice (one call's table copied to two files): keep one
            if not any(set(r["seeds"]) == set(u["seeds"]) for u in unique):
                unique.append(r)
        seen: dict[int, str] = {}
        for r in unique:
            for s in r["seeds"]:
                if s in seen:
                    raise UserError(
                        f"{cell} / {way}: seed {s} is in {seen[s]} and in {r.get('source', '?')} with other "
                        "seeds: pass one file per seed set"
                    )
                seen[s] = r.get("source", "?")
        merged.append(_pool(unique))
    return merged


def _check_same_runs(cell: str, way: str, rows: list[dict]) -> None:
    """Two rows of one (cell, way) that share a seed must hold the same run of it — one call's table
    copied, or an earlier part of a later table — with the same best and last epoch (and, for the same
    seeds, the same means): a re-run on other code with the same seeds is another way, not a copy."""
    epochs = [dict(zip(r["seeds"], zip(r["best_epochs"], r["epochs"]))) for r in rows]
    for i, a in enumerate(rows):
        for j in range(i + 1, len(rows)):
            b, ea, eb = rows[j], epochs[i], epochs[j]
            differ = [s for s in ea if s in eb and ea[s] != eb[s]]
            if (
                not differ
                and set(ea) == set(eb)
                and any(a[k] != b[k] for k in ("test_map_mean", "test_mrr_mean"))
            ):
                differ = list(a["seeds"])  # the same seeds, the same epochs, other means: another run
            if differ:
                raise UserError(
                    f"{cell} / {way}: seed {differ[0]} is a different run in {a.get('source', '?')} and in "
                    f"{b.get('source', '?')} (a re-run?): pass one of them, or give the re-run its own way "
                    "(tools/reproduce.py --set)"
                )


def _order(row: dict) -> tuple:
    d, m = row["dataset"], row["model"]
    return (
        DATASET_ORDER.index(d) if d in DATASET_ORDER else len(DATASET_ORDER),
        MODEL_ORDER.index(m) if m in MODEL_ORDER else len(MODEL_ORDER),
        row["cell"],
        row["way"] != "evolvegcn",
        row["way"],
    )


def full_table(merged: list[dict], cells: dict[tuple[str, str], str]) -> list[dict]:
    """``merged`` plus a not-run row for every published (model, dataset) without an ``evolvegcn`` row
    (``cells``: (model, dataset) -> cell name), in Table 2's order."""
    have = {(r["model"], r["dataset"]) for r in merged if r["way"] == "evolvegcn"}
    missing = []
    for key, (map_, mrr) in PUBLISHED.items():
        if key not in have:
            missing.append(
                {
                    "cell": cells.get(key, f"{key[0]}_{key[1]}"),
                    "way": "evolvegcn",
                    "model": key[0],
                    "dataset": key[1],
                    "seeds": [],
                    "published_map": map_,
                    "published_mrr": mrr,
                    "not_run": True,
                }
            )
    return sorted(merged + missing, key=_order)


def table_markdown(rows: list[dict]) -> str:
    """``reproduce.markdown`` of the measured rows, the not-run cells as their own lines in place."""
    lines = markdown([r for r in rows if not r.get("not_run")]).splitlines()
    head, body = lines[:2], iter(lines[2:])
    out = list(head)
    for r in rows:
        if r.get("not_run"):
            out.append(
                f"| {r['cell']} | {r['way']} | — | not run | {r['published_map']:.4f} | — | not run "
                f"| {r['published_mrr']:.4f} | — | — | — | — |"
            )
        else:
            out.append(next(body))
    return "\n".join(out) + "\n"
