"""CUDA lowering of T.reduce_sum / max / min / abssum / absmax (O.Reduce).

Takes: a Reduce over one dim of a tile. Gives: for rows of an mma/wgmma accumulator into a row
fragment (both in registers), a fold of each thread's columns then an xor-shuffle over its quad
(tl_quad_<op>); otherwise a register source is first stored to a shared scratch tile
(`<src>_red`) and each destination element runs a serial loop over the reduced dim.

    T.reduce_max(S, m, dim=1)   ->   racc = S_reg[0]; racc = max(racc, S_reg[1]) ...; racc = tl_quad_max(racc); m_reg[s] = racc
"""
from __future__ import annotations

from .... import dtypes as dt
from ....ir import expr as E
from ....ir import stmt as S
from ....ir.buffer import Buffer
from ....layout.fragment import MmaAccFragment, RowFragment, WgmmaAccFragment
from ....op import tile_ops as O
from ....op.registry import register_lowering


def row_reduce(low, op: O.Reduce, sreg: Buffer, dreg: Buffer, lay: RowFragment):
    """Rows of an accumulator: fold this thread's columns, then its quad with xor-shuffles."""
    dt_ = op.dst.dtype
    comb = {"sum": lambda x, y: x + y, "abssum": lambda x, y: x + y,
            "max": lambda x, y: E.call("max", x, y), "absmax": lambda x, y: E.call("max", x, y),
            "min": lambda x, y: E.call("min", x, y)}[op.kind]
    quad = {"sum": "sum", "abssum": "sum", "max": "max", "absmax": "max", "min": "min"}[op.kind]
    low.nreduce = getattr(low, "nreduce", 0) + 1
    tmp = Buffer(f"racc{low.nreduce}", (1,), dt_, "local.var")
    out = [S.Allocate(tmp)]
    zero = (E.as_expr(0),)
    for s in range(lay.nlocal):
        for n, l in enumerate(lay.acc_slots(s, low.plan.layout(op.src))):  # one statement per column: no nested ternaries
            v = E.cast(dt_, E.BufferLoad(sreg, (E.as_expr(l),), sreg.dtype))
            if op.kind in ("abssum", "absmax"):
                v = E.call("abs", v)
            out.append(S.BufferStore(tmp, zero, v if n == 0 else comb(tmp[0], v)))
        # NOTE: the shuffle is a statement of its own, executed by every lane: inside a
        # select (T.max prints as a ternary) only some lanes would reach it and hang.
        out.append(S.BufferStore(tmp, zero, E.Call(f"tl_quad_{quad}", (tmp[0],), dt_)))
        total = tmp[0]
        if not op.clear:
            total = comb(E.BufferLoad(dreg, (E.as_expr(s),), dt_), total)
        out.append(S.BufferStore(dreg, (E.as_expr(s),), total))
    return S.seq(*out)


@register_lowering("cuda", O.Reduce)
def lower_reduce(low, op: O.Reduce):
    src, dst = op.src, op.dst
    sreg, dreg = low.reg(src), low.reg(dst)
    if sreg is not None and dreg is not None and op.dim == src.ndim - 1:
        lay = low.plan.layout(dst)
        src_lay = low.plan.layout(src)
        if isinstance(lay, RowFragment) and isinstance(src_lay, (MmaAccFragment, WgmmaAccFragment)) \
                and RowFragment.of(src_lay) == lay and dst.dtype.is_float:
            return row_reduce(low, op, sreg, dreg, lay)
    out = []
    if low.reg(src) is not None:
        scratch = low.scratch_of.get(src.uid)
        if scratch is None:
            scratch = Buffer(f"{src.name}_red", tuple(src.shape), src.dtype, "shared.dyn")
            low.scratch_of[src.uid] = scratch
            out.append(S.Allocate(scratch))
        lay = low.plan.layout(src)
        sreg = low.reg(src)
        out.append(low.slot_loop(lay, lambda l, cv: S.BufferStore(scratch, tuple(cv), sreg[l])))
        src_buf = scratch
    else:
        src_buf = src
    dt_ = dst.dtype
    if op.kind == "max":
        init = E.const(float("-inf"), dt_) if dt_.is_float else E.const(-(1 << (dt_.bits - 1)), dt_)
    elif op.kind == "min":
        init = E.const(float("inf"), dt_) if dt_.is_float else E.const((1 << (dt_.bits - 1)) - 1, dt_)
    else:
        init = E.const(0, dt_)
    red = src.shape[op.dim]
    comb = {"sum": lambda x, y: x + y, "abssum": lambda x, y: x + y,
            "max": lambda x, y: E.call("max", x, y), "absmax": lambda x, y: E.call("max", x, y),
            "min": lambda x, y: E.call("min", x, y)}[op.kind]

    def make(cv, reg_ref):
        keep = [c for c, s in zip(cv, dst.shape)] if len(cv) == dst.ndim else list(cv)
        ref = reg_ref if reg_ref is not None else E.BufferLoad(dst, tuple(keep), dt_)
        r = E.Var("r", dt.int32)
        sidx = [x for x in keep] if len(keep) == src.ndim - 1 else [x for x in keep if True][: src.ndim - 1]
        sidx.insert(op.dim, r)
        v = E.cast(dt_, E.BufferLoad(src_buf, tuple(sidx), src_buf.dtype))
        if op.kind in ("abssum", "absmax"):
            v = E.call("abs", v)
        tmp = Buffer("racc", (1,), dt_, "local.var")
        return S.seq(S.Allocate(tmp, (init if op.clear else ref,)),
                     S.For(r, E.as_expr(0), E.as_expr(red), "serial",
                           S.BufferStore(tmp, (E.as_expr(0),), comb(tmp[0], v))),
                     S.BufferStore(ref.buffer, ref.indices, tmp[0]))

    dreg = low.reg(dst)
    if dreg is not None:
        lay = low.plan.layout(dst)
        out.append(low.slot_loop(lay, lambda l, cv: make(cv, dreg[l])))
    else:
        out.append(low.flat_loop(tuple(dst.shape), lambda cv: make(cv, None)))
    return S.seq(*out)
