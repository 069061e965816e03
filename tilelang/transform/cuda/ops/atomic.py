"""CUDA lowering of the tile atomics T.atomic_add / max / min over a region (O.AtomicTile).

Takes: an AtomicTile (a region of equal shape or a scalar as its source). Gives: one
atomic_<kind>(dst[...], value) call per element (guarded against out-of-range global elements),
the elements following a register source's layout (one of a row fragment's copies adds; an
mma/wgmma accumulator's column pairs as one 8-byte float32 reduction) or spread over the block's threads
(float32 rows 2 or 4 elements a thread: 8- or 16-byte reductions; vectorize.atomic_vector_loop); a
single-element atomic runs on thread 0 only, except inside a T.Parallel body where each
iteration is already one thread's.
"""
from __future__ import annotations

from ....ir import expr as E
from ....ir import stmt as S
from ....ir.buffer import BufferRegion
from ....op import tile_ops as O
from ....op.regions import squeezed, tile_coords
from ....op.registry import register_lowering
from ...lower_tile_ops_cpu import in_bounds, region_indices


@register_lowering("cuda", O.AtomicTile)
def lower_atomic_tile(low, op: O.AtomicTile):
    sreg = low.reg(op.src.buffer) if isinstance(op.src, BufferRegion) else None

    def make(cv, reg_ref):
        di = region_indices(op.dst, cv)
        if isinstance(op.src, BufferRegion):
            v = sreg[reg_ref.indices] if sreg is not None else \
                E.BufferLoad(op.src.buffer, region_indices(op.src, cv), op.src.buffer.dtype)
            v = E.cast(op.dst.buffer.dtype, v)
        else:
            v = op.src
        target = E.BufferLoad(op.dst.buffer, di, op.dst.buffer.dtype)
        st = S.Evaluate(E.Call("atomic_" + op.kind, (target, v), op.dst.buffer.dtype))
        ok = in_bounds(op.dst, di, low.ranges)
        return st if ok is True else S.IfThenElse(ok, st)

    if isinstance(op.src, BufferRegion) and sreg is not None:
        lay = low.plan.layout(op.src.buffer)
        return low.owned_loop(lay, lambda l, cv: make(tile_coords(op.src, cv), sreg[l]), vector="quiet")
    ext = squeezed(op.dst.extents)
    if not ext:
        if low.per_thread:  # one element per iteration of a T.Parallel body: every thread's own
            return make([], None)
        return S.IfThenElse(E.binop("==", low.tid, 0), make([], None))
    return low.flat_loop(ext, lambda cv: make(cv, None), vector="quiet")
