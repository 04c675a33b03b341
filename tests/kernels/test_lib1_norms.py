"""Norms, GELU, fused LayerNorm+GELU and softmax (kernels/norms.py) against float64 NumPy references.

Tolerances: the output dtype's defaults from ``tilesim.testing.compare`` (one rounding at the store plus
fp32 reductions over ≤ 300 elements). NaN policy (module docstring): a NaN stays in its row.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from kernels import norms
from tilesim import dtypes as dt
from tilesim.ir import nodes as N
from tilesim.testing.compare import assert_matches_reference

DTYPES = ("float32", "float16", "bfloat16")
LARGE = {"float32": 1e15, "bfloat16": 1e15, "float16": 3e4}


def _x(seed, M, N, dtype, edges=True):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((M, N)) * 2.0 + 0.5
    if edges and M > 1:
        x[1] = 0.0
    if edges and M > 2:
        x[2] = rng.standard_normal(N) * LARGE[dtype] / 4
    return x.astype(dt.np_dtype(dtype))


def _w(seed, N, dtype, offset):
    return (np.random.default_rng(seed).standard_normal(N) * 0.2 + offset).astype(dt.np_dtype(dtype))


rows = dict(M=st.integers(1, 20), N=st.integers(1, 300), dtype=st.sampled_from(DTYPES),
            block_M=st.sampled_from([1, 2, 4]), block_N=st.sampled_from([None, 16, 64, 1024]))


@settings(max_examples=8)
@given(**rows)
def test_layernorm(M, N, dtype, block_M, block_N):
    k = norms.layer_norm(M, N, block_M=block_M, block_N=block_N, dtype=dtype)
    ins = (_x(M, M, N, dtype), _w(1, N, dtype, 1.0), _w(2, N, dtype, 0.0))
    Y = assert_matches_reference(k, ins, norms.ref_layernorm)[0]
    if M > 1:
        assert np.array_equal(Y[1], ins[2])  # zero row: y = b exactly


@settings(max_examples=8)
@given(**rows)
def test_rmsnorm(M, N, dtype, block_M, block_N):
    k = norms.rms_norm(M, N, block_M=block_M, block_N=block_N, dtype=dtype)
    ins = (_x(N, M, N, dtype), _w(1, N, dtype, 1.0))
    Y = assert_matches_reference(k, ins, norms.ref_rmsnorm)[0]
    if M > 1:
        assert np.all(Y[1].astype(np.float32) == 0)


@settings(max_examples=6)
@given(M=st.integers(1, 60), N=st.integers(1, 300), dtype=st.sampled_from(DTYPES),
       tiles=st.sampled_from([(8, 64), (16, 32), (32, 256)]))
def test_gelu(M, N, dtype, tiles):
    x = _x(M + N, M, N, dtype)
    if M > 3:
        x[3] = np.linspace(-12, 12, N).astype(x.dtype)  # both saturated tails and the curved middle
    k = norms.gelu(M, N, block_M=tiles[0], block_N=tiles[1], dtype=dtype)
    assert_matches_reference(k, (x,), norms.ref_gelu)


@settings(max_examples=6)
@given(**rows)
def test_layernorm_gelu_fused_and_unfused(M, N, dtype, block_M, block_N):
    ins = (_x(M * N, M, N, dtype), _w(1, N, dtype, 1.0), _w(2, N, dtype, 0.0))
    fused = norms.layer_norm_gelu(M, N, block_M=block_M, block_N=block_N, dtype=dtype)
    unfused = norms.layer_norm_gelu_unfused(M, N, block_M=block_M, block_N=block_N, gelu_block_M=8, gelu_block_N=64,
                                            dtype=dtype)
    yf = assert_matches_reference(fused, ins, norms.ref_layernorm_gelu)[0]
    yu = assert_matches_reference(unfused, ins, norms.ref_layernorm_gelu_unfused)[0]
    # the two differ only by the rounding of h between the kernels
    assert_matches_reference(lambda *a: yu, ins, lambda *a: yf)


def test_fusion_structure():
    """The fused program is one launch; the two-kernel program is two launches around a workspace."""
    f = norms.layer_norm_gelu(64, 128)
    u = norms.layer_norm_gelu_unfused(64, 128)
    count = lambda k: sum(isinstance(s, N.Launch) for s in k.prim_func.body)  # noqa: E731
    assert count(f) == 1 and count(u) == 2
    spec_f, spec_u = (__import__("kernels.registry", fromlist=["get"]).get(n)
                      for n in ("layernorm_gelu", "layernorm_gelu_unfused"))
    p = dict(M=4096, N=7168, dtype="bfloat16")
    assert spec_u.bytes(**p) - spec_f.bytes(**p) == 2 * 4096 * 7168 * 2  # h written and read back


@settings(max_examples=8)
@given(M=st.integers(1, 12), N=st.integers(1, 300), dtype=st.sampled_from(DTYPES),
       block_M=st.sampled_from([1, 4]), block_N=st.sampled_from([None, 16, 64, 512]))
def test_softmax(M, N, dtype, block_M, block_N):
    x = _x(M + 3 * N, M, N, dtype, edges=False)
    if M > 1:
        x[1, ::2] = -np.inf  # -inf entries have probability 0 (first chunk may be all -inf)
        x[1, -1] = 1.0
    if M > 2:
        x[2] = np.random.default_rng(N).standard_normal(N) * LARGE[dtype] / 10
    k = norms.softmax(M, N, block_M=block_M, block_N=block_N, dtype=dtype)
    Y = assert_matches_reference(k, (x,), norms.ref_softmax)[0]
    assert np.allclose(Y.astype(np.float64).sum(axis=1), 1.0, atol=N * 1e-2 if dtype != "float32" else 1e-5)


def test_chunked_variance_is_accurate():
    """Rows with a large common offset: per-chunk statistics merged with Chan's update keep the fp32
    variance accurate (a one-pass E[x²] - mean² would lose every digit here), over 5 uneven chunks."""
    M, N = 3, 300
    rng = np.random.default_rng(9)
    x = (1e4 + rng.standard_normal((M, N))).astype(np.float32)
    ins = (x, _w(1, N, "float32", 1.0), _w(2, N, "float32", 0.0))
    y = norms.layer_norm(M, N, block_M=2, block_N=64, dtype="float32")(*ins)
    assert np.allclose(y, norms.ref_layernorm(*ins), rtol=1e-3, atol=1e-3)


def test_tiles_must_be_powers_of_two():
    """Real TileLang reduces a row over a power-of-two number of threads: other tile sizes are refused."""
    for kw in (dict(block_M=3), dict(block_N=1000)):
        for f in (norms.layer_norm, norms.rms_norm, norms.layer_norm_gelu, norms.layer_norm_gelu_unfused,
                  norms.softmax):
            with pytest.raises(ValueError):
                f(8, 7168, **kw)
    # a chunk never exceeds the row rounded up to a power of two (N = 200 -> 256)
    assert norms._row_tiles(200, 2, 4096) == (2, 256)


def test_nan_policy():
    """A NaN poisons its own row only; an all -inf softmax row is NaN like NumPy's."""
    M, N = 5, 100
    x = _x(0, M, N, "float32", edges=False)
    x[2, 17] = np.nan
    ins = (x, _w(1, N, "float32", 1.0), _w(2, N, "float32", 0.0))
    for k, ref, args in ((norms.layer_norm(M, N, block_M=2, dtype="float32"), norms.ref_layernorm, ins),
                         (norms.rms_norm(M, N, block_M=2, dtype="float32"), norms.ref_rmsnorm, ins[:2]),
                         (norms.softmax(M, N, block_M=2, dtype="float32"), norms.ref_softmax, ins[:1]),
                         (norms.softmax(M, N, block_M=2, block_N=32, dtype="float32"), norms.ref_softmax, ins[:1])):
        Y = assert_matches_reference(k, args, ref)[0]
        assert np.isnan(Y[2]).all() and np.isfinite(np.delete(Y, 2, axis=0)).all()
    x2 = x.copy()
    x2[2] = -np.inf
    for block_N in (None, 32):
        Y = norms.softmax(M, N, block_M=2, block_N=block_N, dtype="float32")(x2)
        assert np.isnan(Y[2]).all() and np.isfinite(np.delete(Y, 2, axis=0)).all()


def test_serial_equals_batched():
    ins = (_x(7, 9, 70, "bfloat16"), _w(1, 70, "bfloat16", 1.0), _w(2, 70, "bfloat16", 0.0))
    cases = [(norms.layer_norm(9, 70, block_M=4), ins), (norms.rms_norm(9, 70, block_M=4), ins[:2]),
             (norms.gelu(9, 70, block_M=8, block_N=32), ins[:1]),
             (norms.layer_norm_gelu(9, 70, block_M=4), ins),
             (norms.layer_norm_gelu_unfused(9, 70, block_M=4, gelu_block_M=8, gelu_block_N=32), ins),
             (norms.softmax(9, 70, block_M=4), ins[:1]), (norms.softmax(9, 70, block_M=4, block_N=32), ins[:1])]
    for k, args in cases:
        a = k(*args)
        b = k.run(*args, options=tilesim.InterpOptions(mode="serial"))
        assert np.array_equal(a.view(np.uint16), b.view(np.uint16)), k
