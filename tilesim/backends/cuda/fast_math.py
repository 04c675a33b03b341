"""Two float32 precision switches of the CUDA lowering (issue 14, brief AU): a hardware ``exp2`` and fused
multiply-adds. Both are **off by default** (the interpreter's float32 semantics, as before); each changes results
by a documented, bounded amount.

Contract
--------
* :func:`fast_exp2` (:data:`FAST_EXP2`, or env ``TILESIM_CUDA_FAST_EXP2=1``): a float32 ``T.exp2`` lowers to
  ``_ex2ftz(x)`` = PTX ``ex2.approx.ftz.f32`` (one ``MUFU.EX2`` in SASS) instead of libdevice's ``exp2f``, which
  is ``ex2.approx.f32`` **without** ``.ftz``: ptxas assembles that as a range test and two multiplications around
  the ``MUFU.EX2`` (``FSETP.GEU`` + ``@p FMUL`` x 2) so that subnormal results come out right. What ``.ftz``
  changes (PTX ISA, ``ex2``): a subnormal input is read as zero (``2^0 = 1``; the exact value differs from 1 by
  less than 2^-125 relative) and a result below ``2^-126`` is flushed to +0. The approximation itself is the same
  ``MUFU.EX2`` in both forms (the PTX ISA's ``ex2`` section bounds its error; about 2^-22 relative — quoted from
  memory, not re-read for this note), so away from the subnormal range the two give identical bits. In flash attention's softmax every ``exp2`` argument is ``<= 0`` (the row maximum
  is subtracted), so a flushed value is below 2^-126 of the row's largest term (1): its share of the row sum and
  of the output is below 2^-126 — zero at float32 precision. GPU flash-attention kernels use this form (CUDA's
  ``--use_fast_math`` maps ``exp2f`` to it); TileLang lowers ``T.exp2`` to ``exp2f`` and gets it with its
  ``tl.enable_fast_math`` pass config (``--use_fast_math``).
* :func:`fma_contract` (:data:`FMA_CONTRACT`, env ``TILESIM_CUDA_FMA=1``): a float32 ``x * y + z`` /
  ``x * y - z`` / ``z + x * y`` of the kernel (the product itself float32, not rounded to a narrower type)
  lowers to ``_ffma(x, y, ±z)`` — one rounding instead of two (libdevice ``fmaf``, PTX ``fma.rn.f32``), as
  nvcc's default ``-fmad=true`` contracts. The softmax's ``s * scale - m * scale`` becomes one ``FFMA`` with
  ``m * scale`` computed once per row. Error: the fused result is the exact ``x*y ± z`` rounded once; the unfused
  one adds the product's rounding (at most 1/2 ulp of ``x*y``), so the two differ by at most 1/2 ulp(x*y) +
  1/2 ulp(result) — for the softmax argument ``(s - m) * scale`` that is a relative error of ~2^-24 of
  ``|s * scale|`` in the exponent, i.e. ~2^-24 * |s * scale| * ln 2 relative in ``exp2`` of it.

The simulator builds (:func:`sim_fast_math_namespace`) compute the same functions on the CPU: ``_ex2ftz`` as
float32 ``exp2`` with both flushes (the GPU's value differs by the approximation, <= 2^-22 relative), ``_ffma``
exactly rounded (rational arithmetic, then round-to-nearest-even to float32).
"""

from __future__ import annotations

import os
from fractions import Fraction

import numpy as np

from ...optional import require
from .caps import numba_types

#: float32 ``T.exp2`` as ``ex2.approx.ftz.f32`` (module docstring); None reads ``TILESIM_CUDA_FAST_EXP2``
FAST_EXP2: bool | None = None
#: contract float32 ``x * y ± z`` into one ``fma.rn.f32`` (module docstring); None reads ``TILESIM_CUDA_FMA``
FMA_CONTRACT: bool | None = None

_TINY = np.float32(2.0 ** -126)


def fast_exp2() -> bool:
    """:data:`FAST_EXP2`, or ``TILESIM_CUDA_FAST_EXP2`` (``1`` on; default off)."""
    if FAST_EXP2 is not None:
        return bool(FAST_EXP2)
    return os.environ.get("TILESIM_CUDA_FAST_EXP2", "0") == "1"


def fma_contract() -> bool:
    """:data:`FMA_CONTRACT`, or ``TILESIM_CUDA_FMA`` (``1`` on; default off)."""
    if FMA_CONTRACT is not None:
        return bool(FMA_CONTRACT)
    return os.environ.get("TILESIM_CUDA_FMA", "0") == "1"


def ex2_ftz_ref(x) -> np.float32:
    """The CPU model of ``ex2.approx.ftz.f32``: subnormal input read as 0, result below 2^-126 flushed to +0,
    otherwise float32 ``exp2`` (the hardware's approximation differs by <= 2^-22 relative)."""
    x = np.float32(x)
    if x != 0 and abs(x) < _TINY:
        x = np.float32(0.0)
    with np.errstate(over="ignore", under="ignore"):
        r = np.float32(np.exp2(x))
    return np.float32(0.0) if r < _TINY else r


def fma_ref(x, y, z) -> np.float32:
    """``x * y + z`` of float32 values rounded once to float32 (round to nearest, ties to even)."""
    x, y, z = np.float32(x), np.float32(y), np.float32(z)
    if not (np.isfinite(x) and np.isfinite(y) and np.isfinite(z)):
        with np.errstate(invalid="ignore", over="ignore"):
            return np.float32(np.float64(x) * np.float64(y) + np.float64(z))
    exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
    with np.errstate(over="ignore"):
        r = np.float32(float(exact))  # may be off by one ulp (double rounding): fixed below
    if not np.isfinite(r):
        return r
    best = r
    for cand in (np.nextafter(r, np.float32(-np.inf)), np.nextafter(r, np.float32(np.inf))):
        if not np.isfinite(cand):
            continue
        d_c, d_b = abs(Fraction(float(cand)) - exact), abs(Fraction(float(best)) - exact)
        if d_c < d_b or (d_c == d_b and (cand.view(np.uint32) & 1) == 0):
            best = cand
    return np.float32(best)


def fast_math_namespace() -> dict:
    """GPU intrinsics: ``_ex2ftz(x)`` (``ex2.approx.ftz.f32``, pure inline PTX) and ``_ffma`` (libdevice ``fmaf``)."""
    ir = require("llvmlite.ir", "the CUDA backend")
    types = numba_types()
    intrinsic = require("numba.cuda.extending", "the CUDA backend").intrinsic
    libdevice = require("numba.cuda.libdevice", "the CUDA backend")
    f32 = ir.FloatType()

    @intrinsic
    def ex2ftz(typingctx, x):
        if not isinstance(x, types.Float):
            return None
        sig = types.float32(x)

        def codegen(context, builder, sig, args):
            v = context.cast(builder, args[0], sig.args[0], types.float32)
            asm = ir.InlineAsm(ir.FunctionType(f32, [f32]), "ex2.approx.ftz.f32 $0, $1;", "=f,f")
            return builder.call(asm, [v])

        return sig, codegen

    return {"_ex2ftz": ex2ftz, "_ffma": libdevice.fmaf}


def sim_fast_math_namespace() -> dict:
    """The simulator build of :func:`fast_math_namespace`."""
    return {"_ex2ftz": ex2_ftz_ref, "_ffma": fma_ref}
