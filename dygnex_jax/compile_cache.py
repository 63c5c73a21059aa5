"""JAX's persistent compilation cache: where it lives, switching it on, and counting its hits and misses.

The trainer calls :func:`enable` with ``parallel.compile_cache`` before its first compilation. A warm cache
skips XLA compilation (not tracing or lowering) when the same program is compiled again in a later process.

- ``"auto"``: a per-user folder, ``$DYGNEX_CACHE`` if set, else ``$XDG_CACHE_HOME/dygnex_jax/xla``, else
  ``~/.cache/dygnex_jax/xla``.
- ``"off"``: no persistent cache (this also overrides a ``JAX_COMPILATION_CACHE_DIR`` set in the environment).
- anything else: that folder (``~`` expanded).

How this JAX (0.10.x) reports the cache, in ``jax/_src/compiler.py`` and ``compilation_cache.py``, through
``jax.monitoring.record_event``:

- ``/jax/compilation_cache/compile_requests_use_cache``: a compilation looked in the persistent cache;
- ``/jax/compilation_cache/cache_hits``: ... and found its executable there;
- ``/jax/compilation_cache/cache_misses``: an executable was *written* to the cache. That is not every miss:
  processes other than 0 never write, nor do programs with host callbacks.

So a miss here is a request that did not hit (``requests - hits``); where the requests event is absent, the
written count stands in for it. Compilations JAX serves from its in-memory caches within one process never
reach the persistent cache and count as neither.

The cache is trusted input (JAX loads executables from it): keep it in a folder only you can write.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

from .errors import UserError

EVENT_REQUEST = "/jax/compilation_cache/compile_requests_use_cache"
EVENT_HIT = "/jax/compilation_cache/cache_hits"
EVENT_WRITE = "/jax/compilation_cache/cache_misses"

_lock = threading.Lock()
_counts = {EVENT_REQUEST: 0, EVENT_HIT: 0, EVENT_WRITE: 0}
_dir: Path | None = None


def resolve(setting: str) -> Path | None:
    """The cache folder that ``setting`` names (``"auto"``, ``"off"`` or a path); ``None`` for ``"off"``."""
    text = str(setting).strip()
    if not text:
        raise UserError("empty compilation cache location: choose another parallel.compile_cache or 'off'")
    key = text.lower()
    if key == "off":
        return None
    if key == "auto":
        if os.environ.get("DYGNEX_CACHE"):
            return Path(os.environ["DYGNEX_CACHE"]).expanduser()
        if os.environ.get("XDG_CACHE_HOME"):
            return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "dygnex_jax" / "xla"
        return Path("~/.cache/dygnex_jax/xla").expanduser()
    return Path(text).expanduser()


def _check_writable(path: Path) -> None:
    """Create ``path`` and prove a file can be written there, or raise a one-line UserError."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        if not path.is_dir():
            raise NotADirectoryError(f"not a directory: '{path}'")
        fd, probe = tempfile.mkstemp(prefix=".write-probe-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        reason = (e.strerror or str(e)).replace("\n", " ")
        raise UserError(
            f"cannot use '{path}' as the compilation cache ({reason}): "
            "choose another parallel.compile_cache or 'off'"
        ) from None


def _on_event(event: str, **kwargs) -> None:
    # JAX asks its cache (and records a request) whenever the cache is enabled, even with no folder set.
    if event in _counts and _dir is not None:
        with _lock:
            _counts[event] += 1


def _ensure_listener() -> None:
    """Register the counting listener once per process (again if someone cleared JAX's listeners)."""
    import jax.monitoring
    from jax._src import monitoring as _monitoring

    with _lock:
        if _on_event not in _monitoring.get_event_listeners():
            jax.monitoring.register_event_listener(_on_event)


def _jax_cache_module():
    from jax._src import compilation_cache

    return compilation_cache


def _set_jax_dir(path: Path | None) -> None:
    """Point JAX at ``path`` (None: no cache), resetting its cache object when the folder changes.

    JAX decides once per process whether the cache is used (on the first compilation) and builds its cache
    object for the folder it saw then; changing ``jax_compilation_cache_dir`` afterwards is ignored until
    ``compilation_cache.reset_cache()``.
    """
    import jax

    cc = _jax_cache_module()
    want = None if path is None else str(path)
    if jax.config.jax_compilation_cache_dir == want:
        if want is None:
            return
        cache = getattr(cc, "_cache", None)
        live = getattr(cache, "_path", None) if cache is not None else None
        checked_unused = getattr(cc, "_cache_checked", False) and not getattr(cc, "_cache_used", False)
        if not checked_unused and (live is None or Path(str(live)) == path):
            return  # already in use at this folder, or not yet initialised: JAX picks it up by itself
    jax.config.update("jax_compilation_cache_dir", want)
    if not hasattr(cc, "reset_cache"):
        raise RuntimeError(
            f"jax {jax.__version__} has no compilation_cache.reset_cache(): "
            "cannot switch the persistent compilation cache folder within one process"
        )
    cc.reset_cache()


def enable(setting: str) -> Path | None:
    """Switch JAX's persistent compilation cache to ``setting`` (see :func:`resolve`); returns the folder.

    Idempotent. Every compilation is stored (no minimum compile time or entry size). Counts restart at 0.
    An unusable folder raises :class:`~dygnex_jax.errors.UserError`.
    """
    global _dir
    path = resolve(setting)
    if path is not None:
        _check_writable(path)
        path = path.resolve()
    import jax

    # Off: JAX then skips computing cache keys too (it computes them whenever this flag is on, folder or not).
    jax.config.update("jax_enable_compilation_cache", path is not None)
    if path is not None:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        try:
            # -1: no size minimum, and JAX may not override it with a filesystem default (0 would allow that)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        except AttributeError:  # an older JAX without the option
            pass
    _set_jax_dir(path)
    _ensure_listener()
    with _lock:
        _dir = path
    reset_counts()
    return path


def reset_counts() -> None:
    """Restart the hit and miss counts at 0."""
    with _lock:
        for k in _counts:
            _counts[k] = 0


def stats() -> dict:
    """``{"dir": str or None, "hits": int, "misses": int}`` since :func:`enable` or :func:`reset_counts`."""
    with _lock:
        requests, hits, written = _counts[EVENT_REQUEST], _counts[EVENT_HIT], _counts[EVENT_WRITE]
        d = _dir
    misses = max(requests - hits, written)
    return {"dir": None if d is None else str(d), "hits": hits, "misses": misses}


def size_bytes(path) -> int:
    """Total size of the files under ``path`` (0 when it is None or missing)."""
    if path is None:
        return 0
    root = Path(path)
    if root.is_file():
        return root.stat().st_size
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:  # evicted or replaced while we walked
                pass
    return total
