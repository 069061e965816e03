"""Lane maps of the mma.sync / ldmatrix fragments and the swizzles of their shared tiles."""
from .mma_layout import get_swizzle_layout, make_mma_swizzle_layout  # noqa: F401
from .utils import get_ldmatrix_offset, get_mma_micro_size, mma_store_index_map  # noqa: F401
