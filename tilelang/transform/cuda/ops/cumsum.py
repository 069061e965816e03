"""CUDA lowering of T.cumsum / T.cummax (O.CumSum).

Takes: a CumSum along one dim of a tile. Gives: the serial scan of every other-dims position
(`cumsum_scan`, shared with the CPU backend), the positions spread over the block's threads.
"""
from __future__ import annotations

from ....op import tile_ops as O
from ....op.registry import register_lowering
from ...lower_tile_ops_cpu import cumsum_scan


@register_lowering("cuda", O.CumSum)
def lower_cumsum(low, op: O.CumSum):
    keep = [s for d, s in enumerate(op.scan_extents()) if d != op.dim]
    return low.flat_loop(tuple(keep) if keep else (1,), lambda cv: cumsum_scan(op, cv if keep else []))
