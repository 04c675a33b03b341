#if defined(_MSC_VER) && !defined(__clang__) && _MSC_VER < 1940
#define _tl_orig_alignas alignas
#define alignas(N) _tl_orig_alignas((N) <= 64 ? (N) : 64)
#include <cuda.h>
#undef alignas
#define alignas _tl_orig_alignas
#endif
#include <tl_templates/cuda/instruction/wgmma.h>
#include <tl_templates/cuda/intrin.h>
#include <tl_templates/cuda/barrier.h>
#include <tl_templates/cuda/cuda_fp8.h>
#include <math_constants.h>
#include <tl_templates/cuda/reduce.h>
#include <tl_templates/cuda/scan.h>
#include <tl_templates/cuda/ldsm.h>
#include <tl_templates/cuda/threadblock_swizzle.h>
#include <tl_templates/cuda/debug.h>
#ifdef ENABLE_BF16
#include <tl_templates/cuda/cuda_bf16_fallbacks.cuh>
#endif

extern "C" __global__ void main_kernel(const fp8_e4_t* __restrict__ Ki, float* __restrict__ Logits, const fp8_e4_t* __restrict__ Qi, const float* __restrict__ W);
extern "C" __global__ void __launch_bounds__(128, 1) main_kernel(const fp8_e4_t* __restrict__ Ki, float* __restrict__ Logits, const fp8_e4_t* __restrict__ Qi, const float* __restrict__ W) {
  extern __shared__ __align__(1024) uchar buf_dyn_shmem[];
  void* Q_s = ((void*)((char*)buf_dyn_shmem + 0));
  void* K_s = ((void*)((char*)buf_dyn_shmem + 16384));
  void* workspace = ((void*)((char*)buf_dyn_shmem + 24576));
  float w_f[4];
  float s3[64];
  float out[32];
  #pragma unroll
  for (int i = 0; i < 8; ++i) {
    *(fp8_e4_16_t*)(((fp8_e4_t*)Q_s) + (((((i * 2048) + ((((int)threadIdx.x) >> 3) * 128)) + (((((((int)threadIdx.x) & 63) >> 5) + ((((int)threadIdx.x) & 7) >> 2)) & 1) * 64)) + (((((((int)threadIdx.x) & 31) >> 4) + ((((int)threadIdx.x) & 3) >> 1)) & 1) * 32)) + (((((((int)threadIdx.x) & 15) >> 3) + (((int)threadIdx.x) & 1)) & 1) * 16))) = *(fp8_e4_16_t*)(Qi + (((((int)blockIdx.x) * 16384) + (i * 2048)) + (((int)threadIdx.x) * 16)));
  }
  #pragma unroll
  for (int i_1 = 0; i_1 < 4; ++i_1) {
    w_f[i_1] = W[(((((((int)blockIdx.x) * 128) + ((i_1 >> 1) * 64)) + ((((int)threadIdx.x) >> 5) * 16)) + ((i_1 & 1) * 8)) + ((((int)threadIdx.x) & 31) >> 2))];
  }
  for (int kt = 0; kt < 128; ++kt) {
    __syncthreads();
    if (0 <= (((int)blockIdx.x) - (kt * 32))) {
      #pragma unroll
      for (int i_2 = 0; i_2 < 4; ++i_2) {
        *(fp8_e4_16_t*)(((fp8_e4_t*)K_s) + (((((i_2 * 2048) + ((((int)threadIdx.x) >> 3) * 128)) + (((((((int)threadIdx.x) & 63) >> 5) + ((((int)threadIdx.x) & 7) >> 2)) & 1) * 64)) + (((((((int)threadIdx.x) & 31) >> 4) + ((((int)threadIdx.x) & 3) >> 1)) & 1) * 32)) + (((((((int)threadIdx.x) & 15) >> 3) + (((int)threadIdx.x) & 1)) & 1) * 16))) = *(fp8_e4_16_t*)(Ki + (((kt * 8192) + (i_2 * 2048)) + (((int)threadIdx.x) * 16)));
      }
      {
        tl::GmmaDescriptor desc_a;
        tl::GmmaDescriptor desc_b;
        __syncthreads();
        tl::initialize_wgmma_descriptor<1, 1, 64>(desc_a, (&(((fp8_e4_t*)Q_s)[0])));
        tl::initialize_wgmma_descriptor<1, 1, 64>(desc_b, (&(((fp8_e4_t*)K_s)[0])));
        tl::warpgroup_fence_operand(reinterpret_cast<float*>(s3 + 0), 64);
        tl::warpgroup_arrive();
        tl::fence_proxy_async();
        #pragma unroll
        for (int i_3 = 0; i_3 < 2; ++i_3) {
          #pragma unroll
          for (int ki = 0; ki < 4; ++ki) {
            tl::wgmma_ss<tl::DataType::kFloat8_e4m3, tl::DataType::kFloat8_e4m3, tl::DataType::kFloat32, 64, 64, 32, false, false, 1, 1>(uint64_t(desc_a + (((i_3 * 8192) + (ki * 32)) >> 4)), uint64_t(desc_b + ((ki * 32) >> 4)), ((uint32_t*)(s3 + (i_3 * 32))), ((0 < ki) ? 1 : 0));
          }
        }
        tl::warpgroup_commit_batch();
        tl::warpgroup_wait<0>();
        tl::warpgroup_fence_operand(reinterpret_cast<float*>(s3 + 0), 64);
      }
      #pragma unroll
      for (int i_4 = 0; i_4 < 32; ++i_4) {
        float broadcast_var = 0x0p+0f/*0.000000e+00*/;
        float2 __1;
          float2 __2;
            float2 v_ = *(float2*)(s3 + (i_4 * 2));
            float2 v__1 = make_float2(broadcast_var, broadcast_var);
            __2.x = max(v_.x, v__1.x);
            __2.y = max(v_.y, v__1.y);
          float2 v__2 = make_float2(w_f[(((i_4 >> 4) * 2) + (i_4 & 1))], w_f[(((i_4 >> 4) * 2) + (i_4 & 1))]);
          __1.x = (__2.x*v__2.x);
          __1.y = (__2.y*v__2.y);
        *(float2*)(s3 + (i_4 * 2)) = __1;
      }
      #pragma unroll
      for (int i_5 = 0; i_5 < 32; ++i_5) {
        out[i_5] = 0x0p+0f/*0.000000e+00*/;
        #pragma unroll
        for (int rv = 0; rv < 2; ++rv) {
          out[i_5] = (out[i_5] + s3[((((i_5 >> 1) * 4) + (rv * 2)) + (i_5 & 1))]);
        }
        __syncthreads();
        out[i_5] = tl::AllReduce<tl::SumOp, 128, 32, 0, tl::NamedBarrier<128>>::run(out[i_5], (&(((float*)workspace)[0])));
        out[i_5] = tl::AllReduce<tl::SumOp, 32, 4, 0, tl::NamedBarrier<128>>::run(out[i_5]);
      }
      #pragma unroll
      for (int i_6 = 0; i_6 < 32; ++i_6) {
        float condval;
        if ((((((kt * 64) + (((i_6 & 15) >> 1) * 8)) + ((((int)threadIdx.x) & 3) * 2)) + (i_6 & 1)) <= ((((int)blockIdx.x) * 2) + (i_6 >> 4)))) {
          condval = out[i_6];
        } else {
          condval = -CUDART_INF_F;
        }
        out[i_6] = condval;
      }
    } else {
      #pragma unroll
      for (int i_7 = 0; i_7 < 8; ++i_7) {
        float broadcast_var_1 = -CUDART_INF_F;
        *(float4*)(out + (i_7 * 4)) = make_float4(broadcast_var_1, broadcast_var_1, broadcast_var_1, broadcast_var_1);
      }
    }
    if (((((((int)threadIdx.x) & 31) >> 2) * 4) + (((int)threadIdx.x) >> 5)) == 0) {
      #pragma unroll
      for (int i_8 = 0; i_8 < 16; ++i_8) {
        *(float2*)(Logits + (((((((int)blockIdx.x) * 16384) + ((i_8 >> 3) * 8192)) + (kt * 64)) + ((i_8 & 7) * 8)) + ((((int)threadIdx.x) & 3) * 2))) = *(float2*)(out + (i_8 * 2));
      }
    }
  }
}

