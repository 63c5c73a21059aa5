"""Named datasets (file, loader, EvolveGCN defaults) and ``load_dataset(cfg)``, the one entry point."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from ..config import DataConfig
from ..errors import UserError
from . import cumulative, pygt_json, signals, synthetic, timerange
from .graph import DynamicGraph
from .loaders import load_edge_intervals, load_snapshot_edges
from .snapshots import load_snapshot_files


@dataclasses.dataclass(frozen=True)
class NamedDataset:
    """A dataset under the data root.

    Fields:
      name: registry key (``data.dataset``).
      folder / file: the main file is ``root/folder/file``.
      kind: "stream" (edge stream bucketed by ``aggr_time``), "intervals" (edge-interval CSV),
        "snapshots" (rows carry their snapshot index) or "signal" (PyG-Temporal JSON: a graph per
        step + node signal, for data.task=node_reg; data/signals.py).
      aggr_time: default seconds per snapshot of a stream (EvolveGCN's choice).
      last_snapshots: default number of last snapshots kept (0 = all).
      extra: further files, by role: "dates" (intervals), "stream" (raw stream behind a snapshot file).
      url: public source of the main file ("" = none), used by ``download``.
    """

    name: str
    folder: str
    file: str
    kind: str
    aggr_time: float = 0.0
    last_snapshots: int = 0
    extra: tuple[tuple[str, str], ...] = ()
    url: str = ""

    def path(self, root: Path, role: str = "") -> Path:
        files = dict(self.extra)
        return root / self.folder / (files[role] if role else self.file)


NAMED: dict[str, NamedDataset] = {
    d.name: d
    for d in [
        NamedDataset(
            "bitcoin_otc",
            "bitcoin_otc",
            "soc-sign-bitcoinotc.csv.gz",
            "stream",
            aggr_time=1_200_000.0,
            url="https://snap.stanford.edu/data/soc-sign-bitcoinotc.csv.gz",
        ),
        NamedDataset(
            "bitcoin_alpha",
            "bitcoin_alpha",
            "soc-sign-bitcoinalpha.csv.gz",
            "stream",
            aggr_time=1_200_000.0,
            url="https://snap.stanford.edu/data/soc-sign-bitcoinalpha.csv.gz",
        ),
        NamedDataset(
            "uci_collegemsg",
            "uci_collegemsg",
            "CollegeMsg.txt.gz",
            "stream",
            aggr_time=190_080.0,
            url="https://snap.stanford.edu/data/CollegeMsg.txt.gz",
        ),
        NamedDataset(
            "as733",
            "as733",
            "as733_edge_intervals.csv.gz",
            "intervals",
            last_snapshots=100,
            extra=(("dates", "as733_dates.csv"),),
            url="https://snap.stanford.edu/data/as-733.tar.gz",
        ),
        NamedDataset(
            "enron_dysat",
            "enron_dysat",
            "enron_dysat_16snapshots.csv.gz",
            "snapshots",
            extra=(("stream", "enron_edges.csv.gz"),),
        ),
        # PyTorch Geometric Temporal's signal datasets (node regression), native steps
        NamedDataset("chickenpox_hungary", "chickenpox_hungary", "chickenpox.json.gz", "signal"),
        NamedDataset("pedalme_london", "pedalme_london", "pedalme_london.json.gz", "signal"),
        NamedDataset("england_covid", "england_covid", "england_covid.json.gz", "signal"),
        NamedDataset("montevideo_bus", "montevideo_bus", "montevideo_bus.json.gz", "signal"),
    ]
}

SPECIAL = ("synthetic", "edges", "intervals", "snapshots", "pygt_json")


def known_names() -> list[str]:
    return [*SPECIAL, *NAMED]


def resolve_root(cfg_root: str) -> Path:
    """Data root: ``cfg_root``, else ``$DYGNEX_DATA``, else the first existing ``../shared/datasets``
    (next to the working directory, then next to the repository)."""
    if cfg_root:
        root, how = Path(cfg_root), "data.root"
    elif os.environ.get("DYGNEX_DATA"):
        root, how = Path(os.environ["DYGNEX_DATA"]), "DYGNEX_DATA"
    else:
        repo = Path(__file__).resolve().parents[2]
        candidates = [Path.cwd().parent / "shared" / "datasets", repo.parent / "shared" / "datasets"]
        found = [c for c in candidates if c.is_dir()]
        root = found[0] if found else candidates[0]
        how = "default" if found else f"none of {', '.join(str(c) for c in candidates)} exists; default"
    if not root.is_dir():
        raise UserError(
            f"data root {str(root)!r} ({how}) does not exist: set data.root=DIR or DYGNEX_DATA=DIR, "
            "or fetch the data with `python -m dygnex_jax download NAME --root DIR`"
        )
    return root


def _require(path: Path, name: str, root: Path) -> Path:
    if not path.is_file():
        fetch = (
            f"fetch it with `python -m dygnex_jax download {name} --root {root}`"
            if NAMED[name].url
            else "copy the dataset folder there (it has no public single-file download)"
        )
        raise UserError(f"dataset {name!r}: file {str(path)!r} does not exist: {fetch}")
    return path


def _load_named(ds: NamedDataset, cfg: DataConfig) -> DynamicGraph:
    root = resolve_root(cfg.root)
    rebucket = cfg.aggr_time > 0 or cfg.num_snapshots > 0
    flags = {"symmetric": cfg.symmetric, "self_loops": cfg.self_loops}
    if ds.kind == "signal":
        if rebucket:
            raise UserError(
                f"dataset {ds.name!r} has native steps: data.aggr_time / data.num_snapshots do not apply "
                "(set them to 0)"
            )
        return signals.LOADERS[ds.name](_require(ds.path(root), ds.name, root), ds.name)
    if ds.kind == "intervals":
        if rebucket:
            raise UserError(
                f"dataset {ds.name!r} has native snapshots: data.aggr_time / data.num_snapshots do not apply "
                "(set them to 0; use data.last_snapshots to choose snapshots)"
            )
        path = _require(ds.path(root), ds.name, root)
        dates = ds.path(root, "dates")
        return load_edge_intervals(path, dates_path=dates if dates.is_file() else None, name=ds.name, **flags)
    if ds.kind == "snapshots" and not rebucket:
        return load_snapshot_edges(_require(ds.path(root), ds.name, root), name=ds.name, **flags)
    # a stream, or a snapshot dataset re-bucketed from its raw stream
    path = _require(ds.path(root, "stream") if ds.kind == "snapshots" else ds.path(root), ds.name, root)
    aggr = cfg.aggr_time if cfg.aggr_time > 0 else (0.0 if cfg.num_snapshots > 0 else ds.aggr_time)
    return timerange.read_stream(path, cfg, aggr_time=aggr, name=ds.name)


def load_dataset(cfg: DataConfig) -> DynamicGraph:
    """The dynamic graph ``cfg`` names, bucketed and trimmed to ``cfg.last_snapshots``."""
    name = cfg.dataset
    if cfg.path and cfg.path.startswith("~"):  # as a shell would: data.path=~/x.txt in a YAML file too
        cfg = dataclasses.replace(cfg, path=os.path.expanduser(cfg.path))
    flags = {"symmetric": cfg.symmetric, "self_loops": cfg.self_loops}
    default_last = 0
    if name == "synthetic":
        graph = synthetic.generate(cfg)
    elif name == "pygt_json":  # PyG-Temporal's JSON layouts (data/pygt_json.py)
        graph = pygt_json.load(cfg)
    elif name in ("edges", "intervals", "snapshots"):
        if not cfg.path:
            what = (
                "FOLDER (or a glob): the folder of per-snapshot edge files" if name == "snapshots" else "FILE"
            )
            raise UserError(f"data.dataset={name} needs data.path={what}: set what to read")
        if name == "edges":
            graph = timerange.read_stream(cfg.path, cfg, aggr_time=cfg.aggr_time)
        elif name == "snapshots":
            if cfg.aggr_time > 0 or cfg.num_snapshots > 0:
                raise UserError(
                    "data.dataset=snapshots has one snapshot per file: data.aggr_time / data.num_snapshots "
                    "do not apply (set them to 0; data.start / data.end choose snapshots)"
                )
            graph = load_snapshot_files(cfg.path, **flags)
        else:
            graph = load_edge_intervals(cfg.path, **flags)
    elif name in NAMED:
        graph = _load_named(NAMED[name], cfg)
        default_last = NAMED[name].last_snapshots
    else:
        raise UserError(f"unknown dataset {name!r}: use one of {', '.join(known_names())}")
    graph = timerange.select_snapshots(graph, cfg.start, cfg.end)  # native snapshots; streams: by row
    if cfg.cumulative:
        graph = cumulative.accumulate(graph)
    last = default_last if cfg.last_snapshots == -1 else cfg.last_snapshots
    if last < 0:
        raise UserError(
            f"data.last_snapshots must be -1 (default), 0 (all) or positive, got {cfg.last_snapshots}"
        )
    total = graph.num_snapshots
    if 0 < last < total:
        graph = graph.select(total - last, total)
    if graph.num_snapshots < 2:
        raise UserError(
            f"dataset {name!r} has {graph.num_snapshots} snapshot(s) after bucketing: need at least 2 "
            "(use a smaller data.aggr_time, a larger data.num_snapshots, data.last_snapshots or a wider "
            "data.start / data.end)"
        )
    if int(graph.edge_counts().sum()) == 0:
        raise UserError(f"dataset {name!r} has no edges in its snapshots: check the data and data.self_loops")
    if cfg.task == "node_reg" and graph.signal is None:
        with_signal = ", ".join(d.name for d in NAMED.values() if d.kind == "signal")
        raise UserError(
            f"data.task=node_reg needs a node signal, which {name!r} has not: use one of {with_signal} "
            "or pygt_json (data.path=FILE)"
        )
    return graph
