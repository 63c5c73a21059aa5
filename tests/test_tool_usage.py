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


OUTPUTS = [
    (name, flag)
    for name in TOOLS
    for flag in ("--json", "--out")
    if f'add_argument("{flag}", type=output_' in (TOOLS_DIR / name).read_text()
]


def test_every_json_and_out_is_checked_at_parsing():
    """Every tool's --json, and every --out a tool writes into, has the checked type."""
    for name in TOOLS:
        text = (TOOLS_DIR / name).read_text()
        for flag in ("--json", "--out"):
            if f'add_argument("{flag}"' in text:
                assert (name, flag) in OUTPUTS, (name, flag)


@pytest.mark.parametrize("tool,flag", OUTPUTS)
def test_an_unwritable_output_fails_before_the_work(tool, flag, tmp_path):
    """An output the tool could not write at the end is a usage error at the start: no benchmark run for
    nothing (``files.output_file`` / ``files.output_dir``)."""
    blocker = tmp_path / "a_file"
    blocker.write_text("keep")
    r = run_tool(tool, flag, str(blocker / "x.json"))
    err = r.stderr.strip()
    assert r.returncode == 2 and err.splitlines() == [err], (tool, r.stderr[-500:])
    assert err.startswith(f"error: argument {flag}: ") and "which is a file" in err, err
    assert blocker.read_text() == "keep" and sorted(tmp_path.iterdir()) == [blocker]
