"""The persistent compilation cache: where it goes, that it stores and reloads programs, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import run_python

from dygnex_jax import compile_cache
from dygnex_jax.errors import UserError

SUBPROCESS_TIMEOUT = 600

# One program, compiled in a fresh process against the cache folder in argv[1] ("off" allowed); prints the
# counts and the output's bytes as one JSON line. Inputs are NumPy arrays so nothing else is compiled.
SCRIPT = """
import json, sys
import numpy as np
import jax, jax.numpy as jnp
from dygnex_jax import compile_cache

compile_cache.enable(sys.argv[1])

@jax.jit
def f(x, w):
    h = jnp.tanh(x @ w)
    return h.sum(axis=0) * 0.731 + jnp.sin(w).mean()

rng = np.random.default_rng(3)
x = rng.standard_normal((11, 7)).astype(np.float32)
w = rng.standard_normal((7, 5)).astype(np.float32)
out = np.asarray(f(x, w))
print(json.dumps({"stats": compile_cache.stats(), "out": out.tobytes().hex(), "dtype": str(out.dtype)}))
"""


def _run_script(setting) -> dict:
    proc = run_python(["-c", SCRIPT, str(setting)], timeout=SUBPROCESS_TIMEOUT, fake_devices=8)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _cache_files(folder: Path) -> list[Path]:
    return sorted(p for p in Path(folder).rglob("*") if p.is_file())


@pytest.fixture
def restore_jax_cache():
    """Leave JAX's cache setting as this process had it, whatever the test switched it to."""
    import jax
    from jax._src import compilation_cache as jax_cc

    before = jax.config.jax_compilation_cache_dir, jax.config.jax_enable_compilation_cache
    yield
    compile_cache.enable("off")
    jax.config.update("jax_enable_compilation_cache", before[1])
    if before[0] is not None:
        jax.config.update("jax_compilation_cache_dir", before[0])
        jax_cc.reset_cache()


# --- resolve -----------------------------------------------------------------------------------------


def test_resolve_auto_prefers_dygnex_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("DYGNEX_CACHE", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compile_cache.resolve("auto") == tmp_path / "mine"


def test_resolve_auto_uses_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.delenv("DYGNEX_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compile_cache.resolve("auto") == tmp_path / "xdg" / "dygnex_jax" / "xla"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert compile_cache.resolve("auto") == tmp_path / "home" / ".cache" / "dygnex_jax" / "xla"


def test_resolve_off_and_paths(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert compile_cache.resolve("off") is None
    assert compile_cache.resolve("~/xla") == tmp_path / "xla"
    assert compile_cache.resolve(str(tmp_path / "a" / "b")) == tmp_path / "a" / "b"
    with pytest.raises(UserError):
        compile_cache.resolve("  ")


# --- errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("below", [True, False])
def test_unusable_location_is_a_user_error(tmp_path, below):
    a_file = tmp_path / "plain.txt"
    a_file.write_text("not a folder")
    target = a_file / "cache" if below else a_file
    with pytest.raises(UserError) as err:
        compile_cache.enable(str(target))
    message = str(err.value)
    assert "\n" not in message
    assert str(target) in message
    assert message.endswith(": choose another parallel.compile_cache or 'off'")


# --- in this process ---------------------------------------------------------------------------------


def test_first_compile_is_a_miss_and_writes(tmp_path, restore_jax_cache):
    import jax
    import jax.numpy as jnp

    folder = tmp_path / "xla"
    assert compile_cache.enable(str(folder)) == folder.resolve()
    assert compile_cache.enable(str(folder)) == folder.resolve()  # idempotent: one listener, counts at 0
    assert compile_cache.stats() == {"dir": str(folder.resolve()), "hits": 0, "misses": 0}
    assert jax.config.jax_compilation_cache_dir == str(folder.resolve())

    # A function this process has never seen, so JAX's in-memory caches cannot answer it.
    f = jax.jit(lambda x: jnp.cumsum(jnp.cos(x) * 0.3141, axis=1))
    x = np.linspace(0, 1, 3 * 13, dtype=np.float32).reshape(3, 13)
    f(x).block_until_ready()
    s = compile_cache.stats()
    assert s["hits"] == 0 and s["misses"] == 1, s  # 2 would mean the listener was registered twice
    files = _cache_files(folder)
    assert any(p.name.endswith("-cache") for p in files), files
    assert compile_cache.size_bytes(folder) == sum(p.stat().st_size for p in files) > 0

    compile_cache.reset_counts()
    assert compile_cache.stats()["misses"] == 0

    # Switched off: a new program compiles and nothing more is written.
    assert compile_cache.enable("off") is None
    g = jax.jit(lambda x: jnp.cumprod(jnp.sin(x) + 1.5, axis=0))
    g(x).block_until_ready()
    assert _cache_files(folder) == files
    assert compile_cache.stats() == {"dir": None, "hits": 0, "misses": 0}


def test_switching_folders_in_one_process(tmp_path, restore_jax_cache):
    import jax
    import jax.numpy as jnp

    x = np.arange(6 * 9, dtype=np.float32).reshape(6, 9)

    def fresh():  # a new function object each time: JAX compiles it again and asks the persistent cache
        return jax.jit(lambda v: jnp.exp(-v * 0.0123).max(axis=1))

    first, second = tmp_path / "one", tmp_path / "two"
    compile_cache.enable(str(first))
    fresh()(x).block_until_ready()
    compile_cache.enable(str(second))
    fresh()(x).block_until_ready()
    assert compile_cache.stats() == {"dir": str(second.resolve()), "hits": 0, "misses": 1}
    assert _cache_files(first) and _cache_files(second)

    compile_cache.enable(str(first))
    out = fresh()(x)
    assert compile_cache.stats() == {"dir": str(first.resolve()), "hits": 1, "misses": 0}
    np.testing.assert_allclose(np.asarray(out), np.exp(-x * np.float32(0.0123)).max(axis=1), rtol=1e-6)


# --- across processes --------------------------------------------------------------------------------


def test_second_process_hits_with_identical_output(tmp_path):
    folder = tmp_path / "xla"
    cold = _run_script(folder)
    assert cold["stats"]["dir"] == str(folder.resolve())
    assert cold["stats"]["hits"] == 0 and cold["stats"]["misses"] >= 1, cold
    written = _cache_files(folder)
    assert written and compile_cache.size_bytes(folder) > 0

    warm = _run_script(folder)
    assert warm["stats"]["hits"] >= 1 and warm["stats"]["misses"] == 0, warm
    assert warm["out"] == cold["out"] and warm["dtype"] == cold["dtype"]
    assert {p.name for p in _cache_files(folder) if p.name.endswith("-cache")} == {
        p.name for p in written if p.name.endswith("-cache")
    }


def test_off_writes_nothing_even_with_jax_env(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "xdg"))
    monkeypatch.setenv("DYGNEX_CACHE", str(home / "dygnex"))
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(home / "jax-env"))
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    result = _run_script("off")
    assert result["stats"] == {"dir": None, "hits": 0, "misses": 0}
    assert _cache_files(home) == []


# --- size --------------------------------------------------------------------------------------------


def test_size_bytes(tmp_path):
    assert compile_cache.size_bytes(None) == 0
    assert compile_cache.size_bytes(tmp_path / "missing") == 0
    (tmp_path / "sub").mkdir()
    (tmp_path / "a").write_bytes(b"x" * 10)
    (tmp_path / "sub" / "b").write_bytes(b"y" * 32)
    assert compile_cache.size_bytes(tmp_path) == 42
    assert compile_cache.size_bytes(tmp_path / "a") == 10
