"""The CPU target's whole-tile helpers for 16-bit floats (``prelude_tiles.dec_all``/``enc_all``/``rnd_all``,
``prelude.dec_f16``/``rnd_f16``): fp16/bf16 tiles between global tensors and on-chip buffers, on-chip
conversions and fills, bit for bit the interpreter's on shapes no tile divides, with every kind of value
(random bit patterns: subnormals, infinities, NaN)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim as tilelang
import tilesim.language as T
from tilesim.backends.cpu import available
from tilesim.kernel import JITKernel

pytestmark = pytest.mark.skipif(not available(), reason="numba and scipy are not installed")


@tilelang.jit(out_idx=[-4, -3, -2, -1])
def half_walk(dtype, other, bm=8, bn=4):
    M = T.dynamic("m")
    N = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((M, 2, N), dtype), C: T.Tensor((M, N), dtype), D: T.Tensor((M, N), dtype),
             E: T.Tensor((M, N), other), F: T.Tensor((M, 2, N), dtype)):
        with T.Kernel(T.ceildiv(M, bm), T.ceildiv(N, bn), threads=128) as (bx, by):
            s = T.alloc_shared((bm, bn), dtype)
            f = T.alloc_fragment((bm, bn), "float32")
            g = T.alloc_fragment((bm, bn), "float32")
            h = T.alloc_fragment((bm, bn), dtype)
            o = T.alloc_shared((bm, bn), other)
            T.copy(A[bx * bm:(bx + 1) * bm, 1, by * bn:(by + 1) * bn], s)  # global 16-bit -> tile of its dtype
            T.copy(A[bx * bm:(bx + 1) * bm, 0, by * bn:(by + 1) * bn], g)  # global 16-bit -> float32 tile
            T.copy(s, f)  # on-chip, widening: a plain copy
            for i, j in T.Parallel(bm, bn):
                f[i, j] = f[i, j] * 1.3 + g[i, j]
            T.copy(f, h)  # on-chip, narrowing: rounded
            T.copy(h, C[bx * bm:(bx + 1) * bm, by * bn:(by + 1) * bn])  # tile of the dtype -> global
            T.copy(f, D[bx * bm:(bx + 1) * bm, by * bn:(by + 1) * bn])  # float32 tile -> global: one rounding
            T.copy(h, o)  # between the two 16-bit formats
            T.copy(o, E[bx * bm:(bx + 1) * bm, by * bn:(by + 1) * bn])
            T.fill(h, 0.1)  # a fill of a 16-bit tile: the rounded value
            T.copy(h, F[bx * bm:(bx + 1) * bm, 1, by * bn:(by + 1) * bn])
    return main


def _bits(a):
    return a.view(np.uint16)


def _same(a, b):
    """Bit for bit, except that a NaN only has to be a NaN of the same sign (NaN payloads are not kept by
    either target's float32 arithmetic)."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    nan = np.isnan(a32)
    np.testing.assert_array_equal(nan, np.isnan(b32))
    np.testing.assert_array_equal(np.signbit(a32[nan]), np.signbit(b32[nan]))
    np.testing.assert_array_equal(_bits(a)[~nan], _bits(b)[~nan])


@pytest.mark.parametrize("dtype, other", [("float16", "bfloat16"), ("bfloat16", "float16")])
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_half_tiles_match_the_interpreter(dtype, other, data):
    k = half_walk(dtype, other)
    kc = JITKernel(k.prim_func, out_idx=k.out_idx, target="cpu")
    ki = JITKernel(k.prim_func, out_idx=k.out_idx, target="interp")
    assert kc.program.fallback is None
    src = kc.get_kernel_source()
    for helper in ("tile_in(", "tile_out(", "dec_all(", "enc_all(", "rnd_all(", "copy_all(",
                   "fill_all("):
        assert helper in src, helper
    assert "T_f16[" not in src and "enc_f16(" not in src, "no element loop converts 16-bit values"
    m, n = data.draw(st.integers(1, 21)), data.draw(st.integers(1, 11))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    if data.draw(st.booleans()):  # every bit pattern: subnormals, infinities, NaN
        a = rng.integers(0, 2**16, size=(m, 2, n), dtype=np.uint16).view(tilelang.dtypes.np_dtype(dtype))
    else:
        a = (rng.standard_normal((m, 2, n)) * 10.0 ** rng.integers(-6, 5)).astype(np.float32)
        a = a.astype(tilelang.dtypes.np_dtype(dtype))
    for got, want in zip(kc(a), ki(a)):
        _same(got, want)


def test_dec_f16_is_the_decode_table():
    """Every fp16 bit pattern decodes to the table's float32, bit for bit; ``rnd_f16`` is the table of the
    encoding on random, edge and tie values."""
    import numba

    from tilesim.backends.cpu import narrow, prelude

    @numba.njit
    def decode_all(bits):
        out = np.empty(bits.size, np.float32)
        for i in range(bits.size):
            out[i] = prelude.dec_f16(bits[i])
        return out

    @numba.njit
    def round_all(x):
        out = np.empty(x.size, np.float32)
        for i in range(x.size):
            out[i] = prelude.rnd_f16(x[i])
        return out

    table = narrow.decode_table("float16")
    np.testing.assert_array_equal(decode_all(np.arange(2**16, dtype=np.uint16)).view(np.uint32), table.view(np.uint32))
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.standard_normal(20000).astype(np.float32) * np.float32(10.0) ** rng.integers(-9, 6, 20000),
                        table[np.isfinite(table)], (table[:-1] + table[1:])[np.isfinite(table[:-1])] / 2,
                        np.array([np.inf, -np.inf, np.nan, 65520.0, -65520.0, 1e-8], np.float32)]).astype(np.float32)
    want = np.array([table[narrow.encode_bits(v, *narrow.encode_args("float16"))] for v in x[:2000]], np.float32)
    np.testing.assert_array_equal(round_all(x[:2000]).view(np.uint32), want.view(np.uint32))
    want = x.astype(np.float16).astype(np.float32)
    got = round_all(x)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))
