"""Layouts: index maps for shared/global tiles (`Layout`) and thread/register maps for
register tiles (`Fragment`), with swizzles and tensor-core fragment layouts."""
from .bank_swizzle import (  # noqa: F401
    make_full_bank_swizzled_layout,
    make_half_bank_swizzled_layout,
    make_quarter_bank_swizzled_layout,
    make_wgmma_swizzled_layout,
)
from .fixed_layouts import (  # noqa: F401
    make_fully_replicated_layout_fragment,
    make_gemm_fragment_8x8,
    make_gemm_fragment_8x8_transposed,
    make_linear_layout,
)
from .fragment_layout import Fragment  # noqa: F401
from .layout import Layout  # noqa: F401
from .swizzle import make_swizzled_layout  # noqa: F401
