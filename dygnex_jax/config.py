"""Typed configuration: every key declared once, with its default, a comment and its allowed values.

A YAML file in ``configs/`` overrides only what differs from these defaults; ``key=value`` pairs on the
command line override the file (``train.batch_size=16``, ``schedule.method=psg``). Unknown keys and
values of the wrong type are one-line ``UserError``s.

Every key's allowed values are declared beside it with ``key(default, ...)`` (config_check.py): an
interval (``"[1, inf)"``), a string's choices (a tuple, or a function returning a registry's names), or
``free=`` saying why the value is not checked here; bool keys need none. ``validate`` checks every key
(``check_keys``), then the rules that span keys. YAML reading and type coercion: config_yaml.py.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from pathlib import Path
from typing import Any

import yaml

from .config_check import check_keys, key
from .config_yaml import coerce, key_differences, parse_override, read_yaml
from .data.cumulative import check_targets
from .data.timerange import TimePoint, time_range
from .errors import UserError
from .files import atomic_write_text
from .host_memory import CHOICES as _HOST_MALLOC
from .resources import check_config
from .schedule.greedy import COMPOSE as _COMPOSE
from .strategies import METHODS as _METHODS
from .strategies import WINDOW_METHODS as _WINDOW_METHODS

# Models that snapshot / vertex partition can run (models/: initial_carry, advance and a Comm).
PARTITIONED_MODELS = ("egcn_o", "gcrn_gru")
# Models whose graph operators never read the recurrent state: their packed step runs every time
# offset's edges as one flat list (padding.py, layout "flat"); the others scan over offsets ("scan").
FLAT_LAYOUT_MODELS = frozenset({"egcn_o", "tgcn", "gcn_gru", "mpnn_lstm"})
# Models whose output (embeddings at the last offset) reads the graph of the last offset only: EvolveGCN-O
# (its weights evolve without the graph, and a layer's GCN at offset tau reads offset tau alone). Their
# steps can carry the last offset's edges alone (layout "last"; the same output, tested).
LAST_OFFSET_MODELS = frozenset({"egcn_o"})
LAYOUT_CHOICES = ("auto", "scan", "flat", "last")
# Models whose GCN layers take model.activation (the others have their cells' fixed nonlinearities).
ACTIVATION_MODELS = frozenset({"egcn_o", "egcn_h", "gcn_gru"})
# Methods that pack whole windows per device (the others have their own partitioned layouts): the
# strategies' table (strategies/__init__.py, data without JAX) says which.
WINDOW_METHODS = _WINDOW_METHODS
# Tasks (data.task): link prediction of the next snapshot, edge classification of the window's last
# snapshot, or node regression of the next signal value. "link" runs under every schedule.method, the
# others under psg / dygnex_g / dygnex_l.
TASKS = ("link", "edge_cls", "node_reg")
# Each task's evaluation metrics (metrics.jsonl keys "{split}_{name}"; the first picks the best epoch)
# and whether the best is the max or the min.
TASK_METRICS = {
    "link": (("map", "mrr"), max),
    "edge_cls": (("f1", "micro_f1", "macro_f1"), max),
    "node_reg": (("mse",), min),
}
SEED = "[0, 4294967295]"  # random seeds: unsigned 32-bit (every generator here takes them)


def step_layout(config: Config) -> str:
    """The edge layout of a run's packed training and evaluation steps (padding.py): ``parallel.layout``,
    where ``auto`` is the cheapest the model allows — ``last`` (LAST_OFFSET_MODELS), ``flat``
    (FLAT_LAYOUT_MODELS), else ``scan``. The partitioned baselines (snapshot, vertex) always scan."""
    name, choice = config.model.name, config.parallel.layout
    if config.schedule.method not in WINDOW_METHODS:
        return "scan"
    if choice == "auto":
        return "last" if name in LAST_OFFSET_MODELS else "flat" if name in FLAT_LAYOUT_MODELS else "scan"
    return choice


def selection_metric(task: str) -> tuple[str, object]:
    """The metric that picks a run's best epoch (its task's first) and ``max`` / ``min`` (which is best)."""
    names, better = TASK_METRICS[task]
    return names[0], better


def run_methods() -> tuple[str, ...]:
    """The ``schedule.method`` names: the strategies' table (``strategies.METHODS``; data, no JAX)."""
    return _METHODS


@dataclasses.dataclass
class DataConfig:
    # What a window predicts: "link" (the edges of the next snapshot, EvolveGCN), "edge_cls" (the
    # rating sign of the edges of the window's last snapshot, EvolveGCN's Bitcoin task; see
    # data/windows.py) or "node_reg" (every node's signal value at the target step, PyG-Temporal's
    # signal datasets; see data/signals.py).
    task: str = key("link", choices=TASKS)
    # Dataset: "synthetic" (embedded default), a named real dataset (bitcoin_otc, bitcoin_alpha,
    # uci_collegemsg, as733, enron_dysat; node_reg: chickenpox_hungary, pedalme_london, england_covid,
    # montevideo_bus), or "edges" / "intervals" / "snapshots" / "pygt_json" to read `path`.
    dataset: str = key("synthetic", free="data/datasets.py checks it (unknown dataset ...)")
    # Data root holding the named datasets; "" = $DYGNEX_DATA, else ../shared/datasets when it exists.
    root: str = key("", free="a folder")
    # File for dataset "edges" (src dst [weight] time rows) or "intervals" (src,dst,first,last rows);
    # for "snapshots" a folder or a glob of edge files, one per snapshot (data/snapshots.py); for
    # "pygt_json" a PyG-Temporal JSON file (data/pygt_json.py).
    path: str = key("", free="a file")
    # pygt_json: the keys of the target ([T, N], or [N] per snapshot record) and of the features
    # ([T, N, F], or [N, F] per record); "" = detect (data/pygt_json.py).
    target_key: str = key("", free="a key of the JSON file (data/pygt_json.py looks it up)")
    feature_key: str = key("", free="a key of the JSON file")  # for data.features=given; "" = detect
    # Snapshot bucketing of an edge stream: seconds per snapshot (0 = dataset default), or a count.
    aggr_time: float = key(0.0, "[0, inf)")
    num_snapshots: int = key(0, "[0, inf)")  # that many equal-width snapshots when aggr_time is 0 (0 = off)
    # Keep only the last N snapshots (0 = all; -1 = the dataset's default: all, but as733 its last 100
    # days as EvolveGCN does).
    last_snapshots: int = key(-1, "[0, inf)", also={-1: "default"})
    # Keep rows with start <= time < end: numbers in the data's time unit, or ISO dates (2004-01-01,
    # 2004-01-01T12:00:00, UTC) for Unix seconds; "" = open. See data/timerange.py.
    start: TimePoint = key("", free="a number or an ISO date (data/timerange.py parses it)")
    end: TimePoint = key("", free="a number or an ISO date, after start")  # the range's end, excluded
    cumulative: bool = False  # snapshot t holds every edge of snapshots 0..t (data/cumulative.py)
    # Link-prediction positives: "all" edges of the target, or "new" pairs (no edge before; pairs seen
    # before are then no candidates at all); "auto" = new on a cumulative series, else all.
    targets: str = key("auto", choices=("auto", "all", "new"))
    symmetric: bool = True  # store every edge in both directions
    # The weight of a history edge in the GCN's normalised adjacency: "none" (1 each) or "count": the
    # source rows behind the pair in its snapshot (both directions under `symmetric`) — EvolveGCN's
    # weighted adjacency (messages, ratings between two nodes); sources without repeated rows give 1.
    edge_weight: str = key("none", choices=("none", "count"))
    self_loops: bool = False  # keep u->u rows of the source (the GCN adds its own self-loops)
    # Node features: "degree" (EvolveGCN's one-hot of the snapshot degree, capped) or "constant";
    # node_reg: "given" = the features the data carries (pygt_json), then `lags` target values.
    features: str = key("degree", choices=("degree", "constant", "given"))
    # Degrees >= this share the last one-hot slot; 0 = uncapped as EvolveGCN: one slot per degree up to
    # the largest in-degree of any snapshot (that + 1 input features).
    max_degree: int = key(64, "[1, inf)", also={0: "uncapped"})
    # W: history snapshots per window; the target is the next one (edge_cls: the last).
    window: int = key(10, "[1, inf)")
    # node_reg: a snapshot's node input is its last `lags` signal values (PyG-T's examples: window 1,
    # lags 4 on chickenpox; window W, lags 1 is the recurrent form); with data.features=given they
    # follow the given features (0 = the features alone). Ignored by the other tasks.
    lags: int = key(1, "[0, inf)")
    # Chronological split of target snapshots (EvolveGCN: 0.7 / 0.1 / 0.2); test gets the rest.
    train_frac: float = key(0.7, "(0, 1)")
    val_frac: float = key(0.1, "[0, 1)")  # validation share (0 = none); train_frac + val_frac < 1
    neg_mult: int = key(10, "[0, inf)")  # training negatives per positive target edge, resampled every epoch
    # Training negatives: "uniform" over all nodes, "active" (both ends among the nodes with an edge in
    # the window's history), or "evolvegcn" (IBM's smart_neg_sampling: the source drawn from the target
    # edges' sources, as often as each is one, the destination from the history snapshots' nodes, as
    # often as each has an edge in one); see data/windows.py.
    neg_sampling: str = key("uniform", choices=("uniform", "active", "evolvegcn"))
    # Synthetic dynamic SBM (dataset "synthetic").
    syn_nodes: int = key(600, "[2, inf)")  # nodes, at least 2 per community
    syn_snapshots: int = key(48, "[2, inf)")  # snapshots generated
    syn_communities: int = key(6, "[1, inf)")  # communities of the block model
    syn_edges: int = key(400, "[1, inf)")  # mean edges per snapshot
    # Log-normal sigma of the per-snapshot size: 0 = all equal, larger = more skew.
    syn_skew: float = key(1.5, "[0, 10]")  # (beyond 10 the draws overflow float64)
    syn_p_in: float = key(0.8, "[0, 1]")  # fraction of edges inside a community
    # Fraction of an active community's edges kept from the previous snapshot.
    syn_persist: float = key(0.5, "[0, 1]")
    syn_seed: int = key(0, SEED)  # the synthetic graph is a function of this seed


@dataclasses.dataclass
class ModelConfig:
    # Registry (dygnex_jax/models): egcn_o, egcn_h, gcrn_gru, gconv_lstm, gc_lstm, tgcn, gcn_gru, mpnn_lstm
    name: str = key("egcn_o", free="models/ checks it when building (its registry imports JAX)")
    hidden: int = key(64, "[1, inf)")  # node embedding width of every graph layer
    # Graph layers (EvolveGCN: 2); stacked recurrent cells for gcrn_gru / gconv_lstm / gc_lstm / tgcn;
    # mpnn_lstm has PyG-Temporal's fixed two GCN layers and two LSTMs.
    layers: int = key(2, "[1, 64]")  # (layers are unrolled: more would trace for minutes)
    cheb_k: int = key(2, "[1, 64]")  # Chebyshev order K of gcrn_gru / gconv_lstm / gc_lstm convolutions
    # egcn_o's weight GRU: "rows" (PyG-Temporal: torch.nn.GRU over the weight matrix's rows) or
    # "matrix" (IBM's EvolveGCN code: left-multiplied matrix GRU).
    egcn_gru: str = key("rows", choices=("rows", "matrix"))
    # Activation after every GCN layer of egcn_o, egcn_h and gcn_gru: "relu", or "rrelu_mean" — RReLU
    # (IBM's EvolveGCN code) at its expected slope, a leaky ReLU of slope (1/8 + 1/3) / 2 = 11/48, which
    # is torch.nn.RReLU in evaluation mode; its random per-element slopes in training are not drawn here.
    activation: str = key("relu", choices=("relu", "rrelu_mean"))
    head_hidden: int = key(128, "[1, inf)")  # link-prediction MLP hidden width (EvolveGCN: 400)
    # Rematerialisation of the time scan (models/layers.py ``time_scan``): "none" keeps every offset's
    # activations for the backward pass; "scan" keeps only the recurrent carry per offset and recomputes
    # the scan body in the backward pass (less memory, more compute; same values and parameters).
    remat: str = key("none", choices=("none", "scan"))
    # Activations' dtype (layers.compute_dtype); params, optimiser state, loss and gradients stay float32.
    dtype: str = key("float32", choices=("float32", "bfloat16"))
    # float32 products: "highest" (PyTorch's float32, GPU too) or "default" (TF32 on NVIDIA GPUs; models/)
    matmul_precision: str = key("highest", choices=("highest", "default"))
    # Link head: more target pairs than this run in rematerialised chunks of this many (models/head.py:
    # its memory stops growing with the pairs; 0 = never chunk). -1 (auto): 4,096 on CPU (cache-sized:
    # AS-733's step 1.4x faster than at 65,536, tools/bench_step.py), 65,536 on an accelerator.
    head_chunk: int = key(-1, "[0, inf)", also={-1: "auto"})


@dataclasses.dataclass
class TrainConfig:
    epochs: int = key(10, "[1, inf)")  # passes over the training windows
    batch_size: int = key(8, "[1, inf)")  # B: windows per optimiser step, over all devices
    learning_rate: float = key(0.005, "(0, inf)")  # Adam / AdamW step size
    weight_decay: float = key(0.0, "[0, inf)")  # AdamW's decoupled weight decay (0 = plain Adam)
    # CE weights of classes (0, 1): link (non-edge, edge); edge_cls (negative, positive rating). Each
    # > 0: a zero weight drops its class from the loss, and the model learns to predict the other always.
    class_weights: tuple[float, float] = key((0.1, 0.9), "(0, inf)")
    seed: int = key(0, SEED)  # parameter init; with the epoch, schedules and training negatives
    # Checkpoint (params, optimiser state, metrics so far) every N epochs and after the last, under
    # OUT/checkpoints (0 = only after the last); `train --resume OUT` continues from the latest.
    checkpoint_every: int = key(1, "[0, inf)")
    keep_checkpoints: int = key(3, "[1, inf)")  # complete checkpoints kept (the oldest are deleted)
    checkpoint_best: bool = False  # also at each new best val metric (the result's epoch), the newest kept
    # A step with a non-finite loss, gradient or update: "stop" the run (naming the step, its windows
    # and the last good checkpoint), or "skip" it (parameters unchanged; counted per epoch).
    on_nonfinite: str = key("stop", choices=("stop", "skip"))
    # Early stopping (EvolveGCN's early_stop_patience): end the run once more than this many evaluations
    # in a row have not improved the validation metric (the task's first: MAP, F1, MSE) on its best so
    # far; the run's result is the best-validation epoch (summary.json "best"). 0 = train every epoch.
    patience: int = key(0, "[0, inf)")


@dataclasses.dataclass
class ScheduleConfig:
    # dygnex_g (greedy), dygnex_l (per-step MILP), psg (even split by count); the communication-bound
    # baselines snapshot (time ranges per device, pipelined) and vertex (node ranges per device) take
    # psg's steps and run them with their partitioned step. Choices: strategies.METHODS.
    method: str = key("dygnex_g", choices=run_methods)
    shuffle: bool = True  # psg: shuffle windows every epoch (else time order)
    jitter: float = key(0.1, "[0, inf)")  # cost-ordered methods: randomness kept in mini-batch composition
    # Cost-ordered methods, how windows form steps: "strata" = one window from each of B cost strata
    # (a stratified random mini-batch); "rows" = B/P random rows of P equal-cost windows; "sorted" =
    # B consecutive windows of the cost order. Later ones balance better, earlier ones mix better.
    # "auto": planned budgets: the planner's pick (mix_margin); else sorted while B/P <= 4, else strata.
    # "chrono": B consecutive windows in time order, the steps in time order every epoch (EvolveGCN's
    # protocol; never fitted across steps): only the placement balances.
    compose: str = key("auto", choices=_COMPOSE)
    # Planned budgets, cost-ordered methods: may fit an epoch's steps to one budget (greedy.balance_epoch:
    # windows swapped across steps so the largest slot per column shrinks; then its shrink); false: never.
    fit_epochs: bool = True
    # ... may run one planned epoch's steps every epoch in an order of its own; false: never.
    repeat_steps: bool = True
    # ... the candidate plans come in order of mixing (strata, rows, sorted; as composed, fitted, then
    # repeated); a later one is kept only if its predicted seconds (steps on their budgets + compilations)
    # are lower by more than this share: less mixing cost converged test MAP (plan_search.plan_run).
    mix_margin: float = key(0.1, "[0, 1)")
    alpha: float = key(1.0, "[0, inf)")  # padded-objective weight of max nodes per device
    beta: float = key(1.0, "[0, inf)")  # ... of max edges per device
    gamma: float = key(1.0, "[0, inf)")  # ... of max target pairs per device
    # Balance the edges of every time offset separately (costs [K, W + 2]), as the packed step pads
    # edges per offset; false: one summed edge column (costs [K, 3]).
    time_resolved: bool = True
    # The cost model: "auto" (this machine's profile of this model, task, layout and device count,
    # stored by `python -m dygnex_jax profile`; without one the analytic default, with a line saying
    # so), "analytic", or a JSON file from `profile`. A profiled model's seconds per node, edge and pair
    # become alpha/beta/gamma, and predicted step times and the compile price use it (cost_cache.py).
    cost_model: str = key("auto", free="auto, analytic or a file (cost_cache.py reads it)")
    # Every N epochs, re-fit the cost model on the step times measured so far (steps beside the next
    # step's packing and an epoch's last, alone, fitted apart) and re-schedule with its weights (0 = never).
    reschedule_every: int = key(0, "[0, inf)")
    # dygnex_l: seconds per step, search and MILP together (an epoch may take steps x this). 0.5 s
    # gets 96 % of what 2 s gets on Bitcoin-OTC / UCI / AS-733 at P = 8 (docs/bench_ilp.json).
    time_limit: float = key(0.5, "(0, inf)")
    mip_gap: float = key(0.01, "[0, inf)")  # dygnex_l: relative gap at which a step's solve stops
    # cvxpy MILP solver name; schedule/ilp.py checks it against the solvers installed here.
    solver: str = key("HIGHS", free="the installed MILP solvers (schedule/ilp.py)")
    ilp_warm_start: bool = True  # dygnex_l + HIGHS: highspy started from greedy (false: cvxpy, no start)
    # dygnex_l: B&B nodes per step, 0 = no cap (reproducible, unlike time_limit).
    node_limit: int = key(0, "[0, inf)")


@dataclasses.dataclass
class ParallelConfig:
    devices: int = key(0, "[0, inf)")  # data-parallel devices (0 = all local devices)
    # Training budgets (padded sizes): "planned" = before epoch 1 the run's steps (every epoch's
    # schedule) are grouped into at most max_budgets budgets fitted to them (padding.plan_budgets),
    # compiled ahead; "buckets" = each step's need rounded up to the geometric grid below, compiled
    # when first seen (with the reuse/rent policy below). Evaluation and the snapshot / vertex
    # baselines always use the grid.
    budgets: str = key("planned", choices=("planned", "buckets"))
    # Packed edge layout of whole-window steps (padding.py): "scan" = edges per time offset, padded to
    # the largest offset (W x E); "flat" = all offsets' edges in one list (their sum; models whose graph
    # operators do not read the recurrent state); "last" = the last offset's edges alone (EvolveGCN-O,
    # whose output reads no other); "auto" = the cheapest the model allows.
    layout: str = key("auto", choices=LAYOUT_CHOICES)
    # planned: the budgets are fitted to the schedules of epochs 1..N (0 = every epoch of the run). Runs
    # that may stop early (train.patience) need not schedule hundreds of epochs before the first: later
    # ones are scheduled when due; a step no planned budget holds runs on its bucket ("overflow_steps").
    plan_epochs: int = key(0, "[0, inf)")
    # planned: XLA compilations at once (threads; priced in rounds, padding.compile_rounds). 1: one
    # at a time; on the 2-core CPU one already keeps 1.4 cores busy (tools/bench_compile.py: 2 = 0.95x).
    compile_workers: int = key(1, "[1, 64]")
    max_budgets: int = key(4, "[1, 64]")  # planned: at most this many training budgets (compilations) per run
    # JAX's persistent compilation cache: "auto" (a per-user folder: $DYGNEX_CACHE, else
    # $XDG_CACHE_HOME/dygnex_jax/xla, else ~/.cache/dygnex_jax/xla), "off", or a folder. A second run
    # of the same shapes (another seed, scheduling variant, resume) skips XLA compilation.
    compile_cache: str = key("auto", free="auto, off or a folder (compile_cache.py checks it)")
    budget_align: int = key(8, "[1, 4096]")  # planned: nodes, edges and pairs rounded up to a multiple
    bucket_ratio: float = key(1.25, "(1, inf)")  # padded budgets rounded up to a geometric grid of ratio
    min_bucket: int = key(64, "[1, 1048576]")  # smallest budget of every padded dimension
    # Run a step on a compiled larger budget when its padded work is at most this fraction above the
    # step's own bucket (0 = never; inf = always).
    reuse_slack: float = key(0.25, "[0, inf]")
    # A compilation's price in steps. planned: a budget more is worth it only if it saves this many
    # average steps of padded work. buckets: rent a larger compiled budget rather than compile a new one
    # until the padded work rented for that bucket would pass this many steps of the larger budget, then
    # compile it (ski rental; 0 = never rent). -1 (auto): compile_seconds over the cost model's predicted
    # seconds of an average planned step (P fake devices on a host run P times slower than one), the
    # same on every process. ~12 steps for EvolveGCN-O at B = 32 on the 2-core CPU (1 or 8 fake devices:
    # 0.12-0.13 s steps predicted), hundreds on a GPU (millisecond steps).
    compile_steps: float = key(-1.0, "[0, inf]", also={-1: "auto"})
    # compile_steps=-1: the expected seconds of one training-step compilation, lowering included.
    # 0 (auto): the profiled cost model's measurement (schedule.cost_model), else 1.5 s (measured on the
    # 2-core CPU: EvolveGCN-O 1.4 s, T-GCN 1.8 s, GCRN-GRU 2.1 s).
    compile_seconds: float = key(0.0, "(0, 86400]", also={0: "auto"})
    # schedule.method=snapshot: micro-batches per step flowing through the time pipeline (0 = P).
    micro_batches: int = key(0, "[0, inf)")
    # schedule.method=vertex: node ranges by "contiguous" count, or balanced by "degree" (1 + in-degree).
    vertex_balance: str = key("contiguous", choices=("contiguous", "degree"))
    # Training steps packed and placed on the devices ahead of the running step by a background thread
    # (host packing overlaps the device's work; 0 = pack each step when it is due).
    prefetch: int = key(1, "[0, 64]")
    # Memory one device may use for a training step, in GiB (XLA's buffers of the compiled step; 0 =
    # auto: 90 % of what an accelerator reports, on CPU half the memory available at start shared by
    # this process's devices). Whole-window steps that need more run as micro-steps whose gradients
    # are summed before one update (the same update); see memory.py. inf: never split.
    memory_gb: float = key(0.0, "[0, inf]")
    # Host memory (host_memory.py): "system" = the C library's defaults; "retain" = glibc keeps freed memory
    # for the next step (T-GCN 0.8x the step, but GCRN-GRU 3x the peak RSS, EvolveGCN-O at 8 devices 1.3x
    # the step: tools/bench_host_malloc.py). Process-wide; no effect on results.
    host_malloc: str = key("system", choices=_HOST_MALLOC)


@dataclasses.dataclass
class EvalConfig:
    # Link-prediction candidates: "all" (every non-edge, EvolveGCN; exact and O(L^2) in the L local
    # nodes of a window, see evaluation.py), "sampled", or "auto" (all when every evaluated window has
    # at most all_max_nodes local nodes).
    candidates: str = key("auto", choices=("auto", "all", "sampled"))
    all_max_nodes: int = key(4000, "[0, inf)")  # auto: "all" up to this many local nodes per window
    neg_per_source: int = key(100, "[1, inf)")  # sampled mode: random non-edges per source of a true edge
    batch_size: int = key(8, "[1, inf)")  # windows per evaluation step
    seed: int = key(12345, SEED)  # sampled candidates are fixed for a run
    every: int = key(1, "[1, inf)")  # evaluate val (and test) every N epochs and after the last
    # The first epoch that is evaluated (EvolveGCN: eval_after_epochs 5 of its 0-based epochs = our 7);
    # epochs before it are not evaluated even when `every` divides them (the last one always is).
    start: int = key(1, "[1, inf)")
    # When the test split is evaluated: "always" (with val), or "at_best": only at an evaluation whose val
    # metric is the best so far (EvolveGCN's protocol: its reported test figure is the best-val epoch's,
    # and the other test evaluations are skipped, which saves their time).
    test: str = key("always", choices=("always", "at_best"))


# keys that moved: an old name is refused with its new one (a config never trains on a guessed meaning)
RENAMED = {"train.eval_every": "eval.every"}


@dataclasses.dataclass
class Config:
    name: str = key("default", free="a label (the default run folder's prefix)")  # the run's name
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    schedule: ScheduleConfig = dataclasses.field(default_factory=ScheduleConfig)
    parallel: ParallelConfig = dataclasses.field(default_factory=ParallelConfig)
    eval: EvalConfig = dataclasses.field(default_factory=EvalConfig)


# ---------------------------------------------------------------------------------------------------


def _merge(obj: Any, updates: dict, prefix: str = "") -> Any:
    if not isinstance(updates, dict):
        raise UserError(
            f"config section {prefix.rstrip('.') or '<top>'!r} must be a mapping, got "
            f"{type(updates).__name__ if updates is not None else 'nothing'}: write its keys under it "
            "(key: value lines, indented), or drop the section"
        )
    hints = typing.get_type_hints(type(obj))
    changes = {}
    for name, value in updates.items():
        full = f"{prefix}{name}"
        if full in RENAMED:
            raise UserError(f"config key {full!r} is now {RENAMED[full]!r}: rename it in the config")
        if not isinstance(name, str) or name not in hints:
            known = ", ".join(f.name for f in dataclasses.fields(obj))
            raise UserError(f"unknown config key {full!r} (known here: {known})")
        current = getattr(obj, name)
        if dataclasses.is_dataclass(current):
            changes[name] = _merge(current, value, full + ".")
        else:
            changes[name] = coerce(value, hints[name], full)
    return dataclasses.replace(obj, **changes)


def load_config(path: str | os.PathLike | None = None, overrides: list[str] = ()) -> Config:
    """Defaults <- YAML file (if given) <- ``key=value`` overrides, validated."""
    config = Config()
    if path is not None:
        p = Path(path)
        if not p.is_file():  # a folder, /dev/null or a FIFO, nothing
            what = "is a folder" if p.is_dir() else "is no regular file" if p.exists() else "does not exist"
            raise UserError(f"config file {str(p)!r} {what}: pass a YAML file (e.g. one in configs/)")
        config = _merge(config, read_yaml(p))
    for text in overrides:
        config = _merge(config, parse_override(text))
    validate(config)
    return config


def validate(config: Config) -> None:
    """Every key against its declaration (``check_keys``), then the rules that span keys."""
    check_keys(config)
    d, m, s, p = config.data, config.model, config.schedule, config.parallel
    time_range(d.start, d.end)  # data.start / data.end: numbers or ISO dates, end after start
    check_targets(d)  # data.targets=new: link prediction only
    if d.aggr_time > 0 and d.num_snapshots > 0:
        raise UserError(
            f"data.aggr_time={d.aggr_time:g} and data.num_snapshots={d.num_snapshots} both bucket the edges "
            "into snapshots: set one of them (the other to 0)"
        )
    partitioned = s.method not in WINDOW_METHODS
    rules = [
        (
            d.train_frac + d.val_frac < 1,
            f"data.train_frac + data.val_frac must be < 1, got {d.train_frac} + {d.val_frac}",
        ),
        (
            d.dataset != "synthetic" or d.syn_nodes >= 2 * d.syn_communities,
            f"data.syn_nodes ({d.syn_nodes}) must be >= 2 * data.syn_communities ({d.syn_communities})",
        ),
        (
            d.task == "link" or not partitioned,
            f"schedule.method={s.method} runs data.task=link only, not {d.task!r}: "
            "use psg, dygnex_g or dygnex_l for it",
        ),
        (
            config.train.patience == 0 or d.val_frac > 0,
            f"train.patience={config.train.patience} stops on the validation metric, but data.val_frac=0 "
            "leaves no validation split: set data.val_frac > 0, or train.patience=0",
        ),
        (
            d.edge_weight == "none" or not d.cumulative,
            "data.edge_weight=count counts a pair's rows in one snapshot, which a cumulative series "
            "(data.cumulative=true) does not have: use data.edge_weight=none",
        ),
        (
            d.edge_weight == "none" or not partitioned,
            f"data.edge_weight=count runs under psg, dygnex_g and dygnex_l, not schedule.method={s.method} "
            "(its partitioned step packs unit edges): use data.edge_weight=none",
        ),
        (
            d.edge_weight == "none" or d.task != "node_reg",
            "data.edge_weight=count applies to data.task link and edge_cls (node_reg reads the "
            "weights its data gives): use data.edge_weight=none",
        ),
        (
            d.features != "given" or d.task == "node_reg",
            f"data.features=given applies to data.task=node_reg, not {d.task!r}: use degree or constant",
        ),
        (
            not partitioned or m.name in PARTITIONED_MODELS,
            f"schedule.method={s.method} runs model.name {' or '.join(PARTITIONED_MODELS)} (a pipelined "
            f"recurrence and a node-range communicator), not {m.name!r}: use psg, dygnex_g or dygnex_l for it",
        ),
        (
            m.activation == "relu" or m.name in ACTIVATION_MODELS,
            f"model.activation={m.activation} applies to model.name {', '.join(sorted(ACTIVATION_MODELS))} "
            f"(EvolveGCN's GCN layers), not {m.name!r}: use model.activation=relu",
        ),
        (
            p.layout not in ("flat", "last")
            or m.name in (FLAT_LAYOUT_MODELS if p.layout == "flat" else LAST_OFFSET_MODELS),
            f"parallel.layout={p.layout} does not fit model.name {m.name!r} (its graph operators read the "
            "recurrent state or earlier offsets): use parallel.layout=auto or scan",
        ),
    ]
    for ok, message in rules:
        if not ok:
            raise UserError(message)
    check_config(config)  # sizes known from the config alone (resources.py)


def to_dict(config: Config) -> dict:
    """Plain nested dict (tuples as lists) for YAML/JSON output."""

    def plain(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: plain(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [plain(v) for v in x]
        return x

    return plain(dataclasses.asdict(config))


def dump_config(config: Config, path: str | os.PathLike) -> None:
    """``config`` as YAML at ``path``, replaced whole (``files.atomic_write_text``)."""
    atomic_write_text(path, yaml.safe_dump(to_dict(config), sort_keys=False))


def changed_keys(config: Config, trained: dict) -> list[str]:
    """Dotted keys whose value in ``config`` differs from ``trained`` (``to_dict`` of a config saved by
    an earlier version: keys renamed since are read under their new names, keys it did not have yet ran
    with their defaults; config_yaml.key_differences)."""
    return key_differences(to_dict(config), trained, to_dict(Config()), RENAMED)
