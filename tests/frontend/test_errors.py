"""User errors as one table: (kernel source, error class, message text, position).

Each case is a small module written to a temporary file and imported, so errors point at real
file:line:col. The offending line carries ``# <-``; ``at`` names the token whose column the error
must point at.
"""

import importlib.util
import textwrap

import numpy as np
import pytest

from tilesim.errors import KernelError, KernelRuntimeError, KernelSyntaxError, KernelTypeError

HEADER = """\
import tilesim as tilelang
import tilesim.language as T
import math
"""

GEMM_SIG = "(A: T.Tensor((M, K), 'float16'), B: T.Tensor((K, N), 'float16'), C: T.Tensor((M, N), 'float32'))"


def lazy(body, sig=GEMM_SIG, call="M=64, N=64, K=64"):
    """A lazy-style factory whose prim_func body is ``body`` (indented under the def)."""
    return (HEADER + "\n@tilelang.jit(out_idx=[-1])\ndef factory(M, N, K):\n    @T.prim_func\n"
            f"    def main{sig}:\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8) +
            f"\n    return main\n\n\ndef trigger():\n    return factory({call})\n")


def e(id, src, cls, text, at, *, runner=None):
    return pytest.param(src, cls, text, at, runner, id=id)


KERNEL = """
with T.Kernel(T.ceildiv(N, 32), T.ceildiv(M, 32), threads=128) as (bx, by):
    A_s = T.alloc_shared((32, 32), "float16")
    B_s = T.alloc_shared((32, 32), "float16")
    C_l = T.alloc_fragment((32, 32), "float32")
"""


def k(extra):
    return KERNEL + textwrap.indent(textwrap.dedent(extra), "    ")


CASES = [
    e("unknown-primitive", lazy(k("T.fil(C_l, 0)  # <-")), KernelSyntaxError, "unknown primitive T.fil", "T.fil"),
    e("tile-op-in-parallel", lazy(k("""
        for i, j in T.Parallel(32, 32):
            T.copy(A[by * 32, 0], A_s)  # <-
        """)), KernelSyntaxError, "tile operation T.copy inside T.Parallel", "T.copy"),
    e("copy-shape-mismatch", lazy(k("T.copy(A_s, C_l[0:16, 0:32])  # <-")), KernelTypeError, "do not pair", "T.copy"),
    e("gemm-k-mismatch", lazy(k("""
        X_s = T.alloc_shared((32, 16), "float16")
        T.gemm(X_s, B_s, C_l)  # <-
        """)), KernelTypeError, "reduction dims differ", "T.gemm"),
    e("gemm-dtype-mismatch", lazy(k("""
        X_s = T.alloc_shared((32, 32), "float32")
        T.gemm(X_s, B_s, C_l)  # <-
        """)), KernelTypeError, "A is float32 but B is float16", "T.gemm"),
    e("gemm-c-shape", lazy(k("""
        D_l = T.alloc_fragment((32, 16), "float32")
        T.gemm(A_s, B_s, D_l)  # <-
        """)), KernelTypeError, "op(A) @ op(B) is (32, 32)", "T.gemm"),
    e("gemm-global-operand", lazy(k("T.gemm(A, B_s, C_l)  # <-")), KernelTypeError, "is a global tensor", "T.gemm"),
    e("gemm-c-not-fragment", lazy(k("T.gemm(A_s, B_s, A_s)  # <-")), KernelTypeError, "must be a fragment", "T.gemm"),
    e("non-constant-tile-shape", lazy(k("X = T.alloc_shared((bx, 32), 'float16')  # <-")), KernelTypeError,
      "tile shape must be compile-time constants", "T.alloc_shared"),
    e("wrong-arg-count", lazy(k("T.copy(A_s)  # <-")), KernelTypeError, "missing a required argument", "T.copy"),
    e("unknown-kwarg", lazy(k("T.gemm(A_s, B_s, C_l, transpose_C=True)  # <-")), KernelTypeError,
      "unexpected keyword argument 'transpose_C'", "T.gemm"),
    e("undefined-name", lazy(k("T.clear(D_l)  # <-")), KernelSyntaxError, "name 'D_l' is not defined", "D_l"),
    e("reduce-out-shape", lazy(k("""
        r = T.alloc_fragment((16,), "float32")
        T.reduce_max(C_l, r, dim=1)  # <-
        """)), KernelTypeError, "reducing dim 1", "T.reduce_max"),
    e("reduce-dim-range", lazy(k("""
        r = T.alloc_fragment((32,), "float32")
        T.reduce_sum(C_l, r, dim=2)  # <-
        """)), KernelTypeError, "dim 2 is out of range", "T.reduce_sum"),
    e("tile-op-outside-kernel", lazy("T.clear(C)  # <-"), KernelSyntaxError, "outside `with T.Kernel", "T.clear"),
    e("nested-kernel", lazy(k("""
        with T.Kernel(1) as bz:  # <-
            pass
        """)), KernelSyntaxError, "T.Kernel inside another T.Kernel", "with"),
    e("parallel-non-constant", lazy(k("""
        for i in T.Parallel(bx):  # <-
            C_l[i, 0] = 0
        """)), KernelTypeError, "T.Parallel extents must be compile-time constants", "for"),
    e("python-fn-on-kernel-value", lazy(k("""
        for i, j in T.Parallel(32, 32):
            C_l[i, j] = math.exp(C_l[i, j])  # <-
        """)), KernelSyntaxError, "math.exp", "math.exp"),
    e("rank-mismatch-store", lazy(k("""
        for i in T.Parallel(32):
            C_l[i] = 0.0  # <-
        """)), KernelTypeError, "C_l has 2 dimension(s) but is indexed with 1", "C_l[i]"),
    e("float-index", lazy(k("""
        for i, j in T.Parallel(32, 32):
            C_l[i, j] = A[i * 0.5, j]  # <-
        """)), KernelTypeError, "index must be an integer expression", "A[i * 0.5, j]"),
    e("python-var-rebound-in-loop", lazy(k("""
        acc = 0.0
        for kk in T.serial(4):
            acc = acc + A[kk, 0]  # <-
        """)), KernelSyntaxError, "assigned inside a kernel loop", "acc"),
    e("lambda-arity", lazy(k("""
        f = lambda x: x * 2
        y = f(bx, by)  # <-
        """)), KernelTypeError, "lambda: too many positional arguments", "f(bx, by)"),
    e("lambda-return-under-kernel-if", lazy(k("""
        f = lambda x: A[x, 0]
        for i in T.serial(4):
            if bx > 0:
                y = f(bx)
                z = f(bx, 1)  # <-
        """)), KernelTypeError, "too many positional arguments", "f(bx, 1)"),
    e("return-in-prim-func", lazy(k("return C  # <-")), KernelSyntaxError, "`return` inside a @T.prim_func", "return"),
    e("slice-assign", lazy(k("A_s[0:16, :] = 0  # <-")), KernelSyntaxError, "slice assignment", "A_s[0:16, :]"),
    e("unsupported-primitive", lazy(k("v = T.call_extern('float32', 'f', A[0, 0])  # <-")), KernelSyntaxError,
      "T.call_extern of 'f': an external device function", "T.call_extern"),
    e("bad-dtype", lazy(k("X = T.alloc_fragment((4,), 'float17')  # <-")), KernelTypeError, "unknown dtype 'float17'",
      "T.alloc_fragment"),
    e("missing-annotation", HEADER + textwrap.dedent("""
    @tilelang.jit
    def factory(M):
        @T.prim_func
        def main(A):  # <-
            pass
        return main

    def trigger():
        return factory(4)
    """), KernelSyntaxError, "parameter 'A' has no annotation", "A"),
    e("too-many-grid-dims", lazy("""
        with T.Kernel(1, 1, 1, 1) as (a, b, c, d):  # <-
            pass
        """), KernelTypeError, "T.Kernel takes 1 to 3 grid extents, got 4", "with"),
    e("let-used-outside-if", lazy(k("""
        if bx > 0:
            v = A[0, 0] * 2
        C_l[0, 0] = v  # <-
        """)), KernelSyntaxError, "'v' is used outside the loop or `if` that defines it", "C_l[0, 0]"),
    e("while-with-tile-op-in-parallel-loop-bound", lazy(k("""
        for i in T.Parallel(32):
            for kk in T.Pipelined(4):  # <-
                pass
        """)), KernelSyntaxError, "T.Pipelined inside T.Parallel", "for"),
]


def load(tmp_path, src, name):
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, path


@pytest.mark.parametrize("src, cls, text, at, runner", CASES)
def test_user_error(tmp_path, request, src, cls, text, at, runner):
    name = "case_" + request.node.callspec.id.replace("-", "_")
    mod, path = load(tmp_path, src, name)
    with pytest.raises(KernelError) as info:
        mod.trigger()
    err = info.value
    assert type(err) is cls, f"{type(err).__name__}: {err}"
    assert text in str(err), str(err)
    lines = src.splitlines()
    line = next(i + 1 for i, ln in enumerate(lines) if "# <-" in ln)
    col = lines[line - 1].index(at)
    assert err.loc is not None, str(err)
    assert (err.loc.file, err.loc.line, err.loc.col) == (str(path), line, col), str(err)
    rendered = str(err)
    assert f"{path}:{line}:{col + 1}" in rendered and "^" in rendered
    assert "Traceback" not in rendered


def test_error_table_is_large_enough():
    assert len(CASES) >= 20


RUNTIME_SRC = HEADER + textwrap.dedent("""
@tilelang.jit(out_idx=[-1])
def add(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):  # <-
        with T.Kernel(M) as bx:
            for j in T.Parallel(N):
                B[bx, j] = A[bx, j] + 1
    return main
""")


@pytest.mark.parametrize("args, text", [
    (lambda: (np.zeros((4, 8), np.float16),), "expected dtype float32, got float16"),
    (lambda: (np.zeros((4, 9), np.float32),), "dimension 1 must be 8"),
    (lambda: (np.zeros((4, 8, 1), np.float32),), "expected 2 dimension(s)"),
    (lambda: (np.zeros((4, 8), np.float32), np.zeros((4, 8), np.float32)), "takes 1 argument(s) (A), got 2"),
], ids=["dtype", "shape", "rank", "count"])
def test_wrong_arguments(tmp_path, args, text):
    mod, path = load(tmp_path, RUNTIME_SRC, "runtime_args")
    kern = mod.add(4, 8)
    with pytest.raises(KernelRuntimeError) as info:
        kern(*args())
    assert text in str(info.value)
    assert str(path) in str(info.value)


def test_primitive_outside_kernel_names_the_decorator():
    import tilesim.language as T
    with pytest.raises(KernelSyntaxError, match="inside a kernel body"):
        T.copy(None, None)
