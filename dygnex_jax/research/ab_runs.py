"""Before / after benchmarks of two checkouts (``tools/bench_step.py``, ``tools/bench_pack.py``): a worker
subprocess per run that imports dygnex_jax from one checkout, the checkouts alternated A B / B A round
by round so that a drift of a shared machine's load weighs on both alike, and a check that every run
measured the checkout it was meant to (a stale install on the path would compare a tree with itself).

Only the driver imports this module; the workers run the tool's own script against either checkout, so a
reference checkout older than this module still measures.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ..errors import UserError

SIDES = ("ref", "this")


def side_order(round_index: int) -> tuple[str, str]:
    """The sides of round ``round_index`` (0-based) in the order they run: ref first in even rounds."""
    return SIDES if round_index % 2 == 0 else SIDES[::-1]


def reference_tree(ref: str | None) -> Path:
    """``--ref`` as a checkout path; one-line error unless it holds a dygnex_jax package."""
    if not ref or not (Path(ref) / "dygnex_jax").is_dir():
        raise UserError(f"--ref {ref!r} is not a dygnex_jax checkout: give e.g. a git worktree")
    return Path(ref).resolve()


def run_worker(tree: Path, argv: list[str], env: dict, mark: str, what: str) -> dict:
    """Run the worker command ``argv`` in ``tree`` with dygnex_jax imported from it; returns the JSON of
    its last stdout line that starts with ``mark``. That JSON's ``imported_from`` (a path or a list of
    them: the dygnex_jax files the worker used) must lie in ``tree``. One-line ``UserError`` (``what``
    names the run) when the worker fails, prints no result, or measured another checkout."""
    proc = subprocess.run(
        argv, cwd=tree, env={**env, "PYTHONPATH": str(tree)}, capture_output=True, text=True, check=False
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(mark)]
    if proc.returncode != 0 or not lines:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1].removeprefix("error: ")
        raise UserError(f"{what} with {tree} failed (exit {proc.returncode}): {last}")
    out = json.loads(lines[-1][len(mark) :])
    came = out.get("imported_from")
    files = [came] if isinstance(came, str) else list(came or [])
    want = tree.resolve() / "dygnex_jax"
    if not files or not all(Path(f).is_relative_to(want) for f in files):
        raise UserError(f"{what}: dygnex_jax came from {came}, not {want}: check the checkout and PYTHONPATH")
    return out
