"""CUDA lowering of T.finalize_reducer (O.FinalizeReducer).

Takes: the finalize of a T.alloc_reducer tile. Gives, for a reducer kept in registers as a
LaneRowFragment (per-thread partials of the rows a flat loop deals to L threads each): per row
slot, an xor-shuffle all-reduce over the min(L, 32) lanes of the row in its warp; where a row
spans W = L / 32 > 1 warps, lane 0 of each warp stores its partial to a small shared scratch
`<r>_fin<n>[rows, W]` and, after a barrier (thread_sync), every copy folds the W partials in
warp order, so all copies agree bit for bit. A reducer in registers with one owner per element
needs nothing; one kept in shared memory was updated with atomics: the barrier thread_sync puts
before its next read is the whole finalize.

    T.finalize_reducer(r)   (r: 128 rows, 16 lanes a row)   ->   r[s] = tl_lanes_allreduce_sum(r[s], 16)  (s < 8)
"""
from __future__ import annotations

from ....ir import expr as E
from ....ir import stmt as S
from ....ir.buffer import Buffer
from ....layout.fragment import LaneRowFragment
from ....op import tile_ops as O
from ....op.registry import register_lowering

_COMB = {"sum": lambda x, y: x + y, "max": lambda x, y: E.call("max", x, y),
         "min": lambda x, y: E.call("min", x, y), "bitand": lambda x, y: x & y,
         "bitor": lambda x, y: x | y, "bitxor": lambda x, y: x ^ y}


@register_lowering("cuda", O.FinalizeReducer)
def lower_finalize_reducer(low, op: O.FinalizeReducer):
    reg, lay = low.reg(op.buffer), low.plan.layout(op.buffer)
    if reg is None or not isinstance(lay, LaneRowFragment) or lay.lanes == 1:
        return S.seq()
    d = op.buffer.dtype
    lanes = min(lay.lanes, 32)
    out = [S.BufferStore(reg, (E.as_expr(s),), E.Call(f"tl_lanes_allreduce_{op.op}", (reg[s], E.as_expr(lanes)), d))
           for s in range(lay.nlocal)]
    warps = lay.lanes // 32
    if warps <= 1:
        return S.seq(*out)
    low.nfinal = getattr(low, "nfinal", 0) + 1
    scratch = Buffer(f"{op.buffer.name}_fin{low.nfinal}", (lay.rows, warps), d, "shared.dyn")
    warp = (low.tid % lay.lanes) // 32
    lead = E.binop("==", low.tid % 32, E.as_expr(0))
    out.insert(0, S.Allocate(scratch))
    out.append(low.slot_loop(lay, lambda l, cv: S.IfThenElse(lead, S.BufferStore(scratch, (cv[0], warp), reg[l]))))

    def gather(l, cv):
        acc = E.BufferLoad(scratch, (cv[0], E.as_expr(0)), d)
        for w in range(1, warps):
            acc = _COMB[op.op](acc, E.BufferLoad(scratch, (cv[0], E.as_expr(w)), d))
        return S.BufferStore(reg, (l,), acc)

    out.append(low.slot_loop(lay, gather))
    return S.seq(*out)
