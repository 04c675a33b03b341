"""A second, sealed held-out set for the simulator (issue 15), chosen on 2026-12-02 before any of it ran.

Same kinds as ``tilelang_h200_validation.CONFIGS`` at sizes and tiles none of the earlier sets used, plus two
kinds the earlier sets lack (MoE routing, DSA indexer). The protocol (docs/simulator.md, "Fresh held-out
set"): the current model's predictions are committed first (``--set fresh --dry-run``), the set is then timed
with real TileLang on the H200 and the measurements are kept out of the repository until the model work of the
session is finished; only then are they committed and compared (``--compare``).

``THIRD``, ``FOURTH`` and ``FIFTH`` (below) follow the same protocol. ``FOURTH`` (>= 46 configurations, >= 10 kinds) was
chosen without computing any of its predictions first (no cherry-picking): its configurations were only built
with tilesim and linted before the list was committed; the final model's predictions come after.
"""


def _reg(i, kind, kernel, **params):
    return {"id": i, "kind": kind, "source": "registry", "kernel": kernel, "params": params}


def _extra(i, kind, factory, module="extra", **params):
    return {"id": i, "kind": kind, "source": module, "factory": factory, "params": params}


FRESH = [
    # row norms
    _reg("f_rmsnorm_8kx7k_bm1_n2048_t256", "row_norm", "rmsnorm", M=8192, N=7168, block_M=1, block_N=2048, threads=256),
    _reg("f_rmsnorm_2kx4k_bm4_n1024_t128", "row_norm", "rmsnorm", M=2048, N=4096, block_M=4, block_N=1024,
         threads=128),
    _reg("f_layernorm_16kx7k_bm1_n1024_t256", "row_norm", "layernorm", M=16384, N=7168, block_M=1, block_N=1024,
         threads=256),
    _reg("f_layernorm_4kx8k_bm2_n2048_t256", "row_norm", "layernorm", M=4096, N=8192, block_M=2, block_N=2048,
         threads=256),
    _reg("f_lngelu_4kx7k_bm1_n1024_t256", "row_norm", "layernorm_gelu", M=4096, N=7168, block_M=1, block_N=1024,
         threads=256),
    _extra("f_core_rmsnorm_fp32_8kx2k_bm4_t128", "row_norm", "rms_norm", "core", M=8192, N=2048, block_M=4),
    # softmax
    _reg("f_softmax_16kx256_fp32_bm8", "softmax", "softmax", M=16384, N=256, block_M=8, block_N=None, threads=128,
         dtype="float32"),
    _reg("f_softmax_8kx8k_bm1_n8192_t512", "softmax", "softmax", M=8192, N=8192, block_M=1, block_N=8192,
         threads=512),
    _extra("f_core_softmax_4kx2k_bm4_t128", "softmax", "softmax", "core", M=4096, N=2048, block_M=4, threads=128),
    _extra("f_core_softmax_512x1k_bm8_t128", "softmax", "softmax", "core", M=512, N=1024, block_M=8, threads=128),
    # elementwise
    _reg("f_gelu_4kx14k_bm32_n512_t256", "elementwise", "gelu", M=4096, N=14336, block_M=32, block_N=512,
         threads=256),
    _reg("f_gelu_512x4k_bm8_n256_t128", "elementwise", "gelu", M=512, N=4096, block_M=8, block_N=256, threads=128),
    _extra("f_vec_add_4M_fp32_b1024_t256", "elementwise", "vec_add", N=1 << 22, block=1024, threads=256,
           dtype="float32"),
    _extra("f_vec_add_64M_fp16_b4096_t256", "elementwise", "vec_add", N=1 << 26, block=4096, threads=256,
           dtype="float16"),
    # casts
    _reg("f_fp8_cast_tok_4kx2k_bm8_t64", "cast", "fp8_cast_per_token", M=4096, N=2048, block_M=8, threads=64),
    _reg("f_fp8_cast_tok_8kx7k_bm64_t256", "cast", "fp8_cast_per_token", M=8192, N=7168, block_M=64, threads=256),
    _reg("f_fp8_cast_blk_7kx2k_t128", "cast", "fp8_cast_per_block", M=7168, N=2048, threads=128),
    _reg("f_fp8_dequant_tok_2kx7k_bm16_t256", "cast", "fp8_dequant_per_token", M=2048, N=7168, block_M=16,
         threads=256),
    _reg("f_swiglu_fp8_8kx2k_bm16_t128", "cast", "swiglu_fp8", M=8192, H=2048, block_M=16, threads=128),
    # transposes
    _reg("f_transpose_4x8kx4k_64x32_t128", "transpose", "batched_transpose", B=4, M=8192, N=4096, block_M=64,
         block_N=32, threads=128),
    _reg("f_transpose_16x2kx2k_fp32_32x64_t128", "transpose", "batched_transpose", B=16, M=2048, N=2048,
         block_M=32, block_N=64, threads=128, dtype="float32"),
    _reg("f_transpose_32x1kx512_128x128_t256", "transpose", "batched_transpose", B=32, M=1024, N=512, block_M=128,
         block_N=128, threads=256),
    _reg("f_transpose_1x8kx8k_fp8_64x64_t128", "transpose", "batched_transpose", B=1, M=8192, N=8192, block_M=64,
         block_N=64, threads=128, dtype="float8_e4m3fn"),
    # skinny GEMMs
    _extra("f_gemm_32x7168x7168_64x128x64_s3_t128", "skinny_gemm", "gemm", M=32, N=7168, K=7168, block_M=64,
           block_N=128, block_K=64, num_stages=3, threads=128),
    _extra("f_gemm_256x4096x4096_128x128x32_s3_t128", "skinny_gemm", "gemm", M=256, N=4096, K=4096, block_M=128,
           block_N=128, block_K=32, num_stages=3, threads=128),
    _reg("f_gemm_nt_64x7168x2048_64x64x64_s2_t128", "skinny_gemm", "gemm_nt", M=64, N=7168, K=2048, block_M=64,
         block_N=64, block_K=64, num_stages=2, threads=128),
    # split-K
    _reg("f_splitk_16x7168x8192_s4", "split_k", "gemm_splitk", M=16, N=7168, K=8192, split_k=4),
    _reg("f_splitk_64x4096x16384_s8_64x64", "split_k", "gemm_splitk", M=64, N=4096, K=16384, split_k=8, block_M=64,
         block_N=64),
    # decode attention
    _reg("f_paged_decode_gqa8_b32_4k_split4", "decode_attention", "paged_decode", batch=32, heads=64, groups=8,
         dim=128, max_len=4096, block_size=16, dtype="bfloat16", num_splits=4),
    _reg("f_mla_decode_b16_h128_16k_split4", "decode_attention", "mla_decode", batch=16, heads=128, seq_kv=16384,
         num_splits=4, dtype="bfloat16"),
    # tuned GEMMs, 128 and 256 threads
    _extra("f_gemm_4k_128x128x64_s3_t128", "gemm", "gemm", M=4096, N=4096, K=4096, block_M=128, block_N=128,
           block_K=64, num_stages=3, threads=128),
    _extra("f_gemm_8kx4kx4k_128x256x64_s3_t256", "gemm_256t", "gemm", M=8192, N=4096, K=4096, block_M=128,
           block_N=256, block_K=64, num_stages=3, threads=256),
    _extra("f_gemm_4kx14kx4k_bf16_128x256x32_s4_t256", "gemm_256t", "gemm", M=4096, N=14336, K=4096, block_M=128,
           block_N=256, block_K=32, num_stages=4, threads=256, dtype="bfloat16", out_dtype="bfloat16"),
    _reg("f_fp8_gemm_4kx7kx2k_128x128_s4", "gemm", "fp8_gemm", M=4096, N=7168, K=2048, block_M=128, block_N=128,
         num_stages=4, threads=128),
    # flash attention
    _extra("f_fa_b4h16s2048d128_causal_64x64_s2_t128", "flash_attention", "flash_attention", "core", batch=4,
           heads=16, seq_len=2048, dim=128, is_causal=True, block_M=64, block_N=64, num_stages=2, threads=128),
    _extra("f_fa_b1h32s4096d64_full_128x128_s2_t256", "flash_attention", "flash_attention", "core", batch=1,
           heads=32, seq_len=4096, dim=64, is_causal=False, block_M=128, block_N=128, num_stages=2, threads=256),
    _reg("f_fa_fwd_gqa_8k_bf16_128x64_s2", "flash_attention", "flash_attention_fwd", batch=1, heads=32, groups=4,
         seq_q=8192, dim=128, block_M=128, block_N=64, num_stages=2, dtype="bfloat16"),
    # MoE routing, DSA indexer (kinds the earlier sets lack)
    _reg("f_moe_route_16k_bt8_t128", "moe_routing", "moe_topk_route", num_tokens=16384, block_T=8, threads=128),
    _reg("f_moe_route_4k_bt16_t256", "moe_routing", "moe_topk_route", num_tokens=4096, block_T=16, threads=256),
    _reg("f_dsa_indexer_4k_bm4_n128", "dsa_indexer", "dsa_indexer", seq_q=4096, seq_kv=4096, block_M=4,
         block_N=128),
    _reg("f_dsa_indexer_decode_32k_bm1_n256", "dsa_indexer", "dsa_indexer", seq_q=1, seq_kv=32768, block_M=1,
         block_N=256),
]


# A third set, chosen on 2026-12-02 ~03:10 UTC after the second was unsealed (the second then became development
# data for the model work that followed). Same protocol: the final model's predictions are committed before the
# measurements are looked at.
THIRD = [
    # row norms
    _reg("t_rmsnorm_16kx7k_bm2_n1024_t256", "row_norm", "rmsnorm", M=16384, N=7168, block_M=2, block_N=1024,
         threads=256),
    _reg("t_rmsnorm_4kx8k_bm1_n4096_t512", "row_norm", "rmsnorm", M=4096, N=8192, block_M=1, block_N=4096,
         threads=512),
    _reg("t_layernorm_4kx7k_bm1_n2048_t256", "row_norm", "layernorm", M=4096, N=7168, block_M=1, block_N=2048,
         threads=256),
    _reg("t_layernorm_8kx8k_bm4_n1024_t128", "row_norm", "layernorm", M=8192, N=8192, block_M=4, block_N=1024,
         threads=128),
    _reg("t_lngelu_8kx8k_bm1_n2048_t256", "row_norm", "layernorm_gelu", M=8192, N=8192, block_M=1, block_N=2048,
         threads=256),
    _extra("t_core_rmsnorm_fp32_2kx4k_bm2_t128", "row_norm", "rms_norm", "core", M=2048, N=4096, block_M=2),
    # softmax
    _reg("t_softmax_32kx1k_bm4_n1024_t128", "softmax", "softmax", M=32768, N=1024, block_M=4, block_N=1024,
         threads=128),
    _reg("t_softmax_4kx129k_fp32_n8192_t256", "softmax", "softmax", M=1024, N=129280, block_M=1, block_N=8192,
         threads=256, dtype="float32"),
    _extra("t_core_softmax_16kx512_bm8_t128", "softmax", "softmax", "core", M=16384, N=512, block_M=8, threads=128),
    # elementwise
    _reg("t_gelu_16kx7k_bm32_n256_t128", "elementwise", "gelu", M=16384, N=7168, block_M=32, block_N=256,
         threads=128),
    _reg("t_gelu_2kx2k_fp32_bm16_n256_t256", "elementwise", "gelu", M=2048, N=2048, block_M=16, block_N=256,
         threads=256, dtype="float32"),
    _extra("t_vec_add_16M_fp32_b2048_t128", "elementwise", "vec_add", N=1 << 24, block=2048, threads=128,
           dtype="float32"),
    # casts
    _reg("t_fp8_cast_tok_16kx4k_bm16_t128", "cast", "fp8_cast_per_token", M=16384, N=4096, block_M=16, threads=128),
    _reg("t_fp8_cast_blk_16kx7k_t256", "cast", "fp8_cast_per_block", M=16384, N=7168, threads=256),
    _reg("t_fp8_dequant_tok_16kx2k_bm64_t128", "cast", "fp8_dequant_per_token", M=16384, N=2048, block_M=64,
         threads=128),
    _reg("t_swiglu_fp8_4kx18k_bm32_t256", "cast", "swiglu_fp8", M=4096, H=18432, block_M=32, threads=256),
    # transposes
    _reg("t_transpose_2x16kx4k_64x64_t256", "transpose", "batched_transpose", B=2, M=16384, N=4096, block_M=64,
         block_N=64, threads=256),
    _reg("t_transpose_8x2kx7k_32x128_t128", "transpose", "batched_transpose", B=8, M=2048, N=7168, block_M=32,
         block_N=128, threads=128),
    _reg("t_transpose_128x1kx128_fp16_128x128_t128", "transpose", "batched_transpose", B=128, M=1024, N=128,
         block_M=128, block_N=128, threads=128, dtype="float16"),
    # skinny GEMMs, split-K
    _extra("t_gemm_8x14336x4096_64x64x128_s3_t128", "skinny_gemm", "gemm", M=8, N=14336, K=4096, block_M=64,
           block_N=64, block_K=128, num_stages=3, threads=128),
    _reg("t_gemm_nt_128x4096x7168_64x128x64_s3_t128", "skinny_gemm", "gemm_nt", M=128, N=4096, K=7168, block_M=64,
         block_N=128, block_K=64, num_stages=3, threads=128),
    _reg("t_splitk_32x7168x2048_s2", "split_k", "gemm_splitk", M=32, N=7168, K=2048, split_k=2),
    _reg("t_splitk_128x4096x8192_s4_128x128", "split_k", "gemm_splitk", M=128, N=4096, K=8192, split_k=4,
         block_M=128, block_N=128),
    # GEMMs, fp8 GEMMs
    _extra("t_gemm_2kx7kx7k_128x128x32_s4_t128", "gemm", "gemm", M=2048, N=7168, K=7168, block_M=128, block_N=128,
           block_K=32, num_stages=4, threads=128),
    _extra("t_gemm_8k_bf16_128x256x64_s3_t256", "gemm_256t", "gemm", M=8192, N=8192, K=8192, block_M=128,
           block_N=256, block_K=64, num_stages=3, threads=256, dtype="bfloat16", out_dtype="bfloat16"),
    _reg("t_fp8_gemm_8kx4kx7k_128x128_s3", "fp8_gemm", "fp8_gemm", M=8192, N=4096, K=7168, block_M=128, block_N=128,
         num_stages=3, threads=128),
    _reg("t_fp8_gemm_2kx24kx1.5k_64x128_s4", "fp8_gemm", "fp8_gemm", M=2048, N=24576, K=1536, block_M=64,
         block_N=128, num_stages=4, threads=128),
    _reg("t_fp8_gemm_4kx7kx2k_128x256_s3_t256", "fp8_gemm", "fp8_gemm", M=4096, N=7168, K=2048, block_M=128,
         block_N=256, num_stages=3, threads=256),
    # attention
    _extra("t_fa_b2h32s4096d128_causal_128x64_s2_t256", "flash_attention", "flash_attention", "core", batch=2,
           heads=32, seq_len=4096, dim=128, is_causal=True, block_M=128, block_N=64, num_stages=2, threads=256),
    _reg("t_fa_fwd_mha_4k_fp16_64x128_s2", "flash_attention", "flash_attention_fwd", batch=4, heads=16, groups=1,
         seq_q=4096, dim=128, block_M=64, block_N=128, num_stages=2, dtype="float16"),
    _reg("t_paged_decode_gqa4_b16_32k_split8", "decode_attention", "paged_decode", batch=16, heads=32, groups=4,
         dim=128, max_len=32768, block_size=16, dtype="bfloat16", num_splits=8),
    _reg("t_mla_decode_b64_h128_4k_split1", "decode_attention", "mla_decode", batch=64, heads=128, seq_kv=4096,
         num_splits=1, dtype="bfloat16"),
    # MoE routing (latency of one block's serial selection), DSA
    _reg("t_moe_route_64k_bt32_t128", "moe_routing", "moe_topk_route", num_tokens=65536, block_T=32, threads=128),
    _reg("t_moe_route_1k_bt4_t64", "moe_routing", "moe_topk_route", num_tokens=1024, block_T=4, threads=64),
    _reg("t_moe_route_8k_softmax_bt8_t128", "moe_routing", "moe_topk_route", num_tokens=8192, block_T=8, threads=128,
         scoring="softmax"),
    _reg("t_dsa_indexer_8k_bm2_n64", "dsa_indexer", "dsa_indexer", seq_q=8192, seq_kv=8192, block_M=2, block_N=64),
    _reg("t_dsa_sparse_prefill_4k_bh64_bk64", "dsa_attention", "dsa_sparse_attention", seq_q=4096, seq_kv=4096,
         heads=128, topk=2048, block_H=64, block_K=64),
    _reg("t_dsa_topk_prefill_8k_n1024", "dsa_topk", "dsa_topk", seq_q=8192, seq_kv=8192, topk=2048, block_N=1024),
]


# A fourth set, chosen on 2026-12-02 ~04:45 UTC before the issue-15 outlier work that followed (the fresh and
# third sets are its development data). Sizes and tiles none of CONFIGS, FRESH, THIRD or the registry's first
# report shapes use; weighted like a user's mix (norms, softmax, elementwise, casts, transposes, tuned and
# skinny GEMMs, split-K, flash attention, decode attention, MoE routing, DSA). The configurations were chosen
# WITHOUT computing their predictions (no cherry-picking): each was only built and linted (``tilesim lint``,
# error-free; the decode-attention kernels carry the same two ``advice``-level findings, data-dependent-pipeline
# and fragment-index, as the earlier sets' paged/MLA decode configs that real TileLang compiled and timed) before
# this list was committed; its predictions are written by the final model of that session. The paged-decode
# configs give ``seq_lens`` for their batch (the registry's first shape holds 16 lengths; the fresh set's
# batch-32 config failed to make its inputs for that reason).
FOURTH = [
    # row norms
    _reg("q_rmsnorm_32kx2k_bm8_n512_t128", "row_norm", "rmsnorm", M=32768, N=2048, block_M=8, block_N=512,
         threads=128),
    _reg("q_rmsnorm_512x7k_bm1_n1024_t128", "row_norm", "rmsnorm", M=512, N=7168, block_M=1, block_N=1024,
         threads=128),
    _reg("q_layernorm_16kx4k_bm2_n4096_t512", "row_norm", "layernorm", M=16384, N=4096, block_M=2, block_N=4096,
         threads=512),
    _reg("q_layernorm_1kx2k_bm1_n256_t128", "row_norm", "layernorm", M=1024, N=2048, block_M=1, block_N=256,
         threads=128),
    _reg("q_lngelu_2kx4k_bm4_n512_t128", "row_norm", "layernorm_gelu", M=2048, N=4096, block_M=4, block_N=512,
         threads=128),
    _extra("q_core_rmsnorm_fp32_32kx1k_bm2_t128", "row_norm", "rms_norm", "core", M=32768, N=1024, block_M=2),
    # softmax
    _reg("q_softmax_64kx2k_bm2_n2048_t256", "softmax", "softmax", M=65536, N=2048, block_M=2, block_N=2048,
         threads=256),
    _reg("q_softmax_2kx32k_bm1_n4096_t512", "softmax", "softmax", M=2048, N=32768, block_M=1, block_N=4096,
         threads=512),
    _reg("q_softmax_8kx512_fp32_bm8_t256", "softmax", "softmax", M=8192, N=512, block_M=8, block_N=None,
         threads=256, dtype="float32"),
    _extra("q_core_softmax_1kx4k_bm2_t256", "softmax", "softmax", "core", M=1024, N=4096, block_M=2, threads=256),
    # elementwise
    _reg("q_gelu_2kx28k_bm16_n1024_t256", "elementwise", "gelu", M=2048, N=28672, block_M=16, block_N=1024,
         threads=256),
    _reg("q_gelu_32kx4k_bm8_n128_t128", "elementwise", "gelu", M=32768, N=4096, block_M=8, block_N=128,
         threads=128),
    _extra("q_vec_add_32M_fp16_b512_t128", "elementwise", "vec_add", N=1 << 25, block=512, threads=128,
           dtype="float16"),
    _extra("q_vec_add_2M_fp32_b4096_t256", "elementwise", "vec_add", N=1 << 21, block=4096, threads=256,
           dtype="float32"),
    # casts, dequants
    _reg("q_fp8_cast_tok_32kx2k_bm4_t128", "cast", "fp8_cast_per_token", M=32768, N=2048, block_M=4, threads=128),
    _reg("q_fp8_cast_tok_2kx4k_bm1_t64", "cast", "fp8_cast_per_token", M=2048, N=4096, block_M=1, threads=64),
    _reg("q_fp8_cast_blk_2kx7k_t512", "cast", "fp8_cast_per_block", M=2048, N=7168, threads=512),
    _reg("q_fp8_dequant_tok_4kx4k_bm8_t64", "cast", "fp8_dequant_per_token", M=4096, N=4096, block_M=8, threads=64),
    _reg("q_fp8_dequant_tok_32kx7k_bm4_t256", "cast", "fp8_dequant_per_token", M=32768, N=7168, block_M=4,
         threads=256),
    _reg("q_swiglu_fp8_2kx7k_bm8_t256", "cast", "swiglu_fp8", M=2048, H=7168, block_M=8, threads=256),
    # transposes
    _reg("q_transpose_16x4kx1k_32x128_t256", "transpose", "batched_transpose", B=16, M=4096, N=1024, block_M=32,
         block_N=128, threads=256),
    _reg("q_transpose_4x2kx14k_128x32_t128", "transpose", "batched_transpose", B=4, M=2048, N=14336, block_M=128,
         block_N=32, threads=128),
    _reg("q_transpose_256x512x64_fp16_64x64_t64", "transpose", "batched_transpose", B=256, M=512, N=64,
         block_M=64, block_N=64, threads=64, dtype="float16"),
    _reg("q_transpose_1x4kx4k_fp32_64x128_t256", "transpose", "batched_transpose", B=1, M=4096, N=4096, block_M=64,
         block_N=128, threads=256, dtype="float32"),
    _reg("q_transpose_2x7kx7k_fp8_128x64_t128", "transpose", "batched_transpose", B=2, M=7168, N=7168,
         block_M=128, block_N=64, threads=128, dtype="float8_e4m3fn"),
    # tuned GEMMs (128x256 at 256 threads, 128x128 at 128), fp8 GEMM
    _extra("q_gemm_4kx8kx2k_128x256x64_s3_t256", "gemm_256t", "gemm", M=4096, N=8192, K=2048, block_M=128,
           block_N=256, block_K=64, num_stages=3, threads=256),
    _extra("q_gemm_6kx4kx8k_bf16_128x256x32_s4_t256_sw8", "gemm_256t", "gemm", M=6144, N=4096, K=8192,
           block_M=128, block_N=256, block_K=32, num_stages=4, threads=256, swizzle=8, dtype="bfloat16",
           out_dtype="bfloat16"),
    _extra("q_gemm_16kx2kx7k_128x256x64_s3_t256", "gemm_256t", "gemm", M=16384, N=2048, K=7168, block_M=128,
           block_N=256, block_K=64, num_stages=3, threads=256),
    _extra("q_gemm_3kx5kx4k_128x128x64_s4_t128", "gemm", "gemm", M=3072, N=5120, K=4096, block_M=128,
           block_N=128, block_K=64, num_stages=4, threads=128),
    _reg("q_fp8_gemm_8kx2kx7k_128x64_s5", "fp8_gemm", "fp8_gemm", M=8192, N=2048, K=7168, block_M=128, block_N=64,
         num_stages=5, threads=128),
    # skinny / decode GEMMs (M = 1..64)
    _extra("q_gemm_1x4096x14336_64x64x128_s3_t128", "skinny_gemm", "gemm", M=1, N=4096, K=14336, block_M=64,
           block_N=64, block_K=128, num_stages=3, threads=128),
    _extra("q_gemm_4x18432x7168_64x128x64_s4_t128", "skinny_gemm", "gemm", M=4, N=18432, K=7168, block_M=64,
           block_N=128, block_K=64, num_stages=4, threads=128),
    _reg("q_gemm_nt_16x2048x7168_64x64x128_s3_t128", "skinny_gemm", "gemm_nt", M=16, N=2048, K=7168, block_M=64,
         block_N=64, block_K=128, num_stages=3, threads=128),
    _extra("q_gemm_48x8192x4096_64x256x64_s3_t256", "skinny_gemm", "gemm", M=48, N=8192, K=4096, block_M=64,
           block_N=256, block_K=64, num_stages=3, threads=256),
    _reg("q_gemm_nt_64x24kx1.5k_64x128x32_s4_t128", "skinny_gemm", "gemm_nt", M=64, N=24576, K=1536, block_M=64,
         block_N=128, block_K=32, num_stages=4, threads=128),
    # split-K
    _reg("q_splitk_8x4096x28672_s16", "split_k", "gemm_splitk", M=8, N=4096, K=28672, split_k=16),
    _reg("q_splitk_256x7168x4096_s2_128x128", "split_k", "gemm_splitk", M=256, N=7168, K=4096, split_k=2,
         block_M=128, block_N=128),
    _reg("q_splitk_16x2048x32768_s8", "split_k", "gemm_splitk", M=16, N=2048, K=32768, split_k=8),
    # flash attention forward, causal and not
    _extra("q_fa_b2h16s8192d64_causal_128x128_s2_t256", "flash_attention", "flash_attention", "core", batch=2,
           heads=16, seq_len=8192, dim=64, is_causal=True, block_M=128, block_N=128, num_stages=2, threads=256),
    _extra("q_fa_b1h24s8192d128_full_128x128_s2_t256", "flash_attention", "flash_attention", "core", batch=1,
           heads=24, seq_len=8192, dim=128, is_causal=False, block_M=128, block_N=128, num_stages=2, threads=256),
    _reg("q_fa_fwd_gqa8_b2h64_2k_bf16_128x128_s2", "flash_attention", "flash_attention_fwd", batch=2, heads=64,
         groups=8, seq_q=2048, dim=128, block_M=128, block_N=128, num_stages=2, dtype="bfloat16"),
    _reg("q_fa_fwd_gqa2_h32_4k_d64_fp16_64x32_s3", "flash_attention", "flash_attention_fwd", batch=1, heads=32,
         groups=2, seq_q=4096, dim=64, block_M=64, block_N=32, num_stages=3, dtype="float16"),
    # decode / paged decode attention
    _reg("q_paged_decode_gqa8_b8_16k_split8_n32", "decode_attention", "paged_decode", batch=8, heads=32, groups=8,
         dim=128, max_len=16384, block_size=16, dtype="bfloat16", num_splits=8, block_N=32,
         seq_lens=(16384, 16384, 12288, 8192, 8192, 4096, 2048, 1024)),
    _reg("q_paged_decode_gqa4_b64_2k_split2_n64_s2", "decode_attention", "paged_decode", batch=64, heads=32,
         groups=4, dim=128, max_len=2048, block_size=16, dtype="bfloat16", num_splits=2, block_N=64, num_stages=2,
         seq_lens=(2048,) * 32 + (1024,) * 16 + (512,) * 16),
    _reg("q_mla_decode_b8_h128_32k_split8_n64", "decode_attention", "mla_decode", batch=8, heads=128,
         seq_kv=32768, num_splits=8, block_N=64, dtype="bfloat16"),
    _reg("q_mla_decode_b128_h128_2k_split1", "decode_attention", "mla_decode", batch=128, heads=128, seq_kv=2048,
         num_splits=1, dtype="bfloat16"),
    # MoE routing
    _reg("q_moe_route_32k_bt2_t128", "moe_routing", "moe_topk_route", num_tokens=32768, block_T=2, threads=128),
    _reg("q_moe_route_2k_bt8_t256", "moe_routing", "moe_topk_route", num_tokens=2048, block_T=8, threads=256),
    _reg("q_moe_route_16k_softmax_bt16_t64", "moe_routing", "moe_topk_route", num_tokens=16384, block_T=16,
         threads=64, scoring="softmax"),
    # DSA: indexer (prefill, decode), top-k, sparse attention
    _reg("q_dsa_indexer_2kx16k_bm8_n64", "dsa_indexer", "dsa_indexer", seq_q=2048, seq_kv=16384, block_M=8,
         block_N=64),
    _reg("q_dsa_indexer_decode4_64k_bm4_n128_s2", "dsa_indexer", "dsa_indexer", seq_q=4, seq_kv=65536, block_M=4,
         block_N=128, num_stages=2),
    _reg("q_dsa_topk_4kx16k_n2048", "dsa_topk", "dsa_topk", seq_q=4096, seq_kv=16384, topk=2048, block_N=2048),
    _reg("q_dsa_sparse_prefill_1k_bh32_bk32", "dsa_attention", "dsa_sparse_attention", seq_q=1024, seq_kv=8192,
         heads=128, topk=2048, block_H=32, block_K=32),
]


# A fifth set, chosen on 2026-12-02 ~07:10 UTC (helper AJ) before the per-block critical-path work of that session
# (the fresh, third and fourth sets are its development data). Same protocol and the same rule as FOURTH: sizes and
# tiles none of CONFIGS, FRESH, THIRD, FOURTH or the registry's first report shapes use, a user's mix (norms,
# softmax, elementwise, casts, transposes, tuned 128/256-thread and fp8 GEMMs, skinny GEMMs, split-K, flash
# attention, decode and paged decode, MoE routing, DSA indexer / top-k / sparse attention), the latency-bound
# kinds weighted up (few blocks, long serial per-block chains). Chosen WITHOUT computing any prediction (no
# cherry-picking): each configuration was only built with tilesim and linted (no error-level finding) before this
# list was committed; sizes were kept so that each should run in well under 5 ms (the slowest fourth-set kinds,
# DSA sparse prefill and the indexer decode, at a quarter of their fourth-set work or less). The final model of the
# session writes the predictions after.
FIFTH = [
    # row norms
    _reg("p_rmsnorm_8kx4k_bm2_n2048_t256", "row_norm", "rmsnorm", M=8192, N=4096, block_M=2, block_N=2048,
         threads=256),
    _reg("p_rmsnorm_2kx14k_bm1_n2048_t512", "row_norm", "rmsnorm", M=2048, N=14336, block_M=1, block_N=2048,
         threads=512),
    _reg("p_layernorm_8kx2k_bm4_n512_t256", "row_norm", "layernorm", M=8192, N=2048, block_M=4, block_N=512,
         threads=256),
    _reg("p_layernorm_32kx7k_bm1_n1024_t128", "row_norm", "layernorm", M=32768, N=7168, block_M=1, block_N=1024,
         threads=128),
    _reg("p_lngelu_16kx2k_bm2_n1024_t128", "row_norm", "layernorm_gelu", M=16384, N=2048, block_M=2, block_N=1024,
         threads=128),
    _extra("p_core_rmsnorm_fp32_4kx8k_bm1_t128", "row_norm", "rms_norm", "core", M=4096, N=8192, block_M=1),
    # softmax
    _reg("p_softmax_16kx4k_bm2_n4096_t512", "softmax", "softmax", M=16384, N=4096, block_M=2, block_N=4096,
         threads=512),
    _reg("p_softmax_4kx16k_bm1_n8192_t256", "softmax", "softmax", M=4096, N=16384, block_M=1, block_N=8192,
         threads=256),
    _reg("p_softmax_32kx256_fp32_bm4_t128", "softmax", "softmax", M=32768, N=256, block_M=4, block_N=None,
         threads=128, dtype="float32"),
    _extra("p_core_softmax_8kx2k_bm2_t256", "softmax", "softmax", "core", M=8192, N=2048, block_M=2, threads=256),
    # elementwise
    _reg("p_gelu_8kx8k_bm16_n256_t128", "elementwise", "gelu", M=8192, N=8192, block_M=16, block_N=256,
         threads=128),
    _reg("p_gelu_1kx14k_fp32_bm8_n512_t256", "elementwise", "gelu", M=1024, N=14336, block_M=8, block_N=512,
         threads=256, dtype="float32"),
    _extra("p_vec_add_8M_fp32_b1024_t128", "elementwise", "vec_add", N=1 << 23, block=1024, threads=128,
           dtype="float32"),
    _extra("p_vec_add_128M_fp16_b2048_t256", "elementwise", "vec_add", N=1 << 27, block=2048, threads=256,
           dtype="float16"),
    # casts, dequants
    _reg("p_fp8_cast_tok_8kx2k_bm16_t256", "cast", "fp8_cast_per_token", M=8192, N=2048, block_M=16, threads=256),
    _reg("p_fp8_cast_tok_1kx4k_bm1_t128", "cast", "fp8_cast_per_token", M=1024, N=4096, block_M=1, threads=128),
    _reg("p_fp8_cast_tok_16kx2k_bm64_t64", "cast", "fp8_cast_per_token", M=16384, N=2048, block_M=64, threads=64),
    _reg("p_fp8_cast_blk_4kx14k_t128", "cast", "fp8_cast_per_block", M=4096, N=14336, threads=128),
    _reg("p_fp8_dequant_tok_8kx2k_bm1_t128", "cast", "fp8_dequant_per_token", M=8192, N=2048, block_M=1,
         threads=128),
    _reg("p_swiglu_fp8_16kx4k_bm4_t128", "cast", "swiglu_fp8", M=16384, H=4096, block_M=4, threads=128),
    # transposes
    _reg("p_transpose_8x4kx4k_64x128_t128", "transpose", "batched_transpose", B=8, M=4096, N=4096, block_M=64,
         block_N=128, threads=128),
    _reg("p_transpose_32x2kx256_32x64_t64", "transpose", "batched_transpose", B=32, M=2048, N=256, block_M=32,
         block_N=64, threads=64),
    _reg("p_transpose_4x4kx7k_fp32_32x32_t128", "transpose", "batched_transpose", B=4, M=4096, N=7168, block_M=32,
         block_N=32, threads=128, dtype="float32"),
    _reg("p_transpose_1x16kx16k_fp8_128x128_t128", "transpose", "batched_transpose", B=1, M=16384, N=16384,
         block_M=128, block_N=128, threads=128, dtype="float8_e4m3fn"),
    _reg("p_transpose_64x1kx1k_fp16_128x64_t256", "transpose", "batched_transpose", B=64, M=1024, N=1024,
         block_M=128, block_N=64, threads=256, dtype="float16"),
    # tuned GEMMs (128x256 at 256 threads, 128x128 at 128), fp8 GEMMs
    _extra("p_gemm_8kx7kx2k_128x256x64_s3_t256", "gemm_256t", "gemm", M=8192, N=7168, K=2048, block_M=128,
           block_N=256, block_K=64, num_stages=3, threads=256),
    _extra("p_gemm_2kx8kx8k_bf16_128x256x64_s3_t256_sw4", "gemm_256t", "gemm", M=2048, N=8192, K=8192,
           block_M=128, block_N=256, block_K=64, num_stages=3, threads=256, swizzle=4, dtype="bfloat16",
           out_dtype="bfloat16"),
    _extra("p_gemm_12kx4kx4k_128x256x32_s3_t256", "gemm_256t", "gemm", M=12288, N=4096, K=4096, block_M=128,
           block_N=256, block_K=32, num_stages=3, threads=256),
    _extra("p_gemm_8kx2kx4k_128x128x64_s2_t128", "gemm", "gemm", M=8192, N=2048, K=4096, block_M=128,
           block_N=128, block_K=64, num_stages=2, threads=128),
    _extra("p_gemm_2kx2kx16k_bf16_128x128x64_s3_t128", "gemm", "gemm", M=2048, N=2048, K=16384, block_M=128,
           block_N=128, block_K=64, num_stages=3, threads=128, dtype="bfloat16", out_dtype="bfloat16"),
    _reg("p_fp8_gemm_4kx4kx4k_128x128_s3_t256", "fp8_gemm", "fp8_gemm", M=4096, N=4096, K=4096, block_M=128,
         block_N=128, num_stages=3, threads=256),
    _reg("p_fp8_gemm_2kx7kx7k_64x128_s3_t128", "fp8_gemm", "fp8_gemm", M=2048, N=7168, K=7168, block_M=64,
         block_N=128, num_stages=3, threads=128),
    # skinny / decode GEMMs (M = 2..96; 96 not divided by the 64-row tile)
    _extra("p_gemm_2x7168x2048_64x64x64_s4_t128", "skinny_gemm", "gemm", M=2, N=7168, K=2048, block_M=64,
           block_N=64, block_K=64, num_stages=4, threads=128),
    _extra("p_gemm_24x28672x4096_64x128x128_s3_t128", "skinny_gemm", "gemm", M=24, N=28672, K=4096, block_M=64,
           block_N=128, block_K=128, num_stages=3, threads=128),
    _reg("p_gemm_nt_8x7168x16384_64x128x64_s3_t128", "skinny_gemm", "gemm_nt", M=8, N=7168, K=16384, block_M=64,
         block_N=128, block_K=64, num_stages=3, threads=128),
    _reg("p_gemm_nt_96x2048x4096_64x64x64_s4_t128", "skinny_gemm", "gemm_nt", M=96, N=2048, K=4096, block_M=64,
         block_N=64, block_K=64, num_stages=4, threads=128),
    # split-K
    _reg("p_splitk_4x7168x7168_s8", "split_k", "gemm_splitk", M=4, N=7168, K=7168, split_k=8),
    _reg("p_splitk_32x14336x4096_s4_64x128", "split_k", "gemm_splitk", M=32, N=14336, K=4096, split_k=4,
         block_M=64, block_N=128),
    _reg("p_splitk_128x1024x28672_s16", "split_k", "gemm_splitk", M=128, N=1024, K=28672, split_k=16),
    # flash attention forward
    _extra("p_fa_b8h16s1024d128_causal_64x64_s3_t128", "flash_attention", "flash_attention", "core", batch=8,
           heads=16, seq_len=1024, dim=128, is_causal=True, block_M=64, block_N=64, num_stages=3, threads=128),
    _extra("p_fa_b1h16s16384d64_full_64x128_s2_t128", "flash_attention", "flash_attention", "core", batch=1,
           heads=16, seq_len=16384, dim=64, is_causal=False, block_M=64, block_N=128, num_stages=2, threads=128),
    _reg("p_fa_fwd_gqa4_b4h32_2k_fp16_128x32_s3", "flash_attention", "flash_attention_fwd", batch=4, heads=32,
         groups=4, seq_q=2048, dim=128, block_M=128, block_N=32, num_stages=3, dtype="float16"),
    _reg("p_fa_fwd_mha_b1h8_16k_bf16_64x64_s1", "flash_attention", "flash_attention_fwd", batch=1, heads=8,
         groups=1, seq_q=16384, dim=128, block_M=64, block_N=64, num_stages=1, dtype="bfloat16"),
    # decode / paged decode attention (few blocks, long serial loops)
    _reg("p_paged_decode_gqa8_b4_32k_split16_n64", "decode_attention", "paged_decode", batch=4, heads=32, groups=8,
         dim=128, max_len=32768, block_size=16, dtype="bfloat16", num_splits=16, block_N=64,
         seq_lens=(32768, 16384, 8192, 32768)),
    _reg("p_paged_decode_gqa4_b32_4k_split1_n128", "decode_attention", "paged_decode", batch=32, heads=32,
         groups=4, dim=128, max_len=4096, block_size=16, dtype="bfloat16", num_splits=1, block_N=128,
         seq_lens=(4096,) * 8 + (3072,) * 8 + (2048,) * 8 + (1024,) * 8),
    _reg("p_paged_decode_gqa4_b16_8k_split2_n32_s2", "decode_attention", "paged_decode", batch=16, heads=16,
         groups=4, dim=128, max_len=8192, block_size=16, dtype="bfloat16", num_splits=2, block_N=32, num_stages=2,
         seq_lens=(8192,) * 4 + (6144,) * 4 + (4096,) * 4 + (512,) * 4),
    _reg("p_mla_decode_b4_h128_64k_split16", "decode_attention", "mla_decode", batch=4, heads=128, seq_kv=65536,
         num_splits=16, dtype="bfloat16"),
    _reg("p_mla_decode_b64_h128_8k_split2_n32", "decode_attention", "mla_decode", batch=64, heads=128,
         seq_kv=8192, num_splits=2, block_N=32, dtype="bfloat16"),
    # MoE routing
    _reg("p_moe_route_8k_bt4_t64", "moe_routing", "moe_topk_route", num_tokens=8192, block_T=4, threads=64),
    _reg("p_moe_route_512_bt1_t128", "moe_routing", "moe_topk_route", num_tokens=512, block_T=1, threads=128),
    _reg("p_moe_route_32k_softmax_bt32_t256", "moe_routing", "moe_topk_route", num_tokens=32768, block_T=32,
         threads=256, scoring="softmax"),
    # DSA: indexer (prefill, decode), top-k, sparse attention
    _reg("p_dsa_indexer_1kx8k_bm2_n128", "dsa_indexer", "dsa_indexer", seq_q=1024, seq_kv=8192, block_M=2,
         block_N=128),
    _reg("p_dsa_indexer_decode2_16k_bm2_n64", "dsa_indexer", "dsa_indexer", seq_q=2, seq_kv=16384, block_M=2,
         block_N=64),
    _reg("p_dsa_topk_2kx8k_n512", "dsa_topk", "dsa_topk", seq_q=2048, seq_kv=8192, topk=2048, block_N=512),
    _reg("p_dsa_sparse_prefill_256_bh32_bk64", "dsa_attention", "dsa_sparse_attention", seq_q=256, seq_kv=4096,
         heads=128, topk=1024, block_H=32, block_K=64),
]


# The sixth sealed set (2026-12-02, tenth session, helper AN): weighted like issue 15's list, with more of the
# latency-bound kinds (decode attention, MoE routing, DSA) than the fifth. Chosen before computing any of its
# predictions: each configuration was only built with tilesim and linted (no error-level finding) before this list
# was committed; the final model's predictions come after, then the H200 run.
SIXTH = [
    # row norms
    _reg("s6_rmsnorm_4kx7k_bm2_n1024_t128", "row_norm", "rmsnorm", M=4096, N=7168, block_M=2, block_N=1024,
         threads=128),
    _reg("s6_rmsnorm_16kx2k_bm4_n2048_t256", "row_norm", "rmsnorm", M=16384, N=2048, block_M=4, block_N=2048,
         threads=256),
    _reg("s6_layernorm_4kx4k_bm2_n1024_t256", "row_norm", "layernorm", M=4096, N=4096, block_M=2, block_N=1024,
         threads=256),
    _reg("s6_lngelu_8kx4k_bm1_n2048_t256", "row_norm", "layernorm_gelu", M=8192, N=4096, block_M=1, block_N=2048,
         threads=256),
    _extra("s6_core_rmsnorm_fp32_16kx4k_bm2_t128", "row_norm", "rms_norm", "core", M=16384, N=4096, block_M=2),
    # softmax
    _reg("s6_softmax_8kx1k_bm4_t128", "softmax", "softmax", M=8192, N=1024, block_M=4, block_N=None, threads=128),
    _reg("s6_softmax_2kx8k_bm1_n8192_t256", "softmax", "softmax", M=2048, N=8192, block_M=1, block_N=8192,
         threads=256),
    _extra("s6_core_softmax_16kx1k_bm4_t128", "softmax", "softmax", "core", M=16384, N=1024, block_M=4,
           threads=128),
    # elementwise
    _reg("s6_gelu_2kx28k_bm16_n512_t256", "elementwise", "gelu", M=2048, N=28672, block_M=16, block_N=512,
         threads=256),
    _reg("s6_gelu_4kx4k_fp32_bm8_n256_t128", "elementwise", "gelu", M=4096, N=4096, block_M=8, block_N=256,
         threads=128, dtype="float32"),
    _extra("s6_vec_add_16M_fp32_b2048_t256", "elementwise", "vec_add", N=1 << 24, block=2048, threads=256,
           dtype="float32"),
    _extra("s6_vec_add_32M_fp16_b1024_t128", "elementwise", "vec_add", N=1 << 25, block=1024, threads=128,
           dtype="float16"),
    # casts, dequants
    _reg("s6_fp8_cast_tok_4kx7k_bm8_t128", "cast", "fp8_cast_per_token", M=4096, N=7168, block_M=8, threads=128),
    _reg("s6_fp8_cast_tok_2kx2k_bm4_t64", "cast", "fp8_cast_per_token", M=2048, N=2048, block_M=4, threads=64),
    _reg("s6_fp8_cast_blk_8kx4k_t256", "cast", "fp8_cast_per_block", M=8192, N=4096, threads=256),
    _reg("s6_fp8_dequant_tok_4kx4k_bm4_t256", "cast", "fp8_dequant_per_token", M=4096, N=4096, block_M=4,
         threads=256),
    _reg("s6_swiglu_fp8_4kx7k_bm8_t128", "cast", "swiglu_fp8", M=4096, H=7168, block_M=8, threads=128),
    # transposes
    _reg("s6_transpose_16x2kx1k_64x64_t128", "transpose", "batched_transpose", B=16, M=2048, N=1024, block_M=64,
         block_N=64, threads=128),
    _reg("s6_transpose_2x8kx4k_fp32_64x32_t128", "transpose", "batched_transpose", B=2, M=8192, N=4096, block_M=64,
         block_N=32, threads=128, dtype="float32"),
    _reg("s6_transpose_8x1kx2k_fp16_128x128_t256", "transpose", "batched_transpose", B=8, M=1024, N=2048,
         block_M=128, block_N=128, threads=256, dtype="float16"),
    _reg("s6_transpose_4x4kx4k_fp8_64x128_t128", "transpose", "batched_transpose", B=4, M=4096, N=4096, block_M=64,
         block_N=128, threads=128, dtype="float8_e4m3fn"),
    # tuned GEMMs (128x256 at 256 threads, 128x128 at 128), fp8 GEMMs
    _extra("s6_gemm_4kx4kx4k_128x256x64_s3_t256", "gemm_256t", "gemm", M=4096, N=4096, K=4096, block_M=128,
           block_N=256, block_K=64, num_stages=3, threads=256),
    _extra("s6_gemm_16kx2kx2k_bf16_128x256x64_s3_t256", "gemm_256t", "gemm", M=16384, N=2048, K=2048,
           block_M=128, block_N=256, block_K=64, num_stages=3, threads=256, dtype="bfloat16",
           out_dtype="bfloat16"),
    _extra("s6_gemm_6kx6kx2k_128x256x32_s4_t256", "gemm_256t", "gemm", M=6144, N=6144, K=2048, block_M=128,
           block_N=256, block_K=32, num_stages=4, threads=256),
    _extra("s6_gemm_4kx4kx2k_128x128x32_s3_t128", "gemm", "gemm", M=4096, N=4096, K=2048, block_M=128,
           block_N=128, block_K=32, num_stages=3, threads=128),
    _extra("s6_gemm_1kx7kx7k_bf16_128x128x64_s2_t128", "gemm", "gemm", M=1024, N=7168, K=7168, block_M=128,
           block_N=128, block_K=64, num_stages=2, threads=128, dtype="bfloat16", out_dtype="bfloat16"),
    _reg("s6_fp8_gemm_8kx2kx4k_128x128_s2_t256", "fp8_gemm", "fp8_gemm", M=8192, N=2048, K=4096, block_M=128,
         block_N=128, num_stages=2, threads=256),
    _reg("s6_fp8_gemm_1kx7kx4k_64x128_s4_t128", "fp8_gemm", "fp8_gemm", M=1024, N=7168, K=4096, block_M=64,
         block_N=128, num_stages=4, threads=128),
    # skinny / decode GEMMs
    _extra("s6_gemm_4x14336x4096_64x64x64_s3_t128", "skinny_gemm", "gemm", M=4, N=14336, K=4096, block_M=64,
           block_N=64, block_K=64, num_stages=3, threads=128),
    _extra("s6_gemm_48x7168x7168_64x128x64_s4_t128", "skinny_gemm", "gemm", M=48, N=7168, K=7168, block_M=64,
           block_N=128, block_K=64, num_stages=4, threads=128),
    _reg("s6_gemm_nt_16x4096x7168_64x64x128_s3_t128", "skinny_gemm", "gemm_nt", M=16, N=4096, K=7168, block_M=64,
         block_N=64, block_K=128, num_stages=3, threads=128),
    _reg("s6_gemm_nt_128x7168x2048_64x128x64_s3_t128", "skinny_gemm", "gemm_nt", M=128, N=7168, K=2048,
         block_M=64, block_N=128, block_K=64, num_stages=3, threads=128),
    # split-K
    _reg("s6_splitk_8x4096x14336_s8", "split_k", "gemm_splitk", M=8, N=4096, K=14336, split_k=8),
    _reg("s6_splitk_64x7168x8192_s4_64x128", "split_k", "gemm_splitk", M=64, N=7168, K=8192, split_k=4,
         block_M=64, block_N=128),
    _reg("s6_splitk_16x2048x32768_s16", "split_k", "gemm_splitk", M=16, N=2048, K=32768, split_k=16),
    # flash attention forward
    _extra("s6_fa_b4h32s2048d128_causal_128x64_s2_t128", "flash_attention", "flash_attention", "core", batch=4,
           heads=32, seq_len=2048, dim=128, is_causal=True, block_M=128, block_N=64, num_stages=2, threads=128),
    _extra("s6_fa_b2h16s4096d64_full_64x64_s3_t128", "flash_attention", "flash_attention", "core", batch=2,
           heads=16, seq_len=4096, dim=64, is_causal=False, block_M=64, block_N=64, num_stages=3, threads=128),
    _reg("s6_fa_fwd_gqa8_b2h32_4k_bf16_64x64_s2", "flash_attention", "flash_attention_fwd", batch=2, heads=32,
         groups=8, seq_q=4096, dim=128, block_M=64, block_N=64, num_stages=2, dtype="bfloat16"),
    _reg("s6_fa_fwd_mha_b8h16_1k_fp16_128x64_s2", "flash_attention", "flash_attention_fwd", batch=8, heads=16,
         groups=1, seq_q=1024, dim=128, block_M=128, block_N=64, num_stages=2, dtype="float16"),
    # decode / paged decode attention (few blocks, long serial loops)
    _reg("s6_paged_decode_gqa8_b8_16k_split8_n64", "decode_attention", "paged_decode", batch=8, heads=32, groups=8,
         dim=128, max_len=16384, block_size=16, dtype="bfloat16", num_splits=8, block_N=64,
         seq_lens=(16384, 12288, 8192, 4096) * 2),
    _reg("s6_paged_decode_gqa4_b64_2k_split1_n64", "decode_attention", "paged_decode", batch=64, heads=32,
         groups=4, dim=128, max_len=2048, block_size=16, dtype="bfloat16", num_splits=1, block_N=64,
         seq_lens=(2048,) * 32 + (1024,) * 32),
    _reg("s6_paged_decode_gqa8_b16_8k_split4_n32_s2", "decode_attention", "paged_decode", batch=16, heads=64,
         groups=8, dim=128, max_len=8192, block_size=16, dtype="bfloat16", num_splits=4, block_N=32, num_stages=2,
         seq_lens=(8192,) * 8 + (2048,) * 8),
    _reg("s6_mla_decode_b8_h128_24k_split8", "decode_attention", "mla_decode", batch=8, heads=128, seq_kv=24576,
         num_splits=8, dtype="bfloat16"),
    _reg("s6_mla_decode_b32_h128_4k_split1_n64", "decode_attention", "mla_decode", batch=32, heads=128,
         seq_kv=4096, num_splits=1, block_N=64, dtype="bfloat16"),
    # MoE routing
    _reg("s6_moe_route_12k_bt8_t128", "moe_routing", "moe_topk_route", num_tokens=12288, block_T=8, threads=128),
    _reg("s6_moe_route_2k_bt2_t64", "moe_routing", "moe_topk_route", num_tokens=2048, block_T=2, threads=64),
    _reg("s6_moe_route_4k_softmax_bt16_t256", "moe_routing", "moe_topk_route", num_tokens=4096, block_T=16,
         threads=256, scoring="softmax"),
    # DSA: indexer (prefill, decode), top-k, sparse attention
    _reg("s6_dsa_indexer_512x16k_bm4_n64", "dsa_indexer", "dsa_indexer", seq_q=512, seq_kv=16384, block_M=4,
         block_N=64),
    _reg("s6_dsa_indexer_decode4_8k_bm2_n128", "dsa_indexer", "dsa_indexer", seq_q=4, seq_kv=8192, block_M=2,
         block_N=128),
    _reg("s6_dsa_topk_1kx16k_n1024", "dsa_topk", "dsa_topk", seq_q=1024, seq_kv=16384, topk=2048, block_N=1024),
    _reg("s6_dsa_sparse_prefill_128_bh64_bk64", "dsa_attention", "dsa_sparse_attention", seq_q=128, seq_kv=8192,
         heads=64, topk=2048, block_H=64, block_K=64),
]


# The seventh sealed set (2026-12-02, eleventh session, helper AR): weighted like the sixth (row norms 5, softmax 3,
# elementwise 4, casts 5, transposes 4, 256-thread GEMMs 3, 128-thread GEMMs 2, fp8 GEMMs 2, skinny GEMMs 4, split-K 3,
# flash attention 4, decode attention 5, MoE routing 3, DSA 4). Chosen before any of its predictions was computed and
# before any model change of this session: each configuration was only built with tilesim and linted (no error-level
# finding) before this list was committed; the predictions of the model of §3k come next, then the final model's.
SEVENTH = [
    # row norms
    _reg("s7_rmsnorm_8kx2k_bm2_n1024_t128", "row_norm", "rmsnorm", M=8192, N=2048, block_M=2, block_N=1024,
         threads=128),
    _reg("s7_rmsnorm_1kx14k_bm1_n2048_t256", "row_norm", "rmsnorm", M=1024, N=14336, block_M=1, block_N=2048,
         threads=256),
    _reg("s7_layernorm_16kx2k_bm2_n512_t128", "row_norm", "layernorm", M=16384, N=2048, block_M=2, block_N=512,
         threads=128),
    _reg("s7_lngelu_4kx2k_bm2_n2048_t256", "row_norm", "layernorm_gelu", M=4096, N=2048, block_M=2, block_N=2048,
         threads=256),
    _extra("s7_core_rmsnorm_fp32_4kx2k_bm4_t128", "row_norm", "rms_norm", "core", M=4096, N=2048, block_M=4),
    # softmax
    _reg("s7_softmax_4kx2k_bm2_t128", "softmax", "softmax", M=4096, N=2048, block_M=2, block_N=None, threads=128),
    _reg("s7_softmax_1kx32k_bm1_n8192_t512", "softmax", "softmax", M=1024, N=32768, block_M=1, block_N=8192,
         threads=512),
    _extra("s7_core_softmax_4kx4k_bm1_t256", "softmax", "softmax", "core", M=4096, N=4096, block_M=1, threads=256),
    # elementwise
    _reg("s7_gelu_16kx4k_bm8_n512_t128", "elementwise", "gelu", M=16384, N=4096, block_M=8, block_N=512,
         threads=128),
    _reg("s7_gelu_2kx8k_fp32_bm4_n1024_t256", "elementwise", "gelu", M=2048, N=8192, block_M=4, block_N=1024,
         threads=256, dtype="float32"),
    _extra("s7_vec_add_4M_fp32_b512_t128", "elementwise", "vec_add", N=1 << 22, block=512, threads=128,
           dtype="float32"),
    _extra("s7_vec_add_64M_fp16_b4096_t512", "elementwise", "vec_add", N=1 << 26, block=4096, threads=512,
           dtype="float16"),
    # casts, dequants
    _reg("s7_fp8_cast_tok_16kx4k_bm4_t128", "cast", "fp8_cast_per_token", M=16384, N=4096, block_M=4, threads=128),
    _reg("s7_fp8_cast_tok_512x7k_bm2_t64", "cast", "fp8_cast_per_token", M=512, N=7168, block_M=2, threads=64),
    _reg("s7_fp8_cast_blk_2kx7k_t128", "cast", "fp8_cast_per_block", M=2048, N=7168, threads=128),
    _reg("s7_fp8_dequant_tok_16kx7k_bm2_t128", "cast", "fp8_dequant_per_token", M=16384, N=7168, block_M=2,
         threads=128),
    _reg("s7_swiglu_fp8_8kx2k_bm2_t128", "cast", "swiglu_fp8", M=8192, H=2048, block_M=2, threads=128),
    # transposes
    _reg("s7_transpose_4x8kx2k_128x64_t128", "transpose", "batched_transpose", B=4, M=8192, N=2048, block_M=128,
         block_N=64, threads=128),
    _reg("s7_transpose_16x1kx4k_fp32_32x64_t128", "transpose", "batched_transpose", B=16, M=1024, N=4096,
         block_M=32, block_N=64, threads=128, dtype="float32"),
    _reg("s7_transpose_2x7kx7k_fp16_64x64_t256", "transpose", "batched_transpose", B=2, M=7168, N=7168, block_M=64,
         block_N=64, threads=256, dtype="float16"),
    _reg("s7_transpose_8x2kx8k_fp8_128x64_t128", "transpose", "batched_transpose", B=8, M=2048, N=8192,
         block_M=128, block_N=64, threads=128, dtype="float8_e4m3fn"),
    # tuned GEMMs (128x256 at 256 threads, 128x128 at 128), fp8 GEMMs
    _extra("s7_gemm_8kx4kx8k_128x256x64_s3_t256", "gemm_256t", "gemm", M=8192, N=4096, K=8192, block_M=128,
           block_N=256, block_K=64, num_stages=3, threads=256),
    _extra("s7_gemm_4kx14kx2k_bf16_128x256x64_s4_t256", "gemm_256t", "gemm", M=4096, N=14336, K=2048,
           block_M=128, block_N=256, block_K=64, num_stages=4, threads=256, dtype="bfloat16",
           out_dtype="bfloat16"),
    _extra("s7_gemm_2kx7kx4k_128x256x32_s3_t256", "gemm_256t", "gemm", M=2048, N=7168, K=4096, block_M=128,
           block_N=256, block_K=32, num_stages=3, threads=256),
    _extra("s7_gemm_8kx4kx4k_128x128x64_s3_t128", "gemm", "gemm", M=8192, N=4096, K=4096, block_M=128,
           block_N=128, block_K=64, num_stages=3, threads=128),
    _extra("s7_gemm_2kx4kx8k_bf16_128x128x32_s4_t128", "gemm", "gemm", M=2048, N=4096, K=8192, block_M=128,
           block_N=128, block_K=32, num_stages=4, threads=128, dtype="bfloat16", out_dtype="bfloat16"),
    _reg("s7_fp8_gemm_4kx7kx2k_128x128_s3_t128", "fp8_gemm", "fp8_gemm", M=4096, N=7168, K=2048, block_M=128,
         block_N=128, num_stages=3, threads=128),
    _reg("s7_fp8_gemm_2kx2kx8k_64x128_s3_t256", "fp8_gemm", "fp8_gemm", M=2048, N=2048, K=8192, block_M=64,
         block_N=128, num_stages=3, threads=256),
    # skinny / decode GEMMs
    _extra("s7_gemm_8x4096x14336_64x64x128_s3_t128", "skinny_gemm", "gemm", M=8, N=4096, K=14336, block_M=64,
           block_N=64, block_K=128, num_stages=3, threads=128),
    _extra("s7_gemm_64x14336x2048_64x128x64_s3_t128", "skinny_gemm", "gemm", M=64, N=14336, K=2048, block_M=64,
           block_N=128, block_K=64, num_stages=3, threads=128),
    _reg("s7_gemm_nt_32x7168x4096_64x64x64_s4_t128", "skinny_gemm", "gemm_nt", M=32, N=7168, K=4096, block_M=64,
         block_N=64, block_K=64, num_stages=4, threads=128),
    _reg("s7_gemm_nt_1x14336x7168_64x128x64_s3_t128", "skinny_gemm", "gemm_nt", M=1, N=14336, K=7168, block_M=64,
         block_N=128, block_K=64, num_stages=3, threads=128),
    # split-K
    _reg("s7_splitk_16x7168x14336_s8", "split_k", "gemm_splitk", M=16, N=7168, K=14336, split_k=8),
    _reg("s7_splitk_32x4096x16384_s4_64x128", "split_k", "gemm_splitk", M=32, N=4096, K=16384, split_k=4,
         block_M=64, block_N=128),
    _reg("s7_splitk_4x2048x65536_s32", "split_k", "gemm_splitk", M=4, N=2048, K=65536, split_k=32),
    # flash attention forward
    _extra("s7_fa_b2h32s4096d128_causal_64x64_s3_t128", "flash_attention", "flash_attention", "core", batch=2,
           heads=32, seq_len=4096, dim=128, is_causal=True, block_M=64, block_N=64, num_stages=3, threads=128),
    _extra("s7_fa_b4h16s2048d64_full_128x64_s2_t128", "flash_attention", "flash_attention", "core", batch=4,
           heads=16, seq_len=2048, dim=64, is_causal=False, block_M=128, block_N=64, num_stages=2, threads=128),
    _reg("s7_fa_fwd_gqa4_b4h32_2k_bf16_128x64_s2", "flash_attention", "flash_attention_fwd", batch=4, heads=32,
         groups=4, seq_q=2048, dim=128, block_M=128, block_N=64, num_stages=2, dtype="bfloat16"),
    _reg("s7_fa_fwd_mha_b2h16_8k_fp16_64x128_s2", "flash_attention", "flash_attention_fwd", batch=2, heads=16,
         groups=1, seq_q=8192, dim=128, block_M=64, block_N=128, num_stages=2, dtype="float16"),
    # decode / paged decode attention (few blocks, long serial loops)
    _reg("s7_paged_decode_gqa8_b4_32k_split8_n64", "decode_attention", "paged_decode", batch=4, heads=64, groups=8,
         dim=128, max_len=32768, block_size=16, dtype="bfloat16", num_splits=8, block_N=64,
         seq_lens=(32768, 24576, 16384, 8192)),
    _reg("s7_paged_decode_gqa4_b32_8k_split2_n128", "decode_attention", "paged_decode", batch=32, heads=32,
         groups=4, dim=128, max_len=8192, block_size=16, dtype="bfloat16", num_splits=2, block_N=128,
         seq_lens=(8192,) * 16 + (4096,) * 16),
    _reg("s7_paged_decode_gqa8_b16_4k_split1_n32_s2", "decode_attention", "paged_decode", batch=16, heads=32,
         groups=8, dim=128, max_len=4096, block_size=16, dtype="bfloat16", num_splits=1, block_N=32, num_stages=2,
         seq_lens=(4096,) * 8 + (1024,) * 8),
    _reg("s7_mla_decode_b16_h128_8k_split4", "decode_attention", "mla_decode", batch=16, heads=128, seq_kv=8192,
         num_splits=4, dtype="bfloat16"),
    _reg("s7_mla_decode_b32_h128_16k_split2_n32", "decode_attention", "mla_decode", batch=32, heads=128,
         seq_kv=16384, num_splits=2, block_N=32, dtype="bfloat16"),
    # MoE routing
    _reg("s7_moe_route_24k_bt16_t128", "moe_routing", "moe_topk_route", num_tokens=24576, block_T=16, threads=128),
    _reg("s7_moe_route_4k_bt4_t256", "moe_routing", "moe_topk_route", num_tokens=4096, block_T=4, threads=256),
    _reg("s7_moe_route_8k_softmax_bt4_t128", "moe_routing", "moe_topk_route", num_tokens=8192, block_T=4,
         threads=128, scoring="softmax"),
    # DSA: indexer (prefill, decode), top-k, sparse attention
    _reg("s7_dsa_indexer_2kx4k_bm2_n128", "dsa_indexer", "dsa_indexer", seq_q=2048, seq_kv=4096, block_M=2,
         block_N=128),
    _reg("s7_dsa_indexer_decode1_64k_bm1_n128", "dsa_indexer", "dsa_indexer", seq_q=1, seq_kv=65536, block_M=1,
         block_N=128),
    _reg("s7_dsa_topk_512x32k_n2048", "dsa_topk", "dsa_topk", seq_q=512, seq_kv=32768, topk=2048, block_N=2048),
    _reg("s7_dsa_sparse_prefill_512_bh64_bk32", "dsa_attention", "dsa_sparse_attention", seq_q=512, seq_kv=4096,
         heads=64, topk=1024, block_H=64, block_K=32),
]
