"""2:4 structured-sparse metadata: kept values per group, and how many A elements one metadata
element describes (T.gemm_sp's row-major metadata, see tilelang/op/gemm_sp.py)."""
from __future__ import annotations

from ... import dtypes as dt

# A dtype -> (kept values, group size)
GROUP_CONFIG = {dt.float32: (1, 2), dt.float16: (2, 4), dt.bfloat16: (2, 4), dt.int8: (2, 4), dt.uint8: (2, 4),
                dt.float8_e4m3fn: (2, 4), dt.float8_e5m2: (2, 4)}

_BITS_PER_GROUP = 4  # one 4-bit field of metadata per group


def get_e_factor(a_dtype, meta_dtype) -> int:
    """How many a_dtype elements (of the dense K) one meta_dtype element describes."""
    _, group = GROUP_CONFIG[dt.as_dtype(str(a_dtype))]
    return dt.as_dtype(str(meta_dtype)).bits // _BITS_PER_GROUP * group


def get_e_replicate_factor(a_dtype) -> int:
    """How many consecutive lanes of an mma.sp share one metadata value (1 for 8-bit A, else 2)."""
    return 1 if dt.as_dtype(str(a_dtype)).bits <= 8 else 2
