"""The compiled CPU target (``target="cpu"``) against the interpreter, the reference meaning.

Bitwise where the interpreter's order of operations is the same (elementwise arithmetic, conversions,
narrow-float rounding, atomics in block order, max reductions); sums within float32 rounding. The registry
kernels run on it through the ``cpu`` executor (``tests/test_registry_kernels.py``).
"""

import functools

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
from tests.backends import cpu_kernels as K
from tilesim import dtypes as dt
from tilesim.backends.cpu import available, narrow
from tilesim.errors import KernelRuntimeError
from tilesim.kernel import JITKernel

pytestmark = pytest.mark.skipif(not available(), reason="numba and scipy are not installed")

NARROW = ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"]


def on(kernel, target):
    return JITKernel(kernel.prim_func, out_idx=kernel.out_idx, target=target)


def bits(x):
    x = np.asarray(x)
    return x.view(np.uint8 if x.dtype.itemsize == 1 else np.uint16 if x.dtype.itemsize == 2 else np.uint32)


@pytest.fixture(scope="module")
def prelude():
    from tilesim.backends.cpu import prelude as p  # imports numba: only where it is installed

    return p


def _map_compiled(fn, x):
    import numba

    @numba.njit
    def apply(f, arr):
        out = np.empty(arr.size, np.int64)
        for i in range(arr.size):
            out[i] = f(arr[i])
        return out

    return apply(fn, np.ascontiguousarray(x, dtype=np.float32))


@pytest.mark.parametrize("dtype", NARROW)
def test_encode_matches_ml_dtypes(prelude, dtype):
    """float32 -> narrow bits equal to tilesim.dtypes.convert (ml_dtypes, fp8/fp4 saturating) on every
    representable value, every midpoint between neighbours, edge values and random floats of all scales."""
    rng = np.random.default_rng(7)
    table = narrow.decode_table(dtype)
    finite = np.unique(table[np.isfinite(table)])
    mids = ((finite[1:].astype(np.float64) + finite[:-1]) / 2).astype(np.float32)
    scales = rng.choice(np.float32([1e-9, 1e-4, 1e-2, 1, 1e2, 1e4, 1e6]), 4000)
    edge = np.float32([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 65504, 65519.99, 65520, 65536, 3e38,
                       448, 464, 480, 57344, 61440, 6, 7, 1e-45, -1e-45])
    x = np.concatenate([finite, mids, -mids, rng.standard_normal(4000).astype(np.float32) * scales, edge])
    want = dt.convert(x, dtype).view(narrow.STORAGE[dtype]).astype(np.int64)
    if dtype == "float4_e2m1fn":
        want &= 0xF
    args = narrow.encode_args(dtype)
    got = np.array([prelude.enc(np.float32(v), *args) for v in x])
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(x[i], got[i], want[i]) for i in bad[:5]]
    fast = {"float16": prelude.enc_f16, "bfloat16": prelude.enc_bf16}.get(dtype)
    if fast is not None:  # the bit-arithmetic encoders the generated code uses for fp16/bf16
        if dtype == "bfloat16":  # NaN payloads survive a bf16 -> fp32 -> bf16 round trip (dtypes.convert)
            pay = np.uint32([0x7FC10000, 0xFF810000, 0x7F800001, 0xFFC00000]).view(np.float32)
            x = np.concatenate([x, pay])
            want = np.concatenate([want, dt.convert(pay, dtype).view(np.uint16).astype(np.int64)])
        got = _map_compiled(fast, x)  # inside compiled code: Python floats would quiet signalling NaNs
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, [(x[i], hex(got[i]), hex(want[i])) for i in bad[:5]]


@pytest.mark.parametrize("src,dst", [("float32", "float16"), ("float32", "bfloat16"), ("float16", "float8_e4m3fn"),
                                     ("bfloat16", "float8_e5m2"), ("float32", "float32")])
@settings(max_examples=10, deadline=None)
@given(m=st.integers(1, 200), seed=st.integers(0, 2**16))
def test_narrow_arithmetic_bitwise(src, dst, m, seed):
    rng = np.random.default_rng(seed)
    scale = np.float32(rng.choice([1e-3, 1, 300, 1e5]))
    a = (rng.standard_normal(m).astype(np.float32) * scale).astype(dt.np_dtype(src))
    b = (rng.standard_normal(m).astype(np.float32) * scale).astype(dt.np_dtype(src))
    k = K.cast_ops(src, dst)
    want, got = on(k, "interp")(a, b), on(k, "cpu")(a, b)
    assert on(k, "cpu").program.fallback is None
    np.testing.assert_array_equal(bits(got), bits(want))


@pytest.mark.parametrize("src,dst", [("float32", "int8"), ("float16", "int32"), ("float32", "uint8"),
                                     ("bfloat16", "int16")])
def test_float_to_int_saturates(src, dst):
    x = np.float32([0.0, -0.0, 1.7, -1.7, 127.9, 128.5, -129.5, 255.5, 300, -300, 1e9, -1e9, np.inf, -np.inf,
                    np.nan, 40000.0]).astype(dt.np_dtype(src))
    k = K.to_int(src, dst)
    np.testing.assert_array_equal(on(k, "cpu")(x), on(k, "interp")(x))


def test_integer_division_semantics_and_zero_divisor():
    rng = np.random.default_rng(3)
    a = rng.integers(-1000, 1000, 77).astype(np.int32)
    b = rng.integers(1, 30, 77).astype(np.int32) * rng.choice(np.int32([-1, 1]), 77)
    k = K.int_div()
    np.testing.assert_array_equal(on(k, "cpu")(a, b), on(k, "interp")(a, b))
    b[5] = 0
    with pytest.raises(KernelRuntimeError, match="division by zero"):
        on(k, "cpu")(a, b)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32"])
def test_atomics_apply_in_block_order(dtype):
    rng = np.random.default_rng(11)
    m, h = 1000, 7
    idx = rng.integers(0, h, m).astype(np.int32)
    v = (rng.standard_normal(m) * 10).astype(dt.np_dtype(dtype))
    k = K.scatter_add(dtype=dtype)
    outs = []
    for target in ("interp", "cpu"):
        out = np.zeros(h, dtype=dt.np_dtype(dtype))
        on(k, target)(idx, v, out)
        outs.append(out)
    np.testing.assert_array_equal(bits(outs[1]), bits(outs[0]))


@settings(max_examples=8, deadline=None)
@given(m=st.integers(1, 37), seed=st.integers(0, 2**16))
def test_row_reduce_edge_tiles(m, seed):
    a = np.random.default_rng(seed).standard_normal((m, 48)).astype(np.float16)
    k = K.row_reduce()
    want, got = on(k, "interp")(a), on(k, "cpu")(a)
    np.testing.assert_array_equal(got[:, 0], want[:, 0])  # max: bitwise
    np.testing.assert_allclose(got[:, 1], want[:, 1], rtol=1e-6, atol=1e-5)  # sum: summation order


def test_unsupported_program_falls_back_to_interpreter():
    k = K.viewed_bits()
    kc = on(k, "cpu")
    assert "view of another buffer" in kc.program.fallback
    x = np.random.default_rng(0).standard_normal((37, 4)).astype(np.float32)
    np.testing.assert_array_equal(kc(x), on(k, "interp")(x))
    np.testing.assert_array_equal(kc(x), x.view(np.int32))


def test_a_reshaped_tile_is_a_view_of_its_root():
    k = K.reshaped_tile()
    kc = on(k, "cpu")
    assert kc.program.fallback is None and ".reshape((64,))" in kc.program.source
    x = np.random.default_rng(0).standard_normal((37, 4)).astype(np.float32)
    np.testing.assert_array_equal(kc(x), on(k, "interp")(x))
    np.testing.assert_array_equal(kc(x), x * 2)


@pytest.mark.parametrize("n", [1, 31, 100])
def test_per_thread_code_keeps_values_across_barriers(n):
    """Thread-local values (``mine``, ``v``) live across T.sync_threads; the exclusive scan per block
    matches the interpreter's lock-step run bit for bit (the same additions in the same order)."""
    k = K.thread_scan(n)
    kc = on(k, "cpu")
    assert kc.program.fallback is None, kc.program.fallback
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    np.testing.assert_array_equal(kc(x), on(k, "interp")(x))


def test_checking_options_run_on_the_interpreter():
    """oob='error' is an interpreter check: the CPU target hands such calls to it."""
    k = K.cast_ops("float32", "float32")
    a = np.ones(10, np.float32)
    kc = on(k, "cpu")
    with pytest.raises(KernelRuntimeError):
        kc.run(a, a, np.empty(10, np.float32), options=tilesim.InterpOptions(oob="error"))


def test_device_assert_is_a_located_error():
    k = on(K.checked_copy(), "cpu")
    x = np.arange(40, dtype=np.float32)
    np.testing.assert_array_equal(k(x), x)
    x[33] = -1
    with pytest.raises(KernelRuntimeError, match="negative input") as info:
        k(x)
    assert "cpu_kernels.py" in str(info.value)


def test_rule_tables_cover_the_ir():
    """Every IR node class has a CPU rule (compiled, or an Unsupported refusal that falls back)."""
    from tilesim.backends.cpu.codegen import EXPR_RULES, STMT_RULES

    EXPR_RULES.check_coverage()
    STMT_RULES.check_coverage()


def test_source_and_target_name():
    kc = on(K.cast_ops(), "cpu")
    assert "def launch(" in kc.get_kernel_source()
    assert tilesim.backends.get_target("numba-cpu").name == "cpu"
    assert ml_dtypes.bfloat16  # the narrow types are ml_dtypes on both sides


def _library_cases():
    from kernels.registry import all_specs
    from tilesim.backends.cuda.check import library_cases

    return {c.name: c for c in library_cases(all_specs(), check_smem=False) if c.kernel is not None}


LIBRARY = _library_cases()
#: library kernels the CPU target does not compile yet (they run on the interpreter): why
LIBRARY_FALLBACK: dict = {}


@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_library_kernel_matches_interpreter(name):
    """Every library kernel at its first test shape: the CPU target against the interpreter (the CUDA
    checks' relative-norm tolerances), compiled unless listed in LIBRARY_FALLBACK."""
    from tilesim.backends.cuda.check import run_case

    case = LIBRARY[name]
    twin = on(case.kernel, "cpu")
    row = run_case(case, np.random.default_rng(0), twin=twin)
    assert row["ok"], row
    fb = twin.program.fallback
    if name in LIBRARY_FALLBACK:
        assert fb is not None and LIBRARY_FALLBACK[name] in fb, fb
    else:
        assert fb is None, fb


def test_fragment_registers_per_thread():
    """A fragment touched only element by element in per-thread code is each thread's own (compiled too)."""
    from tests.interp.test_simt import fragment_registers

    kc = on(fragment_registers(100), "cpu")
    assert kc.program.fallback is None, kc.program.fallback
    a = np.arange(100, dtype=np.int32) * 3
    np.testing.assert_array_equal(kc(a), a * 10 + np.arange(100) % 64)


@pytest.mark.parametrize("name, ref", [("exp2f", np.exp2), ("expf", np.exp)])
def test_exp_is_within_one_ulp(prelude, name, ref):
    """The vectorising float32 exp2/exp of generated code: within 1 ulp of the correctly rounded value on random
    arguments of every scale, the subnormal and overflow edges; infinities, NaN, zero and exact powers of two
    exact."""
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.uniform(-160, 130, 300_000), rng.uniform(-1, 1, 100_000), rng.uniform(-110, 90, 200_000),
                        rng.uniform(-151, -125, 50_000),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, -149.0, -149.5, -150.0, -126.0, 127.99, 128.0,
                         88.72, 88.73, -103.0, -87.5, 200.0, -200.0, 1e30, -1e30]]).astype(np.float32)
    got = _map_exp(prelude, name, x)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        want = ref(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    ulps = np.abs(got[ok].view(np.int32).astype(np.int64) - want[ok].view(np.int32).astype(np.int64))
    assert ulps.max() <= 1, (x[ok][ulps > 1][:5], got[ok][ulps > 1][:5], want[ok][ulps > 1][:5])
    assert (ulps > 0).mean() < 0.1  # near-minimax: most results correctly rounded
    special = np.array([0.0, -0.0, np.inf, -np.inf, -1e30, 1e30], np.float32)
    np.testing.assert_array_equal(_map_exp(prelude, name, special), ref(special.astype(np.float64)).astype(np.float32))
    if name == "exp2f":
        ints = np.arange(-149, 128, dtype=np.float32)
        np.testing.assert_array_equal(_map_exp(prelude, name, ints), np.exp2(ints.astype(np.float64)).astype(np.float32))


def test_exp_polynomial_error_bound():
    """prelude._Q (float32 coefficients of q(r) ~ expm1(r)/r) keeps 1 + r q(r) within 2**-26 of e**r, relative, on
    |r| <= 0.35 (in exact arithmetic: what the 1-ulp result above relies on)."""
    from tilesim.backends.cpu import prelude as p

    r = np.linspace(-0.35, 0.35, 200_001)
    q = np.zeros_like(r)
    for c in reversed(p._Q):
        q = q * r + c
    assert np.max(np.abs((1 + r * q) / np.exp(r) - 1)) < 2.0 ** -26  # 2**-26.5 measured: ~0.2 ulp


def _map_exp(prelude, name, x):
    """``prelude.<name>`` over ``x`` in a compiled loop (they are intrinsics: called, not passed)."""
    import numba

    exp2f, expf = prelude.exp2f, prelude.expf

    @numba.njit
    def apply2(arr):
        out = np.empty(arr.size, np.float32)
        for i in range(arr.size):
            out[i] = exp2f(arr[i])
        return out

    @numba.njit
    def apply_e(arr):
        out = np.empty(arr.size, np.float32)
        for i in range(arr.size):
            out[i] = expf(arr[i])
        return out

    return (apply2 if name == "exp2f" else apply_e)(np.ascontiguousarray(x, dtype=np.float32))


@pytest.mark.parametrize("n", [31, 32, 48, 100])
@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**16), specials=st.booleans())
def test_row_max_in_lanes_equals_the_interpreter(n, seed, specials):
    """Rows of 32+ elements fold in 16 lanes (prelude_tiles._row_max): the same values as the interpreter's
    max, NaN and infinities included (a NaN anywhere in a row makes its max NaN)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((9, n)).astype(np.float32)
    if specials:
        for v in (np.nan, np.inf, -np.inf, -0.0):
            a[rng.integers(0, 9), rng.integers(0, n)] = v
    k = K.row_reduce(N=n, dtype="float32")
    want, got = on(k, "interp")(a), on(k, "cpu")(a)
    np.testing.assert_array_equal(got[:, 0], want[:, 0])
    np.testing.assert_array_equal(got[:, 0], a.max(axis=1))
    if not specials:  # row sums in lanes: another order than NumPy's, equal within float32 rounding
        np.testing.assert_allclose(got[:, 1], a.astype(np.float64).sum(axis=1), rtol=0, atol=4e-6 * n)


@functools.cache
def _vector_folds():
    """``f(row, nb) -> (max, min, sum)`` of ``row[:16 * nb]`` through prelude_simd's intrinsics (a C function:
    they take the element pointer a helper gets)."""
    import ctypes

    import numba
    from numba.core import types

    from tilesim.backends.cpu.prelude_simd import vmax16, vmin16, vsum16

    f32p = types.CPointer(types.float32)

    @numba.cfunc(types.void(f32p, types.int64, f32p))
    def folds(p, nb, out):
        out[0] = vmax16(p, 0, nb)
        out[1] = vmin16(p, 0, nb)
        out[2] = vsum16(p, 0, nb)

    fn = folds.ctypes

    def call(row, nb):
        row = np.ascontiguousarray(row, dtype=np.float32)
        out = np.empty(3, np.float32)
        fn(row.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), nb, out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
        return out
    return call


@pytest.mark.parametrize("n", [16, 32, 47, 64, 100])
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**16), zeros=st.booleans())
def test_vector_folds_equal_the_serial_folds(n, seed, zeros):
    """prelude_simd's 16-lane folds (explicit LLVM vectors) against a serial fold of the same elements:
    max/min the same value (NaN where the row has one; +0/-0 ties compare equal), sums within rounding."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((6, n)).astype(np.float32)
    if zeros:
        a[rng.random(a.shape) < 0.3] = 0.0
        a[rng.random(a.shape) < 0.2] = -0.0
    a[1, rng.integers(0, n)] = np.nan
    a[2, rng.integers(0, n)] = np.inf
    a[3, rng.integers(0, n)] = -np.inf
    nb = n // 16
    got = np.array([_vector_folds()(row, nb) for row in a])
    head = a[:, :nb * 16]
    np.testing.assert_array_equal(got[:, 0], head.max(axis=1))
    np.testing.assert_array_equal(got[:, 1], head.min(axis=1))
    ok = ~np.isnan(head).any(axis=1) & ~np.isinf(head).any(axis=1)
    np.testing.assert_allclose(got[ok, 2], head[ok].astype(np.float64).sum(axis=1), rtol=0, atol=4e-6 * n)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@settings(max_examples=6, deadline=None)
@given(rows=st.integers(1, 4), cols=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_vector_transpose_of_8x8_blocks(dtype, rows, cols, seed):
    """prelude_simd.vtranspose8 over every 8x8 block of a (8 rows) x (8 cols) matrix: its transpose, bit for bit
    (mm_acc's "B transposed" products go through it)."""
    import numba

    from tilesim.backends.cpu.prelude_simd import vtranspose8

    @numba.njit
    def transpose(b):
        n0, n1 = b.shape
        t = np.empty((n1, n0), b.dtype)
        flat_b, flat_t = b.reshape(n0 * n1), t.reshape(n0 * n1)
        for i in range(0, n0, 8):
            for j in range(0, n1, 8):
                vtranspose8(flat_b, i * n1 + j, n1, flat_t, j * n0 + i, n0)
        return t

    b = np.random.default_rng(seed).standard_normal((8 * rows, 8 * cols)).astype(dtype)
    b.flat[::7] = np.nan
    np.testing.assert_array_equal(transpose(b), b.T)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 20), n=st.integers(1, 20), k=st.integers(0, 20), ta=st.booleans(), tb=st.booleans(),
       acc=st.booleans(), seed=st.integers(0, 2**16))
def test_gemm_into_is_the_product_plus_the_accumulator(dtype, m, n, k, ta, tb, acc, seed):
    """prelude_blas.gemm_into (BLAS gemm, beta 0 or 1, into the tile): every transpose form, k = 0 included, a
    NaN-filled accumulator overwritten when not accumulating."""
    import numba

    from tilesim.backends.cpu.prelude_blas import gemm_into

    @numba.njit
    def run(a, b, c, ta, tb, acc):
        gemm_into(a, b, c, ta, tb, acc)

    rng = np.random.default_rng(seed)
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
    c = rng.standard_normal((m, n)).astype(dtype) if acc else np.full((m, n), np.nan, dtype)
    want = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64) + (c if acc else 0)
    run(a, b, c, ta, tb, acc)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5 * (k + 1))


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("base2", [True, False])
def test_exp_affine_of_a_vector_is_the_element_formula(mode, base2):
    """exp_affine on a 1-D tile (prelude_ew._exp_column: one vectorised loop) gives, bit for bit, the per-element
    formula of a row loop: f(x*a - r*b), f(x - r), f((x - r)*a)."""
    import numba

    from tilesim.backends.cpu import prelude
    from tilesim.backends.cpu.prelude_tiles import exp_affine

    exp2f, expf = prelude.exp2f, prelude.expf

    @numba.njit
    def helper(d, x, r, a, b, mode, base2):
        exp_affine(d, x, r, a, b, mode, base2, False)

    @numba.njit
    def formula(d, x, r, a, b, mode, base2):
        for i in range(d.size):
            t = x[i] * a - r[i] * b if mode == 0 else (x[i] - r[i] if mode == 1 else (x[i] - r[i]) * a)
            d[i] = exp2f(t) if base2 else expf(t)

    rng = np.random.default_rng(mode)
    x = (rng.standard_normal(67) * 4).astype(np.float32)
    x[3] = -np.inf
    r = (rng.standard_normal(67) * 2).astype(np.float32)
    a, b = np.float32(0.18033688), np.float32(0.25)
    got, want = np.empty_like(x), np.empty_like(x)
    helper(got, x, r, a, b, mode, base2)
    formula(want, x, r, a, b, mode, base2)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
