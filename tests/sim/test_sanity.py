"""Sanity checks of the simulator: peaks, calibrated DRAM efficiency, profiles, configuration effects,
errors, the report's JSON and trace forms, the CLI."""

import json

import pytest

import hwmodels
from tests import core_kernels as K
from tilesim.errors import KernelError
from tilesim.sim import simulate_kernel

H200 = "h200_sxm_141gb"


def _peak(hw, unit_dtype):
    unit, dtype = unit_dtype.split(":")
    from tilesim.sim.machine import hw_dtype
    for c, u in hw.units(unit):
        p = hw.unit_peak_flops(c, u, hw_dtype(dtype)) or hw.unit_peak_flops(c, u, "float32")
        if p:
            return p
    raise AssertionError(unit_dtype)


KERNELS = [
    lambda: K.matmul_relu(8192, 8192, 8192, block_M=128, block_N=128, block_K=64, num_stages=4, threads=256),
    lambda: K.matmul_relu(4096, 4096, 4096),
    lambda: K.flash_attention(2, 16, 4096, 128, False, 128, 128, 2, 256),
    lambda: K.flash_attention(1, 32, 8192, 64, True, 64, 64, 2, 128),
    lambda: K.softmax(65536, 1024),
    lambda: K.rms_norm(65536, 2048, block_M=2),
    lambda: K.elementwise_add.compile(M=16384, N=16384, block=1024, threads=256),
]


@pytest.mark.parametrize("hwname", [H200, "h100_sxm5_80gb", "a100_sxm4_80gb", "ascend_910b2"])
@pytest.mark.parametrize("make", KERNELS)
def test_no_kernel_beats_the_device_peaks(make, hwname):
    hw = hwmodels.load(hwname)
    kernel = make()
    if hwname == "a100_sxm4_80gb" and kernel.prim_func.params[0].shape[-1] == 128 and len(kernel.prim_func.params) == 4:
        # d=128 flash attention, 128x128 tiles, 2 stages: 192 KiB of shared memory, over the A100's 163 KiB
        with pytest.raises(KernelError, match="bytes of shared memory"):
            simulate_kernel(kernel, hw=hwname)
        return
    r = simulate_kernel(kernel, hw=hwname)
    assert r.time_s >= r.roofline_s
    for key, flops in r.flops.items():
        assert flops / r.time_s <= _peak(hw, key) * (1 + 1e-9), key
    assert r.achieved_dram_bytes_per_s <= hw.dram_bandwidth


def test_large_copy_lands_at_the_models_dram_efficiency():
    hw = hwmodels.load(H200)
    k = K.elementwise_add.compile(M=32768, N=16384, block=1024, threads=256)  # 6 GiB moved
    r = simulate_kernel(k, hw=H200)
    assert r.bound == "DRAM bandwidth"
    frac = r.achieved_dram_bytes_per_s / hw.dram_bandwidth
    assert frac == pytest.approx(hw.efficiency("dram"), rel=0.02)


def test_numba_gemm_is_bound_by_cuda_cores():
    k = K.matmul_relu(4096, 4096, 4096, block_M=128, block_N=128, block_K=16, num_stages=1, threads=128)
    r = simulate_kernel(k, hw=H200, profile="numba")
    assert r.bound == "CUDA cores"
    assert "cuda:float32" in r.flops and not any(f.startswith("tensor") for f in r.flops)
    tc = simulate_kernel(k, hw=H200, profile="tensorcore")
    assert r.time_s > 2 * tc.time_s


def test_numba_small_register_tiles_are_shared_memory_bound():
    # 16x16 tiles, one output per thread: two shared loads per FMA (the textbook kernel)
    k = K.matmul_relu(4096, 4096, 4096, block_M=16, block_N=16, block_K=16, num_stages=1, threads=256,
                      dtype="float32")
    r = simulate_kernel(k, hw=H200, profile="numba")
    assert r.bound == "shared-memory bandwidth"


def test_ascend_fused_attention_shows_cube_vector_round_trips():
    fa = simulate_kernel(K.flash_attention(1, 8, 2048, 128, False, 64, 64, 2, 128), hw="ascend_910b2")
    assert fa.profile == "ascend"
    rt = fa.bytes.get("cube<->vector (global memory)", 0.0)
    # per key tile: scores to the vector core, probabilities back, the output accumulator both ways
    assert rt > 0.5 * fa.bytes["l2"]
    gemm = simulate_kernel(K.matmul_dynamic(), hw="ascend_910b2", m=4096, n=4096, k=4096)
    assert gemm.bytes.get("cube<->vector (global memory)", 0.0) == 0.0
    assert gemm.bound in ("cube unit", "latency/occupancy", "DRAM bandwidth", "L2 bandwidth")


def test_configuration_changes_the_prediction_like_hardware():
    # measured on the H200 (reports/measurements): 64x64 tiles 3.5x slower than 128x128, one stage
    # 2.6x slower than three, 128x256x64 faster than 128x128x32
    t = {}
    for name, kw in {"128": dict(block_M=128, block_N=128, block_K=32, num_stages=3),
                     "64": dict(block_M=64, block_N=64, block_K=32, num_stages=3),
                     "s1": dict(block_M=128, block_N=128, block_K=32, num_stages=1),
                     "big": dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)}.items():
        t[name] = simulate_kernel(K.matmul_relu(4096, 4096, 4096, out_dtype="float16", **kw), hw=H200).time_s
    assert t["64"] > 2 * t["128"]
    assert t["s1"] > 2 * t["128"]
    assert t["big"] < t["128"]
    # two consumer warpgroups overlap softmax with the other's GEMM
    fa128 = simulate_kernel(K.flash_attention(1, 16, 4096, 64, False, 128, 64, 2, 128), hw=H200).time_s
    fa256 = simulate_kernel(K.flash_attention(1, 16, 4096, 64, False, 128, 64, 2, 256), hw=H200).time_s
    assert fa256 < fa128


def test_swizzle_restores_l2_reuse_of_wide_gemms():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import tilelang_h200 as B
    mods = B.load_modules("tilesim")
    plain = mods["extra"].gemm(2048, 65536, 4096, block_M=128, block_N=128, block_K=32, swizzle=0)
    sw = mods["extra"].gemm(2048, 65536, 4096, block_M=128, block_N=128, block_K=32, swizzle=8)
    rp, rs = simulate_kernel(plain, hw=H200), simulate_kernel(sw, hw=H200)
    assert rs.bytes["dram read"] < 0.5 * rp.bytes["dram read"]
    assert rs.time_s <= rp.time_s


def test_a_block_that_does_not_fit_names_the_buffer_and_limit():
    k = K.flash_attention(1, 8, 4096, 256, False, 128, 128, 3, 256)
    with pytest.raises(KernelError) as e:
        simulate_kernel(k, hw=H200)
    msg = str(e.value)
    assert "shared memory" in msg and "232,448" in msg and "_shared" in msg


def test_report_json_and_chrome_trace(tmp_path):
    r = simulate_kernel(K.flash_attention(1, 8, 2048, 64, True, 64, 64, 2, 128), hw=H200, trace=True)
    d = r.to_dict()
    json.dumps(d)
    for key in ("time_s", "roofline_s", "bound", "busy_s", "flops", "bytes", "blocks_per_core", "waves"):
        assert key in d
    p = tmp_path / "t.json"
    r.write_trace(p)
    tr = json.loads(p.read_text())
    xs = [e for e in tr["traceEvents"] if e["ph"] == "X"]
    assert {e["cat"] for e in xs} >= {"device", "copy engine", "loops"}
    assert all(e["dur"] >= 0 for e in xs)
    assert "roofline bound" in r.summary()


def test_cli_prints_a_summary_and_writes_a_trace(tmp_path, capsys):
    from tilesim.sim.cli import main_sim
    out = tmp_path / "trace.json"
    rc = main_sim(["tests/core_kernels.py::matmul_dynamic", "--hw", "h100_sxm5_80gb", "--args", "block_M=128",
                   "--shapes", "m=4096", "n=4096", "k=4096", "--trace", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "bound by" in text and "h100_sxm5_80gb" in text
    assert json.loads(out.read_text())["traceEvents"]


def test_launch_overhead_bounds_tiny_kernels():
    r = simulate_kernel(K.elementwise_add.compile(M=16, N=16, block=256, threads=128), hw=H200)
    assert r.bound == "launch overhead"


def test_mlu_profile_runs_on_a_gpu_model_without_gpu_isms():
    r = simulate_kernel(K.matmul_relu(2048, 2048, 2048), hw=H200, profile="mlu")
    assert "shared->matrix unit" not in r.bytes


def test_numba_sync_loads_bound_dram_by_littles_law():
    """Synchronous loads (numba profile): DRAM throughput ≤ bytes in flight × resident threads ×
    cores / DRAM latency, bytes in flight = one tile copy's loads per thread, at most the profile's
    cap; the tensorcore profile applies the same bound (loaded latency) to a launch without async copies."""
    import dataclasses

    from tilesim.analysis.cost import analyze
    from tilesim.analysis.profiles import get_profile
    from tilesim.sim.machine import Machine
    hw = hwmodels.load(H200)
    k = K.elementwise_add.compile(M=16384, N=16384, block=1024, threads=256)
    nb = get_profile("numba")
    assert nb.sync_load_bytes_in_flight_per_thread == 64
    assert get_profile("tensorcore").sync_load_bytes_in_flight_per_thread is None
    per_thread = analyze(k.prim_func, hw, nb)[0].sync_load_bytes_per_thread
    assert per_thread == 2 * 1024 * 4 / 256  # two fp32 inputs of 1024 elements per block over 256 threads
    r = simulate_kernel(k, hw=H200, profile="numba")
    tc = simulate_kernel(k, hw=H200, profile="tensorcore")
    m = Machine(hw, nb)
    threads = r.blocks_per_core * 256 * m.n_cores
    assert r.achieved_dram_bytes_per_s <= min(m.dram_bw, per_thread * threads / m.dram_lat_s) * 1.001
    assert r.time_s >= tc.time_s
    # a lower cap: the bound binds and the DRAM time scales by the Little's-law factor
    free = simulate_kernel(k, hw=H200, profile=dataclasses.replace(nb, sync_load_bytes_in_flight_per_thread=None))
    r4 = simulate_kernel(k, hw=H200, profile=dataclasses.replace(nb, sync_load_bytes_in_flight_per_thread=4))
    bound = 4 * threads / m.dram_lat_s
    assert bound < m.dram_bw
    assert r4.achieved_dram_bytes_per_s <= bound * 1.001
    assert r4.time_s == pytest.approx(free.time_s * m.dram_bw / bound, rel=0.05)
    assert r4.time_s > 1.2 * tc.time_s
    tcp = get_profile("tensorcore")
    tc1 = simulate_kernel(k, hw=H200, profile=dataclasses.replace(tcp, sync_load_bytes_in_flight_per_thread=1))
    assert tc1.time_s > 1.2 * tc.time_s  # elementwise_add has no async copy: its loads are synchronous
    off = simulate_kernel(k, hw=H200, profile=dataclasses.replace(tcp, sync_loads_little=False,
                                                                  sync_load_bytes_in_flight_per_thread=1))
    assert off.time_s == tc.time_s  # the whole tile copy in flight does not bind here
