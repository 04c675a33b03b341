"""Issue 16, reliability of the public entry points: results are never dropped, bad arguments are named.

* Outputs passed in place are written back whatever their layout (strided, transposed, torch
  non-contiguous); a read-only array the kernel writes is refused naming it; read-only *inputs* run.
* Every bad argument raises a ``KernelError`` subclass that names the argument and points at the
  kernel's source (this file), never a raw ``TypeError``/``ValueError`` or an ``InternalError``.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
import tilesim.language as T
from tilesim.errors import InternalError, KernelError, KernelRuntimeError, KernelSyntaxError, KernelTypeError

HERE = __file__.rsplit("/", 1)[-1]


@tilesim.jit
def scale(M, N, bm=16, bn=16):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), alpha: T.float32, n: T.int32):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            for i, j in T.Parallel(bm, bn):
                if by * bm + i < M and bx * bn + j < N:
                    B[by * bm + i, bx * bn + j] = A[by * bm + i, bx * bn + j] * alpha + n
    return main


@tilesim.jit(out_idx=[-1])
def tile_copy(M, N, bm=16, bn=16):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            s = T.alloc_shared((bm, bn), "float32")
            T.copy(A[by * bm, bx * bn], s)
            T.copy(s, B[by * bm, bx * bn])
    return main


def _a(m, n, seed=0):
    return np.random.default_rng(seed).standard_normal((m, n)).astype(np.float32)


# ------------------------------------------------------------------------------------------ outputs
@settings(max_examples=15, deadline=None)
@given(m=st.integers(1, 40), n=st.integers(1, 40), layout=st.sampled_from(["T", "step", "F"]))
def test_strided_outputs_are_written_back(m, n, layout):
    """Shapes the 16x16 tiles do not divide; the output a transposed/strided/Fortran view."""
    a = _a(m, n)
    if layout == "T":
        base = np.zeros((n, m), np.float32)
        b = base.T
    elif layout == "step":
        base = np.zeros((m, 2 * n), np.float32)
        b = base[:, ::2]
    else:
        b = base = np.asfortranarray(np.zeros((m, n), np.float32))
    assert scale(m, n)(a, b, 2.0, 3) is None
    np.testing.assert_allclose(b, a * 2 + 3, rtol=1e-6)
    if layout == "step":
        assert not base[:, 1::2].any()  # the elements between the view's are untouched


def test_read_only_output_is_refused_naming_it():
    a = _a(20, 9)
    b = np.zeros((20, 9), np.float32)
    b.flags.writeable = False
    with pytest.raises(KernelRuntimeError) as info:
        scale(20, 9)(a, b, 1.0, 0)
    msg = str(info.value)
    assert "argument 'B' of main is read-only, but the kernel writes it" in msg and HERE in msg


def test_read_only_and_strided_inputs_still_run():
    a = _a(20, 30)
    ro = a.copy()
    ro.flags.writeable = False
    np.testing.assert_array_equal(tile_copy(20, 30)(ro), a)
    np.testing.assert_array_equal(tile_copy(30, 20)(a.T), a.T)
    np.testing.assert_array_equal(tile_copy(20, 30)(np.broadcast_to(a[:1], (20, 30))), np.broadcast_to(a[:1], (20, 30)))


def test_torch_non_contiguous_output_is_written_back():
    torch = pytest.importorskip("torch")
    a = _a(20, 9)
    b = torch.zeros((9, 20), dtype=torch.float32).t()
    scale(20, 9)(torch.from_numpy(a), b, 2.0, 1)
    np.testing.assert_allclose(b.numpy(), a * 2 + 1, rtol=1e-6)


def test_object_numpy_must_copy_cannot_be_an_output():
    class Wrapped:  # only __array__: NumPy returns a new array, so writes could not reach the object
        def __init__(self, x):
            self.x = x

        def __array__(self, dtype=None, copy=None):
            return self.x.copy()

    a = _a(8, 8)
    with pytest.raises(KernelRuntimeError, match="argument 'B' of main is a Wrapped that NumPy cannot write"):
        scale(8, 8)(a, Wrapped(np.zeros((8, 8), np.float32)), 1.0, 0)
    np.testing.assert_array_equal(tile_copy(8, 8)(Wrapped(a)), a)  # as an input it is fine


# ------------------------------------------------------------------------------------------ scalars, tensors
@pytest.mark.parametrize("alpha, n, text", [
    (None, 1, "argument 'alpha' of main is a scalar float32, got None"),
    ("2", 1, "argument 'alpha' of main is a scalar float32, got a str"),
    (1j, 1, "argument 'alpha' of main is a scalar float32, got a complex"),
    (1.0, None, "argument 'n' of main is a scalar int32, got None"),
    (1.0, 2.5, "argument 'n' of main is a scalar int32, got 2.5, which is not an integer"),
    (1.0, 2**40, "outside the range of int32"),
    (1.0, np.ones(3), "got a tensor"),
    (1.0, [1], "got a list"),
])
def test_bad_scalars_are_named(alpha, n, text):
    a = _a(8, 8)
    b = np.zeros((8, 8), np.float32)
    with pytest.raises(KernelRuntimeError) as info:
        scale(8, 8)(a, b, alpha, n)
    assert text in str(info.value) and HERE in str(info.value)
    assert not b.any()


def test_good_scalars_of_every_kind_run():
    a = _a(8, 8)
    for alpha, n in [(2, 3), (np.float16(2), np.int64(3)), (np.array(2.0), 3.0), (True, np.uint8(3))]:
        b = np.zeros((8, 8), np.float32)
        scale(8, 8)(a, b, alpha, n)
        np.testing.assert_allclose(b, a * float(alpha) + 3, rtol=1e-3)


@pytest.mark.parametrize("bad", [[1.0, 2.0], 1.5, None, "A"])
def test_non_tensors_given_as_tensors_are_named(bad):
    with pytest.raises(KernelRuntimeError) as info:
        tile_copy(8, 8)(bad)
    msg = str(info.value)
    assert "argument 'A' of main is a float32 tensor (8, 8)" in msg and HERE in msg


@pytest.mark.parametrize("out_idx, text", [
    ("C", "out_idx must be an int or a list of ints, got 'C'"),
    ([0.5], "out_idx must be an int or a list of ints"),
    (True, "out_idx must be an int or a list of ints"),
    ([7], "out_idx 7 is out of range for 2 parameters"),
])
def test_bad_out_idx_is_named_with_the_kernel(out_idx, text):
    pf = tile_copy(8, 8).prim_func
    with pytest.raises(KernelTypeError) as info:
        tilesim.compile(pf, out_idx=out_idx)
    assert text in str(info.value) and HERE in str(info.value)


def test_bad_options_object():
    with pytest.raises(KernelTypeError, match="options must be a tilesim.InterpOptions"):
        tilesim.compile(tile_copy(8, 8).prim_func, out_idx=[-1], options={"mode": "serial"})
    with pytest.raises(KernelTypeError, match="chunk_bytes must be a positive int"):
        tilesim.InterpOptions(chunk_bytes="big")


# ------------------------------------------------------------------------------------------ eager kernels
@tilesim.jit
def eager_add(A, B):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), "float32")
    B: T.Tensor((M, N), "float32")
    C = T.empty((M, N), "float32")
    with T.Kernel(T.ceildiv(N, 16), T.ceildiv(M, 16), threads=128) as (bx, by):
        for i, j in T.Parallel(16, 16):
            C[by * 16 + i, bx * 16 + j] = A[by * 16 + i, bx * 16 + j] + B[by * 16 + i, bx * 16 + j]
    return C


@tilesim.jit
def eager_no_return(A):
    M = T.const("M")
    A: T.Tensor((M,), "float32")
    C = T.empty((M,), "float32")
    with T.Kernel(1, threads=128) as bx:
        for i in T.Parallel(M):
            C[i] = A[i]


@tilesim.jit
def eager_const_int(A):
    M = T.const(42)
    A: T.Tensor((M,), "float32")
    C = T.empty((M,), "float32")
    with T.Kernel(1, threads=128) as bx:
        for i in T.Parallel(M):
            C[i] = A[i]
    return C


def test_eager_kernel_runs():
    a, b = _a(20, 9), _a(20, 9, 1)
    np.testing.assert_allclose(eager_add(a, b), a + b)


@pytest.mark.parametrize("call, cls, text", [
    (lambda a: eager_add(a), KernelTypeError, "eager_add(): missing a required argument: 'B'"),
    (lambda a: eager_add(a, None), KernelRuntimeError, "argument 'B' is a tensor, got None"),
    (lambda a: eager_add(a, [1.0]), KernelRuntimeError, "argument 'B' is a tensor, got [1.0]"),
    (lambda a: eager_add(a, 2.5), KernelRuntimeError, "argument 'B' is a tensor, got 2.5"),
    (lambda a: eager_add(a, a, a), KernelTypeError, "too many positional arguments"),
    (lambda a: eager_no_return(a[0]), KernelSyntaxError, "the output 'C' (T.empty) of eager kernel eager_no_return "
                                                         "is never returned"),
    (lambda a: eager_const_int(a[0]), KernelTypeError, "T.const takes symbol names as a string, got int 42"),
])
def test_eager_call_errors(call, cls, text):
    with pytest.raises(cls) as info:
        call(_a(20, 9))
    msg = str(info.value)
    assert text in msg and HERE in msg
    assert not isinstance(info.value, InternalError)
    tb = info.value.__traceback__  # user_facing: no frame of tilesim's own modules below the call
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    assert not any("/tilesim/" in f and not f.endswith("errors.py") for f in frames), frames


# ------------------------------------------------------------------------------------------ T.* constructors
def _alloc_none():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((64,), None)
            T.copy(A[0], s)
            T.copy(s, A[0])
    return tilesim.compile(main)


def _fragment_none():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_fragment((64,), dtype=None)
            T.copy(A[0], s)
            T.copy(s, A[0])
    return tilesim.compile(main)


@pytest.mark.parametrize("make, cls, text", [
    (_alloc_none, KernelTypeError, "dtype is None"),
    (_fragment_none, KernelTypeError, "dtype is None"),
    (lambda: T.dynamic(3), KernelTypeError, "T.dynamic takes symbol names as a string, got int 3"),
    (lambda: T.dynamic("3m"), KernelTypeError, "'3m' is not a valid symbol name"),
    (lambda: T.dynamic(""), KernelTypeError, "no symbol name given"),
    (lambda: T.Tensor((4,), None), KernelTypeError, "dtype is None"),
])
def test_constructor_errors(make, cls, text):
    with pytest.raises(cls) as info:
        make()
    assert text in str(info.value)
    assert isinstance(info.value, KernelError)


def test_good_dynamic_names():
    m, n = T.dynamic("m, n")
    assert (m.name, n.name) == ("m", "n")
    assert T.dynamic("k").name == "k"


@pytest.mark.parametrize("configs", ["x", [1], 3])
def test_bad_pass_configs_are_named(configs):
    with pytest.raises(KernelTypeError) as info:
        tilesim.compile(tile_copy(8, 8).prim_func, out_idx=[-1], pass_configs=configs)
    assert "pass_configs must be a dict" in str(info.value) and HERE in str(info.value)


def test_bad_tensor_annotation_and_factory_without_return_are_located():
    with pytest.raises(KernelTypeError) as info:
        T.Tensor((4, 4), 3)
    assert "unknown dtype 3" in str(info.value) and HERE in str(info.value)

    @tilesim.jit
    def no_return(M):
        @T.prim_func
        def main(A: T.Tensor((M,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                A[0] = 1.0

    with pytest.raises(KernelTypeError) as info:
        no_return(4)
    assert "must return a @T.prim_func, got NoneType" in str(info.value) and HERE in str(info.value)
