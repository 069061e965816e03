"""Pass-config keys, named as in the public TileLang so existing code keeps working."""
from __future__ import annotations

from enum import Enum


class PassConfigKey(str, Enum):
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_DISABLE_FAST_MATH = "tl.disable_fast_math"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    TL_DISABLE_VECTORIZE_256 = "tl.disable_vectorize_256"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    TL_DISABLE_DYNAMIC_TAIL_SPLIT = "tl.disable_dynamic_tail_split"
    TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS = "tl.debug_merge_shared_memory_allocations"
    TIR_DISABLE_VECTORIZE = "tir.disable_vectorize"
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_ENABLE_PTXAS_VERBOSE_OUTPUT = "tl.enable_ptxas_verbose_output"
    TL_DISABLE_WGMMA = "tl.disable_wgmma"  # ours: keep sm_90a gemms on the mma.sync path
    TL_ENABLE_ROW_FRAGMENTS = "tl.enable_row_fragments"  # ours: per-row accumulator values in registers (default on)
    TL_DISABLE_PERSISTENT = "tl.disable_persistent"  # ours: warp-specialized kernels keep one block per tile
    TL_ENABLE_CLUSTER = "tl.enable_cluster"  # ours: persistent kernels run as 2-block clusters with TMA multicast
    TL_DISABLE_STREAM_K = "tl.disable_stream_k"  # ours: persistent GEMMs keep whole tiles in the last wave
    TL_DISABLE_K_SERPENTINE = "tl.disable_k_serpentine"  # ours: persistent GEMMs walk k forward on every tile
    TL_DISABLE_DEFERRED_EPILOGUE = "tl.disable_deferred_epilogue"  # ours: persistent GEMMs store C between k-loops
    TL_DISABLE_STAGED_EPILOGUE = "tl.disable_staged_epilogue"  # ours: cp.async kernels store C from registers
    TL_DEBUG_TIMELINE = "tl.debug_timeline"  # ours: persistent kernels record per-tile timestamps (kernel.timeline())
    TL_DISABLE_SMEM_REUSE = "tl.disable_smem_reuse"  # ours: every shared buffer keeps its own bytes


def get(configs: dict, key, default=None):
    """Look a key up by enum member or by its string value."""
    if not configs:
        return default
    k = key.value if isinstance(key, PassConfigKey) else key
    for ck, v in configs.items():
        if (ck.value if isinstance(ck, PassConfigKey) else ck) == k:
            return v
    return default
