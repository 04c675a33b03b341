"""Atomic file writes: write to a temporary file in the same folder, then rename over the target."""

from __future__ import annotations

import io
import json
import os
import tempfile
from pathlib import Path

import numpy as np


def write_bytes(path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files; reports are ordinary files
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text(path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_default) + "\n")


def _default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if hasattr(o, "to_dict"):
        return o.to_dict()
    raise TypeError(f"cannot serialise {type(o).__name__}")


def save_figure(fig, path, formats=("png",)) -> list[str]:
    """Save a matplotlib figure atomically in each format; return the paths written."""
    out = []
    for fmt in formats:
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=130, bbox_inches="tight")
        p = Path(str(path) + "." + fmt)
        write_bytes(p, buf.getvalue())
        out.append(str(p))
    return out
