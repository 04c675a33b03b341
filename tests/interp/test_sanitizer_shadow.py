"""The shadow "initialised" mask (``InterpOptions(uninit="check")``, ``interp/shadow.py``).

A read of an element nobody wrote raises at the reading statement, naming the buffer, the element and
the block — through element loads, tile copies, gemm operands, reductions, cumsums, atomics and
per-thread code; masked-off lanes (``T.if_then_else``, ``if``, short-circuit ``and``) and copy padding
are not reads; writes through every path (stores, copies, fills, gemms, per-thread stores, views of
the same width) set the mask. Shapes vary with Hypothesis, tiles not dividing them.
"""

import linecache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilesim
import tilesim.language as T
from tilesim import InterpOptions, KernelRuntimeError
from tilesim.backends.interp import chunks
from tilesim.errors import KernelSyntaxError
from tilesim.ir import nodes as N
from tilesim.ir.printer import format_ir
from tilesim.sanitize import check_kernel, untracked_views

from ..sanitizer_cases import CASES, atomic_total

F32 = "float32"
CHECK = InterpOptions(uninit="check")


def _rows(M, N, r, bm=8, bn=16):
    """Each block writes rows [0, r) of its fragment, then copies the whole tile out."""
    @tilesim.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((M, N), F32), O: T.Tensor((M, N), F32)):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
                t = T.alloc_fragment((bm, bn), F32)
                for i, j in T.Parallel(r, bn):
                    t[i, j] = A[by * bm + i, bx * bn + j] * 2.0
                T.copy(t, O[by * bm, bx * bn])
        return main
    return k()


@settings(max_examples=12, deadline=None)
@given(M=st.integers(1, 40), N=st.integers(1, 40), r=st.integers(1, 8))
def test_partial_fragment_read_is_named(M, N, r):
    """Rows r.. of the fragment are read by the copy only where they land inside O: a finding iff
    some block's copy needs an unwritten row, naming the first such element."""
    k = _rows(M, N, r)
    a = np.random.default_rng(0).standard_normal((M, N)).astype(np.float32)
    needs_unwritten = r < min(8, M)  # the first block row copies rows 0..min(8, M)-1
    if not needs_unwritten:
        np.testing.assert_allclose(k.run(a, options=CHECK), a * 2)
        return
    with pytest.raises(KernelRuntimeError, match=rf"read of uninitialised fragment buffer t at index \({r}, 0\) "
                                                 r"in block 0") as e:
        k.run(a, options=CHECK)
    assert "T.copy(t, O" in linecache.getline(e.value.loc.file, e.value.loc.line)
    assert e.value.hint


def _guarded(N, r, how, bs=16):
    """A fragment written at [0, r) and read only there: through T.if_then_else, an if, or `and`."""
    @tilesim.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((N,), F32), O: T.Tensor((N,), F32)):
            with T.Kernel(T.ceildiv(N, bs), threads=128) as bx:
                t = T.alloc_fragment((bs,), F32)
                for i in T.Parallel(r):
                    t[i] = A[bx * bs + i]
                for i in T.Parallel(bs):
                    if how == "select":
                        O[bx * bs + i] = T.if_then_else(i < r, t[i], 0.0)
                    elif how == "if":
                        if i < r:
                            O[bx * bs + i] = t[i]
                        else:
                            O[bx * bs + i] = 0.0
                    elif how == "and":
                        if i < r and t[i] > 0:
                            O[bx * bs + i] = 1.0
                        else:
                            O[bx * bs + i] = 0.0
                    else:  # unguarded: a bug when r < bs
                        O[bx * bs + i] = t[i]
        return main
    return k()


@settings(max_examples=8, deadline=None)
@given(N=st.integers(1, 50), r=st.integers(1, 16), how=st.sampled_from(["select", "if", "and", "plain"]))
def test_masked_lanes_are_not_reads(N, r, how):
    k = _guarded(N, r, how)
    a = np.random.default_rng(1).standard_normal(N).astype(np.float32)
    if how == "plain" and r < 16:
        with pytest.raises(KernelRuntimeError, match=rf"fragment buffer t at index \({r},\)"):
            k.run(a, options=CHECK)
        return
    out = k.run(a, options=CHECK)
    i = np.arange(N) % 16
    want = {"select": np.where(i < r, a, 0), "if": np.where(i < r, a, 0), "and": ((i < r) & (a > 0)) * 1.0,
            "plain": a}[how]
    np.testing.assert_allclose(out, want)


def _gemm_operand(M, N, K, fill_b=True, bm=16, bn=16, bk=16):
    @tilesim.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((M, K), F32), B: T.Tensor((K, N), F32), C: T.Tensor((M, N), F32)):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
                A_s = T.alloc_shared((bm, bk), F32)
                B_s = T.alloc_shared((bk, bn), F32)
                C_l = T.alloc_fragment((bm, bn), F32)
                T.clear(C_l)
                for ko in T.serial(T.ceildiv(K, bk)):
                    T.copy(A[by * bm, ko * bk], A_s)
                    if fill_b:
                        T.copy(B[ko * bk, bx * bn], B_s)
                    T.gemm(A_s, B_s, C_l)
                T.copy(C_l, C[by * bm, bx * bn])
        return main
    return k()


def test_gemm_operand_and_padding():
    a = np.random.default_rng(2).standard_normal((37, 29)).astype(np.float32)
    b = np.random.default_rng(3).standard_normal((29, 21)).astype(np.float32)
    np.testing.assert_allclose(_gemm_operand(37, 21, 29).run(a, b, options=CHECK), a @ b, rtol=1e-4, atol=1e-4)
    with pytest.raises(KernelRuntimeError, match=r"shared buffer B_s at index \(0, 0\) in block 0") as e:
        _gemm_operand(37, 21, 29, fill_b=False).run(a, b, options=CHECK)
    assert "T.gemm(A_s, B_s, C_l)" in linecache.getline(e.value.loc.file, e.value.loc.line)


def _cumsum(N, r, bs=16):
    @tilesim.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((N,), F32), O: T.Tensor((N,), F32)):
            with T.Kernel(T.ceildiv(N, bs), threads=128) as bx:
                t = T.alloc_fragment((bs,), F32)
                c = T.alloc_fragment((bs,), F32)
                for i in T.Parallel(r):
                    t[i] = A[bx * bs + i]
                T.cumsum(t, c)
                T.copy(c, O[bx * bs])
        return main
    return k()


def test_cumsum_reads_its_source():
    a = np.ones(16, np.float32)
    np.testing.assert_allclose(_cumsum(16, 16).run(a, options=CHECK), np.arange(1, 17))
    with pytest.raises(KernelRuntimeError, match=r"fragment buffer t at index \(5,\)"):
        _cumsum(16, 5).run(a, options=CHECK)


def _simt(N, guard, threads=32):
    @tilesim.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((N,), F32), O: T.Tensor((N,), F32)):
            with T.Kernel(1, threads=threads) as bx:
                tx = T.get_thread_binding()
                s = T.alloc_shared((threads,), F32)
                loc = T.alloc_local((1,), F32)
                if guard == "local":
                    O[tx] = loc[0]  # every thread reads its own never-written local
                else:
                    if tx < N:
                        s[tx] = A[tx]
                    T.sync_threads()
                    if guard == "yes":
                        if tx < N:
                            O[tx] = s[tx]
                    else:
                        O[tx % N] = s[threads - 1 - tx]  # threads >= N read slots nobody wrote
        return main
    return k()


def test_per_thread_code():
    a = np.arange(20, dtype=np.float32)
    np.testing.assert_allclose(_simt(20, "yes").run(a, options=CHECK), a)
    with pytest.raises(KernelRuntimeError, match=r"read of uninitialised shared buffer s at index \(31,\)"):
        _simt(20, "no").run(a, options=CHECK)
    with pytest.raises(KernelRuntimeError, match=r"uninitialised local buffer loc"):
        _simt(32, "local").run(np.zeros(32, np.float32), options=CHECK)


def _view(N, dtype, bs=16):
    @tilesim.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((N,), F32), O: T.Tensor((N,), F32)):
            with T.Kernel(T.ceildiv(N, bs), threads=128) as bx:
                t = T.alloc_fragment((bs,), F32)
                v = T.view(t, (bs,), dtype)
                T.copy(A[bx * bs], v)  # written through the view
                T.copy(t, O[bx * bs])  # read through the root
        return main
    return k()


def test_views_share_or_drop_the_mask():
    a = np.random.default_rng(4).standard_normal(40).astype(np.float32)
    k = _view(40, F32)
    assert untracked_views(k.prim_func) == []
    np.testing.assert_allclose(k.run(a, options=CHECK), a)
    k2 = _view(40, "int32")  # another dtype of the same width: still one mask
    assert untracked_views(k2.prim_func) == []
    assert check_kernel(k2, [a]).ok


def test_outputs_never_written_and_inputs_initialised():
    M, N = 20, 9

    @tilesim.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((M, N), F32), O: T.Tensor((M, N), F32)):
            with T.Kernel(1, threads=128) as bx:
                for i, j in T.Parallel(M, N - 1):
                    O[i, j] = A[i, j + 1] + A[i, j] + bx
        return main
    with pytest.raises(KernelRuntimeError, match=r"output O: 20 of 180 element\(s\) are never written, first at "
                                                 r"\(0, 8\)"):
        k().run(np.zeros((M, N), np.float32), options=CHECK)


def test_atomic_into_unzeroed_output_names_the_atomic():
    with pytest.raises(KernelRuntimeError, match=r"atomic update of uninitialised global buffer O at index \(0,\)"):
        atomic_total(50, zero=False).run(np.ones(50, np.float32), options=CHECK)
    np.testing.assert_allclose(atomic_total(50).run(np.ones(50, np.float32), options=CHECK), [50.0])


def test_default_options_do_not_check():
    """Off by default: the same buggy kernel runs and returns the uninitialised values (NaN)."""
    out = _rows(8, 16, 3).run(np.ones((8, 16), np.float32))
    assert np.isnan(out[3:]).all() and (out[:3] == 2).all()
    with pytest.raises(tilesim.KernelTypeError, match="'check'"):
        InterpOptions(uninit="mask")


@pytest.mark.parametrize("name, build, inputs", [(n, b, i) for n, k, b, i in CASES if k == "uninit"],
                         ids=[n for n, k, _, _ in CASES if k == "uninit"])
def test_planted_uninit_bug_is_named_at_its_read(name, build, inputs):
    """The finding points at a source line that names the buffer it reports."""
    rep = check_kernel(build(), inputs(np.random.default_rng(0)) if inputs else None)
    f = rep.findings[0]
    buf = f.split("buffer ")[1].split()[0] if "buffer " in f else f.split("output ")[1].split(":")[0]
    path, line = f.rsplit("(at ", 1)[1].rstrip(")").rsplit(":", 2)[:2]
    assert buf in linecache.getline(path, int(line)), (f, linecache.getline(path, int(line)))


# ------------------------------------------------------------------ T.sync_grid: one race record per phase
def _grid_phases(G, where):
    """Blocks write W[bx], then read a neighbour's entry: after the grid barrier (ordered, no race), or
    before it (a race within the phase); ``"rewrite"``: after the barrier every block writes W[0]."""
    @tilesim.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(X: T.Tensor((G,), F32), W: T.Tensor((G,), F32), Y: T.Tensor((G,), F32)):
            with T.Kernel(G, threads=32) as bx:
                W[bx] = X[bx] * 2
                if where == "before":
                    Y[bx] = W[(bx + 1) % G]
                T.sync_grid()
                if where == "after":
                    Y[bx] = W[(bx + 1) % G]
                if where == "rewrite":
                    W[0] = X[bx]
                    Y[bx] = X[bx]
        return main
    return k()


@pytest.mark.parametrize("mode", ["batched", "serial"])
@settings(max_examples=4, deadline=None)
@given(G=st.integers(2, 9))
def test_grid_barrier_phases(G, mode):
    x = np.arange(G, dtype=np.float32) + 1
    w = np.zeros(G, np.float32)
    rep = check_kernel(_grid_phases(G, "after"), [x, w], modes=(mode,))
    assert rep.ok, rep.findings
    rep = check_kernel(_grid_phases(G, "before"), [x, w], modes=(mode,))
    assert not rep.ok and "W(" in rep.findings[0] and "(a race" in rep.findings[0], rep.findings
    rep = check_kernel(_grid_phases(G, "rewrite"), [x, w], modes=(mode,))
    assert not rep.ok and "both write W(0,)" in rep.findings[0], rep.findings


def test_grid_barrier_is_in_the_ir_where_it_was_written():
    text = format_ir(_grid_phases(4, "after").prim_func)
    assert text.index("W[bx] =") < text.index("T.sync_grid()") < text.index("Y[bx] =")

    @tilesim.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(X: T.Tensor((4,), F32), Y: T.Tensor((4,), F32)):
            with T.Kernel(4, threads=32) as bx:
                for i in T.Parallel(4):
                    T.sync_grid()
                    Y[i] = X[i] + bx
        return main
    with pytest.raises(KernelSyntaxError, match="T.sync_grid inside T.Parallel"):
        k()


@tilesim.jit
def _eager_add(A, B, block=64, skip=1):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), F32)
    B: T.Tensor((M, N), F32)
    C = T.empty((M, N), F32)
    with T.Kernel(T.ceildiv(M * N, block), threads=128) as bx:
        for i in T.Parallel(block):
            idx = bx * block + i
            if idx < M * N - skip:
                C[idx // N, idx % N] = A[idx // N, idx % N] + B[idx // N, idx % N]
    return C


@settings(max_examples=6, deadline=None)
@given(M=st.integers(1, 20), N=st.integers(1, 20), skip=st.integers(0, 3))
def test_eager_empty_output_is_tracked(M, N, skip):
    a = np.ones((M, N), np.float32)
    rep = check_kernel(_eager_add.compile(M=M, N=N, skip=skip), [a, a])
    missing = min(skip, M * N)
    if missing == 0:
        assert rep.ok, rep.findings
    else:
        want = f"output C: {missing} of {M * N} element(s) are never written, first at {divmod(M * N - missing, N)}"
        assert len(rep.findings) == 1 and rep.findings[0].startswith(want), rep.findings


def _grid_neighbour(target):
    G = 8

    @tilesim.jit(out_idx=[-1], target=target)
    def k():
        @T.prim_func
        def main(X: T.Tensor((G,), F32), W: T.Tensor((G,), F32), Y: T.Tensor((G,), F32)):
            with T.Kernel(G, threads=32) as bx:
                W[bx] = X[bx] * 2
                T.sync_grid()
                Y[bx] = W[(bx + 1) % G]
        return main
    return k


def test_grid_barrier_on_the_cpu_and_cuda_targets():
    """The compiled CPU target runs a grid-barrier launch on the interpreter (it ran blocks one after
    another, past the barrier: wrong values); the CUDA backend refuses it at the barrier's line."""
    x = np.arange(8, dtype=np.float32) + 1
    k = _grid_neighbour("cpu")()
    assert "grid barrier" in k.program.fallback
    assert np.array_equal(k(x, np.zeros(8, np.float32)), np.roll(x * 2, -1))
    with pytest.warns(tilesim.TargetFallbackWarning, match="T.sync_grid .* not supported by the CUDA backend"):
        kc = _grid_neighbour("cuda")()  # no GPU here: the interpreter runs it, the refusal is named
    assert np.array_equal(kc(x, np.zeros(8, np.float32)), np.roll(x * 2, -1))
    with pytest.raises(tilesim.KernelTypeError, match="T.sync_grid .* not supported by the CUDA backend") as e:
        tilesim.JITKernel(kc.prim_func, out_idx=kc.out_idx, target="cuda", fallback=False)
    assert "T.sync_grid()" in linecache.getline(e.value.loc.file, e.value.loc.line)


def _wide_view(N, part, bs=8):
    """An fp32 fragment written through an fp16 view of twice the elements (``part`` of them)."""
    @tilesim.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((2 * N,), "float16"), O: T.Tensor((N,), F32)):
            with T.Kernel(T.ceildiv(N, bs), threads=128) as bx:
                t = T.alloc_fragment((bs,), F32)
                v = T.view(t, (2 * bs,), "float16")
                for i in T.Parallel(part):
                    v[i] = A[2 * bx * bs + i]
                T.copy(t, O[bx * bs])
        return main
    return k()


def test_views_of_another_width_fall_back_to_the_differential():
    a = np.random.default_rng(5).standard_normal(48).astype(np.float16)
    k = _wide_view(24, 16)
    assert untracked_views(k.prim_func) == ["v"]
    rep = check_kernel(k, [a])
    assert rep.ok, rep.findings
    np.testing.assert_array_equal(k.run(a, options=CHECK), a.view(np.float32))
    rep = check_kernel(_wide_view(24, 10), [a])  # elements 5.. of t are never written
    assert not rep.ok and "O: 9 of 24 element(s) depend on uninitialised memory" in rep.findings[0], rep.findings


def test_checking_runs_use_one_thread():
    launch = next(s for s in _rows(8, 16, 8).prim_func.body if isinstance(s, N.Launch))
    assert chunks.parallel_safe(launch, InterpOptions())
    assert not chunks.parallel_safe(launch, CHECK)
