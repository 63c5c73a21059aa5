"""Training-step compilations one at a time against several at once (``tools/bench_compile.py``).

For a config, the trainer plans its budgets as a run would (``parallel.max_budgets`` of them at a
negligible compile price, so that there are several to compile); then, per repeat and per worker
count, ``Trainer.compile_todo`` compiles that many fresh budgets (the planned ones with a few nodes
more per repeat: no in-memory or persistent cache can serve them) on that many threads. Arms are
interleaved (1, W, 1, W, ...) so that load from other users hits them alike. Per arm: the wall
seconds of tracing (Python, one budget after another) and of XLA's compilations, the process's CPU
seconds, the load average before. The ratio of the medians is what ``compile_workers`` buys on this
machine; ``trace_share`` (tracing over the whole, sequential arm) is what it cannot.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import statistics


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _arm(trainer, budgets, workers: int) -> dict:
    """Compile ``budgets`` on ``workers`` threads; the seconds of tracing and of compiling apart."""
    load, c0 = os.getloadavg()[0], _cpu()
    trainer._executables.clear()
    trainer.planned = list(budgets)
    traced, compiled = trainer.compile_todo(workers=workers)
    return {
        "workers": workers,
        "budgets": len(budgets),
        "trace_seconds": traced,
        "compile_seconds": compiled,
        "cpu_seconds": _cpu() - c0,
        "load_before": load,
    }


def measure(config, workers: int, repeats: int, log=print) -> dict:
    """Rows of every arm and the medians (``config``: a loaded ``Config``)."""
    from ..trainer import Trainer

    trainer = Trainer(config)
    planned = trainer.plan_budgets()
    rows = []
    for r in range(repeats):
        for w in (1, workers):
            fresh = [dataclasses.replace(b, nodes=b.nodes + 8 * (len(rows) + 1)) for b in planned]
            rows.append({"repeat": r, **_arm(trainer, fresh, w)})
            log(
                f"repeat {r} workers {w}: trace {rows[-1]['trace_seconds']:.2f} s, compile "
                f"{rows[-1]['compile_seconds']:.2f} s, cpu {rows[-1]['cpu_seconds']:.2f} s "
                f"(load {rows[-1]['load_before']:.1f})"
            )

    def med(w, key):
        return statistics.median(x[key] for x in rows if x["workers"] == w)

    seq, par = med(1, "compile_seconds"), med(workers, "compile_seconds")
    trace = med(1, "trace_seconds")
    return {
        "model": config.model.name,
        "dataset": config.data.dataset,
        "devices": trainer.n_devices,
        "budgets": len(planned),
        "workers": workers,
        "rows": rows,
        "median_trace_seconds": trace,
        "median_compile_seconds_1": seq,
        "median_compile_seconds_w": par,
        "compile_speedup": seq / par if par > 0 else None,
        "trace_share": trace / (trace + seq) if trace + seq > 0 else None,
    }
