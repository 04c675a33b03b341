"""Metadata facts of 2:4 structured sparsity (``tilelang.cuda.intrinsics.sparse_layout``), shared by a
compressor and ``T.gemm_sp`` (see :mod:`tilesim.language.sparse` for the layout).

``GROUP_CONFIG[dtype] = (kept, group)``: values kept per group of consecutive K elements (1 of 2 for 32-bit
types, 2 of 4 otherwise). ``get_e_factor(a_dtype, meta_dtype)``: A elements one metadata element covers
(``bits(meta) / 4`` groups of 4 bits). ``get_e_replicate_factor(a_dtype)``: consecutive threads that share a
metadata value in the GPU's fragment (2 for 16/32-bit types, 1 for 8-bit). A dtype not in the table is a
``KeyError`` naming the supported ones.
"""

from __future__ import annotations

from ...language.types import DType

__all__ = ["GROUP_CONFIG", "get_e_factor", "get_e_replicate_factor"]


class _ByName(dict):
    """A dict keyed by dtype name that accepts any dtype spelling (``T.float16``, ``"float16"``)."""

    def __getitem__(self, key):
        name = str(DType(str(key)))
        if not dict.__contains__(self, name):
            raise KeyError(f"2:4 sparsity of {name} is not supported; supported: {', '.join(self)}")
        return dict.__getitem__(self, name)

    def __contains__(self, key):
        return dict.__contains__(self, str(DType(str(key))))


GROUP_CONFIG = _ByName({"float32": (1, 2), "float16": (2, 4), "bfloat16": (2, 4), "int8": (2, 4), "uint8": (2, 4),
                        "float8_e4m3": (2, 4), "float8_e5m2": (2, 4)})


def get_e_factor(a_dtype, meta_dtype) -> int:
    _, group = GROUP_CONFIG[a_dtype]
    return DType(str(meta_dtype)).bits // 4 * group


def get_e_replicate_factor(a_dtype) -> int:
    return 1 if DType(str(a_dtype)).bits <= 8 else 2
