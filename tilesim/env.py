"""``tilelang.env``: the environment settings TileLang programs read, for tilesim.

Contract
--------
Each name in :data:`SETTINGS` is read from the process environment *on every access* (a program that sets
``os.environ`` later sees the new value), falling back to the default given there; values are strings, as
TileLang's are. ``tilesim.env.TILELANG_CACHE_DIR`` and ``tilesim.env.env.TILELANG_CACHE_DIR`` are the same
(TileLang exposes both the module attributes and an ``env`` object). Directory settings are plain paths; this
module creates nothing. A name not in :data:`SETTINGS` raises ``AttributeError`` naming the known ones.

tilesim keeps compiled kernels per process only, so the cache directory is where *programs* keep their own
files (a torch extension build, downloaded data); tilesim itself never writes there.
"""

from __future__ import annotations

import os

__all__ = ["SETTINGS", "env", "get"]

_CACHE = os.path.join(os.path.expanduser("~"), ".tilesim", "cache")

#: setting name -> (environment variable, default); a callable default is computed when read
SETTINGS: dict[str, tuple[str, object]] = {
    "TILELANG_CACHE_DIR": ("TILELANG_CACHE_DIR", _CACHE),
    "TILELANG_TMP_DIR": ("TILELANG_TMP_DIR", lambda: os.path.join(get("TILELANG_CACHE_DIR"), "tmp")),
    "TILELANG_DEFAULT_TARGET": ("TILELANG_DEFAULT_TARGET", "auto"),
    "TILELANG_DEFAULT_EXECUTION_BACKEND": ("TILELANG_EXECUTION_BACKEND", "auto"),
    "TILELANG_DEFAULT_VERBOSE": ("TILELANG_VERBOSE", "0"),
    "TILELANG_DISABLE_CACHE": ("TILELANG_DISABLE_CACHE", "0"),
    "TILELANG_PRINT_ON_COMPILATION": ("TILELANG_PRINT_ON_COMPILATION", "0"),
    "TILELANG_AUTO_TUNING_DISABLE_CACHE": ("TILELANG_AUTO_TUNING_DISABLE_CACHE", "0"),
    "CUDA_HOME": ("CUDA_HOME", ""),
    "ROCM_HOME": ("ROCM_HOME", ""),
}


def get(name: str) -> str:
    """The current value of setting ``name`` (see the module docstring)."""
    if name not in SETTINGS:
        raise AttributeError(f"tilesim.env has no setting {name!r}; known settings: {', '.join(SETTINGS)}")
    var, default = SETTINGS[name]
    value = os.environ.get(var)
    if value is None:
        value = default() if callable(default) else default
    return value


class _Environment:
    """Attribute access to :func:`get` (``tilesim.env.env.TILELANG_CACHE_DIR``)."""

    def __getattr__(self, name: str) -> str:
        return get(name)

    def __dir__(self):
        return sorted(SETTINGS)


env = _Environment()


def __getattr__(name: str) -> str:  # module attributes: ``tilesim.env.TILELANG_CACHE_DIR``
    return get(name)
