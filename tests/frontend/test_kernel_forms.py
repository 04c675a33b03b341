"""Kernel-language forms of TileLang programs: let-bound slice bounds, unpacking, re-bound names,
``T.parallel``, dtype names without a width, refused CUDA source imports.
"""

import numpy as np
import pytest

import tilesim as tilelang
import tilesim.language as T
from tilesim.errors import KernelTypeError


# ------------------------------------------------------------------ slice bounds bound to names (lets)
def test_slice_bounds_bound_to_names_in_a_loop_pair():
    """kv_start = base * sid + k * BN; kv_end = base * sid + (k + 1) * BN: both names are Lets."""

    @tilelang.jit(out_idx=[-1])
    def k(n, num_split):
        @T.prim_func
        def main(X: T.Tensor((n, 4), "float32"), Y: T.Tensor((num_split, 4), "float32")):
            with T.Kernel(num_split) as bx:
                s = T.alloc_shared((8, 4), "float32")
                acc = T.alloc_fragment((4,), "float32")
                T.clear(acc)
                sid = bx % num_split
                for kk in T.serial(n // num_split // 8):
                    lo = (n // num_split) * sid + kk * 8
                    hi = (n // num_split) * sid + (kk + 1) * 8
                    T.copy(X[lo:hi, :], s)
                    mid = lo + 2  # a Let of a Let
                    T.copy(X[mid:mid + 8 - 2, :], s[0:6, :])
                    for j in T.Parallel(4):
                        acc[j] += s[7, j]
                T.copy(acc, Y[bx, :])
        return main

    x = np.arange(32 * 4, dtype=np.float32).reshape(32, 4)
    out = k(32, 2)(x)
    want = np.stack([x[16 * b:16 * (b + 1)][7::8].sum(0) for b in range(2)])
    assert np.array_equal(out, want)


def test_let_of_a_load_is_an_atom_not_expanded():
    from tilesim.frontend import exprs as X
    from tilesim.frontend import simplify as S
    from tilesim.ir import nodes as N
    bx = N.Var("bx", "int32", kind="block")
    tab = N.Buffer("tab", (8,), "int32", "global")
    load = X.make_load(tab, (bx,), None)
    pure = X.binop("mul", bx, 64, None)
    lo, base = N.Var("lo", "int32"), N.Var("base", "int32")
    assert S.pure(pure) and not S.pure(load) and not S.pure(X.binop("add", load, 1, None))
    lets = {lo: pure}
    assert S.difference(lo, X.binop("mul", X.binop("add", bx, 1, None), 64, None), lets=lets) == 64
    assert not isinstance(S.difference(lo, X.binop("add", bx, 1, None)), int)  # without lets: symbolic
    # a Let of a load is never expanded: base and tab[bx] may differ if tab was written in between
    assert not isinstance(S.difference(base, X.binop("add", load, 4, None), lets={lo: pure}), int)
    assert S.difference(base, X.binop("add", base, 4, None)) == 4


# ------------------------------------------------------------------ T.dynamic with several names, annotations
def test_dynamic_with_several_names_gives_a_tuple():
    m, n = T.dynamic("m, n")
    p, q = T.dynamic("p q", "int64")
    assert (m.name, n.name, p.name, q.name) == ("m", "n", "p", "q") and p.dtype == "int64"
    assert T.dynamic("m").name == "m" and not isinstance(T.dynamic("m"), tuple)

    @tilelang.jit(out_idx=[-1])
    def k():
        rows, cols = T.dynamic("rows, cols")

        @T.prim_func
        def main(X: T.Tensor((rows, cols), "float32"), Y: T.Tensor((rows, cols), "float32")):
            with T.Kernel(rows) as bx:
                for j in T.serial(cols):
                    Y[bx, j] = X[bx, j] + 1
        return main

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert np.array_equal(k()(x), x + 1)


def test_python_type_annotations_in_an_eager_kernel_are_plain_assignments():
    @tilelang.jit
    def scale_rows(x, factor):
        n = T.const("n")
        dtype: str = T.float32
        width: int = 4
        x: T.Tensor((n, width), dtype)
        out = T.empty((n, width), dtype)
        with T.Kernel(n) as bx:
            for j in T.serial(width):
                out[bx, j] = x[bx, j] * factor
        return out

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    assert np.array_equal(np.asarray(scale_rows(x, 3)), x * 3)


def test_an_error_raised_without_a_location_is_located_at_its_statement(tmp_path):
    src = tmp_path / "bad_ann.py"
    src.write_text(
        "import tilesim as tilelang\nimport tilesim.language as T\n\n"
        "@tilelang.jit(out_idx=[-1])\ndef k():\n"
        "    @T.prim_func\n"
        "    def main(X: T.Tensor((4,), 'float32'), Y: T.Tensor((4,), 'float32')):\n"
        "        with T.Kernel(1) as bx:\n"
        "            v: complex = X[0]\n"
        "            Y[0] = v\n"
        "    return main\n")
    import importlib.util
    spec = importlib.util.spec_from_file_location("bad_ann", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(KernelTypeError, match="unknown dtype") as ei:
        mod.k()
    assert ei.value.loc is not None and ei.value.loc.line == 9
