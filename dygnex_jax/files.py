"""Files replaced whole: a reader, a kill at any moment or a full disk never leaves half of one. No JAX.

``atomic_write(dest, write)`` calls ``write`` on a hidden temp file beside ``dest`` (``.NAME.*.part``, same
folder, so the rename stays on one file system) and renames it over ``dest``; if ``write`` or the rename
fails, the temp file is removed and the error propagates with ``dest`` as it was. A process killed while
writing leaves ``dest`` untouched and at most one hidden ``.part`` file.

``staged()`` makes the files one command writes all-or-nothing: inside it every ``atomic_write`` only
writes its temp file, and they are renamed over their destinations together when the block ends without
an error; an error (a full disk at the second file) removes every temp file and the folders the block
created, so nothing of the command's output appears. ``json_text`` is strict JSON: a NaN or an infinity
(an undefined metric, a diverged loss) is written as ``null``, never as the bare ``NaN`` other parsers
reject.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_MODE = 0o666 & ~_umask()  # what open() would give a new file (mkstemp's own is 0o600), read at import


_STAGE: contextvars.ContextVar[list | None] = contextvars.ContextVar("dygnex_stage", default=None)


def make_dirs(folder: Path) -> None:
    """``folder.mkdir(parents=True, exist_ok=True)``; inside a ``staged`` block the folders it creates are
    removed again (when left empty) if the block fails."""
    stage = _STAGE.get()
    missing = []
    f = folder
    while not f.exists() and f != f.parent:
        missing.append(f)
        f = f.parent
    folder.mkdir(parents=True, exist_ok=True)
    if stage is not None:
        stage.extend(("dir", d, None) for d in reversed(missing))


@contextlib.contextmanager
def staged() -> Iterator[None]:
    """A block whose ``atomic_write`` calls land together or not at all (module docstring)."""
    if _STAGE.get() is not None:  # nested: the outer block decides
        yield
        return
    stage: list = []
    token = _STAGE.set(stage)
    try:
        try:
            yield
        finally:
            _STAGE.reset(token)
        for kind, tmp, dest in stage:
            if kind == "file":
                try:
                    os.replace(tmp, dest)
                except OSError as e:
                    raise OSError(e.errno, e.strerror or str(e), str(dest)) from None
    except BaseException:
        for kind, path, _ in reversed(stage):
            with contextlib.suppress(OSError):
                Path(path).unlink(missing_ok=True) if kind == "file" else Path(path).rmdir()
        raise


def atomic_write(dest: str | os.PathLike, write: Callable[[BinaryIO], object]) -> Path:
    """Call ``write(binary file)`` on a temp file beside ``dest``, then rename it to ``dest`` (parent
    folders created; the file's mode that of a plain ``open``, or the replaced file's). Returns ``dest``
    as a Path. An ``OSError`` of the write names ``dest`` (a full disk reports no file name itself)."""
    dest = Path(dest)
    make_dirs(dest.parent)
    stage = _STAGE.get()
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        try:
            with os.fdopen(fd, "wb") as fh:
                os.chmod(tmp, dest.stat().st_mode & 0o7777 if dest.exists() else _MODE)
                write(fh)
            if stage is not None:  # renamed when the staged block ends
                stage.append(("file", tmp, dest))
                return dest
            os.replace(tmp, dest)
        except OSError as e:
            if type(e) is OSError and e.filename is None and e.errno is not None:  # not URLError & co.
                raise OSError(e.errno, e.strerror or str(e), str(dest)) from None
            raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return dest


def unwritable(path: Path) -> str | None:
    """Why ``atomic_write`` could not write a file at ``path`` — an existing folder; the nearest existing
    folder above it a file, or one this user cannot write into — as the end of an error line, or None.
    Touches nothing: commands check the files they write at the end before their work."""
    if path.is_dir():
        return "is a folder: give a file name"
    above = next(p for p in path.absolute().parents if p.exists())
    if not above.is_dir():
        return f"lies under {str(above)!r}, which is a file: choose another path"
    if not os.access(above, os.W_OK | os.X_OK):
        return f"cannot be written under {str(above)!r}: choose another path"
    return None


def output_dir(text: str) -> str:
    """An argparse ``type`` for a tool's ``--out`` folder: the text as given, or a one-line usage error before any
    work where the folder could not be made or written (a file there or above it, a folder this user
    cannot write into). Touches nothing."""
    if not text.strip():  # an unset shell variable (--out "$DIR"): never the current folder
        raise argparse.ArgumentTypeError("is empty: give a folder (is a shell variable unset?)")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file: choose a folder")
    reason = unwritable(path / "_") if path.is_dir() else unwritable(path)
    if reason:
        raise argparse.ArgumentTypeError(f"{text!r} {reason.replace('another path', 'another folder')}")
    return text


def output_file(text: str) -> str:
    """An argparse ``type`` for a file a tool writes when its work is done (``--json``): the text as given, or a
    one-line usage error before any work where ``unwritable`` says it could not be written."""
    if not text.strip():  # an unset shell variable (--json "$F"): never the current folder
        raise argparse.ArgumentTypeError("is empty: give a file name (is a shell variable unset?)")
    reason = unwritable(Path(text))
    if reason:
        raise argparse.ArgumentTypeError(f"{text!r} {reason}")
    return text


def atomic_write_text(dest: str | os.PathLike, text: str) -> Path:
    """``atomic_write`` of ``text`` in UTF-8."""
    return atomic_write(dest, lambda fh: fh.write(text.encode("utf-8")))


def save_figure(fig, path: str | os.PathLike, dpi: int = 110) -> Path:
    """A matplotlib figure saved whole to ``path`` (its format from the suffix, PNG without one)."""
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    return atomic_write(path, lambda fh: fig.savefig(fh, dpi=dpi, format=fmt))


def finite(obj):
    """``obj`` with every NaN or infinite float (numpy's too) replaced by None, numpy scalars and arrays
    as Python numbers and lists; containers copied, other values as they are."""
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, str | bytes):  # numpy scalars and arrays
        return finite(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def json_text(obj, indent: int | None = None) -> str:
    """``obj`` as strict JSON: non-finite numbers as ``null`` (``finite``)."""
    return json.dumps(finite(obj), indent=indent, allow_nan=False)
