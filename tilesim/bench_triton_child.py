"""The child process of the Triton column of ``tilesim bench`` (:mod:`tilesim.bench_triton` runs
``python -m tilesim.bench_triton_child WHICH IN.npz OUT.npz REPS`` with ``TRITON_INTERPRET=1``).

Contract: Triton kernels written here for the bench's two rows (a tiled fp32 GEMM; causal flash-attention
forward), each launched on torch CPU tensors made from the ``.npz`` inputs; writes ``first`` (seconds of
the first call), ``warm`` (median of REPS calls after one warm-up) and ``result`` to OUT.npz. Importing this
module defines the kernels only where triton and torch are installed, and Triton kernels run on the CPU only when ``TRITON_INTERPRET=1`` was set
before Triton was imported: run it only as that child.

Layer: app (see :mod:`tilesim.hw`).
"""

import statistics
import sys
import time

import numpy as np

from . import optional

triton = optional.module("triton")
tl = optional.module("triton.language")
torch = optional.module("torch")
_interpreter = optional.module("triton.runtime.interpreter") if tl is not None else None

if tl is not None and torch is not None:  # importable without them (tilesim's own import checks walk it); the
    # child process that runs it has both (tilesim.bench_triton.column checks before starting it)
    _patch_tensor = _interpreter._patch_lang_tensor

    def _patch_lang_tensor(tensor, scope):
        """Triton's interpreter turns a scalar used as a range bound into ``int(1-element array)``, an error since
        NumPy 2.3: take the element instead (the only change; the same as the conformance harness makes)."""
        _patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    _interpreter._patch_lang_tensor = _patch_lang_tensor

    def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm = tl.program_id(0) * BM + tl.arange(0, BM)
        rn = tl.program_id(1) * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            ka = k0 + rk
            a = tl.load(a_ptr + rm[:, None] * K + ka[None, :], mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
            b = tl.load(b_ptr + ka[:, None] * N + rn[None, :], mask=(ka[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc += tl.dot(a, b, input_precision="ieee")
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

    def _attention(q_ptr, k_ptr, v_ptr, o_ptr, S, H, scale, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):
        """Causal attention forward on contiguous (B, S, H, D) tensors, one program per (query tile, b*h)."""
        pid_m = tl.program_id(0)
        bh = tl.program_id(1)
        base = (bh // H) * S * H * D + (bh % H) * D
        rows = pid_m * BM + tl.arange(0, BM)
        cols = tl.arange(0, BN)
        d = tl.arange(0, D)
        q = tl.load(q_ptr + base + rows[:, None] * (H * D) + d[None, :], mask=rows[:, None] < S, other=0.0)
        m_i = tl.full((BM,), float("-inf"), tl.float32)
        l_i = tl.zeros((BM,), tl.float32)
        acc = tl.zeros((BM, D), tl.float32)
        for start in range(0, (pid_m + 1) * BM, BN):
            kv = start + cols
            k = tl.load(k_ptr + base + kv[None, :] * (H * D) + d[:, None], mask=kv[None, :] < S, other=0.0)
            s = tl.dot(q, k, input_precision="ieee") * scale
            s = tl.where((rows[:, None] >= kv[None, :]) & (kv[None, :] < S), s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.exp(s - m_new[:, None])
            alpha = tl.exp(m_i - m_new)
            v = tl.load(v_ptr + base + kv[:, None] * (H * D) + d[None, :], mask=kv[:, None] < S, other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
            l_i = l_i * alpha + tl.sum(p, 1)
            m_i = m_new
        tl.store(o_ptr + base + rows[:, None] * (H * D) + d[None, :], acc / l_i[:, None], mask=rows[:, None] < S)

    _MATMUL = triton.jit(_matmul)
    _ATTENTION = triton.jit(_attention)


def gemm(a, b, bm=64, bn=64, bk=32):
    ta, tb = torch.from_numpy(np.ascontiguousarray(a)), torch.from_numpy(np.ascontiguousarray(b))
    m, k = ta.shape
    n = tb.shape[1]
    c = torch.empty((m, n), dtype=torch.float32)
    _MATMUL[(-(-m // bm), -(-n // bn))](ta, tb, c, m, n, k, BM=bm, BN=bn, BK=bk)
    return c.numpy()


def attention(q, k, v, bm=64, bn=64):
    tq, tk, tv = (torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)) for x in (q, k, v))
    b, s, h, d = tq.shape
    o = torch.empty_like(tq)
    _ATTENTION[(-(-s // bm), b * h)](tq, tk, tv, o, s, h, float(1.0 / np.sqrt(d)), BM=bm, BN=bn, D=d)
    return o.numpy()


def main(which: str, src: str, dst: str, reps: int) -> None:
    optional.require("triton", "the Triton column of tilesim bench")
    optional.require("torch", "the Triton column of tilesim bench")
    with np.load(src) as f:
        inputs = [f[f"arr_{i}"] for i in range(len(f.files))]
    fn = {"gemm": gemm, "attention": attention}[which]
    t0 = time.perf_counter()
    result = fn(*inputs)
    first = time.perf_counter() - t0
    fn(*inputs)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(*inputs)
        times.append(time.perf_counter() - t0)
    np.savez(dst, first=first, warm=statistics.median(times), result=result)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
