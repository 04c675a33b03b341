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
extern "C" __global__ void __launch_bounds__(256, 1) main_kernel(const float* __restrict__ Bias, int* __restrict__ Idx, const float* __restrict__ Logits, float* __restrict__ W) {
  extern __shared__ __align__(1024) uchar buf_dyn_shmem[];
  void* s_shared = ((void*)((char*)buf_dyn_shmem + 0));
  void* b_shared = ((void*)((char*)buf_dyn_shmem + 16384));
  void* keep_shared = ((void*)((char*)buf_dyn_shmem + 16384));
  void* workspace = ((void*)((char*)buf_dyn_shmem + 16384));
  void* workspace_1 = ((void*)((char*)buf_dyn_shmem + 16384));
  void* workspace_2 = ((void*)((char*)buf_dyn_shmem + 17408));
  void* workspace_3 = ((void*)((char*)buf_dyn_shmem + 17408));
  void* idx_shared = ((void*)((char*)buf_dyn_shmem + 18432));
  void* w_shared = ((void*)((char*)buf_dyn_shmem + 18944));
  float s[16];
  float bias[1];
  float b[16];
  float bg[16];
  float m1[16];
  int gcand[16];
  int gfirst[16];
  float m2[16];
  float gscore[16];
  int gkeep[16];
  float row_max[16];
  int first[16];
  int gcand2[16];
  float row_sum[16];
  int cand[16];
  float w[128];
  #pragma unroll
  for (int i = 0; i < 16; ++i) {
    s[i] = Logits[(((((int)blockIdx.x) * 4096) + (i * 256)) + ((int)threadIdx.x))];
  }
  bias[0] = Bias[((int)threadIdx.x)];
  #pragma unroll
  for (int i_1 = 0; i_1 < 4; ++i_1) {
    float broadcast_var = 0x1p+0f/*1.000000e+00*/;
    float broadcast_var_1 = 0x1p+0f/*1.000000e+00*/;
    float broadcast_var_2 = 0x0p+0f/*0.000000e+00*/;
    float4 __1;
      float4 v_ = make_float4(broadcast_var, broadcast_var, broadcast_var, broadcast_var);
      float4 __2;
        float4 v__1 = make_float4(broadcast_var_1, broadcast_var_1, broadcast_var_1, broadcast_var_1);
        float4 __3;
        float4 __4;
          float4 v__2 = make_float4(broadcast_var_2, broadcast_var_2, broadcast_var_2, broadcast_var_2);
          float4 v__3 = *(float4*)(s + (i_1 * 4));
          __4.x = (v__2.x-v__3.x);
          __4.y = (v__2.y-v__3.y);
          __4.z = (v__2.z-v__3.z);
          __4.w = (v__2.w-v__3.w);
        __3.x = expf(__4.x);
        __3.y = expf(__4.y);
        __3.z = expf(__4.z);
        __3.w = expf(__4.w);
        __2.x = (v__1.x+__3.x);
        __2.y = (v__1.y+__3.y);
        __2.z = (v__1.z+__3.z);
        __2.w = (v__1.w+__3.w);
      __1.x = (v_.x/__2.x);
      __1.y = (v_.y/__2.y);
      __1.z = (v_.z/__2.z);
      __1.w = (v_.w/__2.w);
    *(float4*)(s + (i_1 * 4)) = __1;
    float4 __5;
      float4 v__4 = *(float4*)(s + (i_1 * 4));
      float4 v__5 = make_float4(bias[0], bias[0], bias[0], bias[0]);
      __5.x = (v__4.x+v__5.x);
      __5.y = (v__4.y+v__5.y);
      __5.z = (v__4.z+v__5.z);
      __5.w = (v__4.w+v__5.w);
    *(float4*)(b + (i_1 * 4)) = __5;
  }
  #pragma unroll
  for (int i_2 = 0; i_2 < 16; ++i_2) {
    ((float*)s_shared)[((i_2 * 256) + ((int)threadIdx.x))] = s[i_2];
  }
  #pragma unroll
  for (int i_3 = 0; i_3 < 16; ++i_3) {
    ((float*)b_shared)[((i_3 * 256) + ((int)threadIdx.x))] = b[i_3];
  }
  #pragma unroll
  for (int i_4 = 0; i_4 < 16; ++i_4) {
    bg[i_4] = ((float*)b_shared)[((i_4 * 256) + ((int)threadIdx.x))];
  }
  #pragma unroll
  for (int i_5 = 0; i_5 < 16; ++i_5) {
    m1[i_5] = -CUDART_INF_F;
    m1[i_5] = max(m1[i_5], bg[i_5]);
    m1[i_5] = tl::AllReduce<tl::MaxOp, 32, 1, 0, tl::NamedBarrier<256>>::run(m1[i_5]);
  }
  #pragma unroll
  for (int i_6 = 0; i_6 < 16; ++i_6) {
    int condval;
    if ((bg[i_6] == m1[i_6])) {
      condval = (((int)threadIdx.x) & 31);
    } else {
      condval = 32;
    }
    gcand[i_6] = condval;
  }
  #pragma unroll
  for (int i_7 = 0; i_7 < 16; ++i_7) {
    gfirst[i_7] = 2147483647;
    gfirst[i_7] = min(gfirst[i_7], gcand[i_7]);
    gfirst[i_7] = tl::AllReduce<tl::MinOp, 32, 1, 0, tl::NamedBarrier<256>>::run(gfirst[i_7]);
  }
  #pragma unroll
  for (int i_8 = 0; i_8 < 16; ++i_8) {
    float condval_1;
    if (((((int)threadIdx.x) & 31) == gfirst[i_8])) {
      condval_1 = -CUDART_INF_F;
    } else {
      condval_1 = bg[i_8];
    }
    bg[i_8] = condval_1;
  }
  #pragma unroll
  for (int i_9 = 0; i_9 < 16; ++i_9) {
    m2[i_9] = -CUDART_INF_F;
    m2[i_9] = max(m2[i_9], bg[i_9]);
    m2[i_9] = tl::AllReduce<tl::MaxOp, 32, 1, 0, tl::NamedBarrier<256>>::run(m2[i_9]);
  }
  #pragma unroll
  for (int i_10 = 0; i_10 < 4; ++i_10) {
    float4 __6;
      float4 v__6 = *(float4*)(m1 + (i_10 * 4));
      float4 v__7 = *(float4*)(m2 + (i_10 * 4));
      __6.x = (v__6.x+v__7.x);
      __6.y = (v__6.y+v__7.y);
      __6.z = (v__6.z+v__7.z);
      __6.w = (v__6.w+v__7.w);
    *(float4*)(gscore + (i_10 * 4)) = __6;
  }
  #pragma unroll
  for (int i_11 = 0; i_11 < 4; ++i_11) {
    int broadcast_var_3 = 0;
    *(int4*)(gkeep + (i_11 * 4)) = make_int4(broadcast_var_3, broadcast_var_3, broadcast_var_3, broadcast_var_3);
  }
  for (int __7 = 0; __7 < 4; ++__7) {
    #pragma unroll
    for (int i_12 = 0; i_12 < 16; ++i_12) {
      row_max[i_12] = -CUDART_INF_F;
      row_max[i_12] = max(row_max[i_12], gscore[i_12]);
      __syncthreads();
      row_max[i_12] = tl::AllReduce<tl::MaxOp, 256, 32, 0, tl::NamedBarrier<256>>::run(row_max[i_12], (&(((float*)workspace_3)[0])));
    }
    #pragma unroll
    for (int i_13 = 0; i_13 < 16; ++i_13) {
      int condval_2;
      if ((gscore[i_13] == row_max[i_13])) {
        condval_2 = (((int)threadIdx.x) >> 5);
      } else {
        condval_2 = 8;
      }
      gcand2[i_13] = condval_2;
    }
    #pragma unroll
    for (int i_14 = 0; i_14 < 16; ++i_14) {
      first[i_14] = 2147483647;
      first[i_14] = min(first[i_14], gcand2[i_14]);
      __syncthreads();
      first[i_14] = tl::AllReduce<tl::MinOp, 256, 32, 0, tl::NamedBarrier<256>>::run(first[i_14], (&(((int*)workspace_1)[0])));
    }
    #pragma unroll
    for (int i_15 = 0; i_15 < 16; ++i_15) {
      int condval_3;
      if (((((int)threadIdx.x) >> 5) == first[i_15])) {
        condval_3 = 1;
      } else {
        condval_3 = gkeep[i_15];
      }
      gkeep[i_15] = condval_3;
      float condval_4;
      if (((((int)threadIdx.x) >> 5) == first[i_15])) {
        condval_4 = -CUDART_INF_F;
      } else {
        condval_4 = gscore[i_15];
      }
      gscore[i_15] = condval_4;
    }
  }
  __syncthreads();
  if ((((int)threadIdx.x) % 32) == 0) {
    #pragma unroll
    for (int i_16 = 0; i_16 < 16; ++i_16) {
      ((int*)keep_shared)[((i_16 * 8) + (((int)threadIdx.x) >> 5))] = gkeep[i_16];
    }
  }
  __syncthreads();
  #pragma unroll
  for (int i_17 = 0; i_17 < 16; ++i_17) {
    float condval_5;
    if ((((int*)keep_shared)[((i_17 * 8) + (((int)threadIdx.x) >> 5))] != 0)) {
      condval_5 = b[i_17];
    } else {
      condval_5 = -CUDART_INF_F;
    }
    b[i_17] = condval_5;
  }
  #pragma unroll
  for (int i_18 = 0; i_18 < 4; ++i_18) {
    float broadcast_var_4 = 0x0p+0f/*0.000000e+00*/;
    *(float4*)(row_sum + (i_18 * 4)) = make_float4(broadcast_var_4, broadcast_var_4, broadcast_var_4, broadcast_var_4);
  }
  for (int r = 0; r < 8; ++r) {
    #pragma unroll
    for (int i_19 = 0; i_19 < 16; ++i_19) {
      row_max[i_19] = -CUDART_INF_F;
      row_max[i_19] = max(row_max[i_19], b[i_19]);
      __syncthreads();
      row_max[i_19] = tl::AllReduce<tl::MaxOp, 256, 1, 0, tl::NamedBarrier<256>>::run(row_max[i_19], (&(((float*)workspace_2)[0])));
    }
    #pragma unroll
    for (int i_20 = 0; i_20 < 16; ++i_20) {
      int condval_6;
      if ((b[i_20] == row_max[i_20])) {
        condval_6 = ((int)threadIdx.x);
      } else {
        condval_6 = 256;
      }
      cand[i_20] = condval_6;
    }
    #pragma unroll
    for (int i_21 = 0; i_21 < 16; ++i_21) {
      first[i_21] = 2147483647;
      first[i_21] = min(first[i_21], cand[i_21]);
      __syncthreads();
      first[i_21] = tl::AllReduce<tl::MinOp, 256, 1, 0, tl::NamedBarrier<256>>::run(first[i_21], (&(((int*)workspace)[0])));
    }
    #pragma unroll
    for (int i_22 = 0; i_22 < 16; ++i_22) {
      __syncthreads();
      ((int*)idx_shared)[((i_22 * 8) + r)] = first[i_22];
      __syncthreads();
      ((float*)w_shared)[((i_22 * 8) + r)] = ((float*)s_shared)[((((int64_t)i_22) * (int64_t)256) + ((int64_t)first[((int64_t)i_22)]))];
      __syncthreads();
      row_sum[i_22] = (row_sum[i_22] + ((float*)s_shared)[((((int64_t)i_22) * (int64_t)256) + ((int64_t)first[((int64_t)i_22)]))]);
    }
    #pragma unroll
    for (int i_23 = 0; i_23 < 16; ++i_23) {
      float condval_7;
      if ((((int)threadIdx.x) == first[i_23])) {
        condval_7 = -CUDART_INF_F;
      } else {
        condval_7 = b[i_23];
      }
      b[i_23] = condval_7;
    }
  }
  #pragma unroll
  for (int i_24 = 0; i_24 < 32; ++i_24) {
    float broadcast_var_5 = 0x1.4p+1f/*2.500000e+00*/;
    float4 __8;
      float4 __9;
        float4 v__8 = *(float4*)(((float*)w_shared) + (i_24 * 4));
        float4 v__9 = make_float4(max(row_sum[(i_24 >> 1)], 0x1.79ca10c924223p-67f/*1.000000e-20*/), max(row_sum[(i_24 >> 1)], 0x1.79ca10c924223p-67f/*1.000000e-20*/), max(row_sum[(i_24 >> 1)], 0x1.79ca10c924223p-67f/*1.000000e-20*/), max(row_sum[(i_24 >> 1)], 0x1.79ca10c924223p-67f/*1.000000e-20*/));
        __9.x = (v__8.x/v__9.x);
        __9.y = (v__8.y/v__9.y);
        __9.z = (v__8.z/v__9.z);
        __9.w = (v__8.w/v__9.w);
      float4 v__10 = make_float4(broadcast_var_5, broadcast_var_5, broadcast_var_5, broadcast_var_5);
      __8.x = (__9.x*v__10.x);
      __8.y = (__9.y*v__10.y);
      __8.z = (__9.z*v__10.z);
      __8.w = (__9.w*v__10.w);
    *(float4*)(w + (i_24 * 4)) = __8;
  }
  if (tl::tl_shuffle_elect<256>()) {
    tl::fence_proxy_async();
    tl::tma_store((&(Idx[(((int)blockIdx.x) * 128)])), (&(((int*)idx_shared)[0])), 512);
    tl::tma_store_arrive();
    tl::tma_store_wait<0, true>();
  }
  if ((((((int)threadIdx.x) & 31) * 8) + (((int)threadIdx.x) >> 5)) == 0) {
    #pragma unroll
    for (int i_25 = 0; i_25 < 32; ++i_25) {
      *(float4*)(W + ((((int)blockIdx.x) * 128) + (i_25 * 4))) = *(float4*)(w + (i_25 * 4));
    }
  }
}

