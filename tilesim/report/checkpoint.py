"""A sweep's finished work on disk, so that an interrupted ``tilesim report`` can resume.

Contract
--------
``Checkpoint(path)`` is an append-only file of JSON lines ``{"key": str, "value": ...}``:

* ``add(key, value)`` appends one line and flushes it to disk (``fsync``) before returning, so a
  result is either wholly recorded or absent; ``value`` must be JSON-serialisable (the report's groups
  are plain dicts and lists of numbers and strings; JSON keeps floats exactly).
* ``load()`` returns ``{key: value}`` of every complete line; a line cut short by a crash, or any line
  that is not such a record, is skipped (that work is simply done again). A missing file loads as ``{}``.
* ``discard()`` removes the file, and its folder when that is left empty.

The file lives in a hidden folder of the output directory (``reports/.partial/``); the report's own
files are written only at the end, atomically (:mod:`tilesim.report.io`), so an interrupted run never
leaves a half-written ``summary.json`` and the checkpoint is the only trace it leaves.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["Checkpoint"]


class Checkpoint:
    def __init__(self, path):
        self.path = Path(path)
        self._file = None

    def load(self) -> dict:
        out = {}
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError:
            return out
        for line in text.splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # the line a crash cut short
            if isinstance(rec, dict) and isinstance(rec.get("key"), str) and "value" in rec:
                out[rec["key"]] = rec["value"]
        return out

    def add(self, key: str, value) -> None:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the sweep
            if self._file.tell() and not self.path.read_bytes().endswith(b"\n"):
                self._file.write("\n")  # end a torn last line so the next record parses
        self._file.write(json.dumps({"key": key, "value": value}) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def discard(self) -> None:
        self.close()
        if self.path.exists():
            self.path.unlink()
        try:
            self.path.parent.rmdir()
        except OSError:
            pass  # not empty, or already gone
