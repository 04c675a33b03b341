"""Issue 15 (2026-12-02, helper AH): fp32 math without fast math, and co-resident blocks issuing in phase.

* ``precise_math`` (``tensorcore``): TileLang compiles without ``--use_fast_math`` by default, so an fp32
  ``T.tanh`` is libdevice ``tanhf`` (two SFU ops and 14 ALU slots), ``T.sqrt`` is ``sqrtf`` and ``a / b`` the IEEE
  division (``PRECISE_MATH_COST``), not one approximate instruction.
* ``phase_locked_issue`` (``tensorcore``): with ``k > 1`` blocks per core, a block's time in the wave
  quantisation is its critical path plus the other blocks' CUDA-core issue time.
"""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hwmodels
import tilesim
import tilesim.language as T
from tilesim.analysis import analyze, get_profile
from tilesim.analysis.profiles import PRECISE_MATH_COST
from tilesim.analysis.program import Loop
from tilesim.sim import simulate_kernel

H200 = "h200_sxm_141gb"
TC = get_profile("tensorcore")
FAST = dataclasses.replace(TC, precise_math=False)
UNLOCKED = dataclasses.replace(TC, phase_locked_issue=False)


@tilesim.jit(out_idx=[1])
def act(M, N, block_M, block_N, threads, fn="tanh", dtype="float32"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            x = T.alloc_fragment((block_M, block_N), dtype)
            T.copy(X[by * block_M, bx * block_N], x)
            for i, j in T.Parallel(block_M, block_N):
                if fn == "tanh":
                    x[i, j] = T.tanh(x[i, j])
                elif fn == "sqrt":
                    x[i, j] = T.sqrt(x[i, j])
                else:
                    x[i, j] = 1.0 / x[i, j]
            T.copy(x, Y[by * block_M, bx * block_N])
    return main


@tilesim.jit(out_idx=[1])
def row_chunks(M, N, block_N, threads):
    """One row per block, chunk by chunk: load, a tanh-heavy element-wise step, a row sum (a barrier)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(M, threads=threads) as bx:
            x = T.alloc_fragment((1, block_N), "float32")
            s = T.alloc_fragment((1,), "float32")
            acc = T.alloc_fragment((1,), "float32")
            T.clear(acc)
            for c in T.serial(T.ceildiv(N, block_N)):
                T.copy(X[bx, c * block_N], x)
                for i, j in T.Parallel(1, block_N):
                    x[i, j] = T.tanh(x[i, j] * 0.5) * T.tanh(x[i, j] + 1.0) + T.tanh(x[i, j])
                T.reduce_sum(x, s, dim=1)
                for i in T.Parallel(1):
                    acc[i] = acc[i] + s[i]
            for i in T.Parallel(1):
                Y[bx] = acc[i]
    return main


def _ops(body):
    for n in body:
        if isinstance(n, Loop):
            yield from _ops(n.body)
        else:
            yield n


def _elementwise_op(kern, profile):
    (prog,) = analyze(kern.prim_func, hwmodels.load(H200), profile)
    return next(op for op in _ops(prog.body) if op.sfu_funcs)


@pytest.mark.parametrize("fn, key", [("tanh", "tanh"), ("sqrt", "sqrt"), ("div", "rcp")])
def test_fp32_math_costs_the_precise_sequence(fn, key):
    kern = act(256, 384, 16, 128, 128, fn=fn)
    E = 16 * 128
    precise, fast = _elementwise_op(kern, TC), _elementwise_op(kern, FAST)
    sfu, alu = PRECISE_MATH_COST[fn]
    assert precise.sfu_funcs[key] == pytest.approx(sfu * E)
    extra = precise.work["vector:float32"] - fast.work["vector:float32"]
    fast_alu = {"tanh": 0, "sqrt": 0, "div": 2}[fn]
    assert extra == pytest.approx((alu - fast_alu) * E)


def test_half_precision_math_keeps_the_fast_cost():
    kern = act(256, 384, 16, 128, 128, fn="tanh", dtype="float16")
    (prog,) = analyze(kern.prim_func, hwmodels.load(H200), TC)
    (prog_f,) = analyze(kern.prim_func, hwmodels.load(H200), FAST)
    sfu = [op.sfu_funcs.get("tanh") for op in _ops(prog.body) if op.sfu_funcs]
    sfu_f = [op.sfu_funcs.get("tanh") for op in _ops(prog_f.body) if op.sfu_funcs]
    assert sfu == sfu_f


@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 300), n=st.integers(1, 700), fn=st.sampled_from(["tanh", "sqrt", "div"]))
def test_precise_math_never_makes_a_kernel_faster(m, n, fn):
    kern = act(m, n, 16, 128, 128, fn=fn)  # tiles that do not divide the shape
    assert simulate_kernel(kern, hw=H200).time_s >= simulate_kernel(kern, hw=H200, profile=FAST).time_s * (1 - 1e-12)


def test_phase_locked_blocks_queue_their_issue():
    """Many one-row blocks per core, each a chain of loads, tanh bursts and reductions: in phase, the others'
    instruction bursts add to each block's chain (strictly slower than the old ``max``)."""
    kern = row_chunks(16384, 4096, 1024, 256)
    on = simulate_kernel(kern, hw=H200)
    off = simulate_kernel(kern, hw=H200, profile=UNLOCKED)
    assert on.launches[0]["blocks_per_core"] > 1
    assert on.time_s > 1.05 * off.time_s


def test_one_block_per_core_is_unchanged():
    kern = row_chunks(100, 4096, 1024, 256)  # fewer blocks than SMs: one per core
    on = simulate_kernel(kern, hw=H200)
    assert on.time_s == pytest.approx(simulate_kernel(kern, hw=H200, profile=UNLOCKED).time_s)


@settings(max_examples=10, deadline=None)
@given(m=st.integers(1, 3000), n=st.integers(1, 5000), threads=st.sampled_from([128, 256]))
def test_phase_locking_never_makes_a_launch_faster(m, n, threads):
    kern = row_chunks(m, n, 512, threads)
    on = simulate_kernel(kern, hw=H200).time_s
    off = simulate_kernel(kern, hw=H200, profile=UNLOCKED).time_s
    assert on >= off * (1 - 1e-12)
