"""Whole-tile helpers for generated CPU kernels (imported by them beside :mod:`.prelude`; imports numba).

Why: Numba types, lowers and optimises every statement of a generated launch when a process first calls it
(about 1 s per 100 lines). A tile operation written as a call to one of these functions costs the launch one
call instead of a loop nest; the helper itself is compiled once per machine and argument types (``cache=True``)
and LLVM still inlines it into the launch, so warm speed is that of the loops it replaces.

Contract (the code generator, :mod:`.codegen_tiles`, only emits a call when it holds):

* ``fill_all(a, v)``: every element of the C-contiguous on-chip array ``a`` becomes ``v`` (already of ``a``'s
  type). ``copy_all(src, dst)``: ``dst`` becomes ``src`` (same shape and type, both C-contiguous).
  ``acc_all(c, p)``: ``c += p`` element by element in ``c``'s type (``p`` of the same size and type).
* ``tile_in{n}(src, dst, fill, s0.., r0.., c0..)``: ``dst[i, j]`` (a 2-D on-chip array) becomes the guarded
  load of the ``n``-D global ``src`` at ``s_d + i*r_d + j*c_d`` (``r``/``c`` select the source dims the tile's
  rows and columns run along: one 1 among the ``r`` and one among the ``c``); out of range reads ``fill``.
  ``tile_out{n}(src, dst, s0.., r0.., c0..)`` stores a 2-D on-chip ``src`` the same way, skipping elements
  out of range.
* ``row_sum``/``row_max``/``row_min(src, dst, clear)``: ``dst[j]`` (1-D) becomes the reduction of row ``j`` of
  the 2-D ``src`` (float32: summed in order in float32; max/min propagate NaN), folded into ``dst[j]``'s
  value unless ``clear``: the interpreter's ``T.reduce_*`` over the last dimension.
"""

from __future__ import annotations

import numba
import numpy as np

from .prelude import (
    dec_bf16,
    dec_f16,
    enc_bf16,
    enc_f16,
    fmax,
    fmin,
    ld2,
    ld3,
    ld4,
    ld5,
    rnd_bf16,
    rnd_f16,
    st2,
    st3,
    st4,
    st5,
)

_jit = numba.njit(cache=True, error_model="numpy", nogil=True)

__all__ = ["fill_all", "copy_all", "acc_all", "tile_in2", "tile_in3", "tile_in4", "tile_in5",
           "tile_out2", "tile_out3", "tile_out4", "tile_out5", "row_sum", "row_max", "row_min",
           "dec_all", "enc_all", "rnd_all"]


@_jit
def fill_all(a, v):
    f = a.reshape(a.size)
    for i in range(f.size):
        f[i] = v


@_jit
def copy_all(src, dst):
    s = src.reshape(src.size)
    d = dst.reshape(dst.size)
    for i in range(d.size):
        d[i] = s[i]


@_jit
def acc_all(c, p):
    cf = c.reshape(c.size)
    pf = p.reshape(p.size)
    for i in range(cf.size):
        cf[i] = cf[i] + pf[i]


@_jit
def tile_in2(src, dst, fill, s0, s1, r0, r1, c0, c1):
    for i in range(dst.shape[0]):
        for j in range(dst.shape[1]):
            dst[i, j] = ld2(src, fill, s0 + i * r0 + j * c0, s1 + i * r1 + j * c1)


@_jit
def tile_in3(src, dst, fill, s0, s1, s2, r0, r1, r2, c0, c1, c2):
    for i in range(dst.shape[0]):
        for j in range(dst.shape[1]):
            dst[i, j] = ld3(src, fill, s0 + i * r0 + j * c0, s1 + i * r1 + j * c1, s2 + i * r2 + j * c2)


@_jit
def tile_in4(src, dst, fill, s0, s1, s2, s3, r0, r1, r2, r3, c0, c1, c2, c3):
    for i in range(dst.shape[0]):
        for j in range(dst.shape[1]):
            dst[i, j] = ld4(src, fill, s0 + i * r0 + j * c0, s1 + i * r1 + j * c1, s2 + i * r2 + j * c2,
                            s3 + i * r3 + j * c3)


@_jit
def tile_in5(src, dst, fill, s0, s1, s2, s3, s4, r0, r1, r2, r3, r4, c0, c1, c2, c3, c4):
    for i in range(dst.shape[0]):
        for j in range(dst.shape[1]):
            dst[i, j] = ld5(src, fill, s0 + i * r0 + j * c0, s1 + i * r1 + j * c1, s2 + i * r2 + j * c2,
                            s3 + i * r3 + j * c3, s4 + i * r4 + j * c4)


@_jit
def tile_out2(src, dst, s0, s1, r0, r1, c0, c1):
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            st2(dst, s0 + i * r0 + j * c0, s1 + i * r1 + j * c1, src[i, j])


@_jit
def tile_out3(src, dst, s0, s1, s2, r0, r1, r2, c0, c1, c2):
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            st3(dst, s0 + i * r0 + j * c0, s1 + i * r1 + j * c1, s2 + i * r2 + j * c2, src[i, j])


@_jit
def tile_out4(src, dst, s0, s1, s2, s3, r0, r1, r2, r3, c0, c1, c2, c3):
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            st4(dst, s0 + i * r0 + j * c0, s1 + i * r1 + j * c1, s2 + i * r2 + j * c2, s3 + i * r3 + j * c3,
                src[i, j])


@_jit
def tile_out5(src, dst, s0, s1, s2, s3, s4, r0, r1, r2, r3, r4, c0, c1, c2, c3, c4):
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            st5(dst, s0 + i * r0 + j * c0, s1 + i * r1 + j * c1, s2 + i * r2 + j * c2, s3 + i * r3 + j * c3,
                s4 + i * r4 + j * c4, src[i, j])


@_jit
def row_sum(src, dst, clear):
    for j in range(src.shape[0]):
        a = src.dtype.type(0)
        for k in range(src.shape[1]):
            a = a + src[j, k]
        dst[j] = a if clear else dst[j] + a


@_jit
def row_max(src, dst, clear):
    for j in range(src.shape[0]):
        a = src.dtype.type(-np.inf)
        for k in range(src.shape[1]):
            a = fmax(a, src[j, k])
        dst[j] = a if clear else fmax(dst[j], a)


@_jit
def row_min(src, dst, clear):
    for j in range(src.shape[0]):
        a = src.dtype.type(np.inf)
        for k in range(src.shape[1]):
            a = fmin(a, src[j, k])
        dst[j] = a if clear else fmin(dst[j], a)


@_jit
def dec_all(bits, dst, bf):
    s = bits.reshape(bits.size)
    d = dst.reshape(dst.size)
    if bf:
        for i in range(d.size):
            d[i] = dec_bf16(s[i])
    else:
        for i in range(d.size):
            d[i] = dec_f16(s[i])


@_jit
def enc_all(src, bits, bf):
    s = src.reshape(src.size)
    d = bits.reshape(bits.size)
    if bf:
        for i in range(d.size):
            d[i] = enc_bf16(s[i])
    else:
        for i in range(d.size):
            d[i] = enc_f16(s[i])


@_jit
def rnd_all(src, dst, bf):
    s = src.reshape(src.size)
    d = dst.reshape(dst.size)
    if bf:
        for i in range(d.size):
            d[i] = rnd_bf16(s[i])
    else:
        for i in range(d.size):
            d[i] = rnd_f16(s[i])
