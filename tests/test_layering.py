"""The package's structure, read from the source (no imports): which module may use what.

* only ``parallel.py`` touches ``jax.sharding`` / ``shard_map`` (devices and meshes live there);
* the scheduler (``schedule/``), the strategies' table, the config and the simulator import no JAX;
* models never see a mesh (no ``parallel``, no sharding);
* no module writes another object's private attributes (``x._name = ...`` with ``x`` not ``self``);
* tools are scripts over the installed package (no ``sys.path`` edits);
* modules and tools stay under 500 lines and functions under 80 (one screenful per phase).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "dygnex_jax"
MODULES = sorted(PACKAGE.rglob("*.py"))
TOOLS = sorted((REPO / "tools").glob("*.py"))


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def imported(path: Path) -> set[str]:
    """Every module name ``path`` imports (absolute; relative imports resolved against the package),
    at any depth (function-level imports included)."""
    parts = path.relative_to(REPO).with_suffix("").parts
    package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
    names = set()
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            names.add(mod)
            names.update(f"{mod}.{a.name}" for a in node.names)
    return names


def uses_jax(path: Path) -> bool:
    return any(
        n == "jax" or n.startswith(("jax.", "jaxlib", "flax", "optax", "jraph")) for n in imported(path)
    )


def test_only_parallel_touches_sharding():
    offenders = []
    for path in MODULES:
        names = imported(path)
        if (
            any("sharding" in n or n.endswith("shard_map") for n in names)
            and rel(path) != "dygnex_jax/parallel.py"
        ):
            offenders.append(rel(path))
    assert offenders == []


@pytest.mark.parametrize(
    "where",
    [
        "dygnex_jax/schedule",
        "dygnex_jax/strategies/__init__.py",
        "dygnex_jax/config.py",
        "dygnex_jax/config_yaml.py",
        "dygnex_jax/simulate.py",
        "dygnex_jax/inspect_data.py",
    ],
)
def test_no_jax_where_none_is_needed(where):
    paths = sorted((REPO / where).rglob("*.py")) if (REPO / where).is_dir() else [REPO / where]
    assert paths and [rel(p) for p in paths if uses_jax(p)] == []


def test_simulator_modules_import_no_jax():
    paths = sorted(PACKAGE.glob("simulate*.py"))
    assert len(paths) > 1 and [rel(p) for p in paths if uses_jax(p)] == []


def test_models_never_see_a_mesh():
    for path in sorted((PACKAGE / "models").rglob("*.py")):
        names = imported(path)
        assert not any(n.startswith("dygnex_jax.parallel") or "sharding" in n for n in names), rel(path)


def test_no_private_attribute_written_from_outside():
    offenders = []
    for path in [*MODULES, *TOOLS]:
        for node in ast.walk(tree(path)):
            targets = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if (
                        isinstance(sub, ast.Attribute)
                        and sub.attr.startswith("_")
                        and not sub.attr.startswith("__")
                        and not (isinstance(sub.value, ast.Name) and sub.value.id in ("self", "cls"))
                    ):
                        offenders.append(f"{rel(path)}:{sub.lineno} {ast.unparse(sub)}")
    assert offenders == []


def test_tools_do_not_edit_sys_path():
    assert TOOLS
    for path in TOOLS:
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.Attribute) and node.attr == "path" and ast.unparse(node) == "sys.path":
                pytest.fail(f"{rel(path)}:{node.lineno} edits sys.path: import the installed package instead")


def test_module_and_function_sizes():
    paths = [*MODULES, *TOOLS]
    big = [f"{rel(p)} ({n} lines)" for p in paths if (n := len(p.read_text().splitlines())) > 500]
    long = [
        f"{rel(p)}:{f.lineno} {f.name} ({f.end_lineno - f.lineno + 1} lines)"
        for p in paths
        for f in ast.walk(tree(p))
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.end_lineno - f.lineno + 1 > 80
    ]
    assert big == [] and long == []


def test_every_strategy_in_the_table_exists():
    """One table line per strategy: each names a module and class that exist, the config accepts
    exactly its methods, and the whole-window ones are the config's WINDOW_METHODS."""
    from dygnex_jax import config, strategies

    for method, (module, cls, scheduler, _) in strategies.STRATEGIES.items():
        source = (PACKAGE / "strategies" / f"{module}.py").read_text()
        assert f"class {cls}(" in source, method
        assert scheduler in ("psg", "dygnex_g", "dygnex_l")
    assert config.run_methods() == strategies.METHODS
    assert config.WINDOW_METHODS == strategies.WINDOW_METHODS
    from dygnex_jax import simulate_analytic, simulate_setup

    # the simulator: whole-window methods step by step, every other strategy by an analytic model
    partitioned = set(strategies.METHODS) - set(strategies.WINDOW_METHODS)
    assert set(simulate_analytic.ANALYTIC_SIMULATORS) == partitioned == set(simulate_setup.ANALYTIC_METHODS)
