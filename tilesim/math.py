"""``tilelang.math``: integer helpers used on the host side of kernel factories (``cdiv`` also inside kernels)."""

from __future__ import annotations

__all__ = ["cdiv", "next_power_of_2"]


def next_power_of_2(x: int) -> int:
    """The smallest power of two >= ``x`` (1 for ``x <= 1``)."""
    x = int(x)
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for integers (``b > 0``). In a traced kernel (eager ``T.const`` sizes, symbolic shapes)
    it is ``T.ceildiv``: kernel values give the expression ``(a + b - 1) // b``, as TileLang's cdiv does."""
    return -(-int(a) // int(b))


cdiv.__tilesim_prim__ = "ceildiv"   # the frontend calls the T.ceildiv builder (plain ints fold to an int)
