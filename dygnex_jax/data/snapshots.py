"""``data.dataset: snapshots``: one edge file per snapshot, from a folder or a glob (``data.path``).

* Which files: a folder's files (not its sub-folders, not hidden ``.`` files), or the files a glob
  matches (``data/day*.txt.gz``; ``**`` recurses). They are taken in *natural* order of their paths:
  runs of digits compare as numbers, so ``snap2`` comes before ``snap10`` (and ``snap02`` / ``snap2``,
  equal as numbers, in plain text order). A file's position is its snapshot index.
* Each file is read by the ``edges`` dataset's parser (data/loaders.py: plain or gzip, whitespace or
  commas, ``#`` / ``%`` comments, one optional header line, the same one-line errors naming the file and
  line), with rows ``src dst``, ``src dst time`` or ``src dst weight time``: the time column is optional
  (it only dates the snapshot: ``times[t]`` is its earliest time, else t). Every file with rows has the
  same columns. A file without data rows (empty, or comments / a header only) is an empty snapshot, so
  that a quiet day keeps its place in the series.
* Node ids are remapped over all files together; they may be names (any text, the first row of each
  file decides, every file the same way: ``node_ids`` then holds the names). ``data.symmetric`` /
  ``data.self_loops`` as for edges.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path

import numpy as np

from ..errors import UserError
from .graph import DynamicGraph
from .headers import first_lines, integer_ids, is_header
from .loaders import build_snapshots, columns, read_text, split_rows

_COLUMNS = {
    2: ["source node id", "target node id"],
    3: ["source node id", "target node id", "time"],
    4: ["source node id", "target node id", "weight", "time"],
}


def natural_key(text: str) -> tuple:
    """Sort key: digit runs as numbers (``snap2`` < ``snap10``), then the plain text as a tie-break."""
    parts = re.split(r"(\d+)", text)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), text


def snapshot_files(path: str) -> list[Path]:
    """The files of ``data.path`` (a folder or a glob) in natural order; none is a ``UserError``."""
    p = Path(path)
    if p.is_dir():
        files = [f for f in p.iterdir() if f.is_file() and not f.name.startswith(".")]
        if not files:
            raise UserError(
                f"snapshot folder {path!r} (data.path) holds no files: put one edge file per snapshot in it"
            )
    elif glob.has_magic(path):
        files = [Path(f) for f in glob.glob(path, recursive=True) if Path(f).is_file()]
        if not files:
            raise UserError(
                f"data.path {path!r} matches no files: check the pattern (one edge file per snapshot, "
                "e.g. DIR/day*.txt.gz)"
            )
    elif p.exists():
        raise UserError(
            f"data.path {path!r} is a file: data.dataset=snapshots reads a folder (or a glob) of "
            "per-snapshot files; one edge stream file is data.dataset=edges"
        )
    else:
        raise UserError(
            f"snapshot folder {path!r} (data.path) does not exist: give a folder of snapshot files or a "
            "glob such as DIR/*.txt"
        )
    return sorted(files, key=lambda f: natural_key(str(f)))


def _has_rows(text: str) -> bool:
    """Whether the text has a data row by the parser's rules (comments, blanks, a header dropped)."""
    kept = first_lines(text)
    return len(kept) == 2 or (len(kept) == 1 and not is_header(kept[0][2], None))


def read_snapshot_file(path: Path) -> list[np.ndarray] | None:
    """One snapshot file -> its columns (src, dst[, weight][, time] as in ``_COLUMNS``), or None when it
    has no data rows."""
    text = read_text(path, "edge")
    if not _has_rows(text):
        return None
    rows, linenos = split_rows(text, path, tuple(_COLUMNS), "edge")
    names = _COLUMNS[len(rows[0])]
    if not integer_ids(rows[0][0], rows[0][1]):  # node names
        rest = (
            columns(path, [r[2:] for r in rows], linenos, [(n, "num") for n in names[2:]])
            if names[2:]
            else []
        )
        return [
            np.asarray([r[0] for r in rows], dtype=str),
            np.asarray([r[1] for r in rows], dtype=str),
            *rest,
        ]
    return columns(path, rows, linenos, [(n, "id" if "node id" in n else "num") for n in names])


def load_snapshot_files(
    path: str, *, symmetric: bool = True, self_loops: bool = False, name: str = "snapshots"
) -> DynamicGraph:
    """``data.path`` (a folder or a glob of edge files, one per snapshot) -> the dynamic graph."""
    files = snapshot_files(path)
    parts, first = [], None  # (snapshot, columns) of the files with rows; the first such file
    for t, f in enumerate(files):
        cols = read_snapshot_file(f)
        if cols is None:
            continue
        if first is None:
            first = (f, len(cols), cols[0].dtype.kind)
        elif len(cols) != first[1]:
            raise UserError(
                f"snapshot file {str(f)!r} has {len(cols)} columns but {str(first[0])!r} has {first[1]}: "
                "every snapshot file needs the same columns (src dst, src dst time or src dst weight time)"
            )
        elif (cols[0].dtype.kind == "U") != (first[2] == "U"):
            said = {True: "node names", False: "integer node ids"}
            raise UserError(
                f"snapshot file {str(f)!r} has {said[cols[0].dtype.kind == 'U']} but {str(first[0])!r} has "
                f"{said[first[2] == 'U']}: write every file's nodes one way"
            )
        parts.append((t, cols))
    num = len(files)
    if not parts:
        raise UserError(f"the snapshot files of {path!r} have no data rows: give files with src dst rows")
    bucket = np.concatenate([np.full(len(c[0]), t, np.int64) for t, c in parts])
    src, dst = (np.concatenate([c[j] for _, c in parts]) for j in (0, 1))
    ncol = first[1]
    weight = np.concatenate([c[2] for _, c in parts]) if ncol == 4 else None
    time = np.concatenate([c[-1] for _, c in parts]) if ncol > 2 else None
    node_ids = np.unique(np.concatenate([src, dst]))
    u, v = np.searchsorted(node_ids, src), np.searchsorted(node_ids, dst)
    rank = None  # a pair's weight is that of its last row in time (else file) order
    if time is not None:
        rank = np.empty(len(time), np.int64)
        rank[np.lexsort((time, bucket))] = np.arange(len(time))
    snaps, weights, votes, mult = build_snapshots(
        u, v, bucket, num, weight=weight, rank=rank, symmetric=symmetric, self_loops=self_loops
    )
    times = np.arange(num, dtype=np.float64)
    if time is not None:
        start = np.full(num, np.inf)
        np.minimum.at(start, bucket, time)
        for t in range(num):  # an empty snapshot repeats the previous start (a loop over files)
            if not np.isfinite(start[t]):
                start[t] = start[t - 1] if t else float(time.min())
        times = start
    info = {
        "folder_or_glob": str(path),
        "files": [str(f) for f in files],
        "raw_rows": int(len(src)),
        "num_snapshots": num,
        "bucketing": "snapshot_files",
        "symmetric": symmetric,
        "self_loops": self_loops,
        "weighted": weight is not None,
    }
    return DynamicGraph(
        name, len(node_ids), snaps, weights, node_ids, times, info, votes=votes, multiplicity=mult
    )
