"""Fetch a named dataset from its public source into the layout the loaders expect.

Every file is written to a temporary name in its destination folder and renamed when complete, so an
interrupted download never leaves a half-written dataset file behind.
"""

from __future__ import annotations

import gzip
import http.client
import re
import shutil
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

from ..errors import UserError
from ..files import atomic_write
from .datasets import NAMED, known_names
from .loaders import columns, split_rows

_AS_FILE = re.compile(r"(?:^|/)as(\d{8})\.txt$")
_TIMEOUT_S = 60


def _fetch(url: str, dest: Path) -> Path:
    """Download ``url`` to ``dest`` atomically; network problems become a ``UserError``."""

    def write(fh) -> None:
        with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as resp:
            shutil.copyfileobj(resp, fh)

    try:
        return atomic_write(dest, write)
    except (urllib.error.URLError, http.client.HTTPException, TimeoutError, ConnectionError) as e:
        reason = getattr(e, "reason", e)
        raise UserError(
            f"could not download {url}: {reason}: check the network or fetch the file by hand"
        ) from None


def _parse_as_file(data: bytes, member: str) -> np.ndarray:
    """One raw ``asYYYYMMDD.txt`` (``from to`` rows, ``#`` comments) -> [E, 2] int64 undirected pairs
    (u <= v, unique, sorted)."""
    text = data.decode("utf-8", "replace")
    if not any(line.split() and line.lstrip()[0] not in "#%" for line in text.splitlines()):
        return np.zeros((0, 2), dtype=np.int64)
    rows, linenos = split_rows(text, f"as-733 archive member {member}", (2,), "as-733")
    src, dst = columns(member, rows, linenos, [("FromNodeId", "id"), ("ToNodeId", "id")])
    pairs = np.stack([np.minimum(src, dst), np.maximum(src, dst)], axis=1)
    return np.unique(pairs, axis=0)


def build_as733_intervals(tar_path: str | Path, out_dir: str | Path) -> Path:
    """Convert SNAP's ``as-733.tar.gz`` (daily ``asYYYYMMDD.txt`` files) into
    ``as733_edge_intervals.csv.gz`` (``src,dst,first_snapshot,last_snapshot``: one row per maximal run
    of consecutive snapshots holding an undirected edge, src <= dst, self-loops kept) and
    ``as733_dates.csv`` (``snapshot,date``); returns the intervals file's path."""
    out_dir = Path(out_dir)
    try:
        with tarfile.open(tar_path, "r:*") as tar:
            members = [(m, _AS_FILE.search(m.name)) for m in tar.getmembers() if m.isfile()]
            members = sorted(((match.group(1), m) for m, match in members if match), key=lambda x: x[0])
            if not members:
                raise UserError(
                    f"archive {str(tar_path)!r} holds no asYYYYMMDD.txt files: is it as-733.tar.gz?"
                )
            snaps = [_parse_as_file(tar.extractfile(m).read(), m.name) for _, m in members]
    except (tarfile.TarError, OSError, EOFError) as e:
        raise UserError(f"cannot read archive {str(tar_path)!r} ({e}): download it again") from None
    dates = [d for d, _ in members]
    counts = np.array([len(s) for s in snaps])
    pairs = np.concatenate(snaps)
    snap = np.repeat(np.arange(len(snaps)), counts)
    order = np.lexsort((snap, pairs[:, 1], pairs[:, 0]))  # by edge, then snapshot
    pairs, snap = pairs[order], snap[order]
    new_edge = np.ones(len(snap), dtype=bool)
    new_edge[1:] = np.any(pairs[1:] != pairs[:-1], axis=1)
    new_run = new_edge.copy()
    new_run[1:] |= snap[1:] != snap[:-1] + 1
    starts = np.flatnonzero(new_run)
    ends = np.append(starts[1:], len(snap)) - 1
    table = np.column_stack([pairs[starts], snap[starts], snap[ends]])
    lines = ["src,dst,first_snapshot,last_snapshot"] + [f"{a},{b},{c},{d}" for a, b, c, d in table.tolist()]
    text = ("\n".join(lines) + "\n").encode()
    out = atomic_write(
        out_dir / "as733_edge_intervals.csv.gz", lambda fh: fh.write(gzip.compress(text, mtime=0))
    )
    date_text = "snapshot,date\n" + "".join(f"{i},{d}\n" for i, d in enumerate(dates))
    atomic_write(out_dir / "as733_dates.csv", lambda fh: fh.write(date_text.encode()))
    return out


def download(name: str, root: str | Path) -> Path:
    """Fetch dataset ``name`` into ``root/<folder>/``; returns its main file (kept if already there)."""
    if name not in NAMED:
        named = ", ".join(n for n in known_names() if n in NAMED and NAMED[n].url)
        raise UserError(f"unknown dataset {name!r}: downloadable names are {named}")
    ds = NAMED[name]
    if not ds.url:
        why = {
            "snapshots": "DySAT's split is a pickled networkx file",
            "signal": "it is PyTorch Geometric Temporal's JSON file, which its own loader fetches",
        }.get(ds.kind, "none is known")
        raise UserError(
            f"dataset {name!r} has no public single-file source here ({why}): "
            f"copy its folder {ds.folder}/ from the shared datasets into {root}"
        )
    root = Path(root)
    dest = ds.path(root)
    if dest.is_file() and all(ds.path(root, role).is_file() for role, _ in ds.extra):
        return dest
    if ds.kind != "intervals":
        return _fetch(ds.url, dest)
    tar_path = dest.parent / "as-733.tar.gz"
    _fetch(ds.url, tar_path)
    try:
        return build_as733_intervals(tar_path, dest.parent)
    finally:
        tar_path.unlink(missing_ok=True)
