"""TileLang-compatibility of the kernel language: the forms TileLang's own programs use.

Plain helper functions and lambdas called with kernel values (inlined like ``@T.macro``), layout
objects (``tilesim.layout``), slices with a shared symbolic offset, lazily checked prim_funcs, tensor
views over another parameter's storage, ``T.dtype`` objects and dtype names.
"""

import json
import math
import re

import numpy as np
import pytest

import tilesim as tilelang
import tilesim.language as T
import tilesim.layout
from tilesim.errors import KernelSyntaxError, KernelTypeError

# ----------------------------------------------------------------------------------- helpers (item 1)
N_COLS = 8


def flat_index(i, j):
    return i * N_COLS + j


def double_then_offset(x, offset=1):
    y = x * 2
    return y + offset


def pick(kind, a, b):
    if kind == "first":  # Python-level `if`: the inlined body returns early
        return a
    for _ in (0, 1):  # a Python-level loop (over a tuple) around a return
        return b


def copy_rows(src, dst, row0):
    """A helper with statements: emitted at the call site, like a macro."""
    T.copy(src[row0:row0 + 4, 0:N_COLS], dst)


def bad_return(x):
    if x > 0:  # a kernel `if`: a return under it has no meaning
        return x
    return 0


def recurse(x):
    return recurse(x + 1)


def make_transpose_layout(buf):
    return T.Layout(buf.shape, lambda i, j: [j, i])


scale_lambda = lambda v: v * 3  # noqa: E731 - a module-level lambda used in a kernel


def _run_flat(body_fn):
    """A (4, 8) kernel whose output element (i, j) is body_fn(A, i, j, bx)."""

    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((32,), "float32"), B: T.Tensor((4, 8), "float32")):
            with T.Kernel(1) as bx:
                for i, j in T.Parallel(4, 8):
                    B[i, j] = body_fn(A, i, j, bx)
        return main

    a = np.arange(32, dtype=np.float32)
    return a, k()(a)


def test_index_helper_is_inlined():
    a, out = _run_flat(lambda A, i, j, bx: A[flat_index(i, j)])
    assert np.array_equal(out, a.reshape(4, 8))


def test_helper_with_default_argument_and_local_names():
    a, out = _run_flat(lambda A, i, j, bx: A[flat_index(i, j)] + double_then_offset(i))
    assert np.array_equal(out, a.reshape(4, 8) + (2 * np.arange(4) + 1)[:, None])


@pytest.mark.parametrize("kind", ["first", "second"])
def test_helper_returns_through_python_control_flow(kind):
    a, out = _run_flat(lambda A, i, j, bx: A[flat_index(pick(kind, i, 3 - i), j)])
    want = a.reshape(4, 8)
    assert np.array_equal(out, want if kind == "first" else want[::-1])


def test_module_lambda_and_kernel_lambda():
    a, out = _run_flat(lambda A, i, j, bx: scale_lambda(A[flat_index(i, j)]))
    assert np.array_equal(out, 3 * a.reshape(4, 8))

    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
            with T.Kernel(1) as bx:
                rev = lambda r, c=0: A[3 - r, 7 - c]  # noqa: E731
                for i, j in T.Parallel(4, 8):
                    B[i, j] = rev(i, c=j)
        return main

    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    assert np.array_equal(k()(x), x[::-1, ::-1])


def test_helper_with_statements_is_emitted_at_the_call():
    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((8, 8), "float32"), B: T.Tensor((8, 8), "float32")):
            with T.Kernel(2) as bx:
                S = T.alloc_shared((4, 8), "float32")
                copy_rows(A, S, bx * 4)
                T.copy(S, B[bx * 4:bx * 4 + 4, 0:8])
        return main

    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    assert np.array_equal(k()(x), x)


def test_layout_helper_in_annotate_layout_has_no_effect():
    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((8, 8), "float32"), B: T.Tensor((8, 8), "float32")):
            with T.Kernel(1) as bx:
                S = T.alloc_shared((8, 8), "float32")
                F = T.alloc_fragment((8, 8), "float32")
                T.annotate_layout({S: tilelang.layout.make_swizzled_layout(S), F: make_transpose_layout(F),
                                   B: T.Layout(B.shape, lambda *idx: idx)})
                T.copy(A, S)
                T.copy(S, F)
                T.copy(F, B)
        return main

    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    assert np.array_equal(k()(x), x)


@pytest.mark.parametrize("fn, cls, text", [
    (bad_return, KernelSyntaxError, "`return` of the inlined helper bad_return under kernel control flow"),
    (recurse, KernelSyntaxError, "nested more than 64 deep"),
    (math.floor, KernelSyntaxError, "the Python function floor cannot take kernel values"),
    (json.dumps, KernelSyntaxError, "the Python function dumps cannot take kernel values"),  # library code
    (flat_index, KernelTypeError, "helper flat_index: missing a required argument: 'j'"),
], ids=["return-under-kernel-if", "recursion", "builtin", "library-function", "arity"])
def test_helper_errors(fn, cls, text):
    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(B: T.Tensor((4,), "int32")):
            with T.Kernel(4) as bx:
                B[bx] = fn(bx)
        return main

    with pytest.raises(cls, match=re.escape(text)) as ei:
        k()
    assert ei.value.loc is not None and ei.value.loc.file.endswith(".py")


# ----------------------------------------------------------------------------------- layouts
def test_layout_objects_check_their_forward_function():
    lay = T.Layout([4, 4], lambda i, j: (j, i))
    assert lay.get_input_shape() == [4, 4] and lay.map_forward_index([1, 2]) == [2, 1]
    frag = tilesim.layout.make_gemm_fragment_8x8()
    assert frag.forward_thread_fn(3, 5) == 14 and frag.map_forward_index([3, 5]) == [1]
    with pytest.raises(KernelTypeError, match="the layout has 2 index"):
        T.Layout([4, 4], lambda i: i)
    with pytest.raises(KernelTypeError, match="needs forward_fn or forward_thread_fn"):
        T.Fragment([4, 4])
    with pytest.raises(KernelTypeError, match="make_swizzled_layout takes a buffer"):
        tilesim.layout.make_swizzled_layout(3)


def test_annotate_layout_rejects_a_non_layout():
    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                S = T.alloc_shared((8,), "float32")
                T.annotate_layout({S: 3})
                T.copy(A, S)
                T.copy(S, B)
        return main

    with pytest.raises(KernelTypeError, match="the layout of S is a int"):
        k()


# ----------------------------------------------------------------------------------- slices (item 2)
def _simplify_cases():
    from tilesim.frontend import exprs as X
    from tilesim.ir import nodes as N
    x, y = N.Var("x", "int32", kind="loop"), N.Var("y", "int32", kind="loop")
    var = N.Buffer("off", (), "int32", "var")
    tab = N.Buffer("tab", (8,), "int32", "global")

    def b(op, p, q):
        return X.binop(op, p, q, None)

    def load_var():  # built afresh each time: equal structurally, not by identity
        return X.to_expr(var)

    def load_tab():
        return X.make_load(tab, (x,), None)

    return [
        ("bx*4 .. (bx+1)*4", b("mul", x, 4), b("mul", b("add", x, 1), 4), 4),
        ("var offset", b("add", load_var(), b("mul", x, 8)), b("add", load_var(), b("mul", b("add", x, 1), 8)), 8),
        ("bare var buffer", var, b("add", var, 16), 16),
        ("tensor element", load_tab(), b("add", load_tab(), 3), 3),
        ("floordiv atom", b("add", b("floordiv", x, 2), 3), b("add", b("floordiv", x, 2), 7), 4),
        ("product atom", b("mul", x, y), b("add", b("mul", x, y), 1), 1),
        ("negation", X.unary("neg", x, None), b("sub", 5, x), 5),
        ("scaled sum", b("mul", 3, b("add", x, 1)), b("add", b("mul", 3, x), 9), 6),
        ("symbolic extent", x, b("add", x, y), y),
        ("two symbols", b("add", x, y), b("add", b("mul", x, 2), b("add", y, 1)), b("add", x, 1)),
        ("different tensor index", load_tab(), X.make_load(tab, (y,), None), None),
    ]


@pytest.mark.parametrize("case", range(11))
def test_simplify_table(case):
    from tilesim.frontend import simplify as S
    name, lo, hi, want = _simplify_cases()[case]
    got = S.difference(lo, hi)
    if want is None:  # not provably constant: stays an expression
        assert not isinstance(got, int), name
    elif isinstance(want, int):
        assert got == want, name
    else:
        assert S.same(got, want), (name, got)


def test_simplify_refuses_non_integers():
    from tilesim.frontend import simplify as S
    from tilesim.ir import nodes as N
    f = N.Var("f", "float32")
    assert S.linear(f) is None and S.linear(1.5) is None and S.linear(True) is None
    assert S.difference(f, 3) is None


def test_copy_with_shared_symbolic_offset_pairs():
    """TileLang programs write X[lo + r*blk : lo + (r+1)*blk] with lo a T.alloc_var: extent blk."""

    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(X: T.Tensor((16, 4), "float32"), starts: T.Tensor((2,), "int32"), Y: T.Tensor((2, 4, 4), "float32")):
            with T.Kernel(2) as bx:
                lo = T.alloc_var("int32")
                lo = starts[bx]
                y_local = T.alloc_fragment((4, 4), "float32")
                z_local = T.alloc_fragment((4, 4), "float32")
                T.copy(X[lo:lo + 4, 0:4], y_local)
                T.copy(X[starts[bx] + 1:starts[bx] + 5, 0:4], z_local)  # a tensor element as the offset
                for i, j in T.Parallel(4, 4):
                    y_local[i, j] = y_local[i, j] * 100 + z_local[i, j]
                T.copy(y_local, Y[bx, 0:4, 0:4])
        return main

    x = np.arange(64, dtype=np.float32).reshape(16, 4)
    st = np.array([3, 9], np.int32)
    out = k()(x, st)
    assert np.array_equal(out, np.stack([x[3:7] * 100 + x[4:8], x[9:13] * 100 + x[10:14]]))


# ----------------------------------------------------------------------------------- lazy checks (item 3)
def _split_factory(num_split):
    @tilelang.jit(out_idx=[-1])
    def factory(num_split):
        @T.prim_func
        def main_split(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                F = T.alloc_fragment((8 // num_split,), "float32")
                T.copy(A[0:4], F)  # pairs only when num_split == 2
                T.copy(F, B[0:4])

        @T.prim_func
        def main_no_split(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                F = T.alloc_fragment((8,), "float32")
                T.copy(A, F)
                for i in T.Parallel(8):
                    F[i] = F[i] * 2
                T.copy(F, B)

        return main_split if num_split > 1 else main_no_split

    return factory(num_split)


def test_unused_prim_func_is_not_checked():
    a = np.arange(8, dtype=np.float32)
    assert np.array_equal(_split_factory(1)(a), 2 * a)  # main_split: broken for num_split=1, but not used
    _split_factory(2)  # main_split used, and fine


def test_used_prim_func_reports_its_error_where_it_is_used():
    with pytest.raises(KernelTypeError, match="do not pair") as ei:
        _split_factory(4)
    assert ei.value.loc.line > 0 and "T.copy(A[0:4], F)" in open(ei.value.loc.file).read().splitlines()[
        ei.value.loc.line - 1]


def test_module_level_prim_func_error_surfaces_at_compile():
    from tilesim.ir import nodes as N

    @T.prim_func
    def broken(A: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            T.fil(A, 0)

    assert isinstance(broken, N.PrimFunc) and "broken" in repr(broken)
    with pytest.raises(KernelSyntaxError, match="unknown primitive T.fil"):
        tilelang.compile(broken)
    with pytest.raises(KernelSyntaxError, match="unknown primitive T.fil"):
        broken.params  # noqa: B018 - reading the program raises too


# ----------------------------------------------------------------------------------- storage views (item 4)
def test_tensor_over_another_parameters_data_is_a_view():
    @tilelang.jit
    def flat_scale(x, rows, cols):
        x: T.Tensor((2, 3, 4), "float32")
        out = T.empty((2, 3, 4), "float32")
        with T.Kernel(1) as bx:
            x_flat = T.Tensor((rows, cols), "float32", x.data)
            out_flat = T.Tensor((rows, cols), "float32", data=out.data)
            F = T.alloc_fragment((rows, cols), "float32")
            T.copy(x_flat[0, 0], F)
            for i, j in T.Parallel(rows, cols):
                F[i, j] = F[i, j] * (i + 1)
            T.copy(F, out_flat[0, 0])
        return out

    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = np.asarray(flat_scale(x, 6, 4))
    want = (x.reshape(6, 4) * np.arange(1, 7, dtype=np.float32)[:, None]).reshape(2, 3, 4)
    assert np.array_equal(out, want)


@pytest.mark.parametrize("view, text", [
    ("T.Tensor((5, 4), 'float32', x.data)", "T.Tensor view of x: 20 elements of shape (5, 4) but x (6, 4) has 24"),
    ("T.Tensor((6, 4), 'float16', x.data)", "T.Tensor view of x: (6, 4) float16 is 48 bytes but x (6, 4) float32 is 96"),
    ("T.Tensor((6, 4), 'float32', x)", "data must be another tensor's .data, got Buffer"),
    ("T.Tensor((6, 4), 'float32', x.data, strides=(1, 6))", "strided views are not supported"),
])
def test_tensor_view_errors(view, text, tmp_path):
    import importlib.util
    src = ("import tilesim as tilelang\nimport tilesim.language as T\n\n\n@tilelang.jit\ndef k(x):\n"
           "    x: T.Tensor((6, 4), 'float32')\n    out = T.empty((6, 4), 'float32')\n"
           f"    with T.Kernel(1) as bx:\n        v = {view}\n        T.copy(x, out)\n    return out\n")
    path = tmp_path / "view_case.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("view_case", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(KernelTypeError, match=re.escape(text)) as ei:
        mod.k(np.zeros((6, 4), np.float32))
    assert ei.value.loc.file == str(path) and ei.value.loc.line == 10


# ----------------------------------------------------------------------------------- dtypes, T.Serial (item 5)
def test_dtype_objects():
    assert isinstance(T.float16, T.dtype) and isinstance(T.float16, str)
    assert T.dtype("float16") == T.float16 == "float16" and T.dtype("half") == "float16"
    assert T.dtype(T.bfloat16) is T.bfloat16 and T.dtype(np.float32) == "float32"
    assert (T.float16.bits, T.bfloat16.bytes, T.float8_e4m3fn.itemsize, T.bool.bits, T.float4_e2m1fn.bytes) == \
        (16, 2, 1, 1, 1)
    assert T.int == "int32" and T.uint == "uint32" and T.float8_e4m3 == "float8_e4m3fn"
    assert {T.float16: 1}["float16"] == 1  # hashes as its name
    with pytest.raises(KernelTypeError, match="unknown dtype 'float17'"):
        T.dtype("float17")


def test_dtype_torch_round_trip():
    torch = pytest.importorskip("torch")
    from tilesim.language.dtypes import _TORCH_DTYPE_TO_STR, dtype
    for t in (torch.float16, torch.bfloat16, torch.float32, torch.int8, torch.float8_e4m3fn):
        d = T.dtype(t)
        assert d.as_torch() is t and dtype(_TORCH_DTYPE_TO_STR[t]) == d


def test_dtypes_without_meaning_here_fail_at_use():
    from tilesim.language.types import _UnsupportedDType

    name, text = "float_x", "T.float_x is not supported by tilesim"
    d = _UnsupportedDType(name, "no meaning here")
    assert d == name  # the name exists: programs that mention it import and compare fine
    with pytest.raises(KernelTypeError, match=re.escape(text)):
        T.Tensor((4, 4), d)
    with pytest.raises(KernelTypeError, match=re.escape(text)):
        d.bits  # noqa: B018

    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
            with T.Kernel(1) as bx:
                S = T.alloc_shared((4,), d)
                T.copy(A, S)
                T.copy(S, B)
        return main

    with pytest.raises(KernelTypeError, match=re.escape(text)) as ei:
        k()
    assert ei.value.loc is not None  # located at the allocation


def test_dtype_call_in_kernel_and_serial_alias():
    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "int32")):
            with T.Kernel(1) as bx:
                for i in T.Serial(4):
                    B[i] = T.dtype("int32")(A[i]) + T.int32(A.dtype == T.float32)
        return main

    a = np.array([1.7, -2.2, 3.9, 0.1], np.float32)
    assert np.array_equal(k()(a), a.astype(np.int32) + 1)


# ----------------------------------------------------------------------------------- comprehensions
def test_comprehensions_unroll_at_trace_time():
    sizes = [3, 1, 4]

    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((8,), "float32"), B: T.Tensor((4,), "float32")):
            with T.Kernel(1) as bx:
                total = sum(s * 2 for s in sizes)  # a generator of Python values
                offsets = {i: sum(sizes[:i]) for i in range(len(sizes))}
                loads = [A[offsets[i]] for i in range(3) if sizes[i] > 1]  # kernel values as elements
                i = 7  # the comprehension's `i` did not leak into this scope, nor will this one into it
                B[0] = loads[0] + loads[1]
                B[1] = T.float32(total)
                B[2] = T.float32(len({s % 2 for s in sizes}))
                B[3] = A[i] + [A[j] for j in (0, 1)][1]
        return main

    a = np.arange(8, dtype=np.float32) * 10
    assert np.array_equal(k()(a), [0 + 40, 16, 2, 70 + 10])


@pytest.mark.parametrize("expr, text", [
    ("[v for v in A]", "comprehension over a kernel value"),
    ("[v for v in range(bx)]", "range() of kernel values in a comprehension"),
    ("[v for v in (1, 2) if bx > v]", "comprehension filter on a kernel value"),
])
def test_comprehension_errors(expr, text, tmp_path):
    import importlib.util
    src = ("import tilesim as tilelang\nimport tilesim.language as T\n\n\n@tilelang.jit(out_idx=[-1])\n"
           "def k():\n    @T.prim_func\n    def main(A: T.Tensor((4,), 'float32'), B: T.Tensor((4,), 'float32')):\n"
           f"        with T.Kernel(1) as bx:\n            xs = {expr}\n            T.copy(A, B)\n    return main\n")
    path = tmp_path / "comp_case.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("comp_case", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(KernelSyntaxError, match=re.escape(text)) as ei:
        mod.k()
    assert ei.value.loc.line == 10
