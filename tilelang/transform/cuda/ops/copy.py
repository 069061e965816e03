"""CUDA lowering of T.copy (O.Copy): the dispatch between the per-thread copy and the block copy.

Takes: a Copy. Gives: for a copy into or out of a T.alloc_local array (neither side a fragment),
every thread copying the whole tile on its own (each thread owns a whole copy of a local array),
as an unrolled element loop with the out-of-range rules of T.copy (reads outside a global
tensor give 0, writes outside it are dropped); every other copy goes to the pass's block copy
(lower_copy.py's CopyLowering.copy_tile: 16-byte vectors / cp.async, ldmatrix, paired stores).

    T.copy(A[0:4], q)  (q: T.alloc_local((4,)))   ->   for i in unroll(4): q[i] = A[i]
"""
from __future__ import annotations

from ....ir import expr as E
from ....ir import stmt as S
from ....op import tile_ops as O
from ....op.regions import squeezed
from ....op.registry import register_lowering
from ...lower_tile_ops_cpu import in_bounds, region_indices
from .base import is_local


def per_thread_copy(low, op: O.Copy):
    """Every thread runs the whole copy, element by element (see the module docstring)."""
    def make(cv):
        si, di = region_indices(op.src, cv), region_indices(op.dst, cv)
        val = E.cast(op.dst.buffer.dtype, E.BufferLoad(op.src.buffer, si, op.src.buffer.dtype))
        ok_src = in_bounds(op.src, si, low.ranges)
        if ok_src is not True:
            val = E.select(ok_src, val, E.const(0, op.dst.buffer.dtype))
        st = S.BufferStore(op.dst.buffer, di, val, span=op.span)
        ok_dst = in_bounds(op.dst, di, low.ranges)
        return st if ok_dst is True else S.IfThenElse(ok_dst, st, span=op.span)
    return low.per_thread_loop(squeezed(op.dst.extents), make)


@register_lowering("cuda", O.Copy)
def lower_copy(low, op: O.Copy):
    scopes = (op.src.buffer.scope, op.dst.buffer.scope)
    if (is_local(op.src.buffer) or is_local(op.dst.buffer)) and "fragment" not in scopes:
        return per_thread_copy(low, op)
    return low.copy_tile(op)
