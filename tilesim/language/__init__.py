"""``import tilesim.language as T``: the TileLang-compatible kernel language.

Functions here are markers the frontend recognises inside kernel bodies; see shared semantics in
``docs/language.md``. Names TileLang has but tilesim does not model are present and raise an error
naming the primitive and the reason when a kernel uses them.
"""

from __future__ import annotations

from . import math as _math
from ._marker import marker as _marker
from .alloc import (  # noqa: F401
    alloc_fragment,
    alloc_global,
    alloc_local,
    alloc_reducer,
    alloc_shared,
    alloc_var,
    finalize_reducer,
    make_tensor,
    reshape,
    view,
)
from .allreduce import attr, comm_reducer, evaluate, tvm_thread_allreduce  # noqa: F401
from .annotate import UNSUPPORTED as _UNSUPPORTED  # noqa: F401
from .annotate import (
    Fragment,
    Layout,
    annotate_l2_hit_ratio,
    annotate_layout,
    annotate_padding,
    annotate_safe_value,
    assume,
    c2d_im2col,
    call_extern,
    device_assert,
    disable_warp_group_reg_alloc,
    im2col,
    import_source,
    make_swizzled_layout,
    no_set_max_nreg,
    print,
    set_max_nreg,
    use_swizzle,
)
from .atomic import atomic_add, atomic_max, atomic_min  # noqa: F401
from .blackwell import (  # noqa: F401
    alloc_tmem,
    mma_gemm_blockscaled,
    tcgen05_cp_warpx4,
    tcgen05_gemm,
    tcgen05_gemm_blockscaled,
    tcgen05_mma_arrive,
    tcgen05_sf_warp_transpose,
)
from .cluster import (  # noqa: F401
    ClusterKernel,
    alloc_cluster_barrier,
    atomic_load,
    atomic_store,
    block_rank_in_cluster,
    clc_get_first_ctaid_x,
    clc_is_canceled,
    clc_try_cancel_multicast,
)
from .copy import async_copy, copy, tma_copy  # noqa: F401
from .gemm import GemmWarpPolicy, gemm, gemm_v2, wgmma_gemm  # noqa: F401
from .kernel import Kernel, macro  # noqa: F401
from .loops import Parallel, Persistent, Pipelined, grid, parallel, serial, unroll, vectorized  # noqa: F401
from .loops import serial as Serial  # noqa: F401 - TileLang spells it both ways
from .math import (  # noqa: F401
    And,
    Cast,
    Not,
    Or,
    Select,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    cast,
    ceildiv,
    clamp,
    floordiv,
    floormod,
    fmod,
    if_then_else,
    infinity,
    max,
    max_value,
    min,
    min_value,
    pow,
    reinterpret,
    shift_left,
    shift_right,
    truncdiv,
    truncmod,
)
from .program import prim_func  # noqa: F401
from .ptx import (  # noqa: F401
    access_ptr,
    atomic_addx2,
    atomic_addx4,
    dp4a,
    ptx_commit_group,
    ptx_cp_async,
    ptx_wait_group,
)
from .reduce import (  # noqa: F401
    clear,
    cumsum,
    fill,
    reduce,
    reduce_absmax,
    reduce_abssum,
    reduce_max,
    reduce_min,
    reduce_sum,
)
from .rng import rng_init, rng_rand, rng_rand_float  # noqa: F401
from .simt import (  # noqa: F401
    all_sync,
    any_sync,
    ballot_sync,
    get_block_binding,
    get_block_bindings,
    get_lane_idx,
    get_thread_binding,
    get_thread_bindings,
    get_thread_extent,
    get_warp_group_idx,
    get_warp_idx,
    get_warp_idx_sync,
    shfl_down,
    shfl_sync,
    shfl_up,
    shfl_xor,
    sync_threads,
    sync_warp,
    thread_binding,
    tvm_warp_shuffle,
)
from .sparse import gemm_sp  # noqa: F401
from .tile_schedule import PersistentTileScheduler  # noqa: F401
from .types import (  # noqa: F401
    Buffer,
    DType,
    FragmentBuffer,
    SharedBuffer,
    StridedTensor,
    Tensor,
    TensorSpec,
    bfloat16,
    bool,
    boolean,
    const,
    double,
    dtype,
    dyn,
    dynamic,
    empty,
    float,
    float4_e2m1_unpacked,
    float4_e2m1fn,
    float8_e4m3,
    float8_e4m3fn,
    float8_e5m2,
    float16,
    float32,
    float64,
    half,
    int,
    int4,
    int8,
    int16,
    int32,
    int64,
    ptr,
    symbolic,
    tfloat32,
    uint,
    uint8,
    uint16,
    uint32,
    uint64,
)
from .ws import (  # noqa: F401
    alloc_barrier,
    barrier_arrive,
    barrier_wait,
    cp_async_barrier_noinc,
    fence_proxy_async,
    mbarrier_arrive,
    mbarrier_arrive_expect_tx,
    mbarrier_expect_tx,
    mbarrier_wait_parity,
    wait_wgmma,
    ws,
)
from .ws_schedule import (  # noqa: F401
    WSID,
    WSPipeline,
    WSRole,
    WSSchedule,
    WSScope,
    WSSync,
    annotate_ws_schedule,
    ws_op,
)

#: How the frontend recognises this namespace (``T.<unknown name>`` gets a did-you-mean hint) without
#: importing it: the frontend is imported by this package (``T.prim_func``), not the other way round.
__tilesim_language__ = True

for _n in _math._UNARY:
    globals()[_n] = getattr(_math, _n)


def _unsupported(name: str):
    def fn(*args, **kwargs):
        pass

    fn.__name__ = name
    m = _marker(name)(fn)
    m.__tilesim_unsupported__ = _UNSUPPORTED[name]
    return m


for _n in _UNSUPPORTED:
    if _n not in globals():
        globals()[_n] = _unsupported(_n)
    else:
        globals()[_n].__tilesim_unsupported__ = _UNSUPPORTED[_n]

@_marker("sync_grid")
def sync_grid():
    """Grid barrier (a cooperative launch): every block reaches it before any block goes on; the
    interpreter runs such a launch's blocks in lockstep."""
