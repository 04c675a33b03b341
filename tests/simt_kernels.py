"""Per-thread (SIMT) test kernels, written as TileLang users write them (only the import differs).

* ``block_scan``: an inclusive prefix sum of each row (one block per row, one element per thread) with
  a shared buffer and ``T.sync_threads`` between the Hillis-Steele steps;
* ``histogram``: per-block shared histograms with shared atomics, folded into the global one with global
  atomics;
* ``radix_select``: the k largest of each row (distinct 16-bit keys) by two 8-bit radix passes — shared
  histogram, one thread choosing the bucket, ``T.atomic_add(..., return_prev=True)`` handing out the
  slots of the threshold key — written as a 0/1 selection mask.
"""

import tilesim as tilelang
import tilesim.language as T


@tilelang.jit(out_idx=[-1])
def block_scan(M, N, threads=64):
    steps = max(1, (threads - 1).bit_length())

    @T.prim_func
    def main(A: T.Tensor((M, N), "int32"), B: T.Tensor((M, N), "int32")):
        with T.Kernel(M, threads=threads) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((threads,), "int32")
            v = T.alloc_var("int32")
            s[tx] = T.if_then_else(tx < N, A[bx, tx], 0)
            T.sync_threads()
            for i in T.serial(steps):
                off = 1 << i
                v = s[tx]
                if tx >= off:
                    v = v + s[tx - off]
                T.sync_threads()
                s[tx] = v
                T.sync_threads()
            if tx < N:
                B[bx, tx] = s[tx]

    return main


@tilelang.jit
def histogram(N, bins, per_thread=4, threads=64):
    chunk = threads * per_thread

    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), Out: T.Tensor((bins,), "int32")):
        with T.Kernel(T.ceildiv(N, chunk), threads=threads) as bx:
            tx = T.get_thread_binding()
            h = T.alloc_shared((bins,), "int32")
            T.fill(h, 0)
            T.sync_threads()
            for j in T.serial(per_thread):
                idx = bx * chunk + j * threads + tx
                if idx < N:
                    T.atomic_add(h[X[idx]], 1)
            T.sync_threads()
            for j in T.serial(T.ceildiv(bins, threads)):
                b = j * threads + tx
                if b < bins:
                    T.atomic_add(Out[b], h[b])

    return main


@tilelang.jit(out_idx=[-1])
def radix_select(M, N, k, threads=64):
    per = -(-N // threads)

    @T.prim_func
    def main(X: T.Tensor((M, N), "int32"), Sel: T.Tensor((M, N), "int32")):
        with T.Kernel(M, threads=threads) as bx:
            tx = T.get_thread_binding()
            hist = T.alloc_shared((256,), "int32")
            s_bucket = T.alloc_shared((1,), "int32")
            s_above = T.alloc_shared((1,), "int32")
            s_taken = T.alloc_shared((1,), "int32")
            prefix = T.alloc_var("int32")
            remaining = T.alloc_var("int32")
            acc = T.alloc_var("int32")
            found = T.alloc_var("int32")
            prefix = 0
            remaining = k
            for shift in (8, 0):  # two 8-bit passes, high byte first
                T.fill(hist, 0)
                T.fill(s_taken, 0)
                T.sync_threads()
                for j in T.serial(per):
                    idx = j * threads + tx
                    if idx < N:
                        key = X[bx, idx]
                        if (key >> (shift + 8)) == (prefix >> (shift + 8)):
                            T.atomic_add(hist[(key >> shift) & 255], 1)
                T.sync_threads()
                if tx == 0:
                    acc = 0
                    found = -1
                    for b in T.serial(256):
                        if found < 0:
                            if acc + hist[255 - b] >= remaining:
                                found = 255 - b
                            else:
                                acc = acc + hist[255 - b]
                    s_bucket[0] = found
                    s_above[0] = acc
                T.sync_threads()
                prefix = prefix | (s_bucket[0] << shift)
                remaining = remaining - s_above[0]
                T.sync_threads()
            for j in T.serial(per):
                idx = j * threads + tx
                if idx < N:
                    key = X[bx, idx]
                    if key > prefix:
                        Sel[bx, idx] = 1
                    elif key == prefix:
                        slot = T.atomic_add(s_taken[0], 1, return_prev=True)
                        Sel[bx, idx] = T.if_then_else(slot < remaining, 1, 0)
                    else:
                        Sel[bx, idx] = 0

    return main
