"""Start N local processes of one multi-process training run (tests and demos).

    python tools/launch_local.py 2 -- --config configs/smoke.yaml --out runs/mp
    python tools/launch_local.py 2 --devices-per-process 2 -- --config configs/smoke.yaml train.epochs=1
    python tools/launch_local.py 2 --command profile -- --config configs/smoke.yaml --out runs/prof2

Process i runs ``python -m dygnex_jax train <train args> --coordinator 127.0.0.1:PORT
--num-processes N --process-id i`` (``--command profile``: ``profile`` instead of ``train``; ``--script
FILE``: ``python FILE <args> ...`` instead), with
``--devices-per-process`` fake CPU devices and the CPU platform. PORT is a free port unless ``--port``.
Output of every process goes to this terminal, each line prefixed with ``[i]``. Ctrl-C is forwarded
to every process. The launcher exits 0 when all processes exit 0; when one fails it says which
(``error: process I exited with code C``), stops the others (SIGTERM, then SIGKILL after a grace
period) and exits with 1.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from dygnex_jax.errors import ArgumentParser, UserError, run_tool

PUMP_SECONDS = 60.0  # the longest wait for the processes' last output lines after they exited
GRACE_SECONDS = 5.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(description=__doc__.splitlines()[0], usage="%(prog)s N [options] -- <train arguments>")
    p.add_argument("num_processes", type=int, help="N local processes")
    p.add_argument("--devices-per-process", type=int, default=1, help="fake CPU devices per process")
    p.add_argument("--port", type=int, default=0, help="coordinator port (default: a free one)")
    p.add_argument(
        "--command",
        default="train",
        choices=("train", "profile"),
        help="the dygnex_jax command every process runs (default train; profile times a multi-process "
        "run's steps for the cost model)",
    )
    p.add_argument("--script", help="run this Python file instead of `-m dygnex_jax <command>`")
    p.add_argument("--timeout", type=float, default=0, help="stop everything after this many seconds")
    return p


def _pump(i: int, stream, out) -> None:
    for line in iter(stream.readline, ""):
        out.write(f"[{i}] {line}")
        out.flush()


def _stop(procs: list[subprocess.Popen], sig=signal.SIGTERM) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(sig)
    deadline = time.monotonic() + GRACE_SECONDS
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _watch(procs: list[subprocess.Popen], timeout: float) -> int:
    """Wait until every process has exited 0 (-> 0), one has failed or ``timeout`` passed (-> 1, said)."""
    start = time.monotonic()
    while True:
        failed = [(i, p.returncode) for i, p in enumerate(procs) if p.poll() not in (None, 0)]
        if failed:
            i, rc = failed[0]
            what = f"signal {-rc}" if rc < 0 else f"code {rc}"
            print(
                f"error: process {i} (pid {procs[i].pid}) exited with {what}; stopping the others",
                file=sys.stderr,
                flush=True,
            )
            return 1
        if all(p.returncode == 0 for p in procs):
            return 0
        if timeout and time.monotonic() - start > timeout:
            running = [str(i) for i, p in enumerate(procs) if p.poll() is None]
            print(
                f"error: processes {', '.join(running)} still running after {timeout:.0f} s; stopping them",
                file=sys.stderr,
                flush=True,
            )
            return 1
        time.sleep(0.1)


def launch(
    n: int,
    args: list[str],
    devices_per_process: int = 1,
    port: int = 0,
    script: str | None = None,
    timeout: float = 0,
    command: str = "train",
) -> int:
    """Run the N processes to the end; the launcher's exit code (0, 1 on a failure, 130 on Ctrl-C)."""
    if n < 1:
        raise UserError(f"the number of processes must be >= 1, got {n}")
    if devices_per_process < 1:
        raise UserError(f"--devices-per-process must be >= 1, got {devices_per_process}")
    address = f"127.0.0.1:{port or free_port()}"
    env = {
        **os.environ,
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices_per_process}",
        "JAX_PLATFORMS": "cpu",
        "PYTHONUNBUFFERED": "1",
    }
    head = [sys.executable, script] if script else [sys.executable, "-m", "dygnex_jax", command]
    procs: list[subprocess.Popen] = []
    pumps = []

    def terminate(signum, frame):  # a SIGTERM to the launcher stops the run like Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    # Ctrl-C is the launcher's to forward, even when it was started with SIGINT ignored (a background
    # job of a shell without job control inherits that, and Python then installs no handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:  # from the first process on: a Ctrl-C at any moment reaches every process started
        for i in range(n):
            cmd = [*head, *args, "--coordinator", address, "--num-processes", str(n), "--process-id", str(i)]
            proc = subprocess.Popen(
                cmd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                bufsize=1,
                start_new_session=True,  # Ctrl-C reaches the launcher only; it forwards it
            )
            procs.append(proc)
            t = threading.Thread(target=_pump, args=(i, proc.stdout, sys.stdout), daemon=True)
            t.start()
            pumps.append(t)
        print(
            f"launched {n} processes (pids {', '.join(str(p.pid) for p in procs)}), coordinator {address}",
            file=sys.stderr,
            flush=True,
        )
        code = _watch(procs, timeout)
    except KeyboardInterrupt:
        print("interrupted: forwarding Ctrl-C to every process", file=sys.stderr, flush=True)
        _stop(procs, signal.SIGINT)
        code = 130
    _stop(procs)
    # every process has exited: its pipe ends once its last lines are read. Wait for them (a loaded
    # machine may give the pump threads the CPU seconds later); the bound only guards against a
    # grandchild that kept the pipe open
    deadline = time.monotonic() + PUMP_SECONDS
    for t in pumps:
        t.join(timeout=max(0.1, deadline - time.monotonic()))
    return code


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    a = build_parser().parse_args(argv[:cut])
    return launch(
        a.num_processes, argv[cut + 1 :], a.devices_per_process, a.port, a.script, a.timeout, a.command
    )


if __name__ == "__main__":
    sys.exit(run_tool(main))
