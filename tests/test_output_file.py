"""files.output_file: the argparse type of the file a tool writes at the end (--json) rejects,
before any work, exactly the paths atomic_write could not write, and creates nothing while checking."""

import argparse
import os

import pytest

from dygnex_jax.files import atomic_write_text, output_dir, output_file


def test_writable_paths_pass_and_nothing_is_made(tmp_path):
    deep = tmp_path / "not" / "yet" / "there.json"
    assert output_file(str(deep)) == str(deep)
    assert not (tmp_path / "not").exists()  # checked, not created
    atomic_write_text(output_file(str(deep)), "{}")  # and the writer can write what it let through
    assert deep.read_text() == "{}"
    existing = tmp_path / "old.json"
    existing.write_text("x")
    assert output_file(str(existing)) == str(existing)  # an existing file is replaced at the end


@pytest.mark.parametrize("make", ["folder", "under_file", "empty"])
def test_unwritable_paths_are_usage_errors(tmp_path, make):
    if make == "folder":
        path = str(tmp_path)
    elif make == "under_file":
        (tmp_path / "f").write_text("keep")
        path = str(tmp_path / "f" / "sub" / "x.json")
    else:
        path = ""
    with pytest.raises(argparse.ArgumentTypeError):
        output_file(path)
    if make == "under_file":  # atomic_write could not have written it either
        with pytest.raises(OSError):
            atomic_write_text(path, "{}")
        assert (tmp_path / "f").read_text() == "keep"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_a_usage_error(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(argparse.ArgumentTypeError, match="not writable"):
            output_file(str(ro / "new" / "x.json"))
    finally:
        ro.chmod(0o700)


def test_output_dir(tmp_path):
    """--out folders: an existing or makeable folder passes (nothing made); a file, or a folder under a
    file, does not."""
    assert output_dir(str(tmp_path)) == str(tmp_path)
    assert output_dir(str(tmp_path / "a" / "b")) == str(tmp_path / "a" / "b")
    assert not (tmp_path / "a").exists()
    (tmp_path / "f").write_text("keep")
    for bad in (str(tmp_path / "f"), str(tmp_path / "f" / "run"), " "):
        with pytest.raises(argparse.ArgumentTypeError):
            output_dir(bad)
    assert (tmp_path / "f").read_text() == "keep"
