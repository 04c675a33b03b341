"""The lint rules taken from TileLang 0.1.15's compile-time checks (tilesim/lint_rules.py): each rule
fires on a kernel real TileLang rejects and stays quiet on its corrected twin; the compile-time
warning and its switches; the library and core test kernels that real TileLang compiles are clean."""

import warnings

import numpy as np
import pytest

import tilesim as tilelang
import tilesim.language as T
from kernels.registry import all_specs
from kernels.registry import get as get_spec
from tests.registry import REGISTRY
from tilesim.cli import main as cli
from tilesim.errors import TileLangCompatWarning
from tilesim.lint import lint, set_enabled, warn_on_compile
from tilesim.lint_rules import LINT_RULES

NEW_RULES = {"gemm-scope", "gemm-full-region", "gemm-dtype", "gemm-shape", "gemm-warp-partition", "gemm-k",
             "reduce-scope", "cumsum", "parallel-fragment-indices", "fragment-scalar-index", "shared-memory"}


def rules(k, **kw):
    return sorted({f.rule for f in lint(k.prim_func, **kw)} & NEW_RULES)


def gemm(M=64, N=64, K=32, threads=128, dtype="float16", acc="float32", a_scope="shared", c_rows=None):
    @tilelang.jit(out_idx=[-1])
    def f():
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), acc)):
            with T.Kernel(1, threads=threads):
                if a_scope == "shared":
                    As = T.alloc_shared((M, K), dtype)
                elif a_scope == "local":
                    As = T.alloc_local((M, K), dtype)
                else:
                    As = T.alloc_fragment((M, K), dtype)
                Bs = T.alloc_shared((K, N), dtype)
                Cf = T.alloc_fragment((c_rows or M, N), acc)
                T.copy(A, As)
                T.copy(B, Bs)
                T.clear(Cf)
                if c_rows:
                    T.gemm(As, Bs, Cf[0:M, 0:N])
                else:
                    T.gemm(As, Bs, Cf)
                T.copy(Cf[0:M, 0:N], C)
        return main
    return f()


# --------------------------------------------------------------------------------------------- gemm
@pytest.mark.parametrize("bad,good", [
    (dict(M=40, N=64), dict(M=48, N=64)),    # "M must be divisible by 16, but got 40"
    (dict(M=32, N=20, threads=64), dict(M=32, N=24, threads=64)),  # "N must be divisible by 8, but got 20"
])
def test_gemm_shape(bad, good):
    assert rules(gemm(**bad)) == ["gemm-shape"]
    assert rules(gemm(**good)) == []


@pytest.mark.parametrize("bad,good", [
    (dict(M=16, N=16, threads=128), dict(M=16, N=32, threads=128)),  # mma.sync: 4 warps cannot share 16x16
    (dict(M=80, N=64, threads=128), dict(M=64, N=64, threads=128)),  # WGMMA (M >= 64): m_warp must be 4k
])
def test_gemm_warp_partition(bad, good):
    assert rules(gemm(**bad)) == ["gemm-warp-partition"]
    assert rules(gemm(**good)) == []
    f = [x for x in lint(gemm(**bad).prim_func) if x.rule == "gemm-warp-partition"][0]
    assert "No valid warp partition for T.gemm" in f.message and f.loc is not None


def test_gemm_m80_is_only_rejected_when_wgmma_is_picked():
    # with 2 warps (no warp group) mma.sync takes M=80 as 80 = 5 x 16 rows per warp
    assert rules(gemm(M=80, N=64, threads=64)) == []
    # the tl.disable_wgmma pass config makes TileLang pick mma.sync, which tiles 80 rows with 1 x 4 warps
    assert rules(gemm(M=80, N=64, threads=128), pass_configs={"tl.disable_wgmma": True}) == []


@pytest.mark.parametrize("bad,good", [
    (dict(K=24), dict(K=32)),                                        # "block_K (24) must be a multiple of ... (16)"
    (dict(K=8, dtype="bfloat16"), dict(K=16, dtype="bfloat16")),     # no bf16 m16n8k8
    (dict(K=4, dtype="float32"), dict(K=8, dtype="float32")),        # tf32 takes K in steps of 8
    (dict(K=48, dtype="int8", acc="int32", M=32), dict(K=64, dtype="int8", acc="int32", M=32)),
])
def test_gemm_k(bad, good):
    assert rules(gemm(**bad)) == ["gemm-k"]
    assert rules(gemm(**good)) == []


def test_gemm_k8_float16_has_an_instruction():
    assert rules(gemm(K=8)) == []  # m16n8k8 f16 exists


@pytest.mark.parametrize("bad,good", [
    (dict(acc="bfloat16"), dict(acc="float32")),
    (dict(dtype="float32", acc="float16"), dict(dtype="float32", acc="float32")),
    (dict(dtype="bfloat16", acc="float16"), dict(dtype="bfloat16", acc="float32")),
    (dict(dtype="int16", acc="int32"), dict(dtype="int8", acc="int32")),
])
def test_gemm_dtype(bad, good):
    assert rules(gemm(**bad)) == ["gemm-dtype"]
    assert rules(gemm(**good)) == []


def test_gemm_fp8_accumulates_in_float32_or_float16():
    assert rules(gemm(K=64, dtype="float8_e4m3fn", acc="float32")) == []
    assert rules(gemm(K=64, dtype="float8_e5m2", acc="float16")) == []


def test_gemm_scope():
    assert rules(gemm(a_scope="local")) == ["gemm-scope"]
    assert rules(gemm(a_scope="fragment")) == []


def test_gemm_full_region():
    assert rules(gemm(c_rows=128)) == ["gemm-full-region"]
    assert rules(gemm(c_rows=None)) == []


# ------------------------------------------------------------------------------- reduce / cumsum
def reducer(src_scope):
    @tilelang.jit(out_idx=[-1])
    def f():
        @T.prim_func
        def main(A: T.Tensor((4, 16), "float32"), B: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_local((4, 16), "float32") if src_scope == "local" else T.alloc_fragment((4, 16), "float32")
                d = T.alloc_fragment((4,), "float32")
                T.copy(A, s)
                T.reduce_sum(s, d, dim=1)
                T.copy(d, B)
        return main
    return f()


def test_reduce_scope():
    assert rules(reducer("local")) == ["reduce-scope"]
    assert rules(reducer("fragment")) == []


def scanner(dst_scope="shared", shape=(8, 16)):
    @tilelang.jit(out_idx=[-1])
    def f():
        @T.prim_func
        def main(A: T.Tensor(shape, "float32"), B: T.Tensor(shape, "float32")):
            with T.Kernel(1, threads=128):
                s = T.alloc_shared(shape, "float32")
                d = T.alloc_fragment(shape, "float32") if dst_scope == "fragment" else T.alloc_shared(shape, "float32")
                T.copy(A, s)
                T.cumsum(s, d, dim=len(shape) - 1)
                T.copy(d, B)
        return main
    return f()


def test_cumsum_shared_source_needs_a_shared_destination():
    assert rules(scanner("fragment")) == ["cumsum"]
    assert rules(scanner("shared")) == []


def test_cumsum_rank():
    assert rules(scanner("shared", (2, 4, 16))) == ["cumsum"]
    assert rules(scanner("shared", (8, 16))) == []


# ------------------------------------------------------------------------------------- parallel
def shifted(shift):
    @tilelang.jit(out_idx=[-1])
    def f():
        @T.prim_func
        def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                x = T.alloc_fragment((64,), "float32")
                T.copy(A, x)
                for i in T.Parallel(64):
                    if shift:
                        B[i] = x[i] + x[63 - i]
                    else:
                        B[i] = x[i] + x[i]
        return main
    return f()


def test_parallel_fragment_indices():
    fs = [f for f in lint(shifted(True).prim_func) if f.rule == "parallel-fragment-indices"]
    assert len(fs) == 1 and "fragment x" in fs[0].message
    assert rules(shifted(False)) == []


def scalar_read(index, where="serial"):
    """A fragment element read by per-thread code (``where="serial"``), by a store that names the block index,
    or inside T.Parallel."""
    @tilelang.jit(out_idx=[-1])
    def f():
        @T.prim_func
        def main(A: T.Tensor((8,), "int32"), B: T.Tensor((4,), "int32")):
            with T.Kernel(4, threads=32) as bx:
                x = T.alloc_fragment((8,), "int32")
                tot = T.alloc_shared((1,), "int32")
                n = T.alloc_var("int32")
                T.copy(A, x)
                n = bx
                if where == "serial":
                    for _ in T.serial(2):
                        n = n + x[index]
                elif where == "block":
                    B[bx] = x[index]
                else:
                    for i in T.Parallel(8):
                        if i == index:
                            tot[0] = x[i]
                    n = n + tot[0]
                if where != "block":
                    B[bx] = n
        return main
    return f()


def test_fragment_scalar_index():
    """tilelang/transform/add_bufstore_wrapper.py: a per-thread store may read a fragment at index 0 only."""
    fs = [f for f in lint(scalar_read(7).prim_func) if f.rule == "fragment-scalar-index"]
    assert len(fs) == 1 and fs[0].level == "error"
    assert "fragment x" in fs[0].message and "non-zero index [7] is not supported" in fs[0].message
    assert fs[0].loc is not None and fs[0].loc.line > 0
    assert rules(scalar_read(0)) == []  # fragment[0] is wrapped in a one-trip T.Parallel (replicated)
    assert rules(scalar_read(7, "block")) == []  # a store naming a thread-bound variable is not wrapped
    assert rules(scalar_read(7, "parallel")) == []  # the element read inside T.Parallel, then through shared
    want = {"serial": np.arange(4) + 42, "block": np.full(4, 21), "parallel": np.arange(4) + 21}
    for where, expected in want.items():  # tilesim runs every variant
        assert np.array_equal(scalar_read(7, where)(np.arange(8, dtype=np.int32) * 3), expected), where


# ---------------------------------------------------------------------------------- shared memory
def staged(block, stages):
    @tilelang.jit(out_idx=[-1])
    def f(M=1024, N=1024, K=1024):
        @T.prim_func
        def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=256) as (bx, by):
                As = T.alloc_shared((block, 64), "float16")
                Bs = T.alloc_shared((64, block), "float16")
                Cf = T.alloc_fragment((block, block), "float32")
                T.clear(Cf)
                for k in T.Pipelined(T.ceildiv(K, 64), num_stages=stages):
                    T.copy(A[by * block, k * 64], As)
                    T.copy(B[k * 64, bx * block], Bs)
                    T.gemm(As, Bs, Cf)
                T.copy(Cf, C[by * block, bx * block])
        return main
    return f()


def test_shared_memory_counts_pipeline_stages():
    # 256x64 + 64x256 fp16 = 64 KB a stage: 4 stages need 256 KB > 227 KB, 3 stages 192 KB fit
    fs = [f for f in lint(staged(256, 4).prim_func) if f.rule == "shared-memory"]
    assert len(fs) == 1 and "262144 bytes" in fs[0].message
    assert rules(staged(256, 3)) == []
    assert rules(staged(128, 4)) == []


# ------------------------------------------------------------------------------ warning switches
def test_compile_warning_and_its_switches(monkeypatch):
    pf = gemm(M=40).prim_func
    with pytest.warns(TileLangCompatWarning, match="M must be divisible by 16") as rec:
        warn_on_compile(pf)
    w = next(r for r in rec if "gemm-shape" in str(r.message))
    assert w.filename.endswith("test_lint_tilelang.py") and w.lineno > 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_on_compile(pf, {"tilesim.lint": False}) == []
        monkeypatch.setenv("TILESIM_LINT", "0")
        assert warn_on_compile(pf) == []
        monkeypatch.delenv("TILESIM_LINT")
        old = set_enabled(False)
        try:
            assert warn_on_compile(pf) == []
        finally:
            set_enabled(old)
        assert warn_on_compile(gemm(M=64).prim_func) == []  # a clean kernel warns nothing


def test_advice_is_not_warned_at_compile():
    from tests import core_kernels as K
    pf = K.softmax(16, 100).prim_func  # a 100-wide fragment: the H200-observed pow2 rule, advice only
    assert [f.level for f in lint(pf)] == ["advice"] * len(lint(pf)) and lint(pf)
    assert "(advice)" in str(lint(pf)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_on_compile(pf) == []


def test_every_rule_has_a_source_reference():
    from tilesim import lint_rules as LR
    checks = [getattr(LR, n) for n in dir(LR) if n.startswith("_check_")] + [LINT_RULES[c] for c in LINT_RULES]
    for fn in checks:
        assert fn.__doc__ and ("Source" in fn.__doc__), fn.__name__


def test_lint_cli_prints_tilelang_message(capsys, tmp_path):
    src = tmp_path / "k.py"
    src.write_text(
        "import tilesim as tilelang\nimport tilesim.language as T\n\n"
        "@tilelang.jit(out_idx=[-1])\n"
        "def k(M=40):\n"
        "    @T.prim_func\n"
        "    def main(A: T.Tensor((M, 32), 'float16'), B: T.Tensor((32, 64), 'float16'), "
        "C: T.Tensor((M, 64), 'float32')):\n"
        "        with T.Kernel(1, threads=128):\n"
        "            As = T.alloc_shared((M, 32), 'float16')\n"
        "            Bs = T.alloc_shared((32, 64), 'float16')\n"
        "            Cf = T.alloc_fragment((M, 64), 'float32')\n"
        "            T.copy(A, As)\n            T.copy(B, Bs)\n"
        "            T.gemm(As, Bs, Cf, clear_accum=True)\n"
        "            T.copy(Cf, C)\n"
        "    return main\n")
    assert cli(["lint", f"{src}::k", "--args", "M=40"]) == 1
    out = capsys.readouterr().out
    assert "[gemm-shape]" in out and "M must be divisible by 16, but got 40" in out and "k.py:14" in out
    assert cli(["lint", f"{src}::k", "--args", "M=32"]) == 0


# ------------------------------------------------------------------------ the kernels in the repo
SPEC_NAMES = [s.name for s in all_specs()]


@pytest.mark.parametrize("name", SPEC_NAMES)
def test_library_kernels_pass_tilelang_rules(name):
    """Every library kernel at every test shape and report shape has no error-level finding (build only).
    On the H200 (2026-12-02) real TileLang refused paged_decode, mla_decode, dsa_indexer and
    dsa_sparse_attention at their small test shapes (M < 16, no warp partition, K below the instruction K)
    and dsa_topk everywhere (``pos[block_N - 1]`` in serial code); the kernels were fixed here."""
    spec = get_spec(name)
    bad = []
    for shp in (*spec.test_shapes, *spec.shapes):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            k = spec.build(**spec.params(shp))
        bad += [(shp.get("label"), f.rule, f.message) for f in lint(k.prim_func) if f.level == "error"]
    assert bad == [], bad


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_core_test_kernels_gpu_configs_pass_tilelang_rules(name):
    p = REGISTRY[name].gpu
    if p is None:
        pytest.skip("no GPU configuration")
    assert rules(REGISTRY[name].build(p)) == []
