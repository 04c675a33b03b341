"""Planted bugs and correct look-alikes for the sanitizer (``tilesim.sanitize.check_kernel``).

``CASES``: ``(name, kind, build, inputs)`` — ``kind`` is ``"oob"``, ``"uninit"``, ``"race"`` (a planted
bug the sanitizer must find: write-write, plain-vs-atomic, mixed atomics and read-write conflicts) or ``"correct"`` (it must find nothing); ``build()`` returns the kernel;
``inputs(rng)`` the inputs, or None for the sanitizer's default inputs. Shapes are ones the tiles do
not divide. Used by ``tests/interp/test_sanitizer.py`` and ``benchmarks/sanitizer.py``.
"""

import numpy as np

import tilesim as tilelang
import tilesim.language as T
from tilesim.examples import matmul

F32 = "float32"


# ------------------------------------------------------------------------------------------ gathers and scatters
@tilelang.jit(out_idx=[-1])
def embed(V, D, S, bs=8):
    @T.prim_func
    def main(Tab: T.Tensor((V, D), F32), Ids: T.Tensor((S,), "int32"), O: T.Tensor((S, D), F32)):
        with T.Kernel(T.ceildiv(S, bs), threads=128) as bx:
            for i, j in T.Parallel(bs, D):
                O[bx * bs + i, j] = Tab[Ids[bx * bs + i], j]
    return main


@tilelang.jit(out_idx=[-1])
def scatter(N, bs=16):
    @T.prim_func
    def main(A: T.Tensor((N,), F32), Idx: T.Tensor((N,), "int32"), O: T.Tensor((N,), F32)):
        with T.Kernel(T.ceildiv(N, bs), threads=128) as bx:
            for i in T.Parallel(bs):
                if bx * bs + i < N:
                    O[Idx[bx * bs + i]] = A[bx * bs + i]
    return main


@tilelang.jit(out_idx=[-1])
def histogram(N, bins, bs=16):
    @T.prim_func
    def main(V: T.Tensor((N,), "int32"), H: T.Tensor((bins,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(bins):
                H[i] = 0
        with T.Kernel(T.ceildiv(N, bs), threads=128) as bx:
            for i in T.Parallel(bs):
                if bx * bs + i < N:
                    T.atomic_add(H[V[bx * bs + i]], 1)
    return main


# ------------------------------------------------------------------------------------------ serial/scalar indices
@tilelang.jit(out_idx=[-1])
def shift(N, off=1, extent_extra=0):
    @T.prim_func
    def main(A: T.Tensor((N,), F32), O: T.Tensor((N,), F32)):
        with T.Kernel(1, threads=128) as bx:
            for k in T.serial(N + extent_extra):
                O[k] = A[k + off] if off >= 0 else A[k + off]
    return main


@tilelang.jit(out_idx=[-1])
def shift_write(N, off=1):
    @T.prim_func
    def main(A: T.Tensor((N,), F32), O: T.Tensor((N,), F32)):
        with T.Kernel(1, threads=128) as bx:
            for k in T.serial(N):
                O[k] = 0.0
            for k in T.serial(N):
                O[k + off] = A[k]
    return main


@tilelang.jit(out_idx=[-1])
def reverse(N, fix=1):
    @T.prim_func
    def main(A: T.Tensor((N,), F32), O: T.Tensor((N,), F32)):
        with T.Kernel(1, threads=128) as bx:
            for k in T.serial(N):
                O[k] = A[N - k - fix]
    return main


@tilelang.jit(out_idx=[-1])
def rowsum_serial(M, N, bm=16, extra=0):
    @T.prim_func
    def main(A: T.Tensor((M, N), F32), S: T.Tensor((M,), F32)):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            acc = T.alloc_fragment((bm,), F32)
            T.clear(acc)
            for k in T.serial(N + extra):
                for i in T.Parallel(bm):
                    acc[i] += A[bx * bm + i, k]
            T.copy(acc, S[bx * bm])
    return main


@tilelang.jit(out_idx=[-1])
def corner(M, N, r=0):
    @T.prim_func
    def main(A: T.Tensor((M, N), F32), O: T.Tensor((1,), F32)):
        with T.Kernel(1, threads=128) as bx:
            O[0] = A[M - 1 + r, N - 1]
    return main


@tilelang.jit(out_idx=[-1])
def onchip(N, bs=16, off=0):
    @T.prim_func
    def main(A: T.Tensor((N,), F32), O: T.Tensor((N,), F32)):
        with T.Kernel(T.ceildiv(N, bs), threads=128) as bx:
            s = T.alloc_shared((bs,), F32)
            T.copy(A[bx * bs], s)
            for i in T.Parallel(bs):
                O[bx * bs + i] = s[i] + s[(i + off) % (bs + off)]
    return main


# ------------------------------------------------------------------------------------------ uninitialised memory
@tilelang.jit(out_idx=[-1])
def gemm_clear(M, N, K, clear=True, bm=16, bn=16, bk=16):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), F32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), F32)
            if clear:
                T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])
    return main


@tilelang.jit(out_idx=[-1])
def cols(M, N, skip=1, bm=16):
    @T.prim_func
    def main(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32)):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            for i, j in T.Parallel(bm, N - skip):
                B[bx * bm + i, j] = A[bx * bm + i, j]
    return main


@tilelang.jit(out_idx=[-1])
def sign_of(N, init=True, bs=16):
    @T.prim_func
    def main(A: T.Tensor((N,), F32), B: T.Tensor((N,), "int32")):
        with T.Kernel(T.ceildiv(N, bs), threads=128) as bx:
            t = T.alloc_fragment((bs,), F32)
            if init:
                T.copy(A[bx * bs], t)
            for i in T.Parallel(bs):
                B[bx * bs + i] = T.if_then_else(t[i] > 0, 1, 0)
    return main


@tilelang.jit(out_idx=[-1])
def to_int(N, init=True, bs=16):
    @T.prim_func
    def main(A: T.Tensor((N,), F32), B: T.Tensor((N,), "int32")):
        with T.Kernel(T.ceildiv(N, bs), threads=128) as bx:
            t = T.alloc_fragment((bs,), F32)
            if init:
                T.copy(A[bx * bs], t)
            for i in T.Parallel(bs):
                B[bx * bs + i] = T.Cast("int32", t[i] * 4.0)
    return main


@tilelang.jit(out_idx=[-1])
def rowmax(M, N, clear=True, bm=8):
    @T.prim_func
    def main(A: T.Tensor((M, N), F32), S: T.Tensor((M,), F32)):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            A_l = T.alloc_fragment((bm, N), F32)
            S_l = T.alloc_fragment((bm,), F32)
            T.copy(A[bx * bm, 0], A_l)
            T.reduce_max(A_l, S_l, dim=1, clear=clear)
            T.copy(S_l, S[bx * bm])
    return main


@tilelang.jit(out_idx=[-1])
def atomic_total(N, zero=True, bs=16):
    @T.prim_func
    def main(A: T.Tensor((N,), F32), O: T.Tensor((1,), F32)):
        if zero:
            with T.Kernel(1, threads=128) as bx:
                O[0] = 0.0
        with T.Kernel(T.ceildiv(N, bs), threads=128) as bx:
            for i in T.Parallel(bs):
                if bx * bs + i < N:
                    T.atomic_add(O[0], A[bx * bs + i])
    return main


@tilelang.jit(out_idx=[-1])
def half_fragment(N, half=False, bs=16):
    @T.prim_func
    def main(A: T.Tensor((N,), F32), O: T.Tensor((N,), F32)):
        with T.Kernel(T.ceildiv(N, bs), threads=128) as bx:
            t = T.alloc_fragment((bs,), F32)
            for i in T.Parallel(bs // 2 if half else bs):
                t[i] = A[bx * bs + i] * 2.0
            T.copy(t, O[bx * bs])
    return main


@tilelang.jit(out_idx=[-1])
def use_var(N, init=True, bs=16):
    @T.prim_func
    def main(A: T.Tensor((N,), F32), O: T.Tensor((N,), F32)):
        with T.Kernel(T.ceildiv(N, bs), threads=128) as bx:
            acc = T.alloc_var(F32)
            if init:
                acc = 0.0
            for k in T.serial(bs):
                if bx * bs + k < N:
                    acc = acc + A[bx * bs + k]
            for i in T.Parallel(bs):
                O[bx * bs + i] = acc
    return main


@tilelang.jit(out_idx=[-1])
def shared_order(N, early=False, bs=16):
    @T.prim_func
    def main(A: T.Tensor((N,), F32), O: T.Tensor((N,), F32)):
        with T.Kernel(T.ceildiv(N, bs), threads=128) as bx:
            s = T.alloc_shared((bs,), F32)
            if early:
                T.copy(s, O[bx * bs])
                T.copy(A[bx * bs], s)
            else:
                T.copy(A[bx * bs], s)
                T.copy(s, O[bx * bs])
    return main


@tilelang.jit(out_idx=[-1])
def first_block_only(N, all_blocks=True, bs=16):
    @T.prim_func
    def main(A: T.Tensor((N,), F32), O: T.Tensor((N,), F32)):
        with T.Kernel(T.ceildiv(N, bs), threads=128) as bx:
            if all_blocks or bx == 0:
                for i in T.Parallel(bs):
                    O[bx * bs + i] = A[bx * bs + i] + 1.0
    return main


# ------------------------------------------------------------------------------------------ races
@tilelang.jit(out_idx=[-1])
def plain_total(N, bs=16):
    @T.prim_func
    def main(A: T.Tensor((N,), F32), O: T.Tensor((1,), F32)):
        with T.Kernel(T.ceildiv(N, bs), threads=128) as bx:
            O[0] = A[bx * bs]
    return main


@tilelang.jit(out_idx=[-1])
def plain_and_atomic(N, bs=16):
    @T.prim_func
    def main(A: T.Tensor((N,), F32), O: T.Tensor((1,), F32)):
        with T.Kernel(T.ceildiv(N, bs), threads=128) as bx:
            if bx == 0:
                O[0] = 0.0
            for i in T.Parallel(bs):
                if bx * bs + i < N:
                    T.atomic_add(O[0], A[bx * bs + i])
    return main


@tilelang.jit(out_idx=[-1])
def add_and_max(N, bs=16):
    @T.prim_func
    def main(A: T.Tensor((N,), F32), O: T.Tensor((1,), F32)):
        with T.Kernel(1, threads=128) as bx:
            O[0] = 0.0
        with T.Kernel(T.ceildiv(N, bs), threads=128) as bx:
            if bx % 2 == 0:
                T.atomic_add(O[0], A[bx * bs])
            else:
                T.atomic_max(O[0], A[bx * bs])
    return main


@tilelang.jit(out_idx=[-1])
def tiles(M, N, step=16, tile=16):
    @T.prim_func
    def main(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32)):
        with T.Kernel(T.ceildiv(N, step), T.ceildiv(M, step), threads=128) as (bx, by):
            s = T.alloc_shared((tile, tile), F32)
            T.copy(A[by * step, bx * step], s)
            T.copy(s, B[by * step, bx * step])
    return main


@tilelang.jit(out_idx=[-1])
def same_tile(M, N, bs=16):
    @T.prim_func
    def main(A: T.Tensor((M, N), F32), B: T.Tensor((bs, bs), F32)):
        with T.Kernel(T.ceildiv(N, bs), T.ceildiv(M, bs), threads=128) as (bx, by):
            s = T.alloc_shared((bs, bs), F32)
            T.copy(A[by * bs, bx * bs], s)
            T.copy(s, B[0, 0])
    return main


@tilelang.jit(out_idx=[-1])
def rows(M, N, overlap=0):
    @T.prim_func
    def main(A: T.Tensor((M, N), F32), B: T.Tensor((M + 1, N), F32)):
        with T.Kernel(M, threads=128) as bx:
            for j in T.Parallel(N):
                B[bx + overlap, j] = A[bx, j]
                B[bx + 1, j] = A[bx, j]
    return main


@tilelang.jit(out_idx=[-1])
def halves(N, div=1, bs=16):
    @T.prim_func
    def main(A: T.Tensor((N,), F32), O: T.Tensor((N,), F32)):
        with T.Kernel(N, threads=128) as bx:
            O[bx // div] = A[bx]
    return main


@tilelang.jit(out_idx=[-1])
def scale(M, N, guard=True, bm=16, bn=16):
    @T.prim_func
    def main(A: T.Tensor((M, N), F32), B: T.Tensor((M, N), F32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            for i, j in T.Parallel(bm, bn):
                if not guard or (by * bm + i < M and bx * bn + j < N):
                    B[by * bm + i, bx * bn + j] = A[by * bm + i, bx * bn + j] * 2.0
    return main


@tilelang.jit
def smooth_in_place(N, halo=1, bs=16):
    @T.prim_func
    def main(A: T.Tensor((N,), F32)):
        with T.Kernel(T.ceildiv(N, bs), threads=128) as bx:
            s = T.alloc_shared((bs + 2 * halo,), F32)
            T.copy(A[bx * bs - halo], s)
            for i in T.Parallel(bs):
                A[bx * bs + i] = s[i + halo] * 0.5
    return main


@tilelang.jit(out_idx=[-1])
def prefix(N, two_launches=False):
    @T.prim_func
    def main(A: T.Tensor((N,), F32), O: T.Tensor((N,), F32)):
        if two_launches:
            with T.Kernel(N, threads=128) as bx:
                O[bx] = A[bx]
            with T.Kernel(N, threads=128) as bx:
                if bx > 0:
                    A[bx] = O[bx - 1] + O[bx]
        else:
            with T.Kernel(N, threads=128) as bx:
                O[bx] = A[bx]
                if bx > 0:
                    O[bx] = O[bx - 1] + A[bx]
    return main


def _ids(n, hi, bad=None):
    def make(rng):
        tab = rng.standard_normal((hi, 12)).astype(np.float32)
        ids = rng.integers(0, hi, n).astype(np.int32)
        if bad is not None:
            ids[n // 2] = bad
        return [tab, ids]
    return make


def _scatter(n, bad=None):
    def make(rng):
        idx = rng.permutation(n).astype(np.int32)
        if bad is not None:
            idx[n // 3] = bad
        return [rng.standard_normal(n).astype(np.float32), idx]
    return make


def _hist(n, bins, bad=None):
    def make(rng):
        v = rng.integers(0, bins, n).astype(np.int32)
        if bad is not None:
            v[-1] = bad
        return [v]
    return make


def c(name, kind, build, inputs=None):
    return (name, kind, build, inputs)


CASES = [
    # out of bounds through explicit indices (12)
    c("embedding id == vocab", "oob", lambda: embed(50, 12, 20), _ids(20, 50, bad=50)),
    c("embedding negative id", "oob", lambda: embed(50, 12, 21), _ids(21, 50, bad=-1)),
    c("scatter index == N", "oob", lambda: scatter(37), _scatter(37, bad=37)),
    c("histogram value == bins", "oob", lambda: histogram(45, 10), _hist(45, 10, bad=10)),
    c("serial read k + 1", "oob", lambda: shift(10, off=1)),
    c("serial read k - 1", "oob", lambda: shift(10, off=-1)),
    c("serial loop one too far", "oob", lambda: shift(10, off=0, extent_extra=1)),
    c("serial write k + 1", "oob", lambda: shift_write(9, off=1)),
    c("reverse index N - k", "oob", lambda: reverse(11, fix=0)),
    c("row loop over N + 1 columns", "oob", lambda: rowsum_serial(37, 21, extra=1)),
    c("scalar corner read past M", "oob", lambda: corner(13, 7, r=1)),
    c("shared index past the tile", "oob", lambda: onchip(40, off=1)),
    # uninitialised memory (10)
    c("gemm without T.clear", "uninit", lambda: gemm_clear(40, 30, 20, clear=False)),
    c("last column never written", "uninit", lambda: cols(37, 21, skip=1)),
    c("comparison of an uninitialised fragment", "uninit", lambda: sign_of(40, init=False)),
    c("cast of an uninitialised fragment", "uninit", lambda: to_int(40, init=False)),
    c("reduce_max into an uninitialised fragment (clear=False)", "uninit", lambda: rowmax(20, 13, clear=False)),
    c("atomic sum into an unzeroed output", "uninit", lambda: atomic_total(50, zero=False)),
    c("half of a fragment written", "uninit", lambda: half_fragment(40, half=True)),
    c("alloc_var read before assignment", "uninit", lambda: use_var(40, init=False)),
    c("shared read before its copy", "uninit", lambda: shared_order(40, early=True)),
    c("only block 0 writes", "uninit", lambda: first_block_only(40, all_blocks=False)),
    # races (8)
    c("every block stores O[0]", "race", lambda: plain_total(64)),
    c("plain store and atomic add on O[0]", "race", lambda: plain_and_atomic(50)),
    c("atomic add and atomic max on O[0]", "race", lambda: add_and_max(64)),
    c("tiles overlap (step 8, tile 16)", "race", lambda: tiles(40, 40, step=8, tile=16)),
    c("every block copies to the same tile", "race", lambda: same_tile(40, 40)),
    c("rows bx and bx + 1 from every block", "race", lambda: rows(9, 7, overlap=0)),
    c("two blocks per output element", "race", lambda: halves(20, div=2)),
    c("histogram with plain stores", "race", lambda: halves(20, div=20)),
    c("in-place stencil reads the next block's tile", "race", lambda: smooth_in_place(40, halo=1)),
    c("prefix sum reads the previous block's output", "race", lambda: prefix(12)),
    # correct look-alikes (22), edge tiles included
    c("README gemm 100x70x30", "correct", lambda: matmul(100, 70, 30)),
    c("README gemm 33x17x9", "correct", lambda: matmul(33, 17, 9)),
    c("README gemm 64x64x64", "correct", lambda: matmul(64, 64, 64)),
    c("gemm with T.clear at edges", "correct", lambda: gemm_clear(40, 30, 20, clear=True)),
    c("embedding with valid ids", "correct", lambda: embed(50, 12, 20), _ids(20, 50)),
    c("scatter by a permutation", "correct", lambda: scatter(37), _scatter(37)),
    c("histogram in range", "correct", lambda: histogram(45, 10), _hist(45, 10)),
    c("serial read k", "correct", lambda: shift(10, off=0)),
    c("reverse index N - 1 - k", "correct", lambda: reverse(11, fix=1)),
    c("row loop over N columns at edge rows", "correct", lambda: rowsum_serial(37, 21)),
    c("scalar corner read", "correct", lambda: corner(13, 7)),
    c("shared index inside the tile", "correct", lambda: onchip(40, off=0)),
    c("all columns written", "correct", lambda: cols(37, 21, skip=0)),
    c("comparison of a loaded fragment", "correct", lambda: sign_of(40)),
    c("cast of a loaded fragment", "correct", lambda: to_int(40)),
    c("reduce_max with clear", "correct", lambda: rowmax(20, 13)),
    c("atomic sum into a zeroed output", "correct", lambda: atomic_total(50)),
    c("whole fragment written", "correct", lambda: half_fragment(40)),
    c("alloc_var assigned first", "correct", lambda: use_var(40)),
    c("shared copied then read", "correct", lambda: shared_order(40)),
    c("disjoint tiles at edges", "correct", lambda: tiles(40, 37)),
    c("guarded T.Parallel at edges", "correct", lambda: scale(37, 21)),
    c("unguarded T.Parallel at edges (masked, as TileLang)", "correct", lambda: scale(37, 21, guard=False)),
    c("one block per output element", "correct", lambda: halves(20, div=1)),
    c("in-place update of each block's own tile", "correct", lambda: smooth_in_place(40, halo=0)),
    c("write, then read another block's element in a second launch", "correct", lambda: prefix(12, two_launches=True)),
]
