"""Conformance check: run TileLang's own example programs on tilesim (CPU), unchanged but for imports.

Usage::

    python benchmarks/tilelang_examples.py --mirror DIR [--only SUBSTR ...] [--timeout S] [--jobs N]
                                           [--update PREV.json] [--fla-mirror FLA_DIR]

``DIR`` is a bare git directory of TileLang's repository (``examples/`` of ``HEAD`` is extracted to a
temp dir) or a checkout containing ``examples/``. Nothing of TileLang is copied into this repository.

What to install to run the check: tilesim, a torch build (the CPU one is enough; never pulled in by this
repository's extras) and ``pip install '.[conformance]'`` (triton, fla-core 0.6.0, transformers 4.52.4, einops,
tqdm): the programs' references and sibling kernels import them. The run starts by naming those of
:data:`OPTIONAL` that are missing (the programs that import them fail).

Which fla (flash-linear-attention): the programs need two. linear_attention's references call fla >= 0.3's API
(``l2norm_fwd`` returning ``(y, rstd)``): the installed fla-core 0.6.0. The gdn programs' references call fla at
the commit they cite (f03cb3ae, 2025-06-09, between releases 0.2.2 and 0.3.0; their comment asks for that
checkout on ``sys.path``): fla 0.3+ reordered those functions' positional parameters, so under fla-core 0.6.0 the
arguments land in the wrong parameters (Triton's interpreter stops on 'Unsupported ptr type' / 'Both operands must
be same dtype', or the reference returns other dtypes). No release takes all seven calls (0.2.2 takes five:
``recompute_w_u_fwd`` / ``bwd_prepare_wy_repr`` differ). ``--fla-mirror`` (a bare git dir of
fla-org/flash-linear-attention) stages that commit's ``fla/`` and puts it first on the PYTHONPATH of the programs
of :data:`FLA_AT` only, as the programs set up; its ``import fla`` imports transformers' model classes, hence
transformers 4.52.4 (of the same months) in the extra. deepseek_nsa, the other fla user, passes with either.

Contract
--------
* **Programs.** Every ``.py`` under ``examples/`` (all depths) is classified by its AST:
  ``test_*.py`` / ``regression_*.py`` with a ``__main__`` block are **wrappers** (pytest / perf-regression
  drivers that only import sibling examples; they are *not* run, listed with verdict ``wrapper`` so the
  programs are not run twice); any other file with an ``if __name__ == "__main__":`` block, or with
  module-level statements that do work (a bare call of a plain name such as ``main()`` or ``print(...)``,
  a loop, a ``with``), is a
  **program**; the rest (and ``conftest.py``) are helper modules, listed in the JSON only.
  Programs under a path component in :data:`EXCLUDED_DIRS` (another vendor's hardware: AMD; layout
  plotting/visualisation tools) get verdict ``skip`` and are not run. ``analyze/`` (``tilelang.tools.Analyzer``)
  and ``aws/`` (automatic warp specialisation, not a vendor: it was excluded by mistake) have been run since
  2026-12-02.
* **Run.** The examples tree is staged once to a temp dir with every ``.py`` passed through
  :func:`rewrite_imports` (``tilelang`` -> ``tilesim`` in import statements only; nothing else is
  edited). Each program then runs in its own subprocess (``--jobs`` at a time, default 2; ``--timeout``
  seconds each, default 120) from a private copy of its top-level example directory, with
  ``PYTHONPATH`` = a temp dir holding :data:`SHIM` as ``sitecustomize.py`` (torch CUDA requests run on
  the CPU) + this repository. Extra argv from :data:`SMALL_ARGS` shrinks sizes where the program's
  argparse allows it; a program in :data:`SMALL_MAIN` (no argparse, CPU-sized defaults out of reach) is
  loaded unchanged with ``runpy`` and its ``main`` — or the entry function its ``__main__`` block calls,
  when the entry is a ``(name, kwargs)`` pair — called with smaller keyword arguments; otherwise no
  arguments are passed; a program in
  :data:`SMALL_CALL` (its ``main()`` takes no arguments and calls a test function with hard-coded sizes) is
  loaded unchanged and ``main()`` called with that function's size arguments overridden; a program in
  :data:`SMALL_CONSTS` (sizes as literal constants inside ``main()``) is loaded unchanged and ``main()`` run with
  those constants of its code object replaced; a program in
  :data:`SMALL_GLOBALS` (sizes as module-level constants) runs unchanged as ``__main__`` with those module-level
  names pinned (its own assignments to them are skipped). The shim's
  ``torch.cuda.get_device_capability()`` reports 9.0, or the architecture
  the program's path targets (:data:`CAPABILITY`: ``sm120`` -> 12.0, ``sm100``/``tcgen05`` -> 10.0), as
  tilesim interprets the program's meaning rather than a chip. A program that compiles with an explicit
  GPU target (``target="cuda"``, ``"hip ..."``) runs as on any machine without that GPU: on the interpreter,
  with tilesim's ``TargetFallbackWarning`` (docs/language.md).
* **Verdicts.** ``pass`` (exit 0); ``timeout``; ``wrong`` (the program's reference check failed: the last
  exception is an ``AssertionError`` (or ``*Mismatch*``) raised outside tilesim or by tilesim's
  profiler/testing helpers, whose message ('not close', 'Mismatch', tolerances, ...), asserting line
  (``allclose``, ``diff``, ``ref``, ...) or asserting function (``assert_tensors_similar``) is a comparison); ``fail`` (any other non-zero exit);
  ``program-bug`` (a ``wrong`` outcome of a program listed in :data:`PROGRAM_BUGS`, whose own code is
  established to be wrong, with the evidence; or a ``fail`` of one in :data:`PROGRAM_BUG_ERRORS` whose error
  line matches the listed pattern: a stale import TileLang itself fails, an out-of-bounds access); ``expected-error`` (a ``fail`` of a program listed in
  :data:`EXPECTED_ERRORS`, written to fail, whose error line matches the listed pattern: it is counted among the
  programs run and is not a pass); ``skip``; ``wrapper``. ``error`` is the exception line of
  the last traceback in stderr.
* **Stand-ins.** A CUDA-only package a program uses as its reference (:data:`STANDINS`: ``flash_attn``) is
  replaced, when it is not installed, by a CPU stand-in module of this directory written from the package's
  documented semantics (tested in tests/report/); a row whose program imported one has ``note``
  ``"flash_attn stand-in"`` (shown in the table) whatever its verdict.
* **Output.** A table and a summary (counts; pass % of the programs run), a histogram of normalised
  error lines (digits and paths stripped) of ``fail``/``wrong`` rows, and JSON written atomically to
  ``reports/measurements/tilelang_examples_<UTC timestamp>.json``. ``--update PREV.json`` re-runs only the
  selected programs and keeps PREV's rows for the rest (for re-running a subset).
"""

from __future__ import annotations

import argparse
import ast
import collections
import concurrent.futures
import datetime
import importlib.util
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tilelang_examples_commands import small_call_command, small_consts_command, small_globals_command

REPO = Path(__file__).resolve().parents[1]
EXCLUDED_DIRS = {"amd", "plot_layout", "visual_layout_inference"}
WRAPPER_PREFIXES = ("test_", "regression_")

#: what the programs import besides tilesim (module -> what it is); flash_attn has no CPU build on PyPI
OPTIONAL = {"torch": "references (CPU build)", "triton": "Triton kernels (TRITON_INTERPRET=1 runs them)",
            "fla": "fla-core (flash-linear-attention kernels)",
            "transformers": "transformers 4.52.4 (`import fla` at the commit the gdn programs cite imports it)",
            "einops": "einops", "tqdm": "tqdm",
            "flash_attn": "flash-attn (CUDA only: the harness's CPU stand-in is used)"}


def missing_optional() -> list[str]:
    """The modules of :data:`OPTIONAL` that are not importable here."""
    return [name for name in OPTIONAL if importlib.util.find_spec(name) is None]


# Extra argv per program (path relative to examples/) that shrinks problem sizes, read off each
# program's argparse; tile sizes, head dims and ratios the kernels assume are kept.
SMALL_ARGS: dict[str, str] = {
    # N a multiple of 2 * 8 * block_N, K of 2 * block_K (the programs assert it)
    "aws/gemm.py": "--m 256 --n 1024 --k 256 --block_n 64 --store_block_n 32",
    "aws/flash_attention.py": "--batch 1 --heads 2 --seq_len 256",
    "attention_sink/benchmark_gqa_sink_fwd.py": "--heads 8 --seq_q 256 --seq_kv 256",
    "attention_sink/benchmark_mha_sink_fwd.py": "--batch 1 --heads 2 --seq_q 256 --seq_kv 256",
    # heads >= block_M (64): the kernel indexes its [heads] sink fragment by row of a block_M tile
    "attention_sink/example_gqa_sink_bwd_bhsd.py": "--h 64 --n_ctx 128 --d_head 64",
    "attention_sink/example_gqa_sink_bwd_varlen.py": "--batch 2 --heads 16 --q_seqlen 256 --k_seqlen 256",
    "attention_sink/example_gqa_sink_fwd_varlen.py": "--batch 2 --heads 16 --q_seqlen 256 --k_seqlen 256",
    "attention_sink/example_mha_sink_bwd_bhsd.py": "--h 64 --n_ctx 128 --d_head 64",
    "attention_sink/example_mha_sink_fwd_bhsd.py": "--batch 1 --heads 2 --seq_q 256 --seq_kv 256",
    # group sizes that 128-row tiles do not divide, K four tiles (one scale word per row); few outputs: its check
    # (1 - cosine < 1e-5) is taken with a float32 dot, sequential on the CPU: at 572 x 512 outputs an exact
    # result (max abs error 0) reads 1 - cosine = 2e-5 there
    "blockscaled_gemm_sm100/grouped_gemm_mxfp8_blockscaled_1d1d.py": "--batch-sizes 130,72,100 --N 256 --K 512",
    "blocksparse_attention/example_tilelang_sparse_gqa_decode_paged.py":
        "--batch 1 --heads 8 --max_cache_seqlen 1024 --num_pages 16",
    "blocksparse_attention/example_tilelang_sparse_gqa_decode_varlen_indice.py":
        "--batch 1 --heads 8 --max_cache_seqlen 1024",
    "blocksparse_attention/example_tilelang_sparse_gqa_decode_varlen_mask.py":
        "--batch 1 --heads 8 --max_cache_seqlen 1024",
    "blocksparse_gemm/example_blocksparse_gemm.py": "--m 256 --n 256 --k 256",
    "convolution/example_convolution.py": "--n 2 --c 64 --h 16 --w 16 --f 64",
    "convolution/example_convolution_autotune.py": "--n 2 --c 64 --h 16 --w 16 --f 64",
    # kv_ctx 4096: the reference rounds its scores to float16 before the softmax (on CUDA too), an error its
    # 1e-4 tolerance absorbs only at long contexts (the outputs shrink as kv_ctx grows): at 512 that reference
    # is off the exact result in ~8% of elements (1% allowed; tilesim's output in 0.02%), at 4096 in ~0.15%
    "deepseek_mla/example_mla_decode.py": "--batch 1 --heads 64 --kv_ctx 4096",
    "deepseek_mla/example_mla_decode_paged.py": "--batch 2 --h_q 64 --cache_seqlen 512",
    "deepseek_mla/example_mla_decode_persistent.py": "--batch 2 --heads 64 --kv_ctx 512",
    "deepseek_mla/example_mla_decode_ws.py": "--batch 1 --heads 64 --kv_ctx 4096",  # as example_mla_decode
    "deepseek_mla/experimental/example_mla_decode_kv_fp8.py": "--batch 2 --heads 64 --kv_ctx 512",
    "deepseek_nsa/benchmark/benchmark_nsa_fwd.py": "--batch 1 --seq_len 256 --iterations 1 --warmup 1 --impl tilelang",
    "deepseek_v4/fp8_fp4_gemm_1d1d_sm100.py": "--M 256 --N 8192 --K 256",
    "deepseek_v4/sparse_attn_fwd_sm90.py": "--h 64 --n_ctx 128 --n_kv 512 --topk 128",
    "elementwise/example_elementwise_add.py": "--m 256 --n 256",
    "flash_attention/example_gqa_bwd.py": "--batch 1 --h 16 --n_ctx 256",
    "flash_attention/example_gqa_bwd_tma_reduce.py": "--batch 1 --h 16 --n_ctx 256",
    "flash_attention/example_gqa_bwd_tma_reduce_varlen.py": "--batch 1 --h 16 --n_ctx 256",
    "flash_attention/example_gqa_fwd_bshd.py": "--heads 16 --seq_len 256",
    "flash_attention/example_gqa_fwd_varlen.py": "--batch 2 --heads 16 --q_seqlen 256 --k_seqlen 256",
    "flash_attention/example_mha_bwd_bhsd.py": "--batch 1 --h 2 --n_ctx 256",
    "flash_attention/example_mha_bwd_bshd.py": "--batch 1 --h 2 --n_ctx 256",
    "flash_attention/example_mha_fwd_bshd.py": "--batch 1 --heads 2 --seq_len 256",
    "flash_attention/example_mha_fwd_varlen.py": "--batch 2 --heads 2 --seq_len 256",
    "flash_attention_sm100/mha_fwd_bshd.py": "--heads 2 --seq_len 256",
    "flash_decoding/example_gqa_decode.py": "--kv_seqlen 1024",
    "flash_decoding/example_gqa_decode_varlen_logits.py": "--k_seqlen 1024",
    "gemm/example_gemm_advanced_autotune.py": "--m 256 --n 256 --k 256",
    "gemm/example_gemm_autotune.py": "--m 256 --n 256 --k 256",
    "gemm/example_gemm_autotune_pass_configs.py": "--m 256 --n 256 --k 256",
    "gemm/example_gemm_persistent.py": "--M 512 --N 512 --K 512",
    # --verify: the program's own check (its docstring's invocation); without it nothing is compared
    "gemm_sm120/sm120_nvfp4_blockscaled_gemm.py": "--m 256 --n 256 --k 512 --verify",
    "gemm_sp/example_gemm_sp.py": "--m 512 --n 512 --k 512",
    "gemm_tcgen05/gemm_tcgen5mma_ws.py": "--m 512 --n 512 --k 512",
    # both assert N / block_N (256) % (2 * group_size) == 0: clc's group_size is 8 (no option), so N = 4096
    "gemm_tcgen05/gemm_tcgen5mma_ws_clc.py": "--m 256 --n 4096 --k 256",
    "gemm_tcgen05/gemm_tcgen5mma_ws_persistent.py": "--m 512 --n 512 --k 512 --group_size 1",
    "gemm_tcgen05/gemm_tcgen5mma_ws_persistent_streamk.py": "--m 512 --n 512 --k 512",
    "grouped_gemm/example_grouped_gemm_bwd.py": "--K 256 --M 256",
    "grouped_gemm/example_grouped_gemm_fwd.py": "--K 256 --M 256",
    "grouped_gemm/example_grouped_gemm_fwd_ptr.py": "--K 256 --N 256",
    "hadamard_transform/example_hadamard.py": "--batch 4 --dim 1024",
    "linear_attention/example_linear_attn_bwd.py": "--B 1 --S 256 --H 2",
    "linear_attention/example_linear_attn_fwd.py": "--B 1 --S 256 --H 2",
    "linear_attention/example_mamba_chunk_scan.py": "--batch 1 --heads 2 --seq_len 512",
    "linear_attention/example_mamba_chunk_state.py": "--batch 1 --heads 2 --seq_len 512",
    "linear_attention/example_retention_fwd.py": "--B 1 --S 256 --H 2",
    "minference/example_vertical_slash_sparse_attn.py": "--seq_len 1024 --vertical_size 100 --slash_size 20",
    "warp_specialize/example_warp_specialize_flashmla.py": "--batch 2 --heads 64 --kv_ctx 512",
}

# Keyword arguments of main() for programs without an argparse whose defaults are too large for a CPU: the
# unchanged file is loaded with runpy (``__name__`` is not ``"__main__"``) and ``main(**kwargs)`` is called.
SMALL_MAIN: dict[str, dict | tuple[str, dict]] = {
    # __main__ times test_sparse_mla_fwd_pipelined at S=4096, H=128, topk=2048 with the check off (on only with
    # --test_correctness); here the check on, at sizes the kernels' asserts allow (H a multiple of 64, topk a
    # multiple of 2 x block_I=64; seesaw: H_per_block == block_I == D_tail = 64)
    "deepseek_v32/sparse_mla_fwd_pipelined.py": ("test_sparse_mla_fwd_pipelined", {"S": 64, "SKV": 512, "H": 64,
                                                                                   "topk": 128,
                                                                                   "check_correctness": True}),
    "deepseek_v32/sparse_mla_fwd_seesaw.py": ("test_sparse_mla_fwd_pipelined", {"S": 64, "SKV": 512, "H": 128,
                                                                                "topk": 128, "check_correctness": True}),
    # its __main__ block calls test_sparse_mla_bwd(S=4096, SKV=8192, topk=2048): heads and dims kept
    "deepseek_v32/sparse_mla_bwd.py": ("test_sparse_mla_bwd", {"S": 256, "SKV": 512, "topk": 128}),
    # 4096^3 by default in its __main__ (no argparse); its kernel's 128x128x32 tiles divide 256
    "gemm/example_gemm_intrinsics.py": {"M": 256, "N": 256, "K": 256},
    # __main__ calls test_fp8_lighting_indexer() at S=4096, SKV=8192; a quarter of each (same ratio, same heads)
    "deepseek_v32/fp8_lighting_indexer.py": ("test_fp8_lighting_indexer", {"S": 1024, "SKV": 2048}),
    # 8192^2 by default, and its do_bench times the Triton version under TRITON_INTERPRET (~2 min a call at
    # 2048 x 512, the size of TileLang's own test_example_cast.py): 256 rows, blk_m 8 as the default
    "cast/example_per_token_cast_to_fp8.py": {"M": 256, "N": 512, "blk_m": 8},
    # 8192^2 bfloat16 (two groups of 2048 and 6144 rows) by default: the sizes of TileLang's own
    # test_example_cast.py (groups of 128 and 896 rows; 896 is not a multiple of the 128-row padding)
    "cast/example_group_per_split_token_cast_to_fp8.py": {"M": 1024, "N": 1024, "BG": 2, "blk_m": 4,
                                                          "batch_sizes": [128, 896]},
    # a 16384^3 dynamic-shape GEMM by default
    "dynamic_shape/example_dynamic.py": {"M": 1024, "N": 1024, "K": 1024},
    # 32 heads x 8192 keys by default: the fp16 einsum reference (timed by do_bench too) takes minutes on a
    # CPU; KV_CTX stays a multiple of num_split (4) x block_N (64), Q_CTX = BLOCK_M (128)
    "flash_decoding/example_mha_inference.py": {"BATCH": 1, "H": 8, "Q_CTX": 128, "KV_CTX": 1024, "D_HEAD": 128,
                                                "causal": False},
    # __main__ calls test_sparse_mla_fwd(S=4096, H=128, topk=2048 / 1024, ...): ~2 TFLOP; TileLang's own test
    # uses S=256, SKV=1024, topk=256 with the check off (over 400 s here with it on); half that, H=64 (one
    # padded head block) and topk a multiple of block_I=64, the check kept on
    "deepseek_v32/sparse_mla_fwd.py": ("test_sparse_mla_fwd", {"S": 128, "SKV": 512, "H": 64, "HKV": 1,
                                                               "DQK": 576, "DV": 512, "topk": 128}),
    # (two packed sequences of S/2: the program asserts S/2 - 1 >= topk)
    "dsa_sparse_finetune/sparse_mla_fwd.py": ("test_sparse_mla_fwd", {"S": 256, "H": 64, "HKV": 1, "DQK": 576,
                                                                      "DV": 512, "topk": 64}),
    # __main__ loops over GPU-sized configurations (up to 65536^2 logits: killed for memory on a 24 GiB machine);
    # the first configuration of each program's own list
    "dsa_hisa/block_sparse_mqa_fp8.py": ("test_fp8_block_sparse_mqa", {"M": 1024, "H": 64, "D": 128,
                                                                       "kv_block_size": 128, "topk": 64,
                                                                       "num_seqs": 1}),
    "dsa_hisa/clean_and_maintain_logits.py": ("test_clean_and_maintain_logits", {"M": 4096, "N": 4096,
                                                                                 "num_seqs": 1}),
    "dsa_hisa/hisa.py": ("test_hisa", {"M": 1024, "H": 64, "D": 128, "k_block_size": 128, "block_topk": 16,
                                       "topk_tokens": 256, "num_seqs": 1}),
    # its smallest listed configuration is M=32768 (a 137 GFLOP fp8 GEMM a call); the program's own assert asks
    # only ceildiv(M, k_block_size) % block_N == 0: M=4096 with k_block_size=16 keeps block_N=256, H, D
    "dsa_hisa/pool_mqa_fp8.py": ("test_pool_mqa_fp8", {"M": 4096, "H": 64, "D": 128, "k_block_size": 16,
                                                       "block_N": 256, "num_seqs": 1}),
    # d_hidden=7168, seq_len=8192 by default: the sizes of TileLang's own test_example_fusedmoe.py
    "fusedmoe/example_fusedmoe_tilelang.py": {"d_hidden": 1024, "d_expert": 256, "n_routed_experts": 8,
                                              "n_shared_experts": 1, "n_experts_per_token": 4, "batch_size": 1,
                                              "seq_len": 1024},
    # 16384^3 GEMMs by default; 1024 as their sibling example_warp_specialize_gemm_copy_0_gemm_1's default
    "warp_specialize/example_warp_specialize_gemm_barrierpipe_stage2.py": {"M": 1024, "N": 1024, "K": 1024},
    "warp_specialize/example_warp_specialize_gemm_copy_1_gemm_0.py": {"M": 1024, "N": 1024, "K": 1024},
    "warp_specialize/example_warp_specialize_gemm_softpipe_stage2.py": {"M": 1024, "N": 1024, "K": 1024},
}

#: The compute capability the shim's torch.cuda reports for a program (default 9.0, an H100/H200): programs
#: written for a newer architecture check torch.cuda.get_device_capability() and stop on anything older.
#: tilesim interprets a program's meaning, not the chip, so such a program sees the capability its directory
#: or file name targets (e.g. gemm_sm120/ -> 12.0, *_sm100 and gemm_tcgen05/ -> 10.0). First match wins.
CAPABILITY = ((re.compile(r"sm_?120"), "12.0"), (re.compile(r"sm_?100|tcgen05"), "10.0"))


#: Programs (path prefix) whose references import flash-linear-attention (``fla``) at the commit they cite ("we use
#: the fla repository from the flash-linear-attention project at commit id f03cb3ae", with a commented
#: ``sys.path.insert`` of that checkout): with ``--fla-mirror`` that commit's ``fla/`` is staged and put first on
#: their PYTHONPATH, as the programs set up. No release has those call signatures (see the module docstring).
FLA_AT = {"gdn/": "f03cb3ae6a6a4dc0c3a7792ae1dcb6c42de2d2d2"}


def stage_fla(mirror: Path | None, work: Path) -> dict[str, Path]:
    """Prefix of :data:`FLA_AT` -> a directory holding ``fla/`` at its commit (none without a mirror)."""
    if mirror is None:
        return {}
    out = {}
    for prefix, commit in FLA_AT.items():
        dest = work / f"fla-{commit[:8]}"
        dest.mkdir(exist_ok=True)
        archive = subprocess.run(["git", "--git-dir", str(mirror), "archive", commit, "fla"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        out[prefix] = dest
    return out


def env_for(rel: str, env: dict, fla_dirs: dict[str, Path]) -> dict:
    """``env`` with the staged fla checkout first on PYTHONPATH when ``rel`` is under a :data:`FLA_AT` prefix."""
    d = next((p for prefix, p in fla_dirs.items() if rel.startswith(prefix)), None)
    return env if d is None else dict(env, PYTHONPATH=os.pathsep.join([str(d), env.get("PYTHONPATH", "")]))


def capability_of(rel: str) -> str:
    """The ``major.minor`` capability the shim reports to program ``rel`` (see :data:`CAPABILITY`)."""
    return next((cc for pat, cc in CAPABILITY if pat.search(rel)), "9.0")


# Programs whose main() takes no arguments and calls FUNCTION(**sizes, ...) with GPU-sized values: the unchanged
# file is loaded as a module, FUNCTION is wrapped so that these keyword arguments replace main's, and main() runs
# (every other argument, the dtypes and tile sizes, is main's own). Sizes: chunk multiples (chunk_size 64).
_KDA = {"B": 1, "S": 128, "H": 2}
SMALL_CALL: dict[str, tuple[str, dict]] = {
    f"kda/{name}.py": ("run_test", _KDA) for name in (
        "chunk_bwd_dqkwg", "chunk_bwd_dv", "chunk_bwd_gla_dA", "chunk_bwd_intra", "chunk_delta_bwd",
        "chunk_delta_h_fwd", "chunk_inter_solve_fused", "chunk_intra_token_parallel", "chunk_o", "wy_fast",
        "wy_fast_bwd")}
# their Triton references loop per element in the interpreter (~8 s a call at S=128, H=2) and the programs time
# them 30 times: one chunk, one head (the kernels are chunk-local)
for _name in ("chunk_bwd_intra", "chunk_intra_token_parallel"):
    SMALL_CALL[f"kda/{_name}.py"] = ("run_test", {"B": 1, "S": 64, "H": 1})
SMALL_CALL.update({
    f"gdn/example_{name}.py": ("run_test", _KDA) for name in (
        "chunk_delta_bwd", "chunk_delta_h", "chunk_o", "chunk_o_bwd", "chunk_scaled_dot_kkt", "cumsum", "wy_fast",
        "wy_fast_bwd_split")})


# Programs that do their work at module level or size it with module-level constants (no argparse, no main
# arguments): the unchanged source runs as ``__main__`` with these names pinned (the program's own assignments to
# them are skipped; every other statement runs as written). The names are sizes, repeat counts and GPU warm-up
# loops; reference checks are kept as the program has them.
SMALL_GLOBALS: dict[str, dict] = {
    # M, N, K = 4096, 4096, 8192 at module level (4 dtype pairs, each also timed by do_bench); the printed diff
    # is the program's only check (its assert is commented out upstream); the kernel's 64x256x32 tiles divide
    "gemm_fp8/example_tilelang_gemm_fp8_sm100.py": {"M": 256, "N": 256, "K": 256},
    # seqlen = 65536 and repeat = 512 (the autotuner's rep and the timed loop) at module level; its warm-up
    # loop (`for _ in trange(4)`: an 8192^2 fp32 matmul, ~1 TFLOP, and a kernel call whose result the timed loop
    # overwrites) is GPU warm-up only: trange runs no iteration. Nothing is compared (the program prints its
    # gradient differences, no assert)
    "deepseek_mhc/example_mhc_bwd.py": {"seqlen": 1024, "repeat": 2, "trange": "lambda *a, **k: range(0)"},
}
# Triton programs (no tilesim kernel) that, after their reference check, time `for _ in range(1000)` loops of
# their Triton kernel and of flash_attn (~3 s an interpreted call at the SMALL_ARGS sizes): range(1000) runs 2
# iterations there (the printed averages still divide by 1000); every other range is Python's
_TIMING_RANGE = "lambda *a: __builtins__.range(2) if a == (1000,) else __builtins__.range(*a)"
for _name in ("indice", "mask"):
    SMALL_GLOBALS[f"blocksparse_attention/example_triton_sparse_gqa_decode_varlen_{_name}.py"] = {
        "range": _TIMING_RANGE}
    SMALL_ARGS[f"blocksparse_attention/example_triton_sparse_gqa_decode_varlen_{_name}.py"] = (
        "--batch 1 --heads 8 --max_cache_seqlen 1024")  # as its TileLang sibling


# Programs whose sizes are literal constants inside their main() (no argparse option, no argument): the unchanged
# file is loaded as a module and main() runs with those constants of its code object replaced (the source is not
# edited; every other constant and statement is main's own).
SMALL_CONSTS: dict[str, dict] = {
    # `M, N, K = 8192, 8192, 8192` in main(); the persistent 2-CTA kernel asserts N // 256 % 32 == 0 (N = 8192)
    # and K % 256 == 0; its e2e check compares with x.float() @ w.float().T (1 - cosine < 1e-3)
    "blockscaled_gemm_sm100/gemm_mxfp8_blockscaled_1d1d.py": {(8192, 8192, 8192): (256, 8192, 256)},
}


# sitecustomize.py for the subprocesses: torch's CUDA requests run on the CPU. Harness only.
SHIM = (Path(__file__).resolve().parent / "tilelang_examples_shim.py").read_text()


# ----------------------------------------------------------------------------- staging
def extract_examples(mirror: Path, dest: Path) -> tuple[Path, str | None]:
    """The ``examples/`` directory of ``mirror`` (extracted from HEAD if it is a bare git dir) and its commit."""
    if (mirror / "examples").is_dir():
        git = ["git", "-C", str(mirror)]
        root = mirror / "examples"
    else:
        git = ["git", "--git-dir", str(mirror)]
        archive = subprocess.run(git + ["archive", "HEAD", "examples"], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        root = dest / "examples"
    rev = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True)
    return root, (rev.stdout.strip() or None) if rev.returncode == 0 else None


#: top-level packages of a TileLang install and what they are with tilesim (TileLang ships TVM)
SWAPS = {"tilelang": "tilesim", "tvm": "tilesim.tvm"}


def _swap(name: str | None) -> str | None:
    """``name`` with its TileLang-provided top-level package replaced, or None if it is not one."""
    for old, new in SWAPS.items():
        if name == old or (name or "").startswith(old + "."):
            return new + name[len(old):]
    return None


def rewrite_imports(src: str) -> str:
    """Swap ``tilelang``/``tvm`` for ``tilesim``/``tilesim.tvm`` in import statements only (any depth);
    lines keep their numbers."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return src
    data = src.encode()
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _swap(node.module):
            seg = ast.get_source_segment(src, node)
            new = re.sub(r"^from\s+" + re.escape(node.module) + r"\b", "from " + _swap(node.module), seg)
        elif isinstance(node, ast.Import) and any(_swap(a.name) for a in node.names):
            parts = []
            for a in node.names:
                name = _swap(a.name) or a.name
                if a.asname:
                    parts.append(f"{name} as {a.asname}")
                elif _swap(a.name):  # `import tilelang.x` binds `tilelang`: bind the swapped top level to it
                    top = a.name.split(".")[0]
                    parts += ([name] if name != SWAPS[top] else []) + [f"{SWAPS[top]} as {top}"]
                else:
                    parts.append(name)
            new = "import " + ", ".join(parts)
        else:
            continue
        edits.append((starts[node.lineno - 1] + node.col_offset, starts[node.end_lineno - 1] + node.end_col_offset,
                      new.encode()))
    for begin, end, new in sorted(edits, reverse=True):
        data = data[:begin] + new + data[end:]
    return data.decode()


def classify(path: Path) -> str:
    """'program', 'wrapper' or 'helper' (see the module docstring)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return "helper"
    has_main = any(isinstance(n, ast.If) and "__name__" in ast.unparse(n.test) and "__main__" in ast.unparse(n.test)
                   for n in tree.body)
    if path.name.startswith(WRAPPER_PREFIXES) or path.name == "conftest.py":
        return "wrapper" if has_main else "helper"
    does_work = any(isinstance(n, (ast.For, ast.While, ast.With)) or  # a script: loops, `main()`, `print(...)`
                    (isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name))
                    for n in tree.body)
    return "program" if has_main or does_work else "helper"


def stage(examples: Path, staging: Path) -> None:
    """Copy the examples tree to ``staging`` with imports rewritten in every .py file."""
    shutil.copytree(examples, staging, symlinks=True)
    for py in staging.rglob("*.py"):
        src = py.read_text(encoding="utf-8", errors="surrogateescape")
        new = rewrite_imports(src)
        if new != src:
            py.write_text(new, encoding="utf-8", errors="surrogateescape")


# ----------------------------------------------------------------------------- running and verdicts
WRONG_MSG = re.compile(r"mismatch|not close|not equal|tolerance|allclose|differ\b|rtol|atol|max err|norm error", re.I)
WRONG_SRC = re.compile(r"allclose|assert_close|isclose|assert_similar|array_equal|torch\.equal|\bdiff|\bref|\berr|\bcos"
                       r"|\bsim", re.I)
CHECK_SITE = re.compile(r"/tilesim/(profiler|testing)")  # tilesim code that runs a program's reference check
WRONG_FUNC = re.compile(r"^assert_\w*(close|similar|equal)\w*$|^(check|compare)_\w*$", re.I)


#: programs whose own code is wrong (established, with the evidence): a "wrong" outcome of theirs is reported
#: as "program-bug" (and its reason), not counted as a tilesim wrong answer. Keep each entry checkable.
PROGRAM_BUGS = {
    "attention_sink/example_gqa_sink_bwd_varlen.py":
        "reads Delta positions flash_bwd_prep never writes (torch.empty output): dK NaN with tilesim's NaN "
        "fill; the same bug was fixed upstream in flash_attention/example_gqa_bwd_tma_reduce_varlen.py "
        "(tile-ai/tilelang PR 2461, 'previously failed with dK == NaN' on an H100)",
    "dsa_sparse_finetune/sparse_mla_bwd.py":
        "accumulates dKV with T.atomic_add into a T.empty output (torch.empty: uninitialised memory) that nothing "
        "zeroes: dkv NaN with tilesim's NaN fill. Before tile-ai/tilelang b9a5907a2 ('Migrate eligible examples "
        "to eager style', #2010) dKV was an input the caller made with torch.zeros_like; the deepseek_v32 "
        "copy of this kernel still does (sparse_mla_bwd.py: dkv = torch.zeros_like(kv, dtype=torch.float32))",
    "dsa_sparse_finetune/indexer_bwd.py":
        "accumulates dIndexK with T.atomic_add into a T.empty output nothing zeroes (its printed 'dk err' is nan "
        "with tilesim's NaN fill; the program asserts nothing, so it exits 0); before tile-ai/tilelang b9a5907a2 "
        "(#2010) the caller passed dk = torch.zeros_like(k)",
}


#: programs written to fail (inputs of a debugging tool): ``(pattern of the error line, evidence)``. A
#: ``fail`` whose error line matches is verdict ``expected-error``; any other outcome keeps its verdict.
EXPECTED_ERRORS = {
    "autodd/tilelang_buggy.py": (
        r"KernelTypeError: T\.gemm: reduction dims differ",
        "the program's docstring: 'a bug that triggers an error ... B_shared has shape (block_M, block_N) "
        "instead of (block_K, block_N), causing a GEMM dimension mismatch error'; it is the input of "
        "`python -m tilelang.autodd tilelang_buggy.py --err-msg \"T.gemm K shape check failed\"` "
        "(examples/autodd/README.md); TileLang itself fails it"),
}


#: programs whose own code is wrong in a way that stops them (with the evidence): a ``fail`` whose error line matches
#: ``pattern`` is reported as ``program-bug`` (TileLang's own install fails them too, or the GPU run is undefined
#: behaviour); any other outcome keeps its verdict. ``(pattern of the error line, evidence)``
PROGRAM_BUG_ERRORS = {
    "attention_sink/benchmark_gqa_sink_fwd.py": (
        r"ModuleNotFoundError: No module named 'example_gqa_sink_fwd_bhsd'",
        "line 8 imports example_gqa_sink_fwd_bhsd, a module that has never existed in TileLang's history up to the "
        "mirror's HEAD (git log HEAD -- examples/attention_sink/example_gqa_sink_fwd_bhsd.py is empty): tile-ai/"
        "tilelang ded6a9922 (#1909) deleted example_gqa_sink_fwd_bhsd_wgmma_pipelined.py and pointed this import "
        "at the non-pipelined name, which only exists for MHA (example_mha_sink_fwd_bhsd.py)"),
    "bitnet-1.58b/kernel_benchmark/tilelang_bitnet_158_int8xint2_prefill.py": (
        r"ImportError: cannot import name 'INT4TensorCoreIntrinEmitter'",
        "line 15 imports INT4TensorCoreIntrinEmitter from tilelang.cuda.intrinsics.macro.mma_macro_generator; "
        "tile-ai/tilelang 99ee74b34 ('[CUDA] Support int4 T.gemm', #2063) deleted that class (and "
        "INT4TensorCoreIntrinEmitterWithLadderTransform): `git grep INT4TensorCoreIntrinEmitter HEAD` finds only "
        "this example, so TileLang itself fails it with the same ImportError"),
    "gemm_sp/example_gemm_sp.py": (
        r"out-of-bounds read of local buffer nz_idx",
        "its compressor (sparse_utils.py) allocates nz_idx = T.alloc_local([elem], T.uint8) with elem = 2 (line 51) "
        "and runs `nz_idx[nz_count] = T.if_then_else(dense_local[local_idx + i] != 0, i, nz_idx[nz_count])` for "
        "every i in T.unroll(group=4) (line 69): once a group's two nonzeros are counted (nz_count == 2) the "
        "remaining iterations read and write nz_idx[2], past the 2-element local array (e.g. a group whose "
        "nonzeros sit at positions 0 and 1: i = 2 and i = 3). On a GPU that is an out-of-bounds local-memory "
        "access (undefined behaviour; it happens to store back the byte it read); tilesim reports it"),
    "gdn/example_chunk_delta_h.py": (
        r"do_bench\(\) got an unexpected keyword argument 'k'",
        "lines 302-312 call do_bench(chunk_gated_delta_rule_fwd_h, k=K, w=W, ...), but tilelang.profiler.do_bench "
        "(tilelang/profiler/bench.py line 68) takes the function and timing keywords only, no arguments for it; "
        "tile-ai/tilelang 651f885ed ('Use centralized do_bench from tilelang.profiler', #1670) replaced the "
        "example's local do_bench(fn, *args, **kwargs) with it, so TileLang raises the same TypeError before the "
        "program's reference check (which comes after the timing)"),
    "gdn/example_chunk_delta_bwd.py": (
        r"do_bench\(\) got an unexpected keyword argument 'chunk_size'",
        "line 480 calls do_bench(chunk_gated_delta_rule_bwd_dhu, Q, K, ..., chunk_size=chunk_size), but "
        "tilelang.profiler.do_bench (tilelang/profiler/bench.py line 68) takes no arguments for the function: "
        "tile-ai/tilelang 651f885ed (#1670) replaced the example's local do_bench(fn, *args, **kwargs) with it, so "
        "TileLang raises the same TypeError"),
}


def program_bug_error(rel: str, verdict: str, error: str) -> tuple[str, str]:
    """``program-bug`` for a ``fail`` of a program in :data:`PROGRAM_BUG_ERRORS` whose error line matches."""
    if verdict == "fail" and rel in PROGRAM_BUG_ERRORS and re.search(PROGRAM_BUG_ERRORS[rel][0], error):
        return "program-bug", f"{error} [known program bug: {PROGRAM_BUG_ERRORS[rel][1]}]"
    return verdict, error


KERNEL_TIME = re.compile(r"^tilesim-kernel-time: ([0-9.]+) s in ([0-9]+) calls\n?", re.M)
#: a stand-in module of :data:`STANDINS` announces itself on import with this stderr line
STANDIN_USED = re.compile(r"^tilesim-standin: ([\w.]+)\n?", re.M)
#: CPU stand-ins (module -> file beside this one) for CUDA-only packages the programs use as references; one is
#: put on the programs' path only when the real package is missing, and rows whose program imported it carry
#: ``note`` "<module> stand-in"
STANDINS = {"flash_attn": "tilelang_examples_flash_attn.py"}


def verdict_of(rc: int, stderr: str) -> tuple[str, str]:
    """(verdict, error line) of a finished program (see the module docstring)."""
    if rc == 0:
        return "pass", ""
    lines = stderr.rstrip().splitlines()
    tbs = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if not tbs:
        tail = next((line.strip() for line in reversed(lines) if line.strip()), "")
        return "fail", tail or (f"killed by signal {-rc}" if rc < 0 else f"exit code {rc}")
    after = lines[tbs[-1] + 1:]
    k = next((i for i, line in enumerate(after) if line and not line[0].isspace()), None)
    if k is None:
        return "fail", f"exit code {rc}"
    error = after[k].strip()
    frames = [i for i, line in enumerate(after[:k]) if line.lstrip().startswith('File "')]
    frame = after[frames[-1]] if frames else ""
    code = after[frames[-1] + 1].strip() if frames and frames[-1] + 1 < k else ""
    check_site = "/tilesim/" not in frame or CHECK_SITE.search(frame)
    is_assert = re.match(r"[\w.]*(AssertionError|Mismatch\w*)\b", error)
    func = frame.rsplit(" in ", 1)[-1] if " in " in frame else ""  # a checking helper: assert_tensors_similar
    if check_site and is_assert and (WRONG_MSG.search(error) or WRONG_SRC.search(code) or WRONG_FUNC.search(func)):
        return "wrong", error
    return "fail", error


def expected_error(rel: str, verdict: str, error: str) -> tuple[str, str]:
    """``expected-error`` for a ``fail`` of a program in :data:`EXPECTED_ERRORS` whose error line matches."""
    if verdict == "fail" and rel in EXPECTED_ERRORS and re.search(EXPECTED_ERRORS[rel][0], error):
        return "expected-error", f"{error} [written to fail: {EXPECTED_ERRORS[rel][1]}]"
    return verdict, error


def run_one(rel: str, staging: Path, work: Path, env: dict, timeout: float) -> dict:
    """Run examples/<rel> in a private copy of its top-level example directory; the other directories are
    linked beside it (programs reach siblings such as ``../flash_attention``)."""
    top = rel.split("/")[0]
    private = Path(tempfile.mkdtemp(dir=work, prefix="run_"))
    if (staging / top).is_dir():
        shutil.copytree(staging / top, private / top, symlinks=True)
    else:  # a program at the root of examples/
        shutil.copy2(staging / rel, private / rel)
    for other in staging.iterdir():
        if other.name != top and other.is_dir():
            (private / other.name).symlink_to(other, target_is_directory=True)
    script = private / rel
    argv = SMALL_ARGS.get(rel, "").split()
    cmd = [sys.executable, script.name, *argv]
    if rel in SMALL_MAIN:
        entry, kwargs = SMALL_MAIN[rel] if isinstance(SMALL_MAIN[rel], tuple) else ("main", SMALL_MAIN[rel])
        argv = [f"{entry}(**{kwargs!r})"]
        cmd = [sys.executable, "-c", f"import runpy; runpy.run_path({script.name!r}, run_name='__example__')"
                                     f"[{entry!r}](**{kwargs!r})"]
    if rel in SMALL_CALL:
        function, sizes = SMALL_CALL[rel]
        argv = [f"main() with {function}(**{sizes!r})"]
        cmd = [sys.executable, "-c", small_call_command(script.name, function, sizes)]
    if rel in SMALL_CONSTS:
        cmd = [sys.executable, "-c", small_consts_command(script.name, SMALL_CONSTS[rel], argv)]
        argv = argv + [f"main() constants {SMALL_CONSTS[rel]!r}"]
    if rel in SMALL_GLOBALS:
        cmd = [sys.executable, "-c", small_globals_command(script.name, SMALL_GLOBALS[rel], argv)]
        argv = argv + [f"module-level {SMALL_GLOBALS[rel]!r}"]
    start = time.perf_counter()
    env = dict(env, TILESIM_SHIM_CAPABILITY=capability_of(rel))
    proc = subprocess.Popen(cmd, cwd=script.parent, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        stats = KERNEL_TIME.search(err)
        err = KERNEL_TIME.sub("", err)
        standins = sorted(set(STANDIN_USED.findall(err)))
        err = STANDIN_USED.sub("", err)
        verdict, error = verdict_of(proc.returncode, err)
        if verdict == "wrong" and rel in PROGRAM_BUGS:
            verdict, error = "program-bug", f"{error} [known program bug: {PROGRAM_BUGS[rel]}]"
        verdict, error = expected_error(rel, verdict, error)
        verdict, error = program_bug_error(rel, verdict, error)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        stats, standins = None, sorted(set(STANDIN_USED.findall(err)))
        verdict, error = "timeout", f"timeout after {timeout:g} s"
    seconds = round(time.perf_counter() - start, 2)
    shutil.rmtree(private, ignore_errors=True)
    return {"program": rel, "verdict": verdict, "seconds": seconds, "argv": argv, "error": error,
            "kernel_seconds": float(stats.group(1)) if stats else None,
            "kernel_calls": int(stats.group(2)) if stats else None,
            "note": "; ".join(f"{m} stand-in" for m in standins),
            "returncode": proc.returncode, "stderr_tail": "\n".join(err.splitlines()[-25:])[-3000:],
            "stdout_tail": "\n".join(out.splitlines()[-5:])[-800:]}


def normalise(error: str) -> str:
    """An error line with paths, addresses and numbers stripped, for the blocker histogram."""
    s = re.sub(r"(?:[\w.~-]*/)+[\w.-]+", "<path>", error)
    s = re.sub(r"0x[0-9a-fA-F]+", "<addr>", s)
    s = re.sub(r"\b\d+(\.\d+)?\b", "N", s)  # numbers, not digits inside names (int4, tcgen05_gemm)
    return re.sub(r"\s+", " ", s).strip()[:160]


# ----------------------------------------------------------------------------- report
def versions() -> dict:
    import numpy
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    git = ["git", "-C", str(REPO)]
    rev = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(git + ["status", "--porcelain", "--", "tilesim"], capture_output=True, text=True).stdout
    return {"tilesim_commit": rev or None, "tilesim_uncommitted": dirty.splitlines(), "python": platform.python_version(), "numpy": numpy.__version__,
            "torch": torch_version}


def summarise(rows: list[dict]) -> dict:
    counts = collections.Counter(r["verdict"] for r in rows)
    ran = sum(counts[v] for v in ("pass", "fail", "wrong", "program-bug", "expected-error", "timeout"))
    kernel_s = sorted(r["kernel_seconds"] for r in rows if r["verdict"] == "pass" and r.get("kernel_seconds") is not None)
    wall_s = sorted(r["seconds"] for r in rows if r["verdict"] == "pass")
    return {"counts": dict(sorted(counts.items())), "programs_run": ran,
            "pass_pct": round(100.0 * counts["pass"] / ran, 1) if ran else 0.0,
            # laptop speed of the passing programs: whole process (python, torch import, references
            # included) and the time inside tilesim's kernels alone
            "pass_wall_s_median": wall_s[len(wall_s) // 2] if wall_s else None,
            "pass_kernel_s_median": kernel_s[len(kernel_s) // 2] if kernel_s else None,
            "pass_kernel_under_2s": sum(k < 2.0 for k in kernel_s), "pass_wall_under_2s": sum(w < 2.0 for w in wall_s)}


def histogram(rows: list[dict]) -> list[tuple[int, str, list[str]]]:
    groups: dict[str, list[str]] = collections.defaultdict(list)
    for r in rows:
        if r["verdict"] in ("fail", "wrong"):
            groups[normalise(r["error"])].append(r["program"])
    return sorted(((len(p), e, p) for e, p in groups.items()), key=lambda t: (-t[0], t[1]))


def print_report(rows: list[dict], summary: dict, hist) -> None:
    width = max(len(r["program"]) for r in rows)
    print(f"\n{'program':<{width}}  {'verdict':<8} {'seconds':>8}  error")
    for r in rows:
        note = f"[{r['note']}] " if r.get("note") else ""
        print(f"{r['program']:<{width}}  {r['verdict']:<8} {r.get('seconds', 0):>8.1f}  {note}{r.get('error', '')[:140]}")
    print(f"\nsummary: {summary['counts']}  pass {summary['pass_pct']}% of {summary['programs_run']} programs run")
    print(f"passing programs: median {summary['pass_wall_s_median']} s per process, median "
          f"{summary['pass_kernel_s_median']} s inside tilesim kernels; {summary['pass_kernel_under_2s']} with kernel "
          f"time under 2 s, {summary['pass_wall_under_2s']} under 2 s whole")
    print("\nblockers (fail/wrong error lines, normalised):")
    for n, error, programs in hist:
        print(f"{n:4d}  {error}\n        e.g. {', '.join(programs[:3])}")


def prepare(examples: Path, work: Path, jobs: int, fla_mirror: Path | None) -> tuple[dict, dict]:
    """Stage ``examples`` under ``work/staged`` and the shim (with the :data:`STANDINS` of missing packages)
    under ``work/shim``; return the programs' environment and :func:`stage_fla`'s directories."""
    stage(examples, work / "staged")
    (work / "shim").mkdir()
    (work / "shim" / "sitecustomize.py").write_text(SHIM)
    for module, source in STANDINS.items():
        if importlib.util.find_spec(module) is None:
            shutil.copy2(Path(__file__).resolve().parent / source, work / "shim" / f"{module}.py")
    env = dict(os.environ, PYTHONHASHSEED="0", MPLBACKEND="Agg", TRITON_INTERPRET="1",
               OMP_NUM_THREADS=str(max(1, (os.cpu_count() or 1) // jobs)),
               PYTHONPATH=os.pathsep.join([str(work / "shim"), str(REPO), os.environ.get("PYTHONPATH", "")]))
    return env, stage_fla(fla_mirror.resolve() if fla_mirror else None, work)


def write_json(report: dict, prefix: str = "tilelang_examples") -> Path:
    out_dir = REPO / "reports" / "measurements"
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{prefix}_{report['date'].replace('-', '').replace(':', '')}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=1) + "\n")
    os.replace(tmp, path)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", type=Path, required=True, help="bare git dir or checkout of TileLang")
    ap.add_argument("--only", action="append", default=[], help="run programs whose path contains this (repeatable)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per program")
    ap.add_argument("--jobs", type=int, default=2, help="programs run in parallel")
    ap.add_argument("--update", type=Path, help="previous JSON: keep its rows for programs not re-run")
    ap.add_argument("--fla-mirror", type=Path, help="bare git dir of fla-org/flash-linear-attention: the programs "
                                                    "of FLA_AT import fla at the commit they cite")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="tilelang_examples_") as tmp:
        work = Path(tmp)
        examples, commit = extract_examples(args.mirror.resolve(), work)
        files = sorted(p.relative_to(examples).as_posix() for p in examples.rglob("*.py"))
        kinds = {rel: classify(examples / rel) for rel in files}
        selected = [rel for rel in files if kinds[rel] == "program" and
                    (not args.only or any(s in rel for s in args.only))]
        excluded = [rel for rel in selected if EXCLUDED_DIRS & set(rel.split("/")[:-1])]
        to_run = [rel for rel in selected if rel not in excluded]
        env, fla_dirs = prepare(examples, work, args.jobs, args.fla_mirror)
        missing = missing_optional()
        if missing:
            print("missing optional packages: " + "; ".join(f"{m} ({OPTIONAL[m]})" for m in missing), flush=True)
        print(f"{len(to_run)} programs to run, {len(excluded)} skipped; timeout {args.timeout:g} s, jobs {args.jobs}",
              flush=True)
        rows = {rel: {"program": rel, "verdict": "skip", "seconds": 0.0, "error": "excluded directory"}
                for rel in excluded}
        rows.update({rel: {"program": rel, "verdict": "wrapper", "seconds": 0.0, "error": ""} for rel in files
                     if kinds[rel] == "wrapper" and (not args.only or any(s in rel for s in args.only))})
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = [pool.submit(run_one, rel, work / "staged", work, env_for(rel, env, fla_dirs), args.timeout)
                       for rel in to_run]
            for fut in concurrent.futures.as_completed(futures):
                row = fut.result()
                rows[row["program"]] = row
                done = sum(f.done() for f in futures)
                note = f"[{row['note']}] " if row["note"] else ""
                print(f"[{done}/{len(to_run)}] {row['verdict']:<7} {row['seconds']:7.1f}s  {row['program']}  "
                      f"{note}{row['error'][:100]}", flush=True)

    if args.update:
        previous = json.loads(args.update.read_text())
        rows = {**{r["program"]: r for r in previous["rows"]}, **rows}
    rows_list = [rows[k] for k in sorted(rows)]
    summary, hist = summarise(rows_list), histogram(rows_list)
    print_report(rows_list, summary, hist)
    report = {"mirror": str(args.mirror), "mirror_commit": commit,
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              **versions(), "fla_mirror": str(args.fla_mirror) if args.fla_mirror else None, "fla_at": FLA_AT,
              "timeout_s": args.timeout, "jobs": args.jobs, "only": args.only,
              "summary": summary, "rows": rows_list,
              "helpers": [rel for rel in files if kinds[rel] == "helper"],
              "blockers": [{"count": n, "error": e, "programs": p} for n, e, p in hist]}
    print(f"\nwrote {write_json(report).relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
