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


def atomic_write(dest: str | os.PathLike, write: Callable[[BinaryIO], object]) -> Path:
    """Call ``write(binary file)`` on a temp file beside ``dest``, then rename it to ``dest`` (parent
    folders created). Returns ``dest`` as a Path."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return dest


def atomic_write_text(dest: str | os.PathLike, text: str) -> Path:
    """``atomic_write`` of ``text`` in UTF-8."""
    return atomic_write(dest, lambda fh: fh.write(text.encode("utf-8")))
