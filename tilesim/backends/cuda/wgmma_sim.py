"""A model of ``wgmma.mma_async`` reading shared memory through matrix descriptors (PTX ISA), and the build of
:mod:`.wgmma_intrinsics` for numba's CUDA simulator.

The hardware model (:func:`operand`, :func:`wgmma_model`), written from the PTX ISA's matrix-descriptor and
canonical-layout sections, independent of the lowering's choices in :mod:`.wgmma_layout`:

* descriptor: start address ``(d & 0x3FFF) << 4``, LBO ``((d >> 16) & 0x3FFF) << 4``, SBO
  ``((d >> 32) & 0x3FFF) << 4``, swizzle mode ``d >> 62`` (0 none, 1 128-byte, 2 64-byte, 3 32-byte);
* the byte address of an element is formed from the start, the strides and the position inside the
  ``8 x 16``-byte core matrix (no swizzle) or the ``8 x W``-byte swizzle atom, then for a swizzled layout
  the 16-byte chunk bits 4.. are XORed with bits 7.. of the **address** (so a start inside an atom —
  the K step of a K-major operand — reads the atom's swizzled rows);
* K-major (no transpose): element ``(r, k)`` of the ``rows x K`` operand is at
  ``start + (r // 8)*SBO + (r % 8)*rowbytes + kb`` with ``kb = k * itemsize``, ``rowbytes = W`` (swizzled) or,
  unswizzled, ``start + (r // 8)*SBO + (kb // 16)*LBO + (r % 8)*16 + kb % 16``;
* M-/N-major (``trans``; 16-bit types): element ``(r, k)`` (``r`` along M/N, contiguous) is at
  ``start + (rb // W)*S_region + (k // 8)*S_k + (k % 8)*W + rb % W`` (``rb = r * itemsize``), with
  ``(S_region, S_k) = (LBO, SBO)`` when :data:`~.wgmma_layout.MN_LBO_IS_REGION` else ``(SBO, LBO)``.
* ``D[64 x N] += A[64 x K] @ B[K x N]`` with B read as its ``N x K`` transpose (K-major B is stored N x K);
  the products and sums are computed exactly in float64 and rounded once to float32 (the GPU's fp32
  accumulation order may differ in the last bits). Thread ``tid`` of the warpgroup holds ``D`` at
  :func:`~.wgmma_layout.acc_coord`.

The simulator build (:func:`sim_wgmma_namespace`): ``_smem_u32(arr, i)`` gives each shared array a fake
1024-byte-aligned window address (views share their base array's window), so descriptor arithmetic in the
generated source runs unchanged; ``_wgmma_*`` records the operation, and it is **executed when a
``_wg_wait<N>`` retires it** — the latest moment the PTX ISA allows — reading shared memory then; so a stage
overwritten before its ``wgmma`` was waited for shows up as a wrong result in the simulator. Fences are no-ops.
Write-after-read hazards on a pending group's operands raise ``RuntimeError`` instead of passing silently (the
``cp.async`` model writes late, so a refill of a stage still being read would otherwise land after the read):

* ``_cp_async16`` (given the ``cp.async`` build to wrap, :func:`sim_wgmma_namespace`) refuses a copy into a
  16-byte chunk that any thread's pending (issued, not yet retired) ``wgmma`` reads — the copy may land at any
  moment between its issue and its wait;
* at retirement, the operand bytes of the first thread of each warpgroup are compared with a snapshot taken when
  the instruction was issued: any store in between (ordinary stores land at once in the simulator) raises.
"""

from __future__ import annotations

import threading

import ml_dtypes
import numpy as np

from . import wgmma_layout as WL
from .wgmma_intrinsics import MAX_WAIT, _parse, parse_ra, reg_slot

_DT = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "e4m3": ml_dtypes.float8_e4m3fn,
       "e5m2": ml_dtypes.float8_e5m2}
_WIDTH = {0: 0, 1: 128, 2: 64, 3: 32}


def decode(desc: int) -> tuple[int, int, int, int]:
    """(start byte address, LBO, SBO, swizzle width in bytes or 0) of a matrix descriptor."""
    d = int(desc)
    return (d & 0x3FFF) << 4, ((d >> 16) & 0x3FFF) << 4, ((d >> 32) & 0x3FFF) << 4, _WIDTH[(d >> 62) & 3]


def _swz(addr: np.ndarray, W: int) -> np.ndarray:
    if W == 0:
        return addr
    return addr ^ (((addr >> 7) & (W // 16 - 1)) << 4)


def operand_addresses(desc: int, rows: int, K: int, itemsize: int, trans: bool) -> np.ndarray:
    """Byte addresses (``rows x K``) of the operand elements a descriptor names (see the module docstring)."""
    start, lbo, sbo, W = decode(desc)
    r = np.arange(rows)[:, None]
    k = np.arange(K)[None, :]
    if not trans:
        kb = k * itemsize
        if W:
            addr = start + (r // 8) * sbo + (r % 8) * W + kb
        else:
            addr = start + (r // 8) * sbo + (kb // 16) * lbo + (r % 8) * 16 + kb % 16
    else:
        if itemsize != 2:
            raise ValueError("wgmma: M-/N-major operands are 16-bit only")
        rb = r * itemsize
        if not W:
            raise ValueError("wgmma model: unswizzled M-/N-major operands are not modelled")
        s_reg, s_k = (lbo, sbo) if WL.MN_LBO_IS_REGION else (sbo, lbo)
        addr = start + (rb // W) * s_reg + (k // 8) * s_k + (k % 8) * W + rb % W
    return _swz(addr.astype(np.int64), W)


def operand(mem: np.ndarray, desc: int, rows: int, K: int, kind: str, trans: bool) -> np.ndarray:
    """The ``rows x K`` operand (float64) read from the shared-memory byte image ``mem`` (address 0 = ``mem[0]``)."""
    t = np.dtype(_DT[kind])
    addr = operand_addresses(desc, rows, K, t.itemsize, trans)
    if int(addr.max()) + t.itemsize > len(mem) or int(addr.min()) < 0:
        raise ValueError(f"wgmma: operand address {int(addr.max())} outside shared memory ({len(mem)} bytes)")
    raw = np.stack([mem[addr + i] for i in range(t.itemsize)], axis=-1).copy()
    return raw.view(t)[..., 0].astype(np.float64)


def wgmma_model(mem: np.ndarray, desc_a: int, desc_b: int, n: int, a: str, b: str, ta: bool, tb: bool) -> np.ndarray:
    """``A @ B`` (64 x n, float64) of one ``wgmma.mma_async.m64n<n>k<16|32>`` on the byte image ``mem``."""
    K = 32 if a in ("e4m3", "e5m2") else 16
    A = operand(mem, desc_a, 64, K, a, ta)
    Bt = operand(mem, desc_b, n, K, b, tb)
    return A @ Bt.T


def register_a(regs: dict, kind: str) -> np.ndarray:
    """The 64 x 16 operand A (float64) of a register-A ``wgmma .m64nNk16`` from every thread's four ``.b32``
    registers (``regs``: thread of the warpgroup -> (a0, a1, a2, a3), two 16-bit values each, the lower half first):
    warp ``w``, lane ``4g + t``: register 0 row ``16w + g``, columns ``2t, 2t + 1``; register 1 row ``16w + g + 8``;
    register 2 row ``16w + g``, columns ``2t + 8, 2t + 9``; register 3 row ``16w + g + 8``, those columns (PTX ISA,
    the A fragment of ``wgmma .m64nNk16``: :mod:`.wgmma_reg_a`)."""
    t = np.dtype(_DT[kind])
    A = np.zeros((64, 16))
    for tid, r4 in regs.items():
        w, lane = tid // 32, tid % 32
        g, q = lane // 4, lane % 4
        for k, (dr, dc) in enumerate(((0, 0), (8, 0), (0, 8), (8, 8))):
            bits = np.array([r4[k] & 0xFFFF, r4[k] >> 16], np.uint16)
            A[16 * w + g + dr, 2 * q + dc: 2 * q + dc + 2] = bits.view(t).astype(np.float64)
    return A


def sim_wgmma_namespace(cp_async16=None) -> dict:
    """The simulator build of :mod:`.wgmma_intrinsics` (see the module docstring); ``cp_async16``: the simulator's
    ``_cp_async16`` to wrap with the pending-read check (None: not wrapped)."""
    lock = threading.Lock()
    windows: dict = {}  # "block": the block they belong to; "list": [fake address, data pointer, bytes, array]
    state = threading.local()
    reads: dict = {}  # thread -> [[16-byte chunk ids read by each committed / open group]]

    def base_of(arr):
        b = arr
        while isinstance(getattr(b, "base", None), np.ndarray):
            b = b.base
        return b

    def smem_u32(arr, i):
        """Windows are found by memory address, not object: the simulator's dynamic shared arrays are new
        ``frombuffer`` views per thread and per dtype over one buffer."""
        b = base_of(arr)
        ptr, size = b.__array_interface__["data"][0], b.nbytes
        me = threading.current_thread()
        blk = tuple(int(x) for x in (me.blockIdx.x, me.blockIdx.y, me.blockIdx.z)) if hasattr(me, "blockIdx") else ()
        with lock:
            if windows.get("block") != blk:  # a new block: its shared arrays are new
                windows.clear()
                reads.clear()
                windows["block"] = blk
            wins = windows.setdefault("list", [])  # [start address, pointer, bytes, array]
            got = next((w for w in wins if w[1] <= ptr and ptr + size <= w[1] + w[2]), None)
            if got is None:
                start = max([w[0] + -(-w[2] // 1024) * 1024 for w in wins] + [0]) + 1024
                got = [start, ptr, size, b]
                wins.append(got)
        off = arr.__array_interface__["data"][0] - got[1]
        return np.uint32(got[0] + off + int(i) * arr.dtype.itemsize)

    def image():
        """The shared arrays as one byte image at their fake addresses."""
        wins = windows.get("list", [])
        top = max(w[0] + w[2] for w in wins)
        mem = np.zeros(top, np.uint8)
        for start, _ptr, size, b in wins:
            mem[start:start + size] = np.ascontiguousarray(b).view(np.uint8).ravel()[:size]
        if top >= 1 << 18:
            raise ValueError("wgmma simulator: shared arrays past the 18-bit descriptor address range")
        return mem

    def pending():
        p = getattr(state, "groups", None)
        if p is None:
            p = state.groups = [[]]
        return p

    def tid128():
        me = threading.current_thread()
        return int(me.threadIdx.x) % 128

    def my_reads():
        me = threading.current_thread()
        with lock:
            return reads.setdefault(me, [set()])

    def make(name):
        a, b, n, ta, tb, _imm = _parse(name)
        K = 32 if a in ("e4m3", "e5m2") else 16
        ia, ib = np.dtype(_DT[a]).itemsize, np.dtype(_DT[b]).itemsize

        def addresses(da, db):
            return np.concatenate([operand_addresses(da, 64, K, ia, ta).ravel(),
                                   operand_addresses(db, n, K, ib, tb).ravel()])

        def run(da, db, acc, o0, tid, snap):
            with lock:
                mem = image()
            if snap is not None:
                addr, before = snap
                if not np.array_equal(mem[addr], before):
                    raise RuntimeError(f"wgmma simulator: shared memory read by a pending {name} was written before "
                                       "the wait_group that retires it")
            d = wgmma_model(mem, int(da), int(db), n, a, b, ta, tb)
            for i in range(n // 2):
                r, c = WL.acc_coord(tid, i)
                s = int(o0) + reg_slot(i, n)
                acc[s] = np.float32(np.float64(acc[s]) + d[r, c])

        def fn(da, db, acc, o0):
            tid = tid128()
            addr = addresses(int(da), int(db))
            my_reads()[-1].update(np.unique(addr >> 4).tolist())
            snap = None
            if tid == 0:  # one snapshot per warpgroup: every thread of it reads the same bytes
                with lock:
                    snap = (addr, image()[addr].copy())
            pending()[-1].append((run, int(da), int(db), acc, int(o0), tid, snap))

        return fn

    posted: dict = {}  # (block, warpgroup, call number) -> {tid: (a0, a1, a2, a3)} of register-A wgmma
    cond = threading.Condition(lock)

    def block_wg():
        me = threading.current_thread()
        blk = tuple(int(x) for x in (me.blockIdx.x, me.blockIdx.y, me.blockIdx.z)) if hasattr(me, "blockIdx") else ()
        return blk, int(me.threadIdx.x) // 128

    def make_ra(name):
        a, n, tb = parse_ra(name)
        ib = np.dtype(_DT[a]).itemsize

        def run(key, db, acc, o0, tid, snap):
            with cond:
                if not cond.wait_for(lambda: len(posted.get(key, ())) == 128, timeout=120):
                    raise RuntimeError(f"wgmma simulator: {name}: not every thread of the warpgroup issued it")
                regs = posted[key]
                mem = image()
            if snap is not None and not np.array_equal(mem[snap[0]], snap[1]):
                raise RuntimeError(f"wgmma simulator: shared memory read by a pending {name} was written before "
                                   "the wait_group that retires it")
            A = register_a(regs, a)
            Bt = operand(mem, int(db), n, 16, a, tb)
            d = A @ Bt.T
            for i in range(n // 2):
                r, c = WL.acc_coord(tid, i)
                s = int(o0) + reg_slot(i, n)
                acc[s] = np.float32(np.float64(acc[s]) + d[r, c])

        def fn(a0, a1, a2, a3, db, acc, o0):
            tid = tid128()
            blk, wg = block_wg()
            counts = state.__dict__.setdefault("ra_count", {})
            cnt = counts.get((blk, wg), 0)
            counts[(blk, wg)] = cnt + 1
            key = (blk, wg, cnt)
            addr = operand_addresses(int(db), n, 16, ib, tb).ravel()
            my_reads()[-1].update(np.unique(addr >> 4).tolist())
            snap = None
            with cond:
                posted.setdefault(key, {})[tid] = tuple(int(x) for x in (a0, a1, a2, a3))
                cond.notify_all()
                if tid == 0:
                    snap = (addr, image()[addr].copy())
            pending()[-1].append((run, key, int(db), acc, int(o0), tid, snap))

        return fn

    def commit():
        pending().append([])
        my_reads().append(set())

    def wait(keep):
        def fn():
            g = pending()
            done = len(g) - 1 - keep
            for grp in g[:max(0, done)]:
                for run, da, db, acc, o0, tid, snap in grp:
                    run(da, db, acc, o0, tid, snap)
            if done > 0:
                del g[:done]
                r = my_reads()
                with lock:
                    del r[:done]
        return fn

    def cp16(dst, di, src, si, nbytes):
        chunk = int(smem_u32(dst, di)) >> 4
        with lock:
            hit = [t for t, groups in reads.items() if any(chunk in grp for grp in groups)]
        if hit:
            raise RuntimeError(f"wgmma simulator: cp.async into shared bytes (chunk {chunk}) that a pending wgmma "
                               f"group of {len(hit)} thread(s) reads")
        cp_async16(dst, di, src, si, nbytes)

    class NS(dict):
        def __missing__(self, key):
            if isinstance(key, str) and key.startswith("_wgmma_ra_"):
                self[key] = make_ra(key)
                return self[key]
            if isinstance(key, str) and key.startswith("_wgmma_"):
                self[key] = make(key)
                return self[key]
            raise KeyError(key)

    def cp16u(daddr, src, si, nbytes):
        """``_cp_async16u``: the fake 32-bit shared address back to (array, element), then :func:`cp16`."""
        addr = int(daddr)
        with lock:
            w = next((w for w in windows.get("list", []) if w[0] <= addr < w[0] + w[2]), None)
        if w is None:
            raise ValueError(f"cp.async: shared address {addr} in no shared array")
        item = np.dtype(src.dtype).itemsize
        off = addr - w[0]
        if off % item:
            raise ValueError(f"cp.async: shared address {addr} not aligned to {item} bytes")
        cp16(w[3].reshape(-1).view(src.dtype), off // item, src, si, nbytes)

    ns = NS(_wg_fence=lambda: None, _wg_fence_regs=lambda t: t, _wg_commit=commit, _fence_async_smem=lambda: None, _smem_u32=smem_u32)
    if cp_async16 is not None:
        ns["_cp_async16"] = cp16
        ns["_cp_async16u"] = cp16u
    for k in range(MAX_WAIT + 1):
        ns[f"_wg_wait{k}"] = wait(k)
    return ns
