"""``tilelang.testing.set_random_seed``: seed every generator a TileLang program may draw from."""

from __future__ import annotations

import random

import numpy as np

from ..optional import loaded

__all__ = ["set_random_seed"]


def set_random_seed(seed: int = 42) -> None:
    """Seed Python's ``random``, NumPy's global generator and, if the program imported it, torch."""
    random.seed(seed)
    np.random.seed(seed)
    torch = loaded("torch")
    if torch is not None:
        torch.manual_seed(seed)
