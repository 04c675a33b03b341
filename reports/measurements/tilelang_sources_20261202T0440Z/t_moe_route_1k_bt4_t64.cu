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
extern "C" __global__ void __launch_bounds__(64, 1) main_kernel(const float* __restrict__ Bias, int* __restrict__ Idx, const float* __restrict__ Logits, float* __restrict__ W) {
  extern __shared__ __align__(1024) uchar buf_dyn_shmem[];
  void* s_shared = ((void*)((char*)buf_dyn_shmem + 0));
  void* b_shared = ((void*)((char*)buf_dyn_shmem + 4096));
  void* keep_shared = ((void*)((char*)buf_dyn_shmem + 4096));
  void* workspace = ((void*)((char*)buf_dyn_shmem + 4096));
  void* workspace_1 = ((void*)((char*)buf_dyn_shmem + 4096));
  void* workspace_2 = ((void*)((char*)buf_dyn_shmem + 4352));
  void* workspace_3 = ((void*)((char*)buf_dyn_shmem + 4352));
  void* w_shared = ((void*)((char*)buf_dyn_shmem + 4608));
  void* idx_shared = ((void*)((char*)buf_dyn_shmem + 5120));
  float s[16];
  float bias[4];
  float b[16];
  float bg[16];
  float m1[4];
  int gcand[16];
  int gfirst[4];
  float m2[4];
  float gscore[4];
  int gkeep[4];
  float row_max[4];
  int first[4];
  int gcand2[4];
  float row_sum[4];
  int cand[16];
  float w[32];
  #pragma unroll
  for (int i = 0; i < 16; ++i) {
    s[i] = Logits[(((((int)blockIdx.x) * 1024) + (i * 64)) + ((int)threadIdx.x))];
  }
  #pragma unroll
  for (int i_1 = 0; i_1 < 4; ++i_1) {
    bias[i_1] = Bias[((i_1 * 64) + ((int)threadIdx.x))];
  }
  #pragma unroll
  for (int i_2 = 0; i_2 < 4; ++i_2) {
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
          float4 v__3 = *(float4*)(s + (i_2 * 4));
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
    *(float4*)(s + (i_2 * 4)) = __1;
    float4 __5;
      float4 v__4 = *(float4*)(s + (i_2 * 4));
      float4 v__5 = *(float4*)(bias + 0);
      __5.x = (v__4.x+v__5.x);
      __5.y = (v__4.y+v__5.y);
      __5.z = (v__4.z+v__5.z);
      __5.w = (v__4.w+v__5.w);
    *(float4*)(b + (i_2 * 4)) = __5;
  }
  #pragma unroll
  for (int i_3 = 0; i_3 < 16; ++i_3) {
    ((float*)s_shared)[((i_3 * 64) + ((int)threadIdx.x))] = s[i_3];
  }
  #pragma unroll
  for (int i_4 = 0; i_4 < 16; ++i_4) {
    ((float*)b_shared)[((i_4 * 64) + ((int)threadIdx.x))] = b[i_4];
  }
  __syncthreads();
  #pragma unroll
  for (int i_5 = 0; i_5 < 4; ++i_5) {
    *(float4*)(bg + (i_5 * 4)) = *(float4*)(((float*)b_shared) + ((i_5 * 256) + (((int)threadIdx.x) * 4)));
  }
  #pragma unroll
  for (int i_6 = 0; i_6 < 4; ++i_6) {
    m1[i_6] = -CUDART_INF_F;
    #pragma unroll
    for (int rv = 0; rv < 4; ++rv) {
      m1[i_6] = max(m1[i_6], bg[((i_6 * 4) + rv)]);
    }
    m1[i_6] = tl::AllReduce<tl::MaxOp, 8, 1, 0, tl::NamedBarrier<64>>::run(m1[i_6]);
  }
  #pragma unroll
  for (int i_7 = 0; i_7 < 16; ++i_7) {
    int condval;
    if ((bg[i_7] == m1[(i_7 >> 2)])) {
      condval = (((((int)threadIdx.x) & 7) * 4) + (i_7 & 3));
    } else {
      condval = 32;
    }
    gcand[i_7] = condval;
  }
  #pragma unroll
  for (int i_8 = 0; i_8 < 4; ++i_8) {
    gfirst[i_8] = 2147483647;
    #pragma unroll
    for (int rv_1 = 0; rv_1 < 4; ++rv_1) {
      gfirst[i_8] = min(gfirst[i_8], gcand[((i_8 * 4) + rv_1)]);
    }
    gfirst[i_8] = tl::AllReduce<tl::MinOp, 8, 1, 0, tl::NamedBarrier<64>>::run(gfirst[i_8]);
  }
  #pragma unroll
  for (int i_9 = 0; i_9 < 16; ++i_9) {
    float condval_1;
    if (((((((int)threadIdx.x) & 7) * 4) + (i_9 & 3)) == gfirst[(i_9 >> 2)])) {
      condval_1 = -CUDART_INF_F;
    } else {
      condval_1 = bg[i_9];
    }
    bg[i_9] = condval_1;
  }
  #pragma unroll
  for (int i_10 = 0; i_10 < 4; ++i_10) {
    m2[i_10] = -CUDART_INF_F;
    #pragma unroll
    for (int rv_2 = 0; rv_2 < 4; ++rv_2) {
      m2[i_10] = max(m2[i_10], bg[((i_10 * 4) + rv_2)]);
    }
    m2[i_10] = tl::AllReduce<tl::MaxOp, 8, 1, 0, tl::NamedBarrier<64>>::run(m2[i_10]);
  }
  float4 __6;
    float4 v__6 = *(float4*)(m1 + 0);
    float4 v__7 = *(float4*)(m2 + 0);
    __6.x = (v__6.x+v__7.x);
    __6.y = (v__6.y+v__7.y);
    __6.z = (v__6.z+v__7.z);
    __6.w = (v__6.w+v__7.w);
  *(float4*)(gscore + 0) = __6;
  int broadcast_var_3 = 0;
  *(int4*)(gkeep + 0) = make_int4(broadcast_var_3, broadcast_var_3, broadcast_var_3, broadcast_var_3);
  for (int __7 = 0; __7 < 4; ++__7) {
    #pragma unroll
    for (int i_11 = 0; i_11 < 4; ++i_11) {
      row_max[i_11] = -CUDART_INF_F;
      row_max[i_11] = max(row_max[i_11], gscore[i_11]);
      __syncthreads();
      row_max[i_11] = tl::AllReduce<tl::MaxOp, 64, 8, 0, tl::NamedBarrier<64>>::run(row_max[i_11], (&(((float*)workspace_3)[0])));
    }
    #pragma unroll
    for (int i_12 = 0; i_12 < 4; ++i_12) {
      int condval_2;
      if ((gscore[i_12] == row_max[i_12])) {
        condval_2 = (((int)threadIdx.x) >> 3);
      } else {
        condval_2 = 8;
      }
      gcand2[i_12] = condval_2;
    }
    #pragma unroll
    for (int i_13 = 0; i_13 < 4; ++i_13) {
      first[i_13] = 2147483647;
      first[i_13] = min(first[i_13], gcand2[i_13]);
      __syncthreads();
      first[i_13] = tl::AllReduce<tl::MinOp, 64, 8, 0, tl::NamedBarrier<64>>::run(first[i_13], (&(((int*)workspace_1)[0])));
    }
    #pragma unroll
    for (int i_14 = 0; i_14 < 4; ++i_14) {
      int condval_3;
      if (((((int)threadIdx.x) >> 3) == first[i_14])) {
        condval_3 = 1;
      } else {
        condval_3 = gkeep[i_14];
      }
      gkeep[i_14] = condval_3;
      float condval_4;
      if (((((int)threadIdx.x) >> 3) == first[i_14])) {
        condval_4 = -CUDART_INF_F;
      } else {
        condval_4 = gscore[i_14];
      }
      gscore[i_14] = condval_4;
    }
  }
  __syncthreads();
  if ((((int)threadIdx.x) % 8) == 0) {
    #pragma unroll
    for (int i_15 = 0; i_15 < 4; ++i_15) {
      ((int*)keep_shared)[((i_15 * 8) + (((int)threadIdx.x) >> 3))] = gkeep[i_15];
    }
  }
  __syncthreads();
  #pragma unroll
  for (int i_16 = 0; i_16 < 16; ++i_16) {
    float condval_5;
    if ((((int*)keep_shared)[((i_16 * 2) + (((int)threadIdx.x) >> 5))] != 0)) {
      condval_5 = b[i_16];
    } else {
      condval_5 = -CUDART_INF_F;
    }
    b[i_16] = condval_5;
  }
  float broadcast_var_4 = 0x0p+0f/*0.000000e+00*/;
  *(float4*)(row_sum + 0) = make_float4(broadcast_var_4, broadcast_var_4, broadcast_var_4, broadcast_var_4);
  for (int r = 0; r < 8; ++r) {
    #pragma unroll
    for (int i_17 = 0; i_17 < 4; ++i_17) {
      row_max[i_17] = -CUDART_INF_F;
      #pragma unroll
      for (int rv_3 = 0; rv_3 < 4; ++rv_3) {
        row_max[i_17] = max(row_max[i_17], b[((i_17 * 4) + rv_3)]);
      }
      __syncthreads();
      row_max[i_17] = tl::AllReduce<tl::MaxOp, 64, 1, 0, tl::NamedBarrier<64>>::run(row_max[i_17], (&(((float*)workspace)[0])));
    }
    #pragma unroll
    for (int i_18 = 0; i_18 < 16; ++i_18) {
      int condval_6;
      if ((b[i_18] == row_max[(i_18 >> 2)])) {
        condval_6 = (((i_18 & 3) * 64) + ((int)threadIdx.x));
      } else {
        condval_6 = 256;
      }
      cand[i_18] = condval_6;
    }
    #pragma unroll
    for (int i_19 = 0; i_19 < 4; ++i_19) {
      first[i_19] = 2147483647;
      #pragma unroll
      for (int rv_4 = 0; rv_4 < 4; ++rv_4) {
        first[i_19] = min(first[i_19], cand[((i_19 * 4) + rv_4)]);
      }
      __syncthreads();
      first[i_19] = tl::AllReduce<tl::MinOp, 64, 1, 0, tl::NamedBarrier<64>>::run(first[i_19], (&(((int*)workspace_2)[0])));
    }
    #pragma unroll
    for (int i_20 = 0; i_20 < 4; ++i_20) {
      __syncthreads();
      ((int*)idx_shared)[((i_20 * 8) + r)] = first[i_20];
      __syncthreads();
      ((float*)w_shared)[((i_20 * 8) + r)] = ((float*)s_shared)[((((int64_t)i_20) * (int64_t)256) + ((int64_t)first[((int64_t)i_20)]))];
      __syncthreads();
      row_sum[i_20] = (row_sum[i_20] + ((float*)s_shared)[((((int64_t)i_20) * (int64_t)256) + ((int64_t)first[((int64_t)i_20)]))]);
    }
    #pragma unroll
    for (int i_21 = 0; i_21 < 16; ++i_21) {
      float condval_7;
      if (((((i_21 & 3) * 64) + ((int)threadIdx.x)) == first[(i_21 >> 2)])) {
        condval_7 = -CUDART_INF_F;
      } else {
        condval_7 = b[i_21];
      }
      b[i_21] = condval_7;
    }
  }
  #pragma unroll
  for (int i_22 = 0; i_22 < 8; ++i_22) {
    float broadcast_var_5 = 0x1.4p+1f/*2.500000e+00*/;
    float4 __8;
      float4 __9;
        float4 v__8 = *(float4*)(((float*)w_shared) + (i_22 * 4));
        float4 v__9 = make_float4(max(row_sum[(i_22 >> 1)], 0x1.79ca10c924223p-67f/*1.000000e-20*/), max(row_sum[(i_22 >> 1)], 0x1.79ca10c924223p-67f/*1.000000e-20*/), max(row_sum[(i_22 >> 1)], 0x1.79ca10c924223p-67f/*1.000000e-20*/), max(row_sum[(i_22 >> 1)], 0x1.79ca10c924223p-67f/*1.000000e-20*/));
        __9.x = (v__8.x/v__9.x);
        __9.y = (v__8.y/v__9.y);
        __9.z = (v__8.z/v__9.z);
        __9.w = (v__8.w/v__9.w);
      float4 v__10 = make_float4(broadcast_var_5, broadcast_var_5, broadcast_var_5, broadcast_var_5);
      __8.x = (__9.x*v__10.x);
      __8.y = (__9.y*v__10.y);
      __8.z = (__9.z*v__10.z);
      __8.w = (__9.w*v__10.w);
    *(float4*)(w + (i_22 * 4)) = __8;
  }
  if (tl::tl_shuffle_elect<64>()) {
    tl::fence_proxy_async();
    tl::tma_store((&(Idx[(((int)blockIdx.x) * 32)])), (&(((int*)idx_shared)[0])), 128);
    tl::tma_store_arrive();
    tl::tma_store_wait<0, true>();
  }
  if ((((((int)threadIdx.x) & 7) * 8) + (((int)threadIdx.x) >> 3)) == 0) {
    #pragma unroll
    for (int i_23 = 0; i_23 < 8; ++i_23) {
      *(float4*)(W + ((((int)blockIdx.x) * 32) + (i_23 * 4))) = *(float4*)(w + (i_23 * 4));
    }
  }
}

