"""What does the training loop add to a step? One epoch's steps timed four ways in one process.

    python tools/bench_loop.py --dataset bitcoin_otc --devices 4 --json runs/bench_loop.json

The cost model is fitted on steps its profile times; a run's steps are timed inside ``train_epoch``.
This separates the two. Every round starts from the same parameters and optimiser state and runs the
same epoch's steps (the same windows, batches and budgets) four ways, in turn:

- ``train``: ``Trainer.train_epoch`` as a run trains (``parallel.prefetch`` of the config: the next
  step packed and placed on a background thread while this one runs; the last step of the epoch runs
  with nothing beside it), its steps split into ``beside`` and ``alone``;
- ``noprefetch``: ``train_epoch`` with ``parallel.prefetch=0`` (each step packed before it runs);
- ``prepacked``: every step packed and placed first, then run back to back on the executables the run
  compiled ahead (``epoch_loop.run_step``), nothing on the host beside them;
- ``jit``: the same pre-packed steps dispatched through the jit-wrapped step instead.

Since all four start from one state and run the same batches, their losses agree step by step (checked:
the tool stops if not), so the ways differ only in what runs around the step. Printed and saved per way:
median step seconds (compiling steps excluded), the epoch's wall seconds (``prepacked`` / ``jit``: packing
plus running), the cost model's prediction of the same steps, and the 1-minute load average. Rounds
(``--rounds``) alternate the ways so that a drift of a shared machine weighs on all alike.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

from dygnex_jax.devices import force_host_devices
from dygnex_jax.errors import ArgumentParser, run_tool
from dygnex_jax.files import atomic_write_text, output_file

REPO = Path(__file__).resolve().parents[1]
WAYS = ("train", "noprefetch", "prepacked", "jit")


def snapshot(trainer):
    """Host copies of the parameters and optimiser state, and a function that puts them back."""
    import jax

    state = (trainer.params, trainer.opt_state)
    host, shardings = jax.device_get(state), jax.tree.map(lambda x: x.sharding, state)

    def restore():
        trainer.params, trainer.opt_state = jax.device_put(host, shardings)

    return restore


def with_prefetch(trainer, ahead: int) -> None:
    par = dataclasses.replace(trainer.config.parallel, prefetch=ahead)
    trainer.config = dataclasses.replace(trainer.config, parallel=par)


def trained(trainer, epoch: int, ahead: int) -> dict:
    """``train_epoch`` with ``prefetch`` = ahead -> its steps and wall seconds."""
    from dygnex_jax.schedule.cost import alone_steps

    with_prefetch(trainer, ahead)
    row = trainer.train_epoch(epoch)
    alone = alone_steps(len(trainer.last_steps), ahead)
    steps = [
        {k: s[k] for k in ("epoch", "seconds", "compiled", "predicted_seconds", "budget", "loss")}
        | {"alone": bool(a)}
        for s, a in zip(trainer.last_steps, alone)
    ]
    return {"steps": steps, "wall_seconds": row["epoch_seconds"]}


def prepacked(trainer, epoch: int, use_executables: bool) -> dict:
    """The epoch's steps packed and placed first, then run back to back -> its steps and wall seconds."""
    from dygnex_jax.epoch_loop import prepared_steps, run_step

    start = time.perf_counter()
    with_prefetch(trainer, 0)  # training's own packing and placing, one step after another, all first
    prepared = list(prepared_steps(trainer, trainer.epoch_schedule(epoch), epoch))
    packed = [(placed, budget) for _, placed, budget, _, _ in prepared]
    steps = []
    for placed, budget in packed:
        if use_executables:
            stats, seconds, _, compiled = run_step(trainer, placed, budget)
        else:
            traces, t0 = len(trainer.train_step.traces), time.perf_counter()
            trainer.params, trainer.opt_state, out = trainer.train_step(
                trainer.params, trainer.opt_state, placed
            )
            stats = {k: float(v) for k, v in out.items()}
            seconds = time.perf_counter() - t0
            compiled = len(trainer.train_step.traces) > traces
        steps.append(
            {
                "epoch": epoch,
                "seconds": seconds,
                "compiled": bool(compiled),
                "predicted_seconds": trainer.step_seconds(budget, True),
                "budget": list(budget.as_tuple()),
                "loss": stats["loss"],
                "alone": True,
            }
        )
    return {"steps": steps, "wall_seconds": time.perf_counter() - start}


def run_way(trainer, way: str, epoch: int, ahead: int) -> dict:
    if way == "train":
        return trained(trainer, epoch, ahead)
    if way == "noprefetch":
        return trained(trainer, epoch, 0)
    return prepacked(trainer, epoch, way == "prepacked")


def median(xs):
    return statistics.median(xs) if xs else None


def summary(rounds: list[dict]) -> dict:
    """Per way: median step seconds (all, beside, alone; compiling steps excluded), median predicted,
    median epoch wall seconds, and the step median over ``prepacked``'s."""
    out = {}
    for way in WAYS:
        runs = [r["ways"][way] for r in rounds]
        timed = [s for run in runs for s in run["steps"] if not s["compiled"]]
        out[way] = {
            "step_median": median([s["seconds"] for s in timed]),
            "beside_median": median([s["seconds"] for s in timed if not s["alone"]]),
            "alone_median": median([s["seconds"] for s in timed if s["alone"]]),
            "predicted_median": median([s["predicted_seconds"] for s in timed]),
            "wall_median": median([run["wall_seconds"] for run in runs]),
            "steps_timed": len(timed),
        }
    base = out["prepacked"]["step_median"]
    for way in WAYS:
        got = out[way]["step_median"]
        out[way]["over_prepacked"] = got / base if got and base else None
    return out


def table(summ: dict, loads: list[float]) -> str:
    fmt = lambda x, d=4: "—" if x is None else f"{x:.{d}f}"  # noqa: E731
    lines = [
        f"load average (1 min) at the rounds' starts: {min(loads):.2f}–{max(loads):.2f}",
        "| way | step s (median) | beside | alone | predicted | over prepacked | epoch wall s | steps |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for way, s in summ.items():
        lines.append(
            f"| {way} | {fmt(s['step_median'])} | {fmt(s['beside_median'])} | {fmt(s['alone_median'])} | "
            f"{fmt(s['predicted_median'])} | {fmt(s['over_prepacked'], 2)} | {fmt(s['wall_median'], 3)} | "
            f"{s['steps_timed']} |"
        )
    return "\n".join(lines)


def check_same_losses(rnd: dict) -> None:
    """The four ways ran the same batches from the same state: their losses must agree step by step."""
    ref = [s["loss"] for s in rnd["ways"]["prepacked"]["steps"]]
    for way, run in rnd["ways"].items():
        got = [s["loss"] for s in run["steps"]]
        if len(got) != len(ref) or any(abs(a - b) > 1e-6 * max(1.0, abs(b)) for a, b in zip(got, ref)):
            raise RuntimeError(f"round {rnd['round']}: way {way} ran other steps (losses {got} vs {ref})")


def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="configs/egcn_o_bitcoin_otc.yaml")
    ap.add_argument("--dataset", default="bitcoin_otc")
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5, help="rounds of the four ways (default 5)")
    ap.add_argument("--epochs", type=int, default=1, help="epochs each way runs a round (default 1)")
    ap.add_argument("--set", action="append", default=[], help="extra key=value for the run")
    ap.add_argument("--json", type=output_file, default=None)
    a = ap.parse_args(argv)
    for name in ("devices", "batch", "rounds", "epochs"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be at least 1")
    force_host_devices(a.devices)  # before JAX is imported
    from dygnex_jax.config import load_config
    from dygnex_jax.train import Trainer

    overrides = [f"data.dataset={a.dataset}", f"parallel.devices={a.devices}", f"train.batch_size={a.batch}"]
    trainer = Trainer(load_config(REPO / a.config, [*overrides, *a.set]))
    ahead = trainer.config.parallel.prefetch
    trainer.plan_budgets()
    trainer.compile_planned(lambda _: None)
    print(f"{trainer.cost_note}; planned budgets {[b.as_tuple() for b in trainer.planned or []]}", flush=True)
    restore = snapshot(trainer)
    rounds = []
    for r in range(a.rounds):
        rnd = {"round": r, "load": os.getloadavg()[0], "ways": {}}
        for way in WAYS if r % 2 == 0 else WAYS[::-1]:
            runs = []
            for e in range(1, a.epochs + 1):
                if e == 1:
                    restore()
                runs.append(run_way(trainer, way, e, ahead))
            rnd["ways"][way] = {
                "steps": [s for run in runs for s in run["steps"]],
                "wall_seconds": sum(run["wall_seconds"] for run in runs),
            }
        check_same_losses(rnd)
        rounds.append(rnd)
        print(f"round {r + 1}/{a.rounds} (load {rnd['load']:.2f}) done", flush=True)
    summ = summary(rounds)
    text = table(summ, [r["load"] for r in rounds])
    print(text)
    if a.json:
        payload = {
            "args": {k: str(v) for k, v in vars(a).items()},
            "prefetch": ahead,
            "cost_note": trainer.cost_note,
            "planned": [list(b.as_tuple()) for b in trainer.planned or []],
            "summary": summ,
            "rounds": rounds,
            "table": text,
        }
        atomic_write_text(a.json, json.dumps(payload, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
