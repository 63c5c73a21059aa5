"""Multi-process (multi-host) start-up: who am I, where is the coordinator, and ``jax.distributed``.

Every process of a run calls ``initialize(spec)`` *before any other JAX call*; afterwards
``jax.devices()`` lists the devices of all processes and ``parallel.make_mesh`` builds the global
``data`` mesh over them. The process topology comes from, in this order:

1. the command line: ``--coordinator HOST:PORT --num-processes N --process-id I``;
2. a cluster launcher's environment: SLURM (``SLURM_NTASKS`` > 1, ``SLURM_PROCID``, the first host of
   ``SLURM_STEP_NODELIST`` / ``SLURM_JOB_NODELIST``, port ``DYGNEX_COORDINATOR_PORT`` or
   ``12000 + SLURM_JOB_ID % 20000``), or ``DYGNEX_COORDINATOR`` / ``DYGNEX_NUM_PROCESSES`` /
   ``DYGNEX_PROCESS_ID``;
3. nothing: a single process, no ``jax.distributed`` at all.

On CPU the cross-process collectives run over gloo (STACK-NOTES). A coordinator that cannot be reached
within ``timeout`` seconds is a one-line ``UserError`` (``jax.distributed`` itself aborts the process
with a stack trace on a connection time-out, so the address is probed first).

``is_main_process()`` is the one test for "may I write files / print progress": process 0 only.
No JAX import at module level.
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
import sys
import time

from .errors import UserError

DEFAULT_TIMEOUT = 60  # seconds to wait for the coordinator


@dataclasses.dataclass(frozen=True)
class ProcessSpec:
    """One process's place in a multi-process run.

    Fields:
      coordinator: "HOST:PORT" of process 0's coordination service.
      num_processes: N >= 1.
      process_id: I in 0..N-1.
      timeout: seconds to wait for the coordinator (and for all processes to register).
      source: where the figures came from ("flags", "slurm", "env"), for messages.
    """

    coordinator: str
    num_processes: int
    process_id: int
    timeout: int = DEFAULT_TIMEOUT
    source: str = "flags"


_active: ProcessSpec | None = None


def parse_address(text: str) -> tuple[str, int]:
    """``"HOST:PORT"`` -> (host, port); a UserError naming the problem otherwise."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(
            f"--coordinator {text!r} is not HOST:PORT with a port in 1..65535 (e.g. 10.0.0.1:12345)"
        )
    return host, int(port)


def first_slurm_host(nodelist: str) -> str:
    """The first host of a SLURM node list: ``"gpu[03-05,9],cpu1"`` -> ``"gpu03"``."""
    m = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not m:
        raise UserError(f"cannot read the SLURM node list {nodelist!r}: pass --coordinator HOST:PORT")
    prefix, ranges = m.group(1), m.group(2)
    if not ranges:
        return prefix
    return prefix + ranges.split(",")[0].split("-")[0]


def _int_env(env, name: str) -> int:
    value = env.get(name, "")
    if not value.strip().lstrip("-").isdigit():
        raise UserError(f"environment variable {name}={value!r} is not an integer")
    return int(value)


def resolve(
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    timeout: int = DEFAULT_TIMEOUT,
    env=None,
) -> ProcessSpec | None:
    """The process topology from flags, else the environment (module docstring); None = one process."""
    env = os.environ if env is None else env
    given = [x is not None for x in (coordinator, num_processes, process_id)]
    if any(given):
        if not all(given):
            raise UserError(
                "multi-process training needs all of --coordinator, --num-processes and --process-id"
            )
        spec = ProcessSpec(coordinator, num_processes, process_id, timeout, "flags")
    elif env.get("DYGNEX_COORDINATOR"):
        spec = ProcessSpec(
            env["DYGNEX_COORDINATOR"],
            _int_env(env, "DYGNEX_NUM_PROCESSES"),
            _int_env(env, "DYGNEX_PROCESS_ID"),
            timeout,
            "env",
        )
    elif env.get("SLURM_NTASKS") and int(env.get("SLURM_NTASKS", "1")) > 1 and "SLURM_PROCID" in env:
        nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or ""
        if not nodes:
            raise UserError("SLURM_NTASKS > 1 but no SLURM node list is set: pass --coordinator HOST:PORT")
        port = env.get("DYGNEX_COORDINATOR_PORT") or str(12000 + _int_env(env, "SLURM_JOB_ID") % 20000)
        spec = ProcessSpec(
            f"{first_slurm_host(nodes)}:{port}",
            _int_env(env, "SLURM_NTASKS"),
            _int_env(env, "SLURM_PROCID"),
            timeout,
            "slurm",
        )
    else:
        return None
    check(spec)
    return spec


def check(spec: ProcessSpec) -> None:
    """One-line UserErrors for a topology that cannot work."""
    parse_address(spec.coordinator)
    if spec.num_processes < 1:
        raise UserError(f"--num-processes must be >= 1, got {spec.num_processes} (from {spec.source})")
    if not 0 <= spec.process_id < spec.num_processes:
        raise UserError(
            f"--process-id {spec.process_id} is outside 0..{spec.num_processes - 1} for "
            f"--num-processes {spec.num_processes} (from {spec.source})"
        )
    if spec.timeout < 1:
        raise UserError(f"the coordinator timeout must be >= 1 s, got {spec.timeout}")


def wait_for_coordinator(address: str, timeout: float) -> None:
    """Poll ``address`` until it accepts a TCP connection; a one-line UserError after ``timeout`` s."""
    host, port = parse_address(address)
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        try:
            with socket.create_connection((host, port), timeout=min(2.0, timeout)):
                return
        except OSError as e:  # refused, unreachable, unknown host, ...
            last = e.strerror or type(e).__name__
        if time.monotonic() >= deadline:
            raise UserError(
                f"cannot reach the coordinator {address} within {timeout:.0f} s ({last}): start process 0 "
                "first, check HOST:PORT and the firewall, or raise --coordinator-timeout"
            )
        time.sleep(0.2)


def initialize(spec: ProcessSpec | None) -> None:
    """Start ``jax.distributed`` for ``spec`` (None: nothing to do). Call before any other JAX call."""
    global _active
    if spec is None:
        return
    if spec.num_processes == 1:  # a one-process "cluster": nothing to coordinate
        _active = spec
        return
    if "jax" in sys.modules:
        import jax

        if jax.distributed.is_initialized():
            raise UserError("jax.distributed is already initialised in this process")
    if spec.process_id != 0:
        wait_for_coordinator(spec.coordinator, spec.timeout)
    import jax

    # Cross-process collectives on the CPU backend; ignored by GPU/TPU backends.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    try:
        jax.distributed.initialize(
            coordinator_address=spec.coordinator,
            num_processes=spec.num_processes,
            process_id=spec.process_id,
            initialization_timeout=spec.timeout,
        )
    except (RuntimeError, ValueError) as e:  # e.g. the port is taken on process 0
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(
            f"jax.distributed could not start as process {spec.process_id}/{spec.num_processes} "
            f"with coordinator {spec.coordinator}: {first}"
        ) from None
    _active = spec


def active() -> ProcessSpec | None:
    """The spec this process was initialised with (None: a plain single-process run)."""
    return _active


def process_index() -> int:
    """This process's index: from ``initialize``, else from JAX when it is running, else 0."""
    if _active is not None:
        return _active.process_id
    if "jax" in sys.modules:
        import jax

        if jax.distributed.is_initialized():  # started by someone else (a notebook, a test)
            return jax.process_index()
    return 0


def process_count() -> int:
    return _active.num_processes if _active is not None else 1


def is_main_process() -> bool:
    """True on process 0 (and in every single-process run): the one process that writes files."""
    return process_index() == 0
