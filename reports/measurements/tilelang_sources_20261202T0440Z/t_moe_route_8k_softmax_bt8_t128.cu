#if defined(_MSC_VER) && !defined(__clang__) && _MSC_VER < 1940
#define _tl_orig_alignas alignas
#define alignas(N) _tl_orig_alignas((N) <= 64 ? (N) : 64)
#include <cuda.h>
#undef alignas
#define alignas _tl_orig_alignas
#endif
#include <tl_templates/cuda/intrin.h>
#include <tl_templates/cuda/barrier.h>
#include <tl_templates/cuda/copy_sm90.h>
#include <math_constants.h>
#include <tl_templates/cuda/reduce.h>
#include <tl_templates/cuda/scan.h>
#include <tl_templates/cuda/ldsm.h>
#include <tl_templates/cuda/threadblock_swizzle.h>
#include <tl_templates/cuda/debug.h>
#ifdef ENABLE_BF16
#include <tl_templates/cuda/cuda_bf16_fallbacks.cuh>
#endif

extern "C" __global__ void main_kernel(const float* __restrict__ Bias, int* __restrict__ Idx, const float* __restrict__ Logits, float* __restrict__ W);
extern "C" __global__ void __launch_bounds__(128, 1) main_kernel(const float* __restrict__ Bias, int* __restrict__ Idx, const float* __restrict__ Logits, float* __restrict__ W) {
  extern __shared__ __align__(1024) uchar buf_dyn_shmem[];
  void* b_shared = ((void*)((char*)buf_dyn_shmem + 0));
  void* idx_shared = ((void*)((char*)buf_dyn_shmem + 0));
  void* keep_shared = ((void*)((char*)buf_dyn_shmem + 0));
  void* w_shared = ((void*)((char*)buf_dyn_shmem + 256));
  void* s_shared = ((void*)((char*)buf_dyn_shmem + 8192));
  float s[256];
  float bias[256];
  float b[256];
  float row_max[1];
  float row_sum[1];
  float bg[32];
  float m1[1];
  int gcand[32];
  int gfirst[1];
  float m2[1];
  float gscore[1];
  int gkeep[1];
  int first[1];
  int gcand2[1];
  int cand[256];
  float w[1];
  #pragma unroll
  for (int i = 0; i < 64; ++i) {
    *(float4*)(s + (i * 4)) = *(float4*)(Logits + (((((int)blockIdx.x) * 2048) + (((((int)threadIdx.x) & 63) >> 3) * 256)) + (i * 4)));
  }
  #pragma unroll
  for (int i_1 = 0; i_1 < 64; ++i_1) {
    *(float4*)(bias + (i_1 * 4)) = *(float4*)(Bias + (i_1 * 4));
  }
  #pragma unroll
  for (int i_2 = 0; i_2 < 64; ++i_2) {
    float4 __1;
      float4 v_ = *(float4*)(s + (i_2 * 4));
      float4 v__1 = *(float4*)(bias + (i_2 * 4));
      __1.x = (v_.x+v__1.x);
      __1.y = (v_.y+v__1.y);
      __1.z = (v_.z+v__1.z);
      __1.w = (v_.w+v__1.w);
    *(float4*)(b + (i_2 * 4)) = __1;
  }
  row_max[0] = -CUDART_INF_F;
  #pragma unroll
  for (int rv = 0; rv < 256; ++rv) {
    row_max[0] = max(row_max[0], s[rv]);
  }
  #pragma unroll
  for (int i_3 = 0; i_3 < 64; ++i_3) {
    float4 __2;
    float4 __3;
      float4 v__2 = *(float4*)(s + (i_3 * 4));
      float4 v__3 = make_float4(row_max[0], row_max[0], row_max[0], row_max[0]);
      __3.x = (v__2.x-v__3.x);
      __3.y = (v__2.y-v__3.y);
      __3.z = (v__2.z-v__3.z);
      __3.w = (v__2.w-v__3.w);
    __2.x = expf(__3.x);
    __2.y = expf(__3.y);
    __2.z = expf(__3.z);
    __2.w = expf(__3.w);
    *(float4*)(s + (i_3 * 4)) = __2;
  }
  row_sum[0] = 0x0p+0f/*0.000000e+00*/;
  #pragma unroll
  for (int rv_1 = 0; rv_1 < 256; ++rv_1) {
    row_sum[0] = (row_sum[0] + s[rv_1]);
  }
  #pragma unroll
  for (int i_4 = 0; i_4 < 64; ++i_4) {
    float4 __4;
      float4 v__4 = *(float4*)(s + (i_4 * 4));
      float4 v__5 = make_float4(row_sum[0], row_sum[0], row_sum[0], row_sum[0]);
      __4.x = (v__4.x/v__5.x);
      __4.y = (v__4.y/v__5.y);
      __4.z = (v__4.z/v__5.z);
      __4.w = (v__4.w/v__5.w);
    *(float4*)(s + (i_4 * 4)) = __4;
  }
  if ((((((int)threadIdx.x) & 7) * 2) + (((int)threadIdx.x) >> 6)) == 0) {
    #pragma unroll
    for (int i_5 = 0; i_5 < 64; ++i_5) {
      *(float4*)(((float*)s_shared) + ((((((int)threadIdx.x) & 63) >> 3) * 256) + (i_5 * 4))) = *(float4*)(s + (i_5 * 4));
    }
    #pragma unroll
    for (int i_6 = 0; i_6 < 64; ++i_6) {
      *(float4*)(((float*)b_shared) + ((((((int)threadIdx.x) & 63) >> 3) * 256) + (i_6 * 4))) = *(float4*)(b + (i_6 * 4));
    }
  }
  __syncthreads();
  #pragma unroll
  for (int i_7 = 0; i_7 < 8; ++i_7) {
    *(float4*)(bg + (i_7 * 4)) = *(float4*)(((float*)b_shared) + (((((int)threadIdx.x) & 63) * 32) + (i_7 * 4)));
  }
  m1[0] = -CUDART_INF_F;
  #pragma unroll
  for (int rv_2 = 0; rv_2 < 32; ++rv_2) {
    m1[0] = max(m1[0], bg[rv_2]);
  }
  #pragma unroll
  for (int i_8 = 0; i_8 < 32; ++i_8) {
    int condval;
    if ((bg[i_8] == m1[0])) {
      condval = i_8;
    } else {
      condval = 32;
    }
    gcand[i_8] = condval;
  }
  gfirst[0] = 2147483647;
  #pragma unroll
  for (int rv_3 = 0; rv_3 < 32; ++rv_3) {
    gfirst[0] = min(gfirst[0], gcand[rv_3]);
  }
  #pragma unroll
  for (int i_9 = 0; i_9 < 32; ++i_9) {
    float condval_1;
    if ((i_9 == gfirst[0])) {
      condval_1 = -CUDART_INF_F;
    } else {
      condval_1 = bg[i_9];
    }
    bg[i_9] = condval_1;
  }
  m2[0] = -CUDART_INF_F;
  #pragma unroll
  for (int rv_4 = 0; rv_4 < 32; ++rv_4) {
    m2[0] = max(m2[0], bg[rv_4]);
  }
  gscore[0] = (m1[0] + m2[0]);
  gkeep[0] = 0;
  for (int __5 = 0; __5 < 4; ++__5) {
    row_max[0] = -CUDART_INF_F;
    row_max[0] = max(row_max[0], gscore[0]);
    row_max[0] = tl::AllReduce<tl::MaxOp, 8, 1, 0, tl::NamedBarrier<128>>::run(row_max[0]);
    int condval_2;
    if ((gscore[0] == row_max[0])) {
      condval_2 = (((int)threadIdx.x) & 7);
    } else {
      condval_2 = 8;
    }
    gcand2[0] = condval_2;
    first[0] = 2147483647;
    first[0] = min(first[0], gcand2[0]);
    first[0] = tl::AllReduce<tl::MinOp, 8, 1, 0, tl::NamedBarrier<128>>::run(first[0]);
    int condval_3;
    if (((((int)threadIdx.x) & 7) == first[0])) {
      condval_3 = 1;
    } else {
      condval_3 = gkeep[0];
    }
    gkeep[0] = condval_3;
    float condval_4;
    if (((((int)threadIdx.x) & 7) == first[0])) {
      condval_4 = -CUDART_INF_F;
    } else {
      condval_4 = gscore[0];
    }
    gscore[0] = condval_4;
  }
  __syncthreads();
  if ((((int)threadIdx.x) >> 6) == 0) {
    ((int*)keep_shared)[(((int)threadIdx.x) & 63)] = gkeep[0];
  }
  __syncthreads();
  #pragma unroll
  for (int i_10 = 0; i_10 < 8; ++i_10) {
    for (int vec = 0; vec < 8; ++vec) {
      float broadcast_var = -CUDART_INF_F;
      float4 condval_5;
      if ((((int*)keep_shared)[((((((int)threadIdx.x) & 63) >> 3) * 8) + i_10)] != 0)) {
        condval_5 = *(float4*)(b + ((i_10 * 32) + (vec * 4)));
      } else {
        condval_5 = make_float4(broadcast_var, broadcast_var, broadcast_var, broadcast_var);
      }
      *(float4*)(b + ((i_10 * 32) + (vec * 4))) = condval_5;
    }
  }
  row_sum[0] = 0x0p+0f/*0.000000e+00*/;
  for (int r = 0; r < 8; ++r) {
    row_max[0] = -CUDART_INF_F;
    #pragma unroll
    for (int rv_5 = 0; rv_5 < 256; ++rv_5) {
      row_max[0] = max(row_max[0], b[rv_5]);
    }
    #pragma unroll
    for (int i_11 = 0; i_11 < 256; ++i_11) {
      int condval_6;
      if ((b[i_11] == row_max[0])) {
        condval_6 = i_11;
      } else {
        condval_6 = 256;
      }
      cand[i_11] = condval_6;
    }
    first[0] = 2147483647;
    #pragma unroll
    for (int rv_6 = 0; rv_6 < 256; ++rv_6) {
      first[0] = min(first[0], cand[rv_6]);
    }
    __syncthreads();
    ((int*)idx_shared)[((((((int)threadIdx.x) & 63) >> 3) * 8) + r)] = first[0];
    __syncthreads();
    ((float*)w_shared)[((((((int)threadIdx.x) & 63) >> 3) * 8) + r)] = ((float*)s_shared)[((((((int64_t)((int)threadIdx.x)) & (int64_t)63) >> (int64_t)3) * (int64_t)256) + ((int64_t)first[(int64_t)0]))];
    __syncthreads();
    row_sum[0] = (row_sum[0] + ((float*)s_shared)[((((((int64_t)((int)threadIdx.x)) & (int64_t)63) >> (int64_t)3) * (int64_t)256) + ((int64_t)first[(int64_t)0]))]);
    #pragma unroll
    for (int i_12 = 0; i_12 < 256; ++i_12) {
      float condval_7;
      if ((i_12 == first[0])) {
        condval_7 = -CUDART_INF_F;
      } else {
        condval_7 = b[i_12];
      }
      b[i_12] = condval_7;
    }
  }
  w[0] = ((((float*)w_shared)[(((int)threadIdx.x) & 63)] / max(row_sum[0], 0x1.79ca10c924223p-67f/*1.000000e-20*/)) * 0x1.4p+1f/*2.500000e+00*/);
  if (tl::tl_shuffle_elect<128>()) {
    tl::fence_proxy_async();
    tl::tma_store((&(Idx[(((int)blockIdx.x) * 64)])), (&(((int*)idx_shared)[0])), 256);
    tl::tma_store_arrive();
    tl::tma_store_wait<0, true>();
  }
  if ((((int)threadIdx.x) >> 6) == 0) {
    W[((((int)blockIdx.x) * 64) + (((int)threadIdx.x) & 63))] = w[0];
  }
}

