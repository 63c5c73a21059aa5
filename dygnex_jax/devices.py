"""Fake CPU devices for multi-device runs on one CPU. No JAX import: must run before JAX starts."""

from __future__ import annotations

import os
import re
import sys

from .errors import UserError

FAKE_DEVICES_FLAG = "--xla_force_host_platform_device_count"


def force_host_devices(n: int) -> None:
    """Make XLA's CPU platform expose at least n devices (a UserError if JAX is already imported)."""
    flags = os.environ.get("XLA_FLAGS", "")
    found = re.search(rf"{FAKE_DEVICES_FLAG}=(\d+)", flags)
    if found and int(found.group(1)) >= n:
        return
    if "jax" in sys.modules:
        raise UserError(
            f"JAX was imported before {n} fake CPU devices could be requested: "
            f"set XLA_FLAGS={FAKE_DEVICES_FLAG}={n}"
        )
    flags = re.sub(rf"{FAKE_DEVICES_FLAG}=\d+", "", flags)
    os.environ["XLA_FLAGS"] = f"{flags} {FAKE_DEVICES_FLAG}={n}".strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
