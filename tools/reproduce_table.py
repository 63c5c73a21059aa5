"""EvolveGCN's whole link-prediction table from the tables that calls of tools/reproduce.py wrote.

    python tools/reproduce_table.py docs/reproduce_*_seeds.json ... --json docs/reproduce_table.json

Rows of one (cell, way) from several files pool exactly (disjoint seeds); a row whose seeds another row
of the same (cell, way) holds is superseded by it; other overlaps are refused, and so is a seed that is
a different run in two files (a re-run: give it its own way). The --json file itself, if among the
inputs, is skipped. Every published cell
without a run of the protocol as written is listed as not run. Prints the markdown table; --json writes
the rows and, beside it, the same table as .md.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dygnex_jax.errors import ArgumentParser, run_tool
from dygnex_jax.files import atomic_write_text, json_text, output_file, staged
from dygnex_jax.research.reproduce import cell_configs
from dygnex_jax.research.reproduce_table import full_table, load_rows, merge, table_markdown


def cell_names() -> dict[tuple[str, str], str]:
    """(model, dataset) -> the configs/repro/ cell that trains it."""
    return {(cfg.model.name, cfg.data.dataset): name for name, cfg in cell_configs().items()}


def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tables", nargs="+", help="reproduce.json files (or docs files holding their rows)")
    ap.add_argument("--json", type=output_file, help="write the rows here (and the markdown beside it, .md)")
    a = ap.parse_args(argv)
    # the table this call replaces is not one of its inputs (a glob like docs/reproduce*.json holds it)
    out = Path(a.json).resolve() if a.json else None
    tables = [t for t in a.tables if Path(t).resolve() != out]
    if not tables:
        ap.error("no tables to pool besides --json's own file")
    rows = full_table(merge(load_rows(tables)), cell_names())
    text = table_markdown(rows)
    if a.json:
        with staged():  # both or neither
            atomic_write_text(a.json, json_text(rows, indent=2))
            atomic_write_text(Path(a.json).with_suffix(".md"), text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(lambda: main()))
