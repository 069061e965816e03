"""Layouts: index maps for shared/global tiles (`Layout`) and thread/register maps for
register tiles (`Fragment`), with swizzles and tensor-core fragment layouts."""
from .layout import Layout  # noqa: F401
from .fragment_layout import Fragment  # noqa: F401
from .swizzle import make_swizzled_layout  # noqa: F401
from .bank_swizzle import (  # noqa: F401
    make_full_bank_swizzled_layout, make_half_bank_swizzled_layout, make_quarter_bank_swizzled_layout)
