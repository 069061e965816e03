"""Pass-config keys: every key of the public TileLang, plus a few of ours.

    tilelang.compile(func, pass_configs={PassConfigKey.TL_ENABLE_FAST_MATH: True,
                                         "tl.device_compile_flags": ["-DMY_SWITCH=1"]})

Keys are accepted as members or as their strings. Each member's `__doc__` says what it does
*here*: either which pass or compile step honours it, or that it has no effect in this
TileLang (a knob of a public pass we do not have; the program still compiles and runs).
`describe()` prints the table. Values are read with `get(configs, key, default)`.
"""
from __future__ import annotations

from enum import Enum

__all__ = ["PassConfigKey", "get", "describe", "merge_device_flags"]

_NONE = "No effect in this TileLang: "


class PassConfigKey(str, Enum):
    """Keys of `pass_configs=`; see each member's `__doc__` for its effect here."""

    TL_SIMPLIFY = "tl.Simplify"
    TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES = "transitively_prove_inequalities"
    TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS = "convert_boolean_to_and_of_ors"
    TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES = "apply_constraints_to_boolean_branches"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL = "propagate_knowns_to_prove_conditional"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS = "propagate_knowns_to_simplify_expressions"
    TL_SIMPLIFY_ENABLE_LET_INLINE = "enable_simplify_let_inline"
    TL_DISABLE_BUFFER_INIT_CHECK = "tl.disable_buffer_init_check"
    TL_DISABLE_DATA_RACE_CHECK = "tl.disable_data_race_check"
    TL_DISABLE_PRELOWER_SEMANTIC_CHECK = "tl.disable_prelower_semantic_check"
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_ENABLE_AUTO_SCHEDULE = "tl.enable_auto_schedule"
    TL_ENABLE_AUTO_WARP_SPECIALIZATION = "tl.enable_auto_warp_specialization"
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_DISABLE_FAST_MATH = "tl.disable_fast_math"
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_ENABLE_PTXAS_VERBOSE_OUTPUT = "tl.enable_ptxas_verbose_output"
    TL_DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"
    TL_EMIT_LINE_DIRECTIVES = "tl.emit_line_directives"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    TL_ENABLE_REDUCER_PLAN_VERBOSE = "tl.enable_reducer_plan_verbose"
    TL_LAYOUT_COST_MODEL = "tl.layout_cost_model"
    TL_REDUCER_FORCE_BASELINE = "tl.reducer_force_baseline"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    TL_DISABLE_VECTORIZE_256 = "tl.disable_vectorize_256"
    TL_ENABLE_FP32X2_REDUCTION = "tl.enable_fp32x2_reduction"
    TL_ENABLE_ASYNC_COPY = "tl.enable_async_copy"
    TL_ENABLE_LOWER_LDGSTG = "tl.enable_lower_ldgstg"
    TL_ENABLE_LOWER_LDGSTG_PREDICATED = "tl.enable_lower_ldgstg_predicated"
    TL_ENABLE_VECTORIZE_PLANNER_VERBOSE = "tl.enable_vectorize_planner_verbose"
    TL_DISABLE_WGMMA = "tl.disable_wgmma"
    TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS = "tl.debug_merge_shared_memory_allocations"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    TL_DISABLE_SHARED_MEMORY_REUSE = "tl.disable_shared_memory_reuse"
    TL_DISABLE_SHUFFLE_ELECT = "tl.disable_shuffle_elect"
    TL_DISABLE_LOOP_UNSWITCHING = "tl.disable_loop_unswitching"
    TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE = "tl.loop_unswitching_allow_non_trivial_else"
    TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS = "tl.if_stmt_binding_inline_replayable_binds"
    TL_DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"
    TL_DISABLE_DYNAMIC_TAIL_SPLIT = "tl.disable_dynamic_tail_split"
    TL_FORCE_LET_INLINE = "tl.force_let_inline"
    TL_AST_PRINT_ENABLE = "tl.ast_print_enable"
    TL_LAYOUT_VISUALIZATION_ENABLE = "tl.layout_visualization_enable"
    TL_LAYOUT_VISUALIZATION_FORMATS = "tl.layout_visualization_formats"
    TL_STORAGE_REWRITE_DETECT_INPLACE = "tl.storage_rewrite_detect_inplace"
    TIR_ENABLE_EQUIV_TERMS_IN_CSE = "tir.enable_equiv_terms_in_cse_tir"
    TIR_DISABLE_CSE = "tirx.disable_cse_tir"
    TIR_SIMPLIFY = "tirx.Simplify"
    TIR_DISABLE_STORAGE_REWRITE = "tirx.disable_storage_rewrite"
    TIR_DISABLE_VECTORIZE = "tirx.disable_vectorize"
    TIR_USE_ASYNC_COPY = "tirx.use_async_copy"
    TIR_ENABLE_DEBUG = "tirx.enable_debug"
    TIR_MERGE_STATIC_SMEM = "tirx.merge_static_smem"
    TIR_ADD_LOWER_PASS = "tirx.add_lower_pass"
    TIR_NOALIAS = "tirx.noalias"
    CUDA_KERNELS_OUTPUT_DIR = "cuda.kernels_output_dir"
    TL_DISABLE_OUT_OF_BOUND_WARNING = "tl.disable_out_of_bound_warning"
    TL_ENABLE_DUMP_IR = "tl.enable_dump_ir"
    TL_DUMP_IR_DIR = "tl.dump_ir_path"
    TL_PASS_PROFILE = "tl.pass_profile"
    TL_PASS_PROFILE_THRESHOLD_MS = "tl.pass_profile_threshold_ms"
    # ours
    TL_ENABLE_ROW_FRAGMENTS = "tl.enable_row_fragments"
    TL_DISABLE_PERSISTENT = "tl.disable_persistent"
    TL_DISABLE_PERSISTENT_GRID = "tl.disable_persistent_grid"
    TL_ENABLE_CLUSTER = "tl.enable_cluster"
    TL_DISABLE_STREAM_K = "tl.disable_stream_k"
    TL_DISABLE_STREAM_K_PROMOTED = "tl.disable_stream_k_promoted"
    TL_STREAM_K_MAX_FANIN = "tl.stream_k_max_fanin"
    TL_DISABLE_CARRIED_ACCUM_CLEAR = "tl.disable_carried_accum_clear"
    TL_DISABLE_K_SERPENTINE = "tl.disable_k_serpentine"
    TL_DISABLE_PERSISTENT_SNAKE = "tl.disable_persistent_snake"
    TL_ENABLE_PERSISTENT_TILE_TABLE = "tl.enable_persistent_tile_table"
    TL_DISABLE_UNMASKED_TILE_CLEAR = "tl.disable_unmasked_tile_clear"
    TL_DISABLE_UNMASKED_POST_MASK = "tl.disable_unmasked_post_mask"
    TL_UNMASKED_POST_MASK_THREADS = "tl.unmasked_post_mask_threads"
    TL_DISABLE_DEFERRED_EPILOGUE = "tl.disable_deferred_epilogue"
    TL_DISABLE_DEEP_RING = "tl.disable_deep_ring"
    TL_DISABLE_RING_TRIP_CAP = "tl.disable_ring_trip_cap"
    TL_DISABLE_MINMAX_CALL_RANGES = "tl.disable_minmax_call_ranges"
    TL_ENABLE_WS_OVERLAP = "tl.enable_ws_overlap"
    TL_ENABLE_WS_PINGPONG = "tl.enable_ws_pingpong"
    TL_ENABLE_EXP2_POLY = "tl.enable_exp2_poly"
    TL_DISABLE_PERSISTENT_PREFIX_TMA = "tl.disable_persistent_prefix_tma"
    TL_DISABLE_STAGED_ELEMENT_COPIES = "tl.disable_staged_element_copies"
    TL_DISABLE_STAGED_EPILOGUE = "tl.disable_staged_epilogue"
    TL_DISABLE_STAGING_SWIZZLE = "tl.disable_staging_swizzle"
    TL_DISABLE_INDEX_DIVMOD_FOLDING = "tl.disable_index_divmod_folding"
    TL_DISABLE_THREAD_RANGE_FOLDING = "tl.disable_thread_range_folding"
    TL_DISABLE_PANEL_XOR_INDEX = "tl.disable_panel_xor_index"
    TL_DISABLE_PROXY_FENCE_REACH = "tl.disable_proxy_fence_reach"
    TL_DISABLE_SYNC_PASS_RANGES = "tl.disable_sync_pass_ranges"
    TL_DISABLE_BRANCH_BARRIERS = "tl.disable_branch_barriers"
    TL_DISABLE_TF32_EXACT_LOADS = "tl.disable_tf32_exact_loads"
    TL_DISABLE_MMA_SPLIT_CHAINS = "tl.disable_mma_split_chains"
    TL_DISABLE_LDSM_LANE_OFFSETS = "tl.disable_ldsm_lane_offsets"
    TL_DISABLE_BF16_PACK_CONVERT = "tl.disable_bf16_pack_convert"
    TL_DISABLE_PIPELINE_BARRIER_MERGE = "tl.disable_pipeline_barrier_merge"
    TL_DISABLE_PIPELINE_REFILL_SINK = "tl.disable_pipeline_refill_sink"
    TL_DISABLE_SWIZZLE_SPAN_OFFSET = "tl.disable_swizzle_span_offset"
    TL_DISABLE_SWIZZLE_ROW_SPLIT = "tl.disable_swizzle_row_split"
    TL_DISABLE_POW2_FLOOR_SHIFT = "tl.disable_pow2_floor_shift"
    TL_DISABLE_LET_FLOOR_SPLIT = "tl.disable_let_floor_split"
    TL_DISABLE_ASSUME_TID_RANGE = "tl.disable_assume_tid_range"
    TL_DISABLE_REPLICATED_INPUTS = "tl.disable_replicated_inputs"
    TL_DISABLE_COLUMN_ROWS_1D = "tl.disable_column_rows_1d"
    TL_DISABLE_ATOMIC_RUNS = "tl.disable_atomic_runs"
    TL_DISABLE_ATOMIC_VECTOR_SOURCE = "tl.disable_atomic_vector_source"
    TL_DISABLE_UNIT_GRID_FOLD = "tl.disable_unit_grid_fold"
    TL_DISABLE_SLICE_PAIR_STORES = "tl.disable_slice_pair_stores"
    TL_DISABLE_FRAGMENT_SLICE_OFFSETS = "tl.disable_fragment_slice_offsets"
    TL_DISABLE_MMA_REGISTER_A = "tl.disable_mma_register_a"
    TL_DISABLE_MMA_REGISTER_A16 = "tl.disable_mma_register_a16"
    TL_DISABLE_WGMMA_INFLIGHT = "tl.disable_wgmma_inflight"
    TL_DISABLE_SINGLE_STAGE_PIPELINE = "tl.disable_single_stage_pipeline"
    TL_DISABLE_SPLIT_GLOBAL_INDEX = "tl.disable_split_global_index"
    TL_DISABLE_MANUAL_TMA_STORE = "tl.disable_manual_tma_store"
    TL_DISABLE_WS_FRAGMENT_GUARD = "tl.disable_ws_fragment_guard"
    TL_DISABLE_WGMMA_ROWS_OUTER = "tl.disable_wgmma_rows_outer"
    TL_DISABLE_TMA_STORE_REUSE = "tl.disable_tma_store_reuse"
    TL_DISABLE_ROW_BLOCK_FISSION = "tl.disable_row_block_fission"
    TL_DISABLE_WGMMA_CLEAR_UNDEF = "tl.disable_wgmma_clear_undef"
    TL_DISABLE_FOLD_STAGED_STORE = "tl.disable_fold_staged_store"
    TL_DISABLE_STMATRIX_STORE = "tl.disable_stmatrix_store"
    TL_DISABLE_TMA_DESCRIPTOR_PREFETCH = "tl.disable_tma_descriptor_prefetch"
    TL_DISABLE_BARRIER_INIT_MERGE = "tl.disable_barrier_init_merge"
    TL_DISABLE_MBARRIER_SUSPEND_HINT = "tl.disable_mbarrier_suspend_hint"
    TL_DISABLE_SHARED_INDEX_SPLIT = "tl.disable_shared_index_split"
    TL_DISABLE_CP_ASYNC_GROUP_FENCES = "tl.disable_cp_async_group_fences"
    TL_DISABLE_MMA_SYNC_GENERIC_REACH = "tl.disable_mma_sync_generic_reach"
    TL_DISABLE_PROXY_FENCE_BYTEWISE_REACH = "tl.disable_proxy_fence_bytewise_reach"
    TL_DISABLE_SHARED_LOAD_BATCH = "tl.disable_shared_load_batch"
    TL_DISABLE_TMA_IM2COL = "tl.disable_tma_im2col"
    TL_DISABLE_REGISTER_PREFETCH = "tl.disable_register_prefetch"
    TL_DISABLE_OWN_LINE_REDUCE = "tl.disable_own_line_reduce"
    TL_DISABLE_LET_FLOOR_THROUGH_LETS = "tl.disable_let_floor_through_lets"
    TL_DISABLE_PROLOGUE_JOIN_PAST_REGISTERS = "tl.disable_prologue_join_past_registers"
    TL_ENABLE_TMA_IM2COL_SMALL_TILES = "tl.enable_tma_im2col_small_tiles"
    TL_DISABLE_WS_MMA_SYNC = "tl.disable_ws_mma_sync"
    TL_DEBUG_TIMELINE = "tl.debug_timeline"
    TL_DISABLE_SMEM_REUSE = "tl.disable_smem_reuse"
    TL_DISABLE_STAGE_SMEM_REUSE = "tl.disable_stage_smem_reuse"
    TL_DISABLE_COPY_HOIST_PAST_MMA = "tl.disable_copy_hoist_past_mma"
    TL_DISABLE_PIPELINE_TAIL_PEEL = "tl.disable_pipeline_tail_peel"
    TL_DISABLE_DYNAMIC_ALIGNMENT = "tl.disable_dynamic_alignment"
    TL_DISABLE_LAUNCH_KERNEL_EX = "tl.disable_launch_kernel_ex"
    TL_DISABLE_LEAN_LAUNCHER = "tl.disable_lean_launcher"
    TL_DISABLE_CP_ASYNC_SHARED_OFFSET = "tl.disable_cp_async_shared_offset"
    TL_DISABLE_SHARED_ADDRESS_SLOTS = "tl.disable_shared_address_slots"
    TL_DISABLE_PACKED_COLUMN_READS = "tl.disable_packed_column_reads"
    TL_DISABLE_WGMMA_POLICY = "tl.disable_wgmma_policy"
    TL_DISABLE_SPLIT_SEGMENT_REDUCE = "tl.disable_split_segment_reduce"
    TL_DISABLE_NARROW_DIM_CHECKS = "tl.disable_narrow_dim_checks"
    TL_DISABLE_ROW_STORE_HOIST = "tl.disable_row_store_hoist"
    TL_DISABLE_REDUCE_TREE = "tl.disable_reduce_tree"
    TL_DISABLE_WGMMA_WAIT_HOLD = "tl.disable_wgmma_wait_hold"
    TL_DISABLE_WGMMA_POLICY_COST = "tl.disable_wgmma_policy_cost"
    TL_DISABLE_WS_WG_EPILOGUE = "tl.disable_ws_wg_epilogue"
    TL_ENABLE_WS_DEAD_ROWS = "tl.enable_ws_dead_rows"
    TL_DISABLE_BARRIER_ID_REMAP = "tl.disable_barrier_id_remap"
    TL_FRESH_COPY_INDEX = "tl.fresh_copy_index"
    TL_WS_PRODUCER_REGS = "tl.ws_producer_regs"


_SIMPLIFY = _NONE + "our simplifier has no tunable options (a sub-key of tl.Simplify)."
_DOCS = {
    "TL_SIMPLIFY": _NONE + "our arithmetic simplifier (arith/simplify.py) has no tunable options.",
    "TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES": _SIMPLIFY,
    "TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS": _SIMPLIFY,
    "TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES": _SIMPLIFY,
    "TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL": _SIMPLIFY,
    "TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS": _SIMPLIFY,
    "TL_SIMPLIFY_ENABLE_LET_INLINE": _SIMPLIFY,
    "TL_DISABLE_BUFFER_INIT_CHECK": _NONE + "there is no read-before-write check to silence.",
    "TL_DISABLE_DATA_RACE_CHECK": _NONE + "there is no data-race checker.",
    "TL_DISABLE_PRELOWER_SEMANTIC_CHECK": _NONE + "the frontend's checks are part of parsing and always run.",
    "TL_DISABLE_WARP_SPECIALIZED": "True: sm_90 kernels are not warp-specialized (TMA producer warp + "
                                   "wgmma consumers); they take the cp.async software pipeline. Default False.",
    "TL_ENABLE_AUTO_SCHEDULE": _NONE + "an Ascend option.",
    "TL_ENABLE_AUTO_WARP_SPECIALIZATION": _NONE + "warp specialization here is decided by lower_cuda "
                                          "(see TL_DISABLE_WARP_SPECIALIZED).",
    "TL_ENABLE_FAST_MATH": "True: NVRTC compiles with --use_fast_math (fast exp/div/sqrt, flush to zero). "
                           "Default False.",
    "TL_DISABLE_FAST_MATH": "True: never --use_fast_math, even with TL_ENABLE_FAST_MATH (an older key).",
    "TL_PTXAS_REGISTER_USAGE_LEVEL": "An int in [0, 10]: passed to ptxas as --register-usage-level=N. "
                                     "Default unset.",
    "TL_ENABLE_PTXAS_VERBOSE_OUTPUT": "True: print ptxas' register/spill report of each CUDA kernel compiled.",
    "TL_DEVICE_COMPILE_FLAGS": "Extra device compiler flags, a string (split like a shell) or a list: passed "
                               "to NVRTC after translating nvcc spellings (comma-separated --ptxas-options "
                               "split; nvcc-only flags such as -O3 or --expt-relaxed-constexpr dropped, see "
                               "backend/cuda/nvrtc.nvrtc_flags). jit's compile_flags= add to these.",
    "TL_EMIT_LINE_DIRECTIVES": _NONE + "no #line directives are emitted.",
    "TL_CONFIG_INDEX_BITWIDTH": _NONE + "no pass re-types index arithmetic.",
    "TL_ENABLE_REDUCER_PLAN_VERBOSE": _NONE + "there is no reducer planner log.",
    "TL_LAYOUT_COST_MODEL": _NONE + "layout inference has a single strategy.",
    "TL_REDUCER_FORCE_BASELINE": _NONE + "there is no narrow reducer plan to turn off.",
    "TL_DISABLE_TMA_LOWER": "True: no TMA; on sm_90 this also turns warp specialization off (it is built on "
                            "TMA). Deprecated in the public TileLang, honoured here.",
    "TL_DISABLE_SAFE_MEMORY_ACCESS": "True: legalize_safe_memory adds no bounds guards to global accesses.",
    "TL_DISABLE_VECTORIZE_256": _NONE + "no pass reads it.",
    "TL_ENABLE_FP32X2_REDUCTION": _NONE + "an SM100 reduction option.",
    "TL_ENABLE_ASYNC_COPY": _NONE + "cp.async is chosen by the pipeline pass for pipelined copies.",
    "TL_ENABLE_LOWER_LDGSTG": _NONE + "no explicit ldg/stg lowering.",
    "TL_ENABLE_LOWER_LDGSTG_PREDICATED": _NONE + "no explicit ldg/stg lowering.",
    "TL_ENABLE_VECTORIZE_PLANNER_VERBOSE": _NONE + "the vectorizer has no log.",
    "TL_DISABLE_WGMMA": "True: sm_90 gemms use mma.sync (the sm_80 path) instead of wgmma.",
    "TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS": _NONE + "the shared-memory plan is an attribute of the "
                                                "lowered function (plan_smem.ATTR) instead of a log.",
    "TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE": _NONE + "plan_smem always reuses bytes whose lifetimes "
                                                "do not overlap.",
    "TL_DISABLE_SHARED_MEMORY_REUSE": "True: plan_smem gives every shared buffer its own bytes (no reuse).",
    "TL_DISABLE_SHUFFLE_ELECT": _NONE + "no pass reads it.",
    "TL_DISABLE_LOOP_UNSWITCHING": _NONE + "there is no loop-unswitching pass.",
    "TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE": _NONE + "there is no loop-unswitching pass.",
    "TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS": _NONE + "there is no if-statement binding pass.",
    "TL_DISABLE_THREAD_STORAGE_SYNC": "True: thread_sync inserts no __syncthreads() for shared-memory "
                                      "hazards; the program's own T.sync_threads / barriers must order "
                                      "them. (Barriers that warp specialization and shared-memory byte "
                                      "reuse need for their own rewrites stay.) Default False.",
    "TL_DISABLE_DYNAMIC_TAIL_SPLIT": _NONE + "an older key; dynamic tails are guarded, not split.",
    "TL_FORCE_LET_INLINE": _NONE + "let bindings are kept as written.",
    "TL_AST_PRINT_ENABLE": _NONE + "print(func) shows the IR at any time.",
    "TL_LAYOUT_VISUALIZATION_ENABLE": _NONE + "use tilelang.tools.plot_layout.",
    "TL_LAYOUT_VISUALIZATION_FORMATS": _NONE + "use tilelang.tools.plot_layout.",
    "TL_STORAGE_REWRITE_DETECT_INPLACE": _NONE + "there is no storage-rewrite pass.",
    "TIR_ENABLE_EQUIV_TERMS_IN_CSE": _NONE + "there is no CSE pass (NVRTC does CSE).",
    "TIR_DISABLE_CSE": _NONE + "there is no CSE pass (NVRTC does CSE).",
    "TIR_SIMPLIFY": _NONE + "simplification always runs.",
    "TIR_DISABLE_STORAGE_REWRITE": _NONE + "there is no storage-rewrite pass.",
    "TIR_DISABLE_VECTORIZE": _NONE + "vectorization of copies is part of their lowering.",
    "TIR_USE_ASYNC_COPY": _NONE + "cp.async is chosen by the pipeline pass.",
    "TIR_ENABLE_DEBUG": _NONE + "use TL_DEVICE_COMPILE_FLAGS=['-G'] for device debug info.",
    "TIR_MERGE_STATIC_SMEM": _NONE + "plan_smem lays out all shared buffers together.",
    "TIR_ADD_LOWER_PASS": _NONE + "the pass lists are fixed per target (backend/<target>/pipeline.py).",
    "TIR_NOALIAS": _NONE + "pointer qualifiers are chosen by the code generator.",
    "CUDA_KERNELS_OUTPUT_DIR": "A directory: each compiled CUDA kernel's source is written there as "
                               "<kernel name>.cu.",
    "TL_DISABLE_OUT_OF_BOUND_WARNING": _NONE + "no out-of-bound warnings are issued.",
    "TL_ENABLE_DUMP_IR": "True: every pass writes the IR it produced to TL_DUMP_IR_DIR (default ./dump_ir), "
                         "like the TL_DUMP_IR environment variable.",
    "TL_DUMP_IR_DIR": "The directory for TL_ENABLE_DUMP_IR. Default ./dump_ir.",
    "TL_PASS_PROFILE": _NONE + "passes are not timed individually.",
    "TL_PASS_PROFILE_THRESHOLD_MS": _NONE + "passes are not timed individually.",
    "TL_ENABLE_ROW_FRAGMENTS": "Ours. False: per-row accumulator values are not kept in registers. Default True.",
    "TL_DISABLE_PERSISTENT": "Ours. True: warp-specialized kernels keep one block per tile.",
    "TL_DISABLE_PERSISTENT_GRID": "Ours. True: a T.Persistent loop stays as written on sm_90 (no warp "
                                  "specialization); by default it becomes a grid of tiles that the warp-specialized "
                                  "path makes persistent itself (persistent_grid.py).",
    "TL_ENABLE_CLUSTER": "Ours. True: persistent kernels run as 2-block clusters with TMA multicast.",
    "TL_DISABLE_STREAM_K": "Ours. True: persistent GEMMs keep whole tiles in the last wave.",
    "TL_STREAM_K_MAX_FANIN": "Ours. int: stream-K cuts a tile into at most this many k-ranges (default 6; 0: "
                             "only the 8-k-step minimum range limits them).",
    "TL_DISABLE_STREAM_K_PROMOTED": "Ours. True: stream-K leaves out promoted k-reductions (fp8 2xAcc: a gemm "
                                    "accumulator added into a second one every few k-steps).",
    "TL_DISABLE_CARRIED_ACCUM_CLEAR": "Ours. True: a wgmma accumulator zeroed late in a loop iteration is zeroed "
                                      "there, not by the next iteration's gemm (carried_clear.py).",
    "TL_DISABLE_K_SERPENTINE": "Ours. True: persistent GEMMs walk k forward on every tile.",
    "TL_DISABLE_PERSISTENT_SNAKE": "Ours. True: a persistent kernel whose k-loop trip count depends on the block "
                                   "(causal attention) deals tiles round robin (block c: c, c + blocks, ...), not "
                                   "in serpentine rounds (persistent.py).",
    "TL_ENABLE_PERSISTENT_TILE_TABLE": "Ours. True: such a kernel whose trip counts are all known at compile "
                                       "time takes its tiles from a __constant__ table dealt longest first to "
                                       "the least loaded block, not in serpentine rounds (persistent.balanced_order;"
                                       " measured slower on causal attention).",
    "TL_DISABLE_UNMASKED_TILE_CLEAR": "Ours. True: a wgmma accumulator's mask fill (`C[i, j] = cond ? 0 : -inf` "
                                      "before the gemm into C) runs on every tile, not only where a block-uniform "
                                      "bound finds a masked element (unmasked_clear.py).",
    "TL_DISABLE_UNMASKED_POST_MASK": "Ours. True: an infinite mask fill on the masked tiles runs before the gemm "
                                     "(which accumulates into it), not added to C after the gemm's wait (which "
                                     "clears C on every tile) (unmasked_clear.py).",
    "TL_UNMASKED_POST_MASK_THREADS": "Ours. An int: the most consumer threads a block may have for the post-mask "
                                     "(TL_DISABLE_UNMASKED_POST_MASK) to be taken; unset: 256 (two consumer "
                                     "warpgroups; see unmasked_clear.py for why not three).",
    "TL_DISABLE_DEFERRED_EPILOGUE": "Ours. True: persistent GEMMs store C between k-loops.",
    "TL_ENABLE_WS_OVERLAP": "Ours. True: a warp-specialized loop of two chained gemms (attention) keeps the next "
                            "tile's scores gemm in flight beside this tile's output gemm (ws_overlap.py). Off by "
                            "default until it is measured faster on the H200.",
    "TL_ENABLE_WS_PINGPONG": "Ours. True: the consumer warpgroups of a warp-specialized attention loop take turns "
                             "at the tensor cores (named barriers, round robin), one warpgroup's softmax running "
                             "beside the next one's gemms (ws_pingpong.py; not with tl.enable_ws_overlap). Unset "
                             "(or \"auto\"): on for loops whose output accumulator has 128 or more columns (head dim "
                             ">= 128; H200, 2026-12-05: D128 +2.8..6.8 %, D64 -1..+2 %), and a loop the turns cannot "
                             "run is built without them. False: off.",
    "TL_ENABLE_EXP2_POLY": "Ours. A fraction (True: 1/4; 0.5, \"3/8\", ...): that share of each thread's column "
                           "pairs of an mma / wgmma accumulator whose per-element loop stores T.exp2(x) computes 2^x "
                           "on the FMA pipe (tl_exp2_poly: degree-3 polynomial, relative error 1.0e-4, -inf -> 0) "
                           "instead of MUFU.EX2 (exp2_poly.py). Off by default until it is measured faster on the "
                           "H200.",
    "TL_DISABLE_PERSISTENT_PREFIX_TMA": "Ours. True: a persistent warp-specialized kernel's consumers load the "
                                        "tiles before the k-loop (attention's Q) themselves at every tile, not the "
                                        "producer by TMA into two buffers a tile ahead (ws_tile_prefix.py).",
    "TL_DISABLE_STAGED_ELEMENT_COPIES": "Ours. True: the cp.async software pipeline stages only T.copy ops (at "
                                        "the top of the body, or later ones under 99 KB of shared memory), not "
                                        "T.Parallel element copies or copies after register-only statements, and "
                                        "T.copy ops just before a pipelined loop wait for themselves instead of "
                                        "joining its prologue.",
    "TL_DISABLE_DEEP_RING": "Ours. True: warp-specialized TMA rings keep exactly the user's num_stages.",
    "TL_DISABLE_RING_TRIP_CAP": "Ours. True: a warp-specialized TMA ring may hold more stages than the most "
                                "iterations its loop can run (where each block runs one tile).",
    "TL_DISABLE_MINMAX_CALL_RANGES": "Ours. True: the global-tensor layout and safe-memory guards do not bound "
                                     "integer T.min / T.max calls (a loop `range(s, T.min(s + 8, n))` keeps "
                                     "its bounds guards).",
    "TL_DISABLE_STAGED_EPILOGUE": "Ours. True: cp.async kernels store C from registers.",
    "TL_DISABLE_INDEX_DIVMOD_FOLDING": "Ours. True: global indices keep the divisions of a layout over "
                                       "fragment coordinates (else split by the coordinates' ranges).",
    "TL_DISABLE_THREAD_RANGE_FOLDING": "Ours. True: divisions of the thread index stay as the layouts wrote "
                                       "them (else those a warp group's thread range decides are folded: "
                                       "transform/cuda/thread_ranges.py).",
    "TL_DISABLE_PANEL_XOR_INDEX": "Ours. True: element accesses of 64-column panel tiles use tl::panel_offset "
                                  "(signed division) instead of tl::panel_xor_offset (shifts, masks, one XOR).",
    "TL_DISABLE_PROXY_FENCE_REACH": "Ours. True: every barrier after a generic shared-memory write gets "
                                    "fence.proxy.async (else only writes of bytes the async proxy may touch: "
                                    "transform/cuda/proxy_fences.py).",
    "TL_DISABLE_BRANCH_BARRIERS": "Ours. True: shared-memory races inside a branch on one interval of threads "
                                  "(`if tx < 64:`) get no barrier of those threads, as before session 29 "
                                  "(transform/cuda/thread_sync.py).",
    "TL_DISABLE_SYNC_PASS_RANGES": "Ours. True: a loop whose passes touch one shared buffer gets a barrier at "
                                   "the end of its body even where consecutive passes touch disjoint elements "
                                   "(thread_sync.passes_apart).",
    "TL_DISABLE_TF32_EXACT_LOADS": "Ours. True: every load of a tfloat32 buffer rounds to tf32 (else buffers that "
                                   "only the kernel's own rounded stores write are read as they are).",
    "TL_DISABLE_PIPELINE_BARRIER_MERGE": "Ours. True: a cp.async pipeline's stage waits and refills keep barriers of "
                                         "their own (else a wait moves onto an earlier barrier and a refill after the "
                                         "next one where nothing between needs them).",
    "TL_DISABLE_BF16_PACK_CONVERT": "Ours. True: bf16 -> float conversions in CUDA code use __bfloat162float (else "
                                    "one `mov.b32 f, {0, x}`: a single byte permute for either half of a register).",
    "TL_DISABLE_PIPELINE_REFILL_SINK": "Ours. True: a cp.async stage refill keeps its own barrier after its tile's last "
                                       "reader (else it moves after the iteration's next barrier, issued later).",
    "TL_DISABLE_LDSM_LANE_OFFSETS": "Ours. True: an mma.sync gemm's ldmatrix reads of a swizzled K-contiguous tile "
                                    "compute tl::swizzle_offset per K slice (else 4 per-lane offsets plus an "
                                    "immediate per slice).",
    "TL_DISABLE_MMA_SPLIT_CHAINS": "Ours. True: an mma.sync gemm of at most 2 tiles per warp accumulates every K "
                                   "slice into C in order (else odd slices into a second accumulator set, added at "
                                   "the end: twice the independent mma chains).",
    "TL_DISABLE_SPLIT_GLOBAL_INDEX": "Ours. True (CUDA): a global tensor's last index is one 32-bit sum added to "
                                     "the 64-bit offset (else its terms are added one by one, so the constant "
                                     "parts of unrolled copies become immediate address offsets).",
    "TL_DISABLE_MANUAL_TMA_STORE": "Ours. True: in hand warp-specialized kernels a T.copy of a T.tma_copy target "
                                   "tile to a global box stays an element copy by the scope's threads (else TMA "
                                   "stores issued by its first thread: transform/cuda/manual_ws.py).",
    "TL_DISABLE_SWIZZLE_SPAN_OFFSET": "Ours. True: element accesses of swizzled gemm tiles index through "
                                      "tl::swizzle_offset (else tl::swizzle_span_offset, the same address with the "
                                      "XOR confined to an 8-chunk span: constant column parts become immediates).",
    "TL_DISABLE_SWIZZLE_ROW_SPLIT": "Ours. True (CUDA): a swizzled tile's row index stays whole inside the swizzle "
                                    "function (else its terms that are multiples of 8, warp and unrolled tile "
                                    "offsets, are added outside it: one per-lane address plus immediates).",
    "TL_DISABLE_POW2_FLOOR_SHIFT": "Ours. True (CUDA): a floor `//` / `%` by a power of two of an index whose sign "
                                   "the codegen cannot prove calls tl_floordiv_i32 / tl_floormod_i32 (else an "
                                   "arithmetic `>>` / a mask, exact for either sign).",
    "TL_DISABLE_LET_FLOOR_SPLIT": "Ours. True (CUDA): element-loop coordinate lets keep their floor divisions "
                                  "whole (else `(g * 1024 + tid * 8) // 128` is `g * 8 + tid // 16`: "
                                  "transform/cuda/let_floor_split.py).",
    "TL_DISABLE_ASSUME_TID_RANGE": "Ours. True (CUDA): the kernel does not state `0 <= tid < threads` to nvcc "
                                   "(else `__builtin_assume`: its divisions and remainders of the thread index "
                                   "and lets built on it need no sign fix-ups).",
    "TL_DISABLE_REPLICATED_INPUTS": "Ours. True: a small fragment only copied in from global memory and read "
                                    "across threads goes to shared memory (else every thread holds it whole).",
    "TL_DISABLE_COLUMN_ROWS_1D": "Ours. True: a 2-d fragment read as F[x, j] in a 1-d T.Parallel over j goes to "
                                 "shared memory (else it takes the loop's flat layout, row by row, in registers).",
    "TL_DISABLE_STAGING_SWIZZLE": "Ours. True: a shared tile an accumulator is copied into stays row-major "
                                  "(else swizzled: conflict-free pair stores).",
    "TL_DISABLE_ATOMIC_RUNS": "Ours. True: 2 or 4 adjacent float32 atomic adds (T.atomic_addx4) stay one "
                              "atomicAdd each (else one red.global.add.v2/v4.f32, transform/cuda/atomic_runs.py).",
    "TL_DISABLE_ATOMIC_VECTOR_SOURCE": "Ours. True: a vector reduction from a shared tile (T.atomic_add(dK[..], "
                                       "dk_shared)) reads its 2 or 4 values one element each (else as one 8- or "
                                       "16-byte vector, transform/cuda/atomic_runs.py).",
    "TL_DISABLE_UNIT_GRID_FOLD": "Ours. True: CUDA kernels read blockIdx of grid dimensions of extent 1 "
                                 "(else those block indices are the constant 0, transform/cuda/unit_grid.py).",
    "TL_DISABLE_SLICE_PAIR_STORES": "Ours. True: a T.Parallel storing row chunks of an accumulator into a shared "
                                    "tile stores element by element (else column pairs, tl_store2, which "
                                    "staging_swizzle may then swizzle).",
    "TL_DISABLE_FRAGMENT_SLICE_OFFSETS": "Ours. True: a T.Parallel reading a register tile at a sub-block offset an "
                                         "enclosing loop moves (x[i, jj * 4 + j]) puts that tile in shared memory "
                                         "(else it stays in registers when the slice's owners do not move, "
                                         "transform/cuda/offset_slices.py).",
    "TL_DISABLE_MMA_REGISTER_A": "Ours. True: a tf32 mma.sync T.gemm whose A is a fragment reads A through shared "
                                 "memory (tl::gemm_ss; else from registers in the mma A layout, tl::gemm_rs).",
    "TL_DISABLE_MMA_REGISTER_A16": "Ours. True: a 16-bit mma.sync T.gemm whose A fragment is laid out as an "
                                   "accumulator of its rows (attention's P, a cast copy of S) reads A through shared "
                                   "memory (tl::gemm_ss; else from those registers, tl::gemm_rs).",
    "TL_DISABLE_WGMMA_INFLIGHT": "Ours. True: a cp.async-pipelined loop's wgmma gemm waits for its own batch "
                                 "and the loop refills a stage before its wait (else the batch stays in flight "
                                 "while the next loads are issued, transform/cuda/wgmma_inflight.py).",
    "TL_DISABLE_SINGLE_STAGE_PIPELINE": "Ours. True: a T.Pipelined(num_stages=1) loop on sm_90 runs unpipelined "
                                        "(else, where its staged tiles have two first readers or more, each tile's "
                                        "load for the next iteration is issued right after its last reader).",
    "TL_DISABLE_WS_FRAGMENT_GUARD": "Ours. True: a T.Pipelined body under `if frag[k]:` (a fragment filled by a "
                                    "T.copy from global before the loop, block-sparse attention's mask) keeps the "
                                    "cp.async pipeline (else it is warp-specialized, the producer reading the global "
                                    "elements; transform/cuda/ws_guard.py).",
    "TL_DISABLE_WGMMA_ROWS_OUTER": "Ours. True: a register-A wgmma gemm (tl::gemm_rs_sm90) with several 64-row "
                                   "blocks a warpgroup issues k-steps outermost, alternating the blocks (else "
                                   "each block's k-steps in turn: fewer spills where registers are short).",
    "TL_DISABLE_WGMMA_CLEAR_UNDEF": "Ours. True: a wgmma gemm that clears its accumulator (scale-d = 0) keeps the old "
                                    "register values live up to it (else they are dead before the batch: a loop's "
                                    "previous S no longer spans the iteration; tl::undef_accumulator).",
    "TL_DISABLE_ROW_BLOCK_FISSION": "Ours. True: a loop body of wgmma gemms with several 64-row blocks per warpgroup "
                                    "runs as written (else row block by row block, each gemm split per block: "
                                    "attention keeps half of S live; transform/cuda/row_block_fission.py).",
    "TL_DISABLE_TMA_STORE_REUSE": "Ours. True: a warp-specialized kernel's TMA-store staging tile keeps bytes of its "
                                  "own (else, one tile per block, it shares those of tiles dead before the epilogue, "
                                  "transform/cuda/plan_smem.py).",
    "TL_DISABLE_FOLD_STAGED_STORE": "Ours. True: a warp-specialized kernel's own output staging (T.copy(acc, O_s); "
                                    "T.copy(O_s, O[...])) stays as written (else it becomes the TMA-store epilogue, "
                                    "transform/cuda/ws_epilogue.fold_staged_store).",
    "TL_DISABLE_STMATRIX_STORE": "Ours. True: on sm_90, T.copy of an mma/wgmma accumulator tile into a 16-bit "
                                 "shared tile stores column pairs (4-byte stores) (else stmatrix.x4, one per "
                                 "two 16x8 atoms, transform/cuda/stmatrix.py).",
    "TL_DISABLE_TMA_DESCRIPTOR_PREFETCH": "Ours. True: a kernel with TMA tensor maps (warp-specialized, or "
                                          "T.tma_copy) does not prefetch them (prefetch.tensormap by thread 0 "
                                          "at its start, transform/cuda/tma_prefetch.py).",
    "TL_DISABLE_BARRIER_INIT_MERGE": "Ours. True: each T.alloc_barrier gets its own initialisation block and "
                                     "__syncthreads (else one for a run of consecutive allocations, "
                                     "transform/cuda/manual_ws.py).",
    "TL_DISABLE_MBARRIER_SUSPEND_HINT": "Ours. True: tl::mbarrier_wait probes again at once after a failed "
                                        "try_wait (else a suspend-time hint: the warp sleeps until the "
                                        "barrier changes; include/tl/mbarrier.h TL_MBAR_SUSPEND_HINT).",
    "TL_DISABLE_SHARED_INDEX_SPLIT": "Ours. True: shared-memory indices keep the divisions of a flat element "
                                     "counter (`(i*1024 + tx*4) // 64`) as written (else the multiples of the "
                                     "divisor are pulled out and a plain tile is indexed by its flat offset, "
                                     "transform/cuda/shared_index_split.py).",
    "TL_DISABLE_CP_ASYNC_GROUP_FENCES": "Ours. True: every cp.async wait of a wgmma kernel is followed by a proxy "
                                        "fence when any cp.async target is async-reachable (else only a wait whose "
                                        "drained groups hold such a tile, transform/cuda/cp_async_groups.py).",
    "TL_DISABLE_MMA_SYNC_GENERIC_REACH": "Ours. True: a shared tile that only mma.sync gemms and stmatrix stores "
                                         "name counts as reachable by the async proxy, so barriers after its writes "
                                         "get fence.proxy.async (else it is generic-only, transform/cuda/proxy_fences.py).",
    "TL_DISABLE_PROXY_FENCE_BYTEWISE_REACH": "Ours. True: a tile sharing bytes with an async-reachable tile is reachable "
                                             "transitively (a packed-B ring under the output tile that also covers a "
                                             "wgmma operand), and a plain tl::copy_vecN names its tile as inline code "
                                             "(else only bytes a named tile covers count and copy_vecN is generic-only; "
                                             "the bf16 fp4 dequant GEMM loses one fence per k-step, "
                                             "transform/cuda/proxy_fences.py).",
    "TL_DISABLE_SHARED_LOAD_BATCH": "Ours. True: a short loop that loads one shared tile and stores into another "
                                    "issues each iteration's shared loads in turn, each behind the previous "
                                    "iteration's stores (else all its loads go first, into registers, "
                                    "transform/cuda/shared_load_batch.py).",
    "TL_DISABLE_REGISTER_PREFETCH": "Ours. True (CUDA): a synchronous global -> shared element copy in a cp.async "
                                    "pipeline loads at the top of its iteration (else its elements are read into "
                                    "registers one iteration ahead, transform/cuda/register_prefetch.py).",
    "TL_DISABLE_PROLOGUE_JOIN_PAST_REGISTERS": "Ours. True (CUDA): a T.copy before a pipelined loop joins the "
                                               "loop's prologue only when nothing runs between them (else also "
                                               "across fills of register tiles: Q's load no longer waits for "
                                               "itself, transform/cuda/software_pipeline.py join_prologues).",
    "TL_DISABLE_LET_FLOOR_THROUGH_LETS": "Ours. True (CUDA): a let dividing an earlier let (`i = e // 128`, `e = g * "
                                         "1024 + tid * 8`) keeps the division (else it is split as if the sum were "
                                         "written out on wgmma kernels: `i = g * 8 + tid // 16`, transform/cuda/let_floor_split.py).",
    "TL_DISABLE_OWN_LINE_REDUCE": "Ours. True (CUDA): a T.reduce of a flat register tile goes through a shared "
                                  "copy (else, where each thread holds the whole reduced line of every result it "
                                  "holds, it folds in registers: transform/cuda/ops/reduce.py own_lines).",
    "TL_DISABLE_TMA_IM2COL": "Ours. True: a T.Pipelined loop with T.im2col keeps the cp.async pipeline (else the "
                             "warp-specialized producer loads the tile through an im2col-mode TMA tensor map, "
                             "transform/cuda/ws_im2col.py).",
    "TL_ENABLE_TMA_IM2COL_SMALL_TILES": "Ours. True: the TMA im2col producer also takes convolutions whose "
                                        "accumulator is under 64 elements per thread (those keep the cp.async "
                                        "pipeline by default, several blocks per SM; ws_im2col.small_tile).",
    "TL_DISABLE_WS_MMA_SYNC": "Ours. True: a T.Pipelined loop whose gemm takes mma.sync on sm_90 (tf32) keeps the "
                              "cp.async pipeline (else the warp-specialized TMA producer streams its tiles, fp32 "
                              "rows longer than 128 bytes as 32-column panels; gemm_paths.mma_ws_ok).",
    "TL_DEBUG_TIMELINE": "Ours. True: persistent kernels record per-tile timestamps (kernel.timeline()).",
    "TL_DISABLE_SMEM_REUSE": "Ours; the same as TL_DISABLE_SHARED_MEMORY_REUSE.",
    "TL_DISABLE_COPY_HOIST_PAST_MMA": "Ours. True: a cp.async T.copy outside a pipeline is not moved up past "
                                      "mma.sync gemms and ldmatrix / stmatrix calls (else it is, where they touch "
                                      "none of what it writes: attention's V load joins its K load, "
                                      "cp_async_waits.py).",
    "TL_DISABLE_PIPELINE_TAIL_PEEL": "Ours. True: an issue-first cp.async pipeline (sm_90) of a constant trip "
                                     "count guards its refill with `if (ko + S - 1 < n)` in every iteration "
                                     "(else its last S - 1 iterations run after the loop without refills: "
                                     "software_pipeline.py, _Pipeline.peeled).",
    "TL_DISABLE_STAGE_SMEM_REUSE": "Ours. True: a cp.async pipeline's stage storage keeps its own shared memory "
                                   "for the whole kernel (else tiles used after the loop's drain, "
                                   "`cp_async_wait<0>(); __syncthreads();`, may take its bytes: plan_smem.py).",
    "TL_DISABLE_DYNAMIC_ALIGNMENT": "Ours. True: CUDA kernels with T.dynamic row lengths are compiled for any "
                                    "length, not as 16-byte multiples checked per call (jit/aligned_dims.py).",
    "TL_DISABLE_LAUNCH_KERNEL_EX": "Ours. True: CUDA launches call cuLaunchKernel as before (the fast path: 11 "
                                   "untyped ctypes arguments; other launches: the typed, GIL-releasing call) "
                                   "rather than cuLaunchKernelEx with 4 prebuilt arguments (a launch config, the "
                                   "function, kernelParams, NULL; driver.PreparedLaunch, CudaFunction.launch).",
    "TL_DISABLE_LEAN_LAUNCHER": "Ours. True: a static-shape all-pointer CUDA kernel's generated per-call launcher "
                                "is the first form (jit/fast_call.py FastCall.first_source: an argument tuple "
                                "unpacked, `.device` compared, every slot written) rather than the lean one "
                                "(FastCall.lean_source: positional-only inputs, one `is_cuda` read as the device "
                                "check where the process sees one GPU, slots written only when their pointer "
                                "changes). Same checks and errors; host time per call only.",
    "TL_DISABLE_CP_ASYNC_SHARED_OFFSET": "Ours. True: T.ptx_cp_async passes its shared destination as a generic "
                                         "pointer (&tile[i]) rather than the tile's 32-bit shared address plus a "
                                         "byte offset (transform/cuda/lower_async.py), with which ptxas folds each "
                                         "copy's constant offset into the instruction.",
    "TL_DISABLE_SHARED_ADDRESS_SLOTS": "Ours. True (CUDA): ldmatrix sources (T.ptx_ldmatrix, TensorCoreIntrinEmitter) "
                                       "and the shared destinations of a tile copy's cp.async take generic pointers "
                                       "(&tile[i]), and an unrolled copy's destination index is its per-element "
                                       "let variables. Else each is tl::smem_addr(tile) plus 32-bit byte terms "
                                       "(codegen/cuda.py shared_address; the copy's unrolled rows outside the "
                                       "swizzle), whose unrolled constants ptxas folds into immediate offsets.",
    "TL_DISABLE_PACKED_COLUMN_READS": "Ours. True (CUDA): a fragment read as P[i, j // k] in a T.Parallel (a "
                                      "dequantizing loop's packed bytes) goes to shared memory, as before. Else, "
                                      "when the loop's driver gives each thread runs of k columns (an accumulator's "
                                      "column pairs, flat vectors), P stays in registers, one slot a run "
                                      "(transform/cuda/packed_columns.py).",
    "TL_DISABLE_WGMMA_POLICY": "Ours. True (sm_90a): a wgmma T.gemm's warpgroups split the tile the squarest way "
                               "whatever its policy, as before. Else policy=FullRow puts every warpgroup along M "
                               "and FullCol along N (transform/cuda/gemm_paths.wgmma_policy_grid), as mma.sync's "
                               "warps do; where the shape does not allow it (64 rows a warpgroup, a wgmma width of "
                               "columns) the squarest split stays, with a PerformanceWarning saying why.",
    "TL_DISABLE_SPLIT_SEGMENT_REDUCE": "Ours. True (CUDA): T.reduce over the last dim of a (rows, Q, H) reshape of "
                                       "an mma/wgmma accumulator whose columns are split over warps or warpgroups "
                                       "goes through a shared-memory copy, as before. Else, where each group's "
                                       "columns are whole segments of H, each thread folds its group's segments "
                                       "and its quad in registers (layout/fragment.py segment_rows, ops/reduce.py "
                                       "segment_reduce).",
    "TL_DISABLE_NARROW_DIM_CHECKS": "Ours. True (CUDA): a bound check of an int32 index against an int32 T.dynamic "
                                    "size (i < n, i <= n, min(i, n)) compares in 64 bits, as C promotes the "
                                    "int64_t kernel argument. Else against int32 constants min(n - 1, INT32_MAX) / "
                                    "min(n, INT32_MAX) set once at kernel entry (codegen/cuda.narrow_dims): the "
                                    "same result for every n, a 32-bit compare.",
    "TL_DISABLE_ROW_STORE_HOIST": "Ours. True (CUDA): a T.Parallel over a row fragment's rows (kept on every lane "
                                  "of a quad) tests the storing copy at each store, inside its bounds check, as "
                                  "before. Else, where the body only stores and the storing copy is the same "
                                  "thread for every slot, one test wraps the unrolled slot loop "
                                  "(transform/cuda/row_copies.row_loop): ptxas predicates the stores off one "
                                  "address instead of a branch region per store.",
    "TL_DISABLE_REDUCE_TREE": "Ours. True (CUDA): T.reduce over the rows of an mma/wgmma accumulator folds each "
                              "thread's columns of a row in one serial chain, as before. Else, with at least 16 "
                              "columns a thread, in 4 independent partial chains joined pairwise, all row slots "
                              "interleaved (ops/reduce.tree_fold): attention's row max over 128 columns is 8 + 2 "
                              "dependent FMNMX instead of 31 (max / min exact; a sum's terms in another order).",
    "TL_DISABLE_WGMMA_WAIT_HOLD": "Ours. True: with tl.enable_ws_overlap, the wait for the output gemm is a plain "
                                  "tl::warpgroup_wait<0>, which ptxas hoists ~35 instructions after P @ V's issue "
                                  "(the softmax then waits for the gemm). Else tl::warpgroup_wait_held: a never-taken "
                                  "branch before the wait keeps it after the softmax (ws_overlap.py).",
    "TL_DISABLE_BARRIER_ID_REMAP": "Ours. True (CUDA): the compiler's named barriers keep their default ids "
                                   "(warp-specialized consumers 1, ping-pong turns 2.., T.ws / thread-index branches "
                                   "1 + index, ...) even where the program's own T.sync_threads(id, count) / "
                                   "T.named_barrier_arrive use one of them, and such a kernel is a LoweringError. "
                                   "Else the compiler's ids move to ids the program does not use "
                                   "(transform/cuda/barrier_ids.py); kernels without such calls are unchanged.",
    "TL_ENABLE_WS_DEAD_ROWS": "Ours. True (sm_90a): a consumer warpgroup of a ping-pong attention loop whose rows "
                              "all land past the end of the tensors the epilogue writes (the last query block when "
                              "seq_len is not a multiple of block_M) only waits for, releases and passes on each "
                              "stage (transform/cuda/ws_dead_rows.py). Off by default: no gain measured (H100, "
                              "2026-12-06, D64 causal 192x128, 7 interleaved rounds: 367.7 on, 369.1 off).",
    "TL_DISABLE_WS_WG_EPILOGUE": "Ours. True (sm_90a): a warp-specialized kernel's TMA-store epilogue is staged by "
                                 "all consumer threads between two barriers across the consumer warpgroups, thread 0 "
                                 "waiting for and issuing the stores, as before. Else, where each of 2+ consumer "
                                 "warpgroups owns 64 whole rows of the output tile (attention's 128-row tile), each "
                                 "warpgroup waits for its own last stores' reads, stages its rows and issues their "
                                 "TMA store itself behind named barriers of its 128 threads (ws_epilogue.wg_chunk): "
                                 "no barrier across warpgroups at a persistent tile's end.",
    "TL_DISABLE_WGMMA_POLICY_COST": "Ours. True (sm_90a): a wgmma T.gemm takes its GemmWarpPolicy's warpgroup grid "
                                    "whenever the shape allows it, as before. Else FullCol's grid only where it "
                                    "costs no more than the squarest split: first fewer reductions of the "
                                    "accumulator whose lines cross warpgroups (shared memory and a barrier each "
                                    "time), then fewer rows + columns a warpgroup (shared-memory operand bytes a "
                                    "k-step; transform/cuda/gemm_paths.grid_cost); FullRow's always. FullCol over "
                                    "a 256 x 128 fp8 tile at 512 threads (the lighting indexer, pool_mqa_fp8) keeps "
                                    "4 x 1 m64n128 warpgroups instead of 1 x 4 m64n32 ones.",
    "TL_FRESH_COPY_INDEX": "Ours. True: tile-level copy loops of CUDA kernels read the thread index afresh, so "
                           "ptxas does not keep their addresses live across the k-loop "
                           "(transform/cuda/fresh_index.py). False: never. Unset: a kernel that spills is recompiled "
                           "with it, and the build that spills less is kept.",
    "TL_WS_PRODUCER_REGS": "Ours. An int (a multiple of 8, 24..256): the registers a thread the producer warpgroup of "
                           "a warp-specialized kernel keeps (setmaxnreg.dec); the consumers get the rest of the "
                           "block's pool (transform/cuda/warp_specialize.consumer_registers). Unset: 24 (consumers "
                           "240 with one or two warpgroups, 160 with three, 112 with four), and a kernel that then "
                           "spills, or loses setmaxnreg, is built again at 40 and the better build is kept.",
}

for _m in PassConfigKey:
    _m.__doc__ = _DOCS[_m.name]
del _m

# Keys that mean the same thing: looking one up finds a value given under the other.
_ALIASES = {
    "tl.disable_shared_memory_reuse": ("tl.disable_smem_reuse",),
    "tl.disable_smem_reuse": ("tl.disable_shared_memory_reuse",),
    "tirx.disable_vectorize": ("tir.disable_vectorize",),
}


def _text(key) -> str:
    return key.value if isinstance(key, PassConfigKey) else key


def get(configs: dict, key, default=None):
    """Look a key up by enum member or by its string value (or an alias of it)."""
    if not configs:
        return default
    wanted = (_text(key), *_ALIASES.get(_text(key), ()))
    for ck, v in configs.items():
        if _text(ck) in wanted:
            return v
    return default


def with_overrides(configs: dict, overrides: dict) -> dict:
    """A copy of `configs` (keys as strings) with `overrides` put over it, aliases included
    (TILELANG_PASS_CONFIGS for A/B runs). An override key that is no pass config is an error."""
    from ..errors import TileLangError

    known = {m.value for m in PassConfigKey}
    out = {_text(k): v for k, v in configs.items()}
    for key, value in overrides.items():
        if key not in known:
            raise TileLangError(f"TILELANG_PASS_CONFIGS: {key!r} is not a pass config (see "
                                f"tilelang.transform.pass_config.describe() for the keys)")
        for name in (key, *_ALIASES.get(key, ())):
            out.pop(name, None)
        out[key] = value
    return out


def merge_device_flags(configs: dict, flags) -> dict:
    """A copy of `configs` whose tl.device_compile_flags also hold `flags` (jit's compile_flags=)."""
    import shlex

    if not flags:
        return dict(configs)
    as_list = lambda f: shlex.split(f) if isinstance(f, str) else [str(x) for x in f]  # noqa: E731
    have = get(configs, PassConfigKey.TL_DEVICE_COMPILE_FLAGS, None)
    out = {_text(k): v for k, v in configs.items()}
    out[PassConfigKey.TL_DEVICE_COMPILE_FLAGS.value] = (as_list(have) if have else []) + as_list(flags)
    return out


def describe() -> str:
    """A table of every key, its string and its effect here."""
    return "\n".join(f"{m.name} = {m.value!r}\n    {m.__doc__}" for m in PassConfigKey)
