"""CUDA lowering of T.fill / T.clear (O.Fill).

Takes: a Fill of any tile. Gives: per-thread element stores through the pass's `elementwise`
helper: a register fragment's slot loop, every element on every thread for a T.alloc_local
array (each thread owns a whole copy), or the elements spread over the block's threads for
shared and global tiles (global ones guarded against out-of-range writes).

    T.clear(acc)      (acc: T.alloc_local((4,)))    ->   for i in unroll(4): acc[i] = 0
"""
from __future__ import annotations

from ....ir import stmt as S
from ....op import tile_ops as O
from ....op.registry import register_lowering
from ...lower_tile_ops_cpu import in_bounds, region_indices


@register_lowering("cuda", O.Fill)
def lower_fill(low, op: O.Fill):
    def make(cv, reg_ref):
        if reg_ref is not None:
            return S.BufferStore(reg_ref.buffer, reg_ref.indices, op.value)
        di = region_indices(op.dst, cv)
        st = S.BufferStore(op.dst.buffer, di, op.value)
        ok = in_bounds(op.dst, di, low.ranges)
        return st if ok is True else S.IfThenElse(ok, st)
    return low.elementwise(op.dst, make)
