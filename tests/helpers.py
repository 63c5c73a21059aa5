"""What the tests that run the CLI or a tool in a subprocess share: the runner and its assertions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_python(args, *, timeout: float, fake_devices: int = 0, cwd=REPO) -> subprocess.CompletedProcess:
    """``python ARGS`` on the CPU platform (``fake_devices`` > 0: that many fake CPU devices), output
    captured as text."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    if fake_devices:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={fake_devices}"
    cmd = [sys.executable, *map(str, args)]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def run_cli(*args, timeout: float = 300, fake_devices: int = 0, cwd=REPO) -> subprocess.CompletedProcess:
    """``python -m dygnex_jax ARGS``."""
    return run_python(["-m", "dygnex_jax", *args], timeout=timeout, fake_devices=fake_devices, cwd=cwd)


def run_tool(script: str, *args, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python tools/SCRIPT ARGS`` with 8 fake CPU devices."""
    return run_python([REPO / "tools" / script, *args], timeout=timeout, fake_devices=8)


def assert_one_line_error(proc, *fragments):
    """``proc`` exited 2 with exactly one ``error: ...`` line on stderr that contains every fragment."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for f in fragments:
        assert f in lines[0], lines[0]
