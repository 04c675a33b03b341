"""Hypothesis properties of the simulator over the core kernels, shapes and devices.

* simulated time ≥ the roofline bound;
* deterministic;
* non-decreasing when a problem dimension grows;
* more ``num_stages`` never slower while the block still fits with the same occupancy;
* a kernel twice as large in a DRAM-bound regime takes about twice as long.
"""

import math

from hypothesis import assume, given
from hypothesis import strategies as st

from tests import core_kernels as K
from tilesim.errors import KernelError
from tilesim.sim import simulate_kernel

DEVICES = ("h200_sxm_141gb", "h100_sxm5_80gb", "a100_sxm4_80gb")


@st.composite
def gemm_cases(draw):
    bm = draw(st.sampled_from([64, 128]))
    bn = draw(st.sampled_from([64, 128]))
    bk = draw(st.sampled_from([32, 64]))
    M = draw(st.integers(1, 48)) * draw(st.sampled_from([32, 100, 128]))
    N = draw(st.integers(1, 48)) * draw(st.sampled_from([32, 100, 128]))
    Kd = draw(st.integers(1, 64)) * draw(st.sampled_from([32, 64]))
    return dict(kind="gemm", M=M, N=N, K=Kd, block_M=bm, block_N=bn, block_K=bk,
                num_stages=draw(st.integers(1, 3)), threads=draw(st.sampled_from([128, 256])),
                hw=draw(st.sampled_from(DEVICES)))


@st.composite
def attention_cases(draw):
    return dict(kind="fa", batch=draw(st.integers(1, 4)), heads=draw(st.sampled_from([1, 8, 16, 32])),
                seq_len=draw(st.integers(1, 64)) * 64, dim=draw(st.sampled_from([64, 128])),
                is_causal=draw(st.booleans()), block_M=64, block_N=64, num_stages=draw(st.integers(1, 2)),
                threads=128, hw=draw(st.sampled_from(DEVICES)))


@st.composite
def rowwise_cases(draw):
    kind = draw(st.sampled_from(["softmax", "rms_norm", "elementwise"]))
    return dict(kind=kind, M=draw(st.integers(1, 400)) * 16, N=draw(st.sampled_from([256, 512, 1024])),
                hw=draw(st.sampled_from(DEVICES)))


def build(c):
    k = c["kind"]
    if k == "gemm":
        return K.matmul_relu(c["M"], c["N"], c["K"], block_M=c["block_M"], block_N=c["block_N"],
                             block_K=c["block_K"], num_stages=c["num_stages"], threads=c["threads"])
    if k == "fa":
        return K.flash_attention(c["batch"], c["heads"], c["seq_len"], c["dim"], c["is_causal"], c["block_M"],
                                 c["block_N"], c["num_stages"], c["threads"])
    if k == "softmax":
        return K.softmax(c["M"], c["N"])
    if k == "rms_norm":
        return K.rms_norm(c["M"], c["N"])
    return K.elementwise_add.compile(M=c["M"], N=c["N"], block=256, threads=128)


def sim(c, **kw):
    try:
        return simulate_kernel(build(c), hw=c["hw"], profile="tensorcore", **kw)
    except KernelError:
        assume(False)


any_case = st.one_of(gemm_cases(), attention_cases(), rowwise_cases())


@given(any_case)
def test_time_at_least_roofline_and_deterministic(c):
    r1 = sim(c)
    r2 = sim(c)
    assert r1.time_s >= r1.roofline_s * (1 - 1e-9)
    assert r1.to_dict() == r2.to_dict()
    assert r1.time_s > 0 and math.isfinite(r1.time_s)


GROW = {"gemm": ("M", "N", "K"), "fa": ("seq_len", "heads", "batch"), "softmax": ("M",), "rms_norm": ("M",),
        "elementwise": ("M", "N")}


@given(any_case, st.data())
def test_time_non_decreasing_when_a_dimension_grows(c, data):
    dim = data.draw(st.sampled_from(GROW[c["kind"]]))
    step = 64 if c["kind"] == "fa" and dim == "seq_len" else data.draw(st.integers(1, 300))
    bigger = dict(c, **{dim: c[dim] + step})
    small, big = sim(c), sim(bigger)
    assert big.time_s >= small.time_s * (1 - 1e-9), (dim, small.time_s, big.time_s)


@given(st.one_of(gemm_cases(), attention_cases()))
def test_more_stages_never_slower_while_it_fits(c):
    base = sim(c)
    more = dict(c, num_stages=c["num_stages"] + 1)
    try:
        r = simulate_kernel(build(more), hw=c["hw"], profile="tensorcore")
    except KernelError:
        return  # does not fit any more
    if r.blocks_per_core == base.blocks_per_core:
        assert r.time_s <= base.time_s * (1 + 1e-9)


@given(st.sampled_from(["softmax", "rms_norm", "elementwise"]), st.integers(64, 256), st.sampled_from(DEVICES))
def test_twice_as_large_dram_bound_takes_about_twice_as_long(kind, m16, hw):
    c = dict(kind=kind, M=m16 * 128, N=1024, hw=hw)
    a = sim(c)
    b = sim(dict(c, M=2 * c["M"]))
    assert "DRAM" in a.bound
    fixed = a.launches[0]["launch_s"]  # the launch (and event-timing) overhead does not scale
    assert 1.85 <= (b.time_s - fixed) / (a.time_s - fixed) <= 2.1
