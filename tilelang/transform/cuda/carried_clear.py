"""Carry a wgmma accumulator's zero fill into the next iteration's gemm as a runtime clear.

Expects: lowered per-thread CUDA IR, as fold_accum_clear.py does (a zero fill is a thread loop
`for l: C[l] = 0` over all of C's registers; a wgmma gemm a Raw `tl::gemm_{ss,rs}_sm90<...>(A, B, C);`).
Guarantees: in a loop whose body runs a wgmma gemm into the whole of C at its top level, with
no other mention of C before it, and zero-fills C later in the body (at the top level or in the
branch of an `if`) with no mention of C after the fill to the end of the body, the fill becomes
`tl_clear_C = 1`, the gemm clears C (scale-d = 0) when the flag is set and resets it, and after
the loop a set flag still zeroes C. Between the fill and the next gemm nothing reads C, so the
gemm's overwrite is the fill; after the last iteration the fill runs where the flag says so.
fp8's promoted accumulation (`if (k + 1) % 2 == 0: acc += loc; T.clear(loc)`) saves one register
move per accumulator element per promotion (128 per thread for a 128x128 tile on one warpgroup).

    for k in range(n):                                 int tl_clear_loc = 0;
        tl::gemm_ss_sm90<...>(A_s, B_s, loc);          for k in range(n):
        if ((k + 1) % 2 == 0):                   ->        tl::gemm_ss_sm90<...>(A_s, B_s, loc, tl_clear_loc != 0);
            for l: acc[l] = acc[l] + loc[l]                tl_clear_loc = 0;
            for l: loc[l] = 0.0f                           if ((k + 1) % 2 == 0):
                                                               for l: acc[l] = acc[l] + loc[l]
                                                               tl_clear_loc = 1
                                                       if (tl_clear_loc != 0): for l: loc[l] = 0.0f
"""
from __future__ import annotations

from dataclasses import replace

from ... import dtypes as dt
from ...arith.simplify import const_int
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer
from ...ir.visitor import Mutator
from .fold_accum_clear import accumulator, mentions, wgmma_elems, zero_fill
from .raw import Raw

_CALL = "({0}, {1}, {2});"
_FLAG_CALL = "({0}, {1}, {2}, {3} != 0);"


def _stmts(s) -> list:
    return list(s.stmts) if isinstance(s, S.SeqStmt) else [s]


def _gemm_at(body: list):
    """(index, C) of the first top-level statement mentioning some wgmma accumulator when it is the
    accumulating gemm into the whole of it, else None."""
    for i, st in enumerate(body):
        c = accumulator(st)
        if c is not None and st.fmt.endswith(_CALL) and wgmma_elems(st.fmt) == const_int(c.shape[0]):
            return (i, c) if not any(mentions(x, c) for x in body[:i]) else None
    return None


def _last_fill(stmts: list, c: Buffer):
    """Index of the zero fill of c in `stmts` after which nothing mentions c, else None."""
    for i in range(len(stmts) - 1, -1, -1):
        if zero_fill(stmts[i]) is not None and zero_fill(stmts[i]).uid == c.uid:
            return i
        if mentions(stmts[i], c):
            return None
    return None


def _plan(body: list, c: Buffer):
    """(index j > gemm's, fill index in the branch or None) of the statement holding the fill."""
    for j in range(len(body) - 1, -1, -1):
        st = body[j]
        if zero_fill(st) is not None and zero_fill(st).uid == c.uid:
            return j, None
        if isinstance(st, S.IfThenElse) and not mentions(st.cond, c) and \
                (st.else_case is None or not mentions(st.else_case, c)):
            f = _last_fill(_stmts(st.then_case), c)
            if f is not None:
                return j, f
        if mentions(st, c):
            return None
    return None


def _carry(loop: S.For):
    """(flag allocation, new loop, fill after the loop) or None when the loop does not qualify."""
    body = _stmts(loop.body)
    g = _gemm_at(body)
    if g is None:
        return None
    gi, c = g
    at = _plan(body, c)
    if at is None or at[0] <= gi:
        return None
    flag = Buffer(f"tl_clear_{c.name}", (1,), dt.int32, "local.var")
    zero = E.as_expr(0)
    load = E.BufferLoad(flag, (zero,), dt.int32)
    j, f = at
    if f is None:
        fill, body[j] = body[j], S.BufferStore(flag, (zero,), E.as_expr(1))
    else:
        then = _stmts(body[j].then_case)
        fill, then[f] = then[f], S.BufferStore(flag, (zero,), E.as_expr(1))
        body[j] = replace(body[j], then_case=S.seq(*then))
    gemm = body[gi]
    body[gi] = S.seq(replace(gemm, fmt=gemm.fmt[: -len(_CALL)] + _FLAG_CALL, args=tuple(gemm.args) + (load,)),
                     S.BufferStore(flag, (zero,), zero))
    after = S.IfThenElse(E.compare("!=", load, 0), fill)
    return S.Allocate(flag, (zero,)), replace(loop, body=S.seq(*body)), after


class _Carry(Mutator):
    def visit_SeqStmt(self, s: S.SeqStmt):
        inner = self.generic(s)
        out, changed = [], False
        for st in inner.stmts:
            got = _carry(st) if isinstance(st, S.For) and st.kind in ("serial", "pipelined") else None
            if got is None:
                out.append(st)
            else:
                out.extend(got)
                changed = True
        return S.seq(*out) if changed else inner


def carry_accum_clears(body):
    """`body` with every loop-carried zero fill of a wgmma accumulator moved into the next gemm."""
    return _Carry().visit(body)
