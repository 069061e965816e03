"""Tensor-core building blocks written per warp: lane maps of mma.sync / ldmatrix fragments,
shared-memory swizzles that suit them, and `TensorCoreIntrinEmitter`, which writes
ldmatrix + mma.sync code for a GEMM tile held in per-thread `T.alloc_local` arrays."""
from .layout.mma_layout import get_swizzle_layout, make_mma_swizzle_layout  # noqa: F401
from .layout.utils import get_ldmatrix_offset, get_mma_micro_size, mma_store_index_map  # noqa: F401
from .macro.mma_macro_generator import TensorCoreIntrinEmitter  # noqa: F401
