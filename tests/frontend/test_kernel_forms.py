"""Kernel-language forms of TileLang programs: let-bound slice bounds, unpacking, re-bound names,
``T.parallel``, dtype names without a width, refused CUDA source imports.
"""

import numpy as np
import pytest

import tilesim as tilelang
import tilesim.language as T
from tilesim.errors import KernelSyntaxError, KernelTypeError


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


# ------------------------------------------------------------------ loop variables' scope, lets, per-element vars
def test_a_loop_variable_name_can_be_bound_again_after_its_loop():
    """`for i, j in T.Parallel(...)` then, in a later loop, `j = offset + i`: a new name (TileLang scoping)."""

    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(X: T.Tensor((8,), "float32"), Y: T.Tensor((16,), "float32")):
            with T.Kernel(1) as bx:
                s = T.alloc_shared((16,), "float32")
                f = T.alloc_fragment((2, 4), "float32")
                for i, j in T.Parallel(2, 4):
                    f[i, j] = X[i * 4 + j]
                T.fill(s, 0)
                offset = T.alloc_var("int32")
                offset = 8
                for i in T.Parallel(8):
                    j = offset + i
                    s[j] = f[i // 4, i % 4] * 2
                T.copy(s, Y)
        return main

    x = np.arange(8, dtype=np.float32)
    assert np.array_equal(k()(x), np.concatenate([np.zeros(8, np.float32), x * 2]))


def test_a_name_bound_to_a_load_keeps_the_value_read_then():
    """val = s[i]; s[i] = s[j]; s[j] = val swaps pairs (the bitonic-sort step of TileLang's top-k)."""

    @tilelang.jit(out_idx=[-1])
    def k(n):
        @T.prim_func
        def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shared((n,), "float32")
                T.copy(X, s)
                for i1 in T.serial(3):
                    for i2 in T.serial(i1 + 1):
                        for i in T.Parallel(n):
                            ascending = (i & (1 << (i1 + 1))) != 0
                            j = i ^ (1 << (i1 - i2))
                            if i < j and ((ascending and s[i] > s[j]) or (not ascending and s[i] < s[j])):
                                val = s[i]
                                s[i] = s[j]
                                s[j] = val
                        T.sync_threads()
                T.copy(s, Y)
        return main

    x = np.array([3, 1, 7, 5, 2, 8, 6, 4], np.float32)
    assert np.array_equal(k(8)(x), np.sort(x)[::-1])


def test_alloc_var_inside_parallel_is_one_variable_per_element():
    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(X: T.Tensor((4, 4), "float32"), Y: T.Tensor((4, 4), "float32")):
            with T.Kernel(1) as bx:
                f = T.alloc_fragment((4, 4), "float32")
                T.copy(X, f)
                for i, j in T.Parallel(4, 4):
                    d = T.alloc_var("float32")
                    if f[i, j] > 0:
                        d = 1.0
                    else:
                        d = 0.0
                    c = T.alloc_var("int32", init=j)
                    for _ in T.serial(2):
                        c += 1
                    f[i, j] = d * 10 + c
                T.copy(f, Y)
        return main

    x = np.array([[1, -1, 2, -2]] * 4, np.float32)
    want = (x > 0) * 10.0 + np.arange(4)[None, :] + 2
    assert np.array_equal(k()(x), want.astype(np.float32))


# ------------------------------------------------------------------ T.parallel (TIR's parallel loop)
def test_lowercase_parallel_loops_nest_like_T_Parallel():
    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(X: T.Tensor((4, 8), "float32"), Y: T.Tensor((4, 8), "float32")):
            with T.Kernel(1) as bx:
                f = T.alloc_fragment((4, 8), "float32")
                T.copy(X, f)
                for i in T.parallel(4):
                    for j in T.parallel(2, 8):  # start, stop: the index runs over 2..7
                        if i >= 2:
                            f[i, j] = 0.0
                T.copy(f, Y)
        return main

    x = np.arange(32, dtype=np.float32).reshape(4, 8) + 1
    want = x.copy()
    want[2:, 2:] = 0
    assert np.array_equal(k()(x), want)


def test_lowercase_parallel_needs_constant_bounds():
    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(X: T.Tensor((4,), "float32"), n: T.int32, Y: T.Tensor((4,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.parallel(n):
                    Y[i] = X[i]
        return main

    with pytest.raises(KernelTypeError, match="T.parallel bounds must be compile-time constants"):
        k()


# ------------------------------------------------------------------ eager kernels compiled by name, binding errors
def _eager_scale_factory():
    @tilelang.autotune(configs=[{"block": 2}, {"block": 4}], warmup=1, rep=1)
    @tilelang.jit
    def scale(x, block=2, factor=3.0):
        n = T.const("n")
        x: T.Tensor((n,), "float32")
        out = T.empty((n,), "float32")
        with T.Kernel(T.ceildiv(n, block)) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    out[bx * block + i] = x[bx * block + i] * factor
        return out

    return scale


def test_autotuned_eager_kernel_compiles_by_name_without_tensors():
    scale = _eager_scale_factory()
    k = scale.compile(n=8, block=4)  # every tunable given: no search; T.const n by name
    x = np.arange(8, dtype=np.float32)
    assert np.array_equal(np.asarray(k(x)), x * 3)
    with tilelang.autotuner.set_autotune_inputs(x):
        tuned = scale.compile(n=8)  # searched over the configs on these inputs
    assert np.array_equal(np.asarray(tuned(x)), x * 3)


def test_an_eager_call_that_misses_an_argument_is_a_located_kernel_error():
    scale = _eager_scale_factory()
    with pytest.raises(KernelTypeError, match=r"scale\(\): missing a required argument: 'x'") as ei:
        scale.jit_impl(block=2)
    assert ei.value.loc is not None and ei.value.loc.file == __file__
    assert "scale.compile(" in ei.value.hint


# ------------------------------------------------------------------ dtype names without a width; CUDA source imports
@pytest.mark.parametrize("name, want", [("uint", "uint32"), ("int", "int32"), ("float", "float32")])
def test_dtype_names_without_a_width_are_32_bits(name, want):
    from tilesim import dtypes as dt
    assert dt.canon(name) == want and T.dtype(name) == want


def _extern_module(tmp_path, name, stmt):
    src = tmp_path / f"ext_{name}.py"
    src.write_text(
        "import tilesim as tilelang\nimport tilesim.language as T\n\n"
        "@tilelang.jit(out_idx=[-1])\ndef k():\n"
        "    @T.prim_func\n"
        "    def main(X: T.Tensor((4,), 'float32'), Y: T.Tensor((4,), 'float32')):\n"
        "        with T.Kernel(1) as bx:\n"
        f"            {stmt}\n"
        "            Y[0] = X[0]\n"
        "    return main\n")
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"ext_{name}", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_import_source_alone_has_no_effect(tmp_path):
    mod = _extern_module(tmp_path, "import", "T.import_source('__device__ void f() {}')")
    np.testing.assert_array_equal(mod.k()(np.arange(4, dtype=np.float32))[:1], [0.0])


def test_unknown_extern_functions_are_refused_naming_them(tmp_path):
    from tilesim.errors import KernelSyntaxError
    mod = _extern_module(tmp_path, "call", "T.call_extern('f', T.access_ptr(Y, 'w'), dtype='float32')")
    with pytest.raises(KernelSyntaxError, match="T.call_extern of 'f': an external device function") as ei:
        mod.k()
    assert ei.value.loc.line == 9
    assert "T.import_source" in ei.value.hint and "decode_fp4_to_bf16_twiddling" in ei.value.hint


# ------------------------------------------------------------------ T.sync_grid: a grid barrier
@pytest.mark.parametrize("opts", [dict(chunk_bytes=1), dict(mode="serial"), {}])
def test_sync_grid_makes_every_blocks_writes_visible_to_every_block(opts):
    """Blocks write a workspace, meet at the grid barrier, then read another block's entry (the persistent
    split-KV MLA decoder combines its partial results this way)."""
    from tilesim.backends.interp import InterpOptions
    G = 8

    @tilelang.jit(out_idx=[-1], options=InterpOptions(**opts))
    def k():
        @T.prim_func
        def main(X: T.Tensor((G,), "float32"), W: T.Tensor((G,), "float32"), Y: T.Tensor((G,), "float32")):
            with T.Kernel(G, threads=32) as bx:
                W[bx] = X[bx] * 2
                T.sync_grid()
                Y[bx] = W[(bx + 1) % G]
        return main

    x = np.arange(G, dtype=np.float32) + 1
    assert np.array_equal(k()(x, np.zeros(G, np.float32)), np.roll(x * 2, -1))


def test_sync_grid_outside_a_launch_is_an_error():
    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(X: T.Tensor((4,), "float32"), Y: T.Tensor((4,), "float32")):
            T.sync_grid()
            with T.Kernel(1) as bx:
                Y[0] = X[0]
        return main

    with pytest.raises(KernelSyntaxError, match="T.sync_grid outside"):
        k()
