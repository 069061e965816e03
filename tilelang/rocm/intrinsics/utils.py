"""Helpers named as the public TileLang names them for AMD MFMA code: accumulator store maps and
the micro tile size."""
from __future__ import annotations

from .mfma_layout import (thread_id_shared_access_64x4_to_16x16_layout_C_n_m,
                          thread_id_shared_access_64x16_to_32x32_layout_C_m_n)

__all__ = ["mfma_store_index_map", "mfma_store_index_map_32x32", "get_mma_micro_size"]


def mfma_store_index_map(thread_id, local_id):
    """(row, col) in a 16x16 accumulator tile of value `local_id` (0..3) of lane `thread_id` (0..63)."""
    return thread_id_shared_access_64x4_to_16x16_layout_C_n_m(thread_id, local_id)


def mfma_store_index_map_32x32(thread_id, local_id):
    """(row, col) in a 32x32 accumulator tile of value `local_id` (0..15) of lane `thread_id`."""
    return thread_id_shared_access_64x16_to_32x32_layout_C_m_n(thread_id, local_id)


def get_mma_micro_size(dtype):
    """(x, y, k) of one MFMA micro tile: 16 x 16, k = 32 for 8-bit inputs, else 16."""
    k = 32 if str(dtype) in ("float8_e4m3", "float8_e5m2", "int8") else 16
    return 16, 16, k
