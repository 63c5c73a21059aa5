"""Files replaced whole: a reader, a kill at any moment or a full disk never leaves half of one. No JAX.

``atomic_write(dest, write)`` calls ``write`` on a hidden temp file beside ``dest`` (``.NAME.*.part``, same
folder, so the rename stays on one file system) and renames it over ``dest``; if ``write`` or the rename
fails, the temp file is removed and the error propagates with ``dest`` as it was. A process killed while
writing leaves ``dest`` untouched and at most one hidden ``.part`` file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_MODE = 0o666 & ~_umask()  # what open() would give a new file (mkstemp's own is 0o600), read at import


def atomic_write(dest: str | os.PathLike, write: Callable[[BinaryIO], object]) -> Path:
    """Call ``write(binary file)`` on a temp file beside ``dest``, then rename it to ``dest`` (parent
    folders created; the file's mode that of a plain ``open``, or the replaced file's). Returns ``dest``
    as a Path. An ``OSError`` of the write names ``dest`` (a full disk reports no file name itself)."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        try:
            with os.fdopen(fd, "wb") as fh:
                os.chmod(tmp, dest.stat().st_mode & 0o7777 if dest.exists() else _MODE)
                write(fh)
            os.replace(tmp, dest)
        except OSError as e:
            if type(e) is OSError and e.filename is None and e.errno is not None:  # not URLError & co.
                raise OSError(e.errno, e.strerror or str(e), str(dest)) from None
            raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return dest


def atomic_write_text(dest: str | os.PathLike, text: str) -> Path:
    """``atomic_write`` of ``text`` in UTF-8."""
    return atomic_write(dest, lambda fh: fh.write(text.encode("utf-8")))


def save_figure(fig, path: str | os.PathLike, dpi: int = 110) -> Path:
    """A matplotlib figure saved whole to ``path`` (its format from the suffix, PNG without one)."""
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    return atomic_write(path, lambda fh: fig.savefig(fh, dpi=dpi, format=fmt))
