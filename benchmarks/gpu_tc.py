"""Tensor-core rows of :mod:`benchmarks.gpu_run` (``--only tc`` and ``--only tcsweep``): bf16 GEMM 4096^3 on
``mma.sync`` with the warp-grid and integer-form A/Bs, fp8 e4m3 (:mod:`benchmarks.gpu_tc_fp8`), causal flash attention,
and the tile sweep. Split from ``gpu_run.py`` (module size); the helpers (timing, float64 checks, result rows) are
``gpu_run``'s, reached through :func:`bind` so the rows land in the running script's ``RESULTS``."""

from __future__ import annotations

import contextlib
import os

#: the running ``gpu_run`` module (``__main__`` when run as a script), set by :func:`bind`
R = None


def bind(runner) -> None:
    """Use ``runner``'s ``RESULTS``, ``log``, ``gpu_time``, ``relnorm``, ``bench_entry``, ``prepared``, ``resources``."""
    global R
    R = runner


def _gemm_timed(torch, a, b, ref, v, async_copy=True, wgmma=False):
    """The bf16 tensor-core GEMM ``a @ b`` (fp32 out) with tile config ``v``: compiled, run once, checked against
    ``ref`` (float64), timed. Returns (compiled kernel, seconds, relative error). ``wgmma``: False keeps the
    ``mma.sync`` lowering these rows measure (``wgmma`` is the backend's default on the H200 since the twelfth
    session; its rows are in ``gpu_tc_wgmma.py``)."""
    from kernels import gemm as G

    M, K = a.shape
    kc, run, c = R.prepared(G.matmul(M, b.shape[1], K, dtype="bfloat16", out_dtype="float32", **v), a, b,
                            tensor_cores=True, async_copy=async_copy, wgmma=wgmma)
    run()
    torch.cuda.synchronize()
    err = R.relnorm(c, ref)
    t, _ = R.gpu_time(run, reps=5)
    return kc, t, err


def _fa_timed(A, torch, shape, v, qkv, ref, sw=None):
    """A causal bf16 flash attention of ``shape`` (B, H, S, D) with tile config ``v`` on tensor cores: compiled,
    run once, checked against ``ref`` (float64), timed. ``sw``: lowering switches of
    :class:`benchmarks.gpu_tc_fa_ab.switches` (``wgmma``, ``reg_a``, ``fast``, ``minblocks``) set while it compiles.
    Returns (compiled kernel, seconds, relative error)."""
    from benchmarks.gpu_tc_fa_ab import switches

    B, H, S, D = shape
    sw = sw or {}
    with switches(sw) if sw else contextlib.nullcontext():  # no switches: the environment's defaults, as before
        kern = A.flash_attention_fwd(B, H, S, D, is_causal=True, dtype="bfloat16", **v)
        kc, run, (o, _lse) = R.prepared(kern, *qkv, tensor_cores=True, wgmma=True if sw.get("wgmma") else None)
        run()
        torch.cuda.synchronize()
    err = R.relnorm(o, ref)
    t, _ = R.gpu_time(run, reps=3, rounds=5)
    return kc, t, err


def bench_tensor_cores(quick):
    """bf16 GEMM 4096^3, fp8 e4m3 GEMM 4096^3 (:mod:`benchmarks.gpu_tc_fp8`) and causal flash attention with
    ``tensor_cores=True`` (not in the default steps: run ``--only tc`` after the gpu tests pass — a faulting
    kernel would poison the process's CUDA context)."""
    import torch


    M = N = K = 4096
    a = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    b = torch.randn(K, N, device="cuda").to(torch.bfloat16)
    ref = a.double() @ b.double()
    t_ref, _ = R.gpu_time(lambda: torch.matmul(a, b), reps=10)
    err_t = R.relnorm(torch.matmul(a, b), ref)
    flops = 2.0 * M * N * K
    # async: cp.async pipelining of the pipelined copies (issue 14 item 2); False = the synchronous copies of run 6
    variants = [dict(block_M=128, block_N=128, block_K=32, num_stages=2, threads=128, async_copy=False),
                dict(block_M=128, block_N=128, block_K=32, num_stages=3, threads=128, async_copy=True)]
    if not quick:
        variants += [dict(block_M=128, block_N=128, block_K=32, num_stages=2, threads=128, async_copy=True),
                     dict(block_M=128, block_N=128, block_K=32, num_stages=4, threads=128, async_copy=True),
                     dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=128, async_copy=True),
                     dict(block_M=128, block_N=256, block_K=32, num_stages=3, threads=256, async_copy=True),
                     dict(block_M=128, block_N=128, block_K=32, num_stages=3, threads=128, async_copy=False)]
    for v in variants:
        v = dict(v)
        ac = v.pop("async_copy")
        try:
            kc, t, err = _gemm_timed(torch, a, b, ref, v, async_copy=ac)
            R.bench_entry(f"gemm_bf16_4096_tc {v['block_M']}x{v['block_N']}x{v['block_K']}/{v['threads']}"
                        f"/s{v['num_stages']}{'' if ac else '/sync'}",
                        [M, N, K], t, t_ref, "torch.matmul bf16", err,
                        {"tflops_ours": flops / t / 1e12, "tflops_ref": flops / t_ref / 1e12, "ref_err": err_t,
                         "config": v, "async_copy": ac}, kc=kc)
        except Exception as ex:  # noqa: BLE001
            R.RESULTS["errors"].append(f"tc gemm {v}: {type(ex).__name__}: {ex}"[:2000])
            R.log("tc gemm variant failed", v, repr(ex)[:500])
    _warp_grid_ab(a, b, ref, t_ref, flops, quick)
    _int_forms_ab(a, b, ref, t_ref, flops)  # before the rows below: the A/B of this session's change first
    from benchmarks.gpu_tc_fp8 import bench_fp8_tensor_cores  # the fp8 e4m3 GEMM rows (issue 14 item 1)

    def fail(msg):
        R.RESULTS["errors"].append(msg[:2000])
        R.log(msg[:500])

    bench_fp8_tensor_cores(quick, R.prepared, R.gpu_time, R.relnorm, R.bench_entry, fail)
    for B, H, S, D in ((2, 16, 2048, 128), (1, 32, 4096, 128)):  # the issue states the second shape
        _bench_fa_rows(quick, (B, H, S, D))


def _bench_fa_rows(quick, shape):
    """Causal flash attention bf16 with tensor cores at ``shape`` = (B, H, S, D), against SDPA in the same process."""
    import torch
    import torch.nn.functional as F

    from kernels import attention as A

    B, H, S, D = shape
    issue = shape != (2, 16, 2048, 128)  # the issue's shape: the 64x64/s2 row only, its name marked
    q, k_, v_ = (torch.randn(B, S, H, D, device="cuda").to(torch.bfloat16) for _ in range(3))
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k_, v_))
    t_ref, _ = R.gpu_time(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=True), reps=10)
    ref = F.scaled_dot_product_attention(qt.double(), kt.double(), vt.double(), is_causal=True).transpose(1, 2)
    fa_flops = 4.0 * B * H * S * S * D / 2
    fa_variants = [dict(block_M=64, block_N=64, threads=128, num_stages=1),
                   dict(block_M=64, block_N=64, threads=128, num_stages=2)]
    if not quick and not issue:
        fa_variants += [dict(block_M=128, block_N=64, threads=256, num_stages=1),
                        dict(block_M=128, block_N=64, threads=256, num_stages=2)]
    from tilesim.backends.cuda import layout as LY

    # "/smemP": P through shared memory (its register path off), the lowering before 2026-12-02 12:30
    fa_variants += [dict(v, smem_p=True) for v in fa_variants if v["num_stages"] == 2]
    if issue:
        fa_variants = [v for v in fa_variants if v["num_stages"] == 2 and not v.get("smem_p")]
    for v in fa_variants:
        v = dict(v)
        smem_p = v.pop("smem_p", False)
        LY.REGISTER_A = not smem_p
        try:
            kc, t, err = _fa_timed(A, torch, (B, H, S, D), v, (q, k_, v_), ref)
            R.bench_entry(f"flash_attn_fwd_bf16_causal_tc {v['block_M']}x{v['block_N']}/t{v['threads']}/s{v['num_stages']}"
                        + ("/smemP" if smem_p else "") + (f" S{S}H{H}B{B}" if issue else ""),
                        [B, S, H, D], t, t_ref, "F.scaled_dot_product_attention", err,
                        {"tflops_ours": fa_flops / t / 1e12, "tflops_ref": fa_flops / t_ref / 1e12, "config": v},
                        kc=kc)
        except Exception as ex:  # noqa: BLE001
            R.RESULTS["errors"].append(f"tc attention {v}: {type(ex).__name__}: {ex}"[:2000])
            R.log("tc attention variant failed", v, repr(ex)[:500])
    LY.REGISTER_A = True


def _int_forms_ab(a, b, ref, t_ref, flops):
    """The integer forms of the ``mma.sync`` path (issue 14, brief AQ: ``emitter.INT_FORMS`` — 32-bit shared
    addresses, per-thread cp.async chunk bases, strength-reduced masks) on and off, timed by turns in one process:
    bf16 GEMM 4096^3 128x128x32/t128/s4 (FullRow, Square) and causal flash attention bf16 64x64/t128/s2 at
    (B, H, S, D) = (2, 16, 2048, 128) and the issue's (1, 32, 4096, 128)."""
    import torch
    import torch.nn.functional as F

    from kernels import attention as A
    from tilesim.backends.cuda import emitter as E
    from tilesim.backends.cuda import mma_layout as ML

    cases = []
    for pol in ("FullRow", "Square"):
        cases.append((f"gemm_bf16_4096_tc 128x128x32/128/s4 {pol}", pol, "gemm", None))
    for shape in ((2, 16, 2048, 128), (1, 32, 4096, 128)):
        cases.append((f"flash_attn_fwd_bf16_causal_tc {shape} 64x64/t128/s2", None, "fa", shape))
    fa_refs = {}
    keep_forms, keep_pol = E.INT_FORMS, ML.FORCE_POLICY
    try:
        for name, pol, kind, shape in cases:
            for forms in (True, False, True, False):
                E.INT_FORMS = forms
                ML.FORCE_POLICY = pol
                try:
                    if kind == "gemm":
                        kc, t, err = _gemm_timed(torch, a, b, ref, dict(block_M=128, block_N=128, block_K=32,
                                                                       num_stages=4, threads=128))
                        tr, fl = t_ref, flops
                    else:
                        B_, H, S, D = shape
                        if shape not in fa_refs:
                            torch.manual_seed(1)
                            q, k_, v_ = (torch.randn(B_, S, H, D, device="cuda").to(torch.bfloat16) for _ in range(3))
                            qt, kt, vt = (x.transpose(1, 2) for x in (q, k_, v_))
                            t_sdpa, _ = R.gpu_time(lambda x=qt, y=kt, z=vt: F.scaled_dot_product_attention(
                                x, y, z, is_causal=True), reps=10)
                            r64 = F.scaled_dot_product_attention(qt.double(), kt.double(), vt.double(),
                                                                 is_causal=True).transpose(1, 2)
                            fa_refs[shape] = (q, k_, v_, t_sdpa, r64)
                        q, k_, v_, tr, r64 = fa_refs[shape]
                        fl = 4.0 * B_ * H * S * S * D / 2
                        kern = A.flash_attention_fwd(B_, H, S, D, is_causal=True, dtype="bfloat16", block_M=64,
                                                     block_N=64, threads=128, num_stages=2)
                        kc, run, (o, lse) = R.prepared(kern, q, k_, v_, tensor_cores=True)
                        run()
                        torch.cuda.synchronize()
                        err = R.relnorm(o, r64)
                        t, _ = R.gpu_time(run, reps=3, rounds=5)
                    R.RESULTS.setdefault("int_forms_ab", []).append(
                        {"name": name, "int_forms": forms, "median_s": t, "ref_s": tr, "rel_err": err,
                         "ratio_ours_over_ref_speed": tr / t, "tflops_ours": fl / t / 1e12, "resources": R.resources(kc)})
                    R.log(f"int_forms_ab {name} forms={'new' if forms else 'old'}: {t * 1e3:.3f} ms "
                        f"({tr / t:.3f} x ref) err {err:.2e}")
                except Exception as ex:  # noqa: BLE001
                    R.RESULTS["errors"].append(f"int forms {name} {forms}: {type(ex).__name__}: {ex}"[:2000])
                    R.log("int forms variant failed", name, forms, repr(ex)[:500])
                R.save()
    finally:
        E.INT_FORMS, ML.FORCE_POLICY = keep_forms, keep_pol


def bench_tc_sweep():
    """Tile configurations of the tensor-core GEMM and causal FA with the current lowering (issue 14, brief AQ's second
    device run, ``--only tcsweep``): GEMM bf16 4096^3 at five tiles, FA bf16 at (2, 16, 2048, 128) and the issue's
    (1, 32, 4096, 128) at four; float64-checked, ratios against torch / SDPA of the same process.
    ``TILESIM_SWEEP=fa4096``: only the FA configurations at the issue's shape (no GEMM rows)."""
    import torch
    import torch.nn.functional as F

    from kernels import attention as A

    fa_only = os.environ.get("TILESIM_SWEEP", "") == "fa4096"
    if not fa_only:
        _sweep_gemm(torch)
    for B, H, S, D in ((1, 32, 4096, 128),) if fa_only else ((2, 16, 2048, 128), (1, 32, 4096, 128)):
        q, k_, v_ = (torch.randn(B, S, H, D, device="cuda").to(torch.bfloat16) for _ in range(3))
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k_, v_))
        t_sdpa, _ = R.gpu_time(lambda x=qt, y=kt, z=vt: F.scaled_dot_product_attention(x, y, z, is_causal=True), reps=10)
        r64 = F.scaled_dot_product_attention(qt.double(), kt.double(), vt.double(), is_causal=True).transpose(1, 2)
        wrf = dict(wgmma=True, reg_a=True, fast=True)  # brief AU's switches (all off by default)
        for v, sw in ((dict(block_M=64, block_N=64, threads=128, num_stages=2), {}),
                      (dict(block_M=64, block_N=32, threads=128, num_stages=2), {}),
                      (dict(block_M=64, block_N=32, threads=128, num_stages=3), {}),
                      (dict(block_M=128, block_N=64, threads=256, num_stages=2), {}),
                      (dict(block_M=128, block_N=64, threads=256, num_stages=2), dict(fast=True)),
                      (dict(block_M=64, block_N=64, threads=128, num_stages=2), wrf),
                      (dict(block_M=64, block_N=32, threads=128, num_stages=2), wrf)):
            tag = "".join(f"/{k}" for k in ("wgmma", "reg_a", "fast") if sw.get(k))
            try:
                kc, t, err = _fa_timed(A, torch, (B, H, S, D), v, (q, k_, v_), r64, sw)
                R.bench_entry(f"sweep flash_attn_fwd_bf16_causal_tc {v['block_M']}x{v['block_N']}/t{v['threads']}"
                            f"/s{v['num_stages']}{tag} S{S}H{H}B{B}", [B, S, H, D], t, t_sdpa,
                            "F.scaled_dot_product_attention", err,
                            {"tflops_ours": 2.0 * B * H * S * S * D / t / 1e12, "config": v, "switches": sw}, kc=kc)
            except Exception as ex:  # noqa: BLE001
                R.RESULTS["errors"].append(f"sweep attention {v}: {type(ex).__name__}: {ex}"[:2000])
                R.log("sweep attention failed", v, repr(ex)[:500])


def _sweep_gemm(torch):
    """The GEMM half of :func:`bench_tc_sweep`: bf16 4096^3 at five tiles against torch.matmul."""
    M = N = K = 4096
    a = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    b = torch.randn(K, N, device="cuda").to(torch.bfloat16)
    ref = a.double() @ b.double()
    t_ref, _ = R.gpu_time(lambda: torch.matmul(a, b), reps=10)
    flops = 2.0 * M * N * K
    for v in (dict(block_M=128, block_N=128, block_K=32, num_stages=4, threads=128),
              dict(block_M=128, block_N=128, block_K=32, num_stages=3, threads=128),
              dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=128),
              dict(block_M=128, block_N=256, block_K=32, num_stages=3, threads=256),
              dict(block_M=256, block_N=128, block_K=32, num_stages=3, threads=256)):
        try:
            kc, t, err = _gemm_timed(torch, a, b, ref, v)
            R.bench_entry(f"sweep gemm_bf16_4096_tc {v['block_M']}x{v['block_N']}x{v['block_K']}/{v['threads']}"
                        f"/s{v['num_stages']}", [M, N, K], t, t_ref, "torch.matmul bf16", err,
                        {"tflops_ours": flops / t / 1e12, "config": v}, kc=kc)
        except Exception as ex:  # noqa: BLE001
            R.RESULTS["errors"].append(f"sweep gemm {v}: {type(ex).__name__}: {ex}"[:2000])
            R.log("sweep gemm failed", v, repr(ex)[:500])


def _warp_grid_ab(a, b, ref, t_ref, flops, quick):
    """The tensor-core GEMM on TileLang's default warp grid (``Square``: 2 x 2 warps for 128 x 128 / 4 warps,
    2 x 4 for 128 x 256 / 8 warps) and on the 4 x 1 / 8 x 1 grid of the earlier runs (``FullRow``, through
    ``mma_layout.FORCE_POLICY``), timed by turns in one process (issue 14, the warp grid)."""
    import torch

    from tilesim.backends.cuda import mma_layout as ML

    cfgs = [dict(block_M=128, block_N=128, block_K=32, num_stages=4, threads=128)]
    if not quick:
        cfgs.append(dict(block_M=128, block_N=256, block_K=32, num_stages=3, threads=256))
    keep = ML.FORCE_POLICY
    try:
        for v in cfgs:
            for pol in ("FullRow", "Square", "FullRow", "Square"):
                ML.FORCE_POLICY = pol
                try:
                    kc, t, err = _gemm_timed(torch, a, b, ref, v)
                    grid = ML.warp_grid(v["block_M"], v["block_N"], v["threads"], pol)
                    R.RESULTS.setdefault("warp_grid_ab", []).append(
                        {"policy": pol, "grid": list(grid), "config": v, "median_s": t, "rel_err": err,
                         "ratio_ours_over_ref_speed": t_ref / t, "tflops_ours": flops / t / 1e12,
                         "resources": R.resources(kc)})
                    R.log(f"warp_grid_ab {v['block_M']}x{v['block_N']}x{v['block_K']}/t{v['threads']}/s{v['num_stages']}"
                        f" {pol} {grid[0]}x{grid[1]}: {t * 1e3:.3f} ms ({t_ref / t:.3f} x torch) err {err:.2e}")
                except Exception as ex:  # noqa: BLE001
                    R.RESULTS["errors"].append(f"warp grid {pol} {v}: {type(ex).__name__}: {ex}"[:2000])
                    R.log("warp grid variant failed", pol, v, repr(ex)[:500])
    finally:
        ML.FORCE_POLICY = keep
