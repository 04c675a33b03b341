"""The CUDA lowering's rule tables, layouts, barrier placement and errors (no GPU, no compiler needed)."""

import numpy as np
import pytest

from tilesim.ir import groups
from tilesim.ir import nodes as N

from ._util import core_module, needs_numba_cuda

pytestmark = needs_numba_cuda


def test_rule_tables_cover_the_ir():
    from tilesim.backends.cuda import rules

    assert rules.EXPR_RULES.groups == groups.EXPRS
    assert rules.STMT_RULES.groups == rules.EVENT_RULES.groups == groups.STMTS
    for table in (rules.EXPR_RULES, rules.STMT_RULES, rules.EVENT_RULES):
        table.check_coverage()  # an InternalError naming the classes without a rule


def test_math_functions_covered():
    from tilesim.backends.cuda.intrinsics import MATH_FUNCS_HANDLED

    assert N.MATH_FUNCS <= MATH_FUNCS_HANDLED, N.MATH_FUNCS - MATH_FUNCS_HANDLED


def test_numpy_row_stack_restored():
    from tilesim.backends.cuda.caps import ensure_numpy_compat

    ensure_numpy_compat()
    assert hasattr(np, "row_stack")


def test_default_layout_is_coalesced_and_covers():
    from tilesim.backends.cuda.layout import default_layout

    lay = default_layout((64, 32), 128)
    assert lay.tcount == (4, 32) and lay.tstride == (32, 1)
    assert lay.nslots * lay.used_threads >= 64 * 32
    # a long row: 4 consecutive elements per thread (vector accesses), the whole block on the row
    row = default_layout((1, 8192), 256)
    assert row.tcount[1] == 256 and row.vec[1] == 4 and row.nslots == 32
    # short rows keep a row inside a warp so that row reductions are warp shuffles
    assert default_layout((8, 77), 128).tcount[1] == 32


def _owned(lay, tid):
    """The set of indices thread ``tid`` owns (brute force from the layout formula)."""
    import itertools

    out = set()
    per_dim = []
    for d in range(lay.ndim):
        P, V, st, S = lay.tcount[d], lay.vec[d], lay.tstride[d], lay.slots[d]
        t = (tid // st) % P if P > 1 else 0
        per_dim.append([(s // V) * P * V + t * V + s % V for s in range(S)])
    for idx in itertools.product(*per_dim):
        if all(i < e for i, e in zip(idx, lay.shape)):
            out.add(idx)
    return out


@pytest.mark.parametrize("shape,nt", [((64, 64), 128), ((7, 77), 128), ((1, 8192), 256), ((32, 128), 128),
                                      ((3, 5, 16), 64), ((200,), 256)])
def test_layouts_partition_the_tile(shape, nt):
    from tilesim.backends.cuda.layout import default_layout, gemm_layout

    lays = [default_layout(shape, nt)]
    if len(shape) == 2:
        lays.append(gemm_layout(shape[0], shape[1], nt))
    for lay in lays:
        seen = set()
        for t in range(lay.used_threads):
            seen |= _owned(lay, t)
        assert len(seen) == int(np.prod(shape)), lay.describe()


def test_flash_attention_placement():
    """Row statistics share the rows of the score tile; P (a gemm A operand) goes to shared memory."""
    from tilesim.backends.cuda.layout import place_buffers

    ck = core_module()
    pf = ck.flash_attention(1, 2, 100, 64).prim_func
    pl = place_buffers(pf.launches[0])
    names = {}

    def walk(body):
        for s in body:
            if isinstance(s, N.Alloc):
                names[s.buffer.name] = s.buffer
            for f in ("body", "then", "orelse"):
                if hasattr(s, f):
                    walk(getattr(s, f))

    walk(pf.launches[0].body)
    acc_s, m = pl.reg[names["acc_s"].uid], pl.reg[names["scores_max"].uid]
    assert m == acc_s.drop(1, False) and m.replicated
    assert names["acc_s_cast"].uid in pl.demoted
    assert pl.reg[names["acc_o"].uid].tcount[0] == acc_s.tcount[0]


def test_pipelined_loop_gets_both_barriers():
    from tilesim.backends.cuda import compile_cuda

    ck = core_module()
    src = compile_cuda(ck.matmul_relu(100, 90, 80).prim_func, sim=True).source
    loop = src[src.index("for k_"):]
    body = loop[:loop.index("for _s")]  # up to the first copy loop
    assert "cuda.syncthreads()" in body  # WAR: last iteration's gemm read the tiles this copy overwrites
    before_gemm = loop[:loop.index("_ra")]
    assert before_gemm.count("cuda.syncthreads()") >= 2  # RAW: the gemm reads what the copies wrote


def test_register_only_code_has_no_barriers():
    from tilesim.backends.cuda import compile_cuda

    ck = core_module()
    src = compile_cuda(ck.rms_norm(10, 77).prim_func, sim=False).source  # row sums: warp shuffles
    assert "cuda.syncthreads()" not in src and "shfl_xor_sync" in src
    assert "cuda.shared.array" not in src


def test_shared_memory_limit_error_names_buffers():
    import tilesim
    import tilesim.language as T
    from tilesim import KernelTypeError
    from tilesim.backends.cuda import compile_cuda

    @tilesim.jit(out_idx=[-1], target="interp")
    def big(M):
        @T.prim_func
        def main(A: T.Tensor((M, 512), "float32"), B: T.Tensor((M, 512), "float32")):
            with T.Kernel(T.ceildiv(M, 128), threads=128) as bx:
                S1 = T.alloc_shared((128, 512), "float32")  # 256 KB: past sm_90's 227 KB opt-in
                T.copy(A[bx * 128, 0], S1)
                T.copy(S1, B[bx * 128, 0])

        return main

    with pytest.raises(KernelTypeError) as e:
        compile_cuda(big(256).prim_func, sim=True)
    msg = str(e.value)
    assert "S1" in msg and str(227 * 1024) in msg and "smaller tiles" in msg


def test_get_kernel_source_is_the_generated_python():
    import tilesim

    ck = core_module()
    k = ck.softmax(100, 77)
    kc = tilesim.JITKernel(k.prim_func, out_idx=k.out_idx, target="cuda")
    src = kc.get_kernel_source()
    assert src.count("def main_k0(") == 1 and "cuda.threadIdx.x" in src
    compile(src, "<generated>", "exec")


def test_fp4_helpers_match_ml_dtypes():
    import ml_dtypes

    from tilesim.backends.cuda.intrinsics import _e2m1_to_f32_py, _f32_to_e2m1_py

    for code in range(16):
        want = float(np.array([code], np.uint8).view(ml_dtypes.float4_e2m1fn)[0]) if hasattr(
            ml_dtypes, "float4_e2m1fn") else None
        if want is not None:
            assert float(_e2m1_to_f32_py(code)) == want
    xs = np.linspace(-7, 7, 141, dtype=np.float32)
    for x in xs:
        want = np.clip(x, -6, 6).astype(ml_dtypes.float4_e2m1fn).astype(np.float32)
        assert float(_e2m1_to_f32_py(_f32_to_e2m1_py(x))) == float(want), x
