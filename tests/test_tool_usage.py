"""Every tool's usage mistakes read like every other bad input: one line ``error: ... (see --help)``
and exit code 2 (the CLI's parser, ``dygnex_jax.errors.ArgumentParser``), with nothing written."""

from pathlib import Path

import pytest
from helpers import run_tool

TOOLS_DIR = Path(__file__).resolve().parents[1] / "tools"
TOOLS = sorted(p.name for p in TOOLS_DIR.glob("*.py") if "ArgumentParser(" in p.read_text())


def test_every_tool_with_options_uses_the_one_line_parser():
    """A new tool on plain argparse would print a usage block: none does."""
    assert TOOLS, "no tool parses options?"
    for name in TOOLS:
        assert "argparse.ArgumentParser(" not in (TOOLS_DIR / name).read_text(), name


@pytest.mark.parametrize("tool", TOOLS)
def test_an_unknown_option_is_one_line(tool, tmp_path):
    r = run_tool(tool, "--no-such-option", "3", "--out", str(tmp_path / "o"))
    err = r.stderr.strip()
    assert r.returncode == 2 and err.splitlines() == [err], (tool, r.stderr[-500:])
    # the unknown option, or a required argument argparse checks first
    assert err.startswith("error: ") and err.endswith("(see --help)"), err
    assert "--no-such-option" in err or "are required" in err, err
    assert not (tmp_path / "o").exists()
