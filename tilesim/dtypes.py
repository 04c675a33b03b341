"""Data types: canonical names, NumPy/ml_dtypes storage types and GPU-like conversions.

Contract
--------
* A dtype inside tilesim is always a canonical **string** (``"float16"``, ``"bfloat16"``,
  ``"float8_e4m3fn"``, ``"int32"``, ``"bool"``, ...). :func:`canon` turns any accepted spelling
  (``"float"``, ``"half"``, ``T.float16``, ``numpy.float32``, ``"e4m3"``) into it and raises
  ``KernelTypeError`` with the list of known names otherwise.
* :func:`np_dtype` gives the storage dtype (ml_dtypes for bf16/fp8/fp4).
* :func:`compute_dtype` is what arithmetic on a dtype is done in: narrow floats (fp16, bf16, fp8,
  fp4) compute in float32 and are rounded back per operation, like GPU half arithmetic.
* :func:`convert` converts an array to a dtype the way a GPU does: float → fp8/fp4 saturates to
  the largest finite value (NaN stays NaN), float → int truncates toward zero, bool → 0/1.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .errors import KernelTypeError

_NP = {
    "bool": np.dtype(np.bool_),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
    "float16": np.dtype(np.float16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "float4_e2m1fn": np.dtype(ml_dtypes.float4_e2m1fn),
    # 4-bit signed integers, one value (-8..7) per int8 in the interpreter; tensors arrive packed two per
    # byte (pack_int4 / unpack_int4). After "int8", so canon(np.int8) stays "int8".
    "int4": np.dtype(np.int8),
}

_ALIASES = {
    "float": "float32", "fp32": "float32", "f32": "float32",
    "half": "float16", "fp16": "float16", "f16": "float16",
    "bf16": "bfloat16",
    "double": "float64", "fp64": "float64",
    "int": "int32", "uint": "uint32",  # TVM: a name without a width is 32 bits
    "float8_e4m3": "float8_e4m3fn", "e4m3": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn",
    "float8_e4m3fnuz": "float8_e4m3fn",
    "e5m2": "float8_e5m2", "fp8_e5m2": "float8_e5m2",
    "float4_e2m1": "float4_e2m1fn", "e2m1": "float4_e2m1fn",
    "float4_e2m1_unpacked": "float4_e2m1fn",  # Blackwell's one-value-per-byte fp4 operand layout: the same values
    "uint1": "bool", "boolean": "bool",
}

NARROW_FLOATS = frozenset({"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"})
FP8 = frozenset({"float8_e4m3fn", "float8_e5m2"})
#: Largest finite value of each saturating narrow type (GPU ``satfinite`` conversions clamp here).
SAT_MAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0, "float4_e2m1fn": 6.0}


def canon(dtype) -> str:
    """Canonical name of ``dtype`` (a string, a ``T.*`` dtype, a NumPy dtype or scalar type)."""
    name = getattr(dtype, "tilesim_dtype", None)
    if name is not None:
        return name
    if dtype is None:  # NumPy would read None as float64: a missing dtype is an error, not a default
        raise KernelTypeError("dtype is None", hint="give a dtype, e.g. \"float16\" or T.float32")
    if isinstance(dtype, str):
        key = dtype.strip().lower()
        key = _ALIASES.get(key, key)
        if key in _NP:
            return key
    else:
        try:
            npd = np.dtype(dtype)
        except TypeError:
            npd = None
        if npd is not None:
            for k, v in _NP.items():
                if v == npd:
                    return k
        torch_name = str(dtype)
        if torch_name.startswith("torch."):
            return canon(torch_name[6:])
    raise KernelTypeError(
        f"unknown dtype {dtype!r}",
        hint="use one of: " + ", ".join(sorted(_NP)) + " (or T.float16, T.bfloat16, ...)",
    )


def np_dtype(dtype: str) -> np.dtype:
    return _NP[canon(dtype)]


def is_float(dtype: str) -> bool:
    return dtype.startswith("float") or dtype == "bfloat16"


def is_int(dtype: str) -> bool:
    return dtype.startswith("int") or dtype.startswith("uint")


def is_signed(dtype: str) -> bool:
    return not dtype.startswith("uint") and dtype != "bool"


def bits(dtype: str) -> int:
    if dtype == "bool":
        return 8
    if dtype in ("float4_e2m1fn", "int4"):
        return 4
    return np_dtype(dtype).itemsize * 8


def itemsize(dtype: str) -> float:
    """Bytes per element as stored on a GPU (fp4 counts half a byte)."""
    return bits(dtype) / 8


def compute_dtype(dtype: str) -> np.dtype:
    """NumPy dtype arithmetic on ``dtype`` values is carried out in."""
    if dtype in NARROW_FLOATS:
        return _NP["float32"]
    return _NP[dtype]


def promote(a: str, b: str) -> str:
    """Result dtype of a binary op between two (strongly typed) operands, as TVM matches them."""
    if a == b:
        return a
    if a == "bool":
        return b
    if b == "bool":
        return a
    fa, fb = is_float(a), is_float(b)
    if fa and not fb:
        return a
    if fb and not fa:
        return b
    if fa and fb:
        if bits(a) != bits(b):
            return a if bits(a) > bits(b) else b
        return "float32"  # e.g. float16 with bfloat16: neither holds the other
    if bits(a) != bits(b):
        return a if bits(a) > bits(b) else b
    return a if is_signed(a) else b


def round_to(values: np.ndarray, dtype: str) -> np.ndarray:
    """Round compute-precision ``values`` to ``dtype`` and return them in compute precision."""
    if dtype in NARROW_FLOATS:
        return widen(convert(values, dtype), np.dtype(np.float32))
    return values


def convert(values, dtype: str) -> np.ndarray:
    """Convert ``values`` to storage dtype ``dtype`` with GPU semantics (saturating fp8/fp4)."""
    target = _NP[dtype]
    arr = np.asarray(values)
    if arr.dtype == target:
        return arr
    if dtype in SAT_MAX:
        src = arr.astype(np.float32) if arr.dtype != np.float32 else arr
        m = SAT_MAX[dtype]
        return np.clip(src, -m, m).astype(target)
    if dtype == "bool":
        return arr != 0
    if dtype == "bfloat16" and arr.dtype == np.float32:
        return _f32_to_bf16(arr)
    if dtype == "int4":  # floats truncate and saturate (cvt.rzi.sat); integers wrap to 4 bits
        if arr.dtype.kind in "iub":
            return (((arr.astype(np.int64) + 8) & 15) - 8).astype(target)
        src = np.nan_to_num(arr.astype(np.float64), nan=0.0)
        return np.clip(np.trunc(src), -8, 7).astype(target)
    if is_int(dtype) and (arr.dtype.kind == "f" or arr.dtype in _NARROW_NP):
        # GPU float->int conversions (cvt.rzi.sat) truncate toward zero, saturate, and map NaN to 0
        src = np.nan_to_num(arr.astype(np.float64), nan=0.0)
        info = np.iinfo(target)
        return np.clip(np.trunc(src), info.min, info.max).astype(target)
    if arr.dtype.kind in "iub" or arr.dtype.kind == "f" or arr.dtype in _NARROW_NP:
        if is_int(dtype) and arr.dtype.kind in "iu":
            return arr.astype(target)  # wraps like a C integer conversion
        return arr.astype(target)
    return arr.astype(target)


_NARROW_NP = tuple(_NP[n] for n in NARROW_FLOATS)
_WIDEN: dict = {}  # 1-byte float dtype -> its 256 values as float32


def widen(arr: np.ndarray, to: np.dtype) -> np.ndarray:
    """``arr.astype(to, copy=False)``, bitwise; 1-byte floats (fp8, fp4) go to float32 through a 256-entry
    table (ml_dtypes' element-wise cast is ~30x slower: it dominated fp8 GEMM programs)."""
    if arr.dtype.itemsize == 1 and to == np.float32 and arr.dtype in _NARROW_NP:
        lut = _WIDEN.get(arr.dtype)
        if lut is None:
            lut = _WIDEN[arr.dtype] = np.arange(256, dtype=np.uint8).view(arr.dtype).astype(np.float32)
        return lut.take(arr.view(np.uint8))
    return arr.astype(to, copy=False)


def _f32_to_bf16(arr: np.ndarray) -> np.ndarray:
    """fp32 → bf16, round-to-nearest-even; a NaN keeps its sign and the top 7 payload bits (the quiet bit
    set if those are all zero), so a bf16 NaN widened to fp32 and stored back is moved bit for bit, as a
    GPU moves bytes (ml_dtypes would canonicalise it to 0x7fc0)."""
    with np.errstate(invalid="ignore"):
        out = arr.astype(_NP["bfloat16"])
    nan = np.isnan(arr)
    if nan.any():
        hi = (np.ascontiguousarray(arr).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
        hi = np.where((hi & np.uint16(0x7F)) == 0, hi | np.uint16(0x40), hi)
        out = np.where(nan, hi.view(_NP["bfloat16"]), out)
    return out


def to_tf32(values: np.ndarray) -> np.ndarray:
    """Round float32 values to TF32 (10 mantissa bits), to nearest with ties away, as ``cvt.rna``."""
    a = np.ascontiguousarray(values, dtype=np.float32)
    u = a.view(np.uint32)
    finite = np.isfinite(a)
    r = ((u + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)
    return np.where(finite, r, a)


def unpack_int4(packed: np.ndarray) -> np.ndarray:
    """int4 values packed two per byte along the last axis (element ``2i`` in the low nibble of byte ``i``)
    as one sign-extended int8 per value: shape ``(..., n)`` -> ``(..., 2 n)``."""
    b = np.asarray(packed).view(np.uint8) if np.asarray(packed).dtype == np.int8 else np.asarray(packed, np.uint8)
    lo, hi = (b & 0xF).astype(np.int8), (b >> 4).astype(np.int8)
    out = np.stack([lo, hi], axis=-1).reshape(b.shape[:-1] + (2 * b.shape[-1],))
    return np.where(out > 7, out - 16, out).astype(np.int8)


def pack_int4(values: np.ndarray) -> np.ndarray:
    """The inverse of :func:`unpack_int4` (values wrap to 4 bits): ``(..., 2 n)`` -> int8 ``(..., n)``."""
    v = (np.asarray(values).astype(np.int64) & 0xF).astype(np.uint8)
    v = v.reshape(v.shape[:-1] + (v.shape[-1] // 2, 2))
    return (v[..., 0] | (v[..., 1] << 4)).astype(np.uint8).view(np.int8)


def max_value(dtype: str) -> float | int:
    dtype = canon(dtype)
    if dtype == "int4":
        return 7
    if dtype in SAT_MAX:
        return SAT_MAX[dtype]
    if dtype == "bool":
        return True
    npd = _NP[dtype]
    if is_float(dtype):
        return float(ml_dtypes.finfo(npd).max)
    return int(np.iinfo(npd).max)


def min_value(dtype: str) -> float | int:
    dtype = canon(dtype)
    if dtype == "int4":
        return -8
    if dtype in SAT_MAX:
        return -SAT_MAX[dtype]
    if dtype == "bool":
        return False
    npd = _NP[dtype]
    if is_float(dtype):
        return float(ml_dtypes.finfo(npd).min)
    return int(np.iinfo(npd).min)


ALL = tuple(_NP)
