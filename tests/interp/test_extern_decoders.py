"""``T.import_source`` + ``T.call_extern`` of the dequantization decoders tilesim knows (their meaning written out
in NumPy here from the CUDA/HIP definitions), refusals of unknown or unimported functions, and
``T.get_block_binding``."""

import ml_dtypes
import numpy as np
import pytest

import tilesim as tilelang
import tilesim.language as T

I4_SRC = """template <typename T1, typename T2, bool isSigned = false>
__device__ void decode_i4b_to_f16(T1 *_i4s, T2 *B_local_decode, const int N = 8) {
  static constexpr uint BOTTOM_MASK = 0x000f000f; static constexpr uint FP16_TOP_MAGIC_NUM = 0x64006400;
  static constexpr uint MEDIAN_NUM = isSigned ? 0x64086408 : 0x64006400; /* lop3 ... */ }
template <typename T1, typename T2> __device__ void decode_i4s_to_f16(T1 *a, T2 *b, const int N = 8) {}
template <typename T1, typename T2> __device__ void decode_i4u_to_f16(T1 *a, T2 *b, const int N = 8) {}
"""
FP4_SRC = """template<typename T1, typename T2>
__device__ void decode_fp4_to_bf16_twiddling(T1 *B_local, T2 *B_local_decode, const int N = 8) {
  "mov.b32 %12, 0x7e807e80;" "and.b32 %0, %13, 0b10000001110000001000000111000000;"
  "and.b32 %6, %5, 0b10000000000000001000000000000000;" }
"""


def _i4_ref(words_bytes, signed):
    w = words_bytes[:4].astype(np.uint32)
    w = w[0] | (w[1] << 8) | (w[2] << 16) | (w[3] << 24)
    out = []
    for i in range(4):
        for half in (0, 1):
            out.append(float(((w >> (4 * i + 16 * half)) & 15)) - (8 if signed else 0))
    return np.array(out, np.float16)


def _fp4_ref(b, n):
    out = np.zeros(8 * n, np.float32)
    for i in range(n):
        t = (int(b[4 * i]) << 24) | (int(b[4 * i + 1]) << 16) | (int(b[4 * i + 2]) << 8) | int(b[4 * i + 3])
        m = 0x81C081C0
        ds = [t & m, ((t << 3) & 0xFFFFFFFF) & m, ((t << 6) & 0xFFFFFFFF) & m,
              (((t << 1) & 0xFFFFFFFF) & 0x80008000) | ((t >> 3) & 0x01800180) | ((t >> 7) & 0x00400040)]
        for j, d in enumerate(ds):
            for k, half in ((8 * i + j, d >> 16), (8 * i + j + 4, d & 0xFFFF)):
                out[k] = float(np.array([half], np.uint16).view(ml_dtypes.bfloat16)[0]) * 2.0 ** 126
    return out.astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("signed", [False, True])
def test_decode_i4_to_f16(signed):
    name = "decode_i4s_to_f16" if signed else "decode_i4u_to_f16"

    @T.prim_func
    def k(Q: T.Tensor((64, 4), "int8"), D: T.Tensor((64, 8), "float16")):
        with T.Kernel(2, threads=32) as bx:
            tx = T.get_thread_binding()
            q = T.alloc_local((4,), "int8")
            d = T.alloc_local((8,), "float16")
            T.import_source(I4_SRC)
            for v in T.serial(4):
                q[v] = Q[bx * 32 + tx, v]
            T.call_extern(name, T.access_ptr(q, "r"), T.access_ptr(d, "w"), dtype="float16")
            for v in T.serial(8):
                D[bx * 32 + tx, v] = d[v]

    q = np.random.default_rng(3).integers(-128, 128, (64, 4)).astype(np.int8)
    out = tilelang.compile(k, out_idx=[-1])(q)
    ref = np.stack([_i4_ref(row.view(np.uint8), signed) for row in q])
    np.testing.assert_array_equal(out, ref)


def test_decode_fp4_to_bf16_twiddling_with_offset_pointer():
    @T.prim_func
    def k(Q: T.Tensor((32, 8), "uint8"), D: T.Tensor((32, 16), "bfloat16")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            q = T.alloc_local((12,), "uint8")
            d = T.alloc_local((16,), "bfloat16")
            T.import_source(FP4_SRC)
            for v in T.serial(8):
                q[v + 4] = Q[tx, v]
            T.call_extern("bfloat16", "decode_fp4_to_bf16_twiddling", T.access_ptr(q[4], "r"),
                          T.access_ptr(d, "w"), 2)
            for v in T.serial(16):
                D[tx, v] = d[v]

    q = np.random.default_rng(5).integers(0, 256, (32, 8)).astype(np.uint8)
    out = tilelang.compile(k, out_idx=[-1])(q)
    ref = np.stack([_fp4_ref(row, 2) for row in q])
    np.testing.assert_array_equal(out.astype(np.float32), ref.astype(np.float32))
    # every value is an E2M1 number (the twiddled nibbles decode to the FP4 grid)
    grid = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0}
    assert set(np.abs(out.astype(np.float32)).ravel().tolist()) <= grid


def _extern_kernel(source, name):
    @T.prim_func
    def k(Q: T.Tensor((32, 4), "int8"), D: T.Tensor((32, 8), "float16")):
        with T.Kernel(1, threads=32):
            q = T.alloc_local((4,), "int8")
            d = T.alloc_local((8,), "float16")
            T.import_source(source)
            T.call_extern("float16", name, T.access_ptr(q, "r"), T.access_ptr(d, "w"))

    return k


def test_unknown_or_unimported_extern_functions_are_refused():
    with pytest.raises(tilelang.KernelSyntaxError, match="'my_decode': an external device function"):
        tilelang.compile(_extern_kernel(I4_SRC, "my_decode"))
    with pytest.raises(tilelang.KernelSyntaxError, match="without its known definition imported"):
        tilelang.compile(_extern_kernel("__device__ void decode_i4u_to_f16(...) { other(); }",
                                        "decode_i4u_to_f16"))

    @T.prim_func
    def bad_ptr(Q: T.Tensor((32, 4), "int8")):
        with T.Kernel(1, threads=32):
            d = T.alloc_local((8,), "float16")
            T.import_source(I4_SRC)
            T.call_extern("float16", "decode_i4u_to_f16", Q, T.access_ptr(d, "w"))

    with pytest.raises(tilelang.KernelTypeError, match="T.access_ptr pointers"):
        tilelang.compile(bad_ptr)


def test_get_block_binding():
    @T.prim_func
    def k(B: T.Tensor((3, 2, 3), "int32")):
        with T.Kernel(2, 3, threads=32):
            bx = T.get_block_binding(0)
            by, bz = T.get_block_binding(1), T.get_block_binding(2)
            B[by, bx, 0] = bx
            B[by, bx, 1] = by
            B[by, bx, 2] = bz

    out = tilelang.compile(k, out_idx=[-1])()
    by, bx = np.meshgrid(np.arange(3), np.arange(2), indexing="ij")
    np.testing.assert_array_equal(out, np.stack([bx, by, np.zeros_like(bx)], axis=-1))


I2_SRC = """template <typename T1, typename T2>
__device__ void decode_i2s_to_i8s(T1 *_i2b, T2 *_i8s, const int N = 16) {
  static constexpr uint BOTTOM_MASK = 0x03030303; static constexpr uint MEDIAN_NUM = 0x02020202;
  for (int i = 0; i < (N / 4); i++) { lop3(i2b >> (2 * i)); i8s[i] = __vsub4(i8s[i], MEDIAN_NUM); } }
template <typename T1, typename T2>
__device__ void decode_i2u_to_i8s(T1 *_i2b, T2 *_i8s, const int N = 16) {
  static constexpr uint BOTTOM_MASK = 0x03030303; for (int i = 0; i < (N / 4); i++) { lop3(i2b >> (2 * i)); } }
"""


@pytest.mark.parametrize("signed", [False, True])
def test_decode_i2_to_i8(signed):
    name = "decode_i2s_to_i8s" if signed else "decode_i2u_to_i8s"

    @T.prim_func
    def k(Q: T.Tensor((32, 4), "int8"), D: T.Tensor((32, 16), "int8")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            q = T.alloc_local((4,), "int8")
            d = T.alloc_local((16,), "int8")
            T.import_source(I2_SRC)
            for v in T.serial(4):
                q[v] = Q[tx, v]
            T.call_extern("handle", name, T.access_ptr(q, "r"), T.access_ptr(d, "w"))
            for v in T.serial(16):
                D[tx, v] = d[v]

    q = np.random.default_rng(7).integers(-128, 128, (32, 4)).astype(np.int8)
    out = tilelang.compile(k, out_idx=[-1])(q)
    u = q.view(np.uint8).astype(np.int32)
    ref = np.stack([((u[:, b] >> (2 * i)) & 3) - (2 if signed else 0) for i in range(4) for b in range(4)], axis=1)
    np.testing.assert_array_equal(out, ref.astype(np.int8))
