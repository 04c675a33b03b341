"""Code-generating backends of tilesim. ``cuda``: the Numba CUDA backend (``target="cuda"``)."""
