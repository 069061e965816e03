"""T.use_swizzle's block order, shared by the codegen (one block per tile) and persistent kernels.

Linear block index `lin` on a gx x gy grid walks panels of `panel` grid rows: down a panel's
rows first, then to the next column, so the blocks running at once share the panel's A rows
and a few B columns in L2. The last panel may be shorter.

    gx = 3, gy = 4, panel = 2:   lin  0 1 2 3 4 5 | 6 7 8 9 10 11
                                 bx   0 0 1 1 2 2 | 0 0 1 1 2  2
                                 by   0 1 0 1 0 1 | 2 3 2 3 2  3
"""
from __future__ import annotations

from ...ir import expr as E


def panel_raster(lin, gx, gy, panel: int):
    """(bx, by) expressions of block `lin` (all operands >= 0)."""
    pan = lin // (gx * panel)
    inn = lin % (gx * panel)
    rows = E.binop("min", E.as_expr(panel), gy - pan * panel)
    return inn // rows, pan * panel + inn % rows


def panel_rank(bx, by, gx, gy, panel: int):
    """The launch-order index of the block `panel_raster` puts at (bx, by): its inverse."""
    pan = by // panel
    return pan * (gx * panel) + bx * E.binop("min", E.as_expr(panel), gy - pan * panel) + by % panel
