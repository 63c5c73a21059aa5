"""Assertions shared by the tests that run the CLI or a tool in a subprocess."""

from __future__ import annotations


def assert_one_line_error(proc, *fragments):
    """``proc`` exited 2 with exactly one ``error: ...`` line on stderr that contains every fragment."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for f in fragments:
        assert f in lines[0], lines[0]
