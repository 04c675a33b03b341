"""Atomic file writes for everything tilesim's core writes (traces, hardware files): the data goes to
a temporary file in the target's folder, which is then renamed over the target, so a reader never
sees a half-written file and an interrupted or failed write leaves the old file (or none) in place.

``write_bytes(path, data)`` / ``write_text(path, text)``: the target's folder must exist (a missing
or unwritable folder, or a target that is a folder, raises the ``OSError`` naming the path, before
anything is written); the file
gets ordinary permissions (``0666`` less the umask), not ``mkstemp``'s ``0600``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_bytes", "write_text"]


def write_bytes(path, data: bytes) -> None:
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise FileNotFoundError(2, "no such folder", str(folder))
    if path.is_dir():
        raise IsADirectoryError(21, "is a folder, not a file", str(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text(path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))
