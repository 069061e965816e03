"""Branches on the thread index that hold tile ops become warp-group scopes (`T.ws`).

Public TileLang programs specialize warp groups with plain `if` statements on
`tx = T.get_thread_binding()`::

    if tx < 128:                       # consumer: tile ops over threads [0, 128)
        T.gemm(...)
    elif tx >= 128 and tx < 256:       # second consumer: threads [128, 256)
        ...
    else:                              # producer: threads [256, 384)
        ...

and mean that the tile ops of each branch are block-level over that branch's threads.
Takes: a PrimFunc whose kernels may hold such IfThenElse chains. Gives: each branch whose
thread range is whole warp groups (or else whole warps) and that holds a tile op or a T.Parallel loop
(in either branch of the `if`) becomes a
WarpGroupScope over that range (op/hopper.py; unit 128 or 32), with the if/elif/else chain
flattened into consecutive scopes (the ranges are disjoint, so the order between them does
not matter). A condition this pass cannot read as one thread interval, or a range that is
not whole warps, is left an ordinary `if`. A thread variable no longer used afterwards is dropped from the kernel.
"""
from __future__ import annotations

from dataclasses import replace

from ..arith.simplify import const_int
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.visitor import Mutator, collect
from ..op import hopper as H

G = H.WARP_GROUP
W = 32  # a branch over whole warps that are not whole warp groups (`if tx < 32` of 96 threads)


def _interval(cond, tv) -> tuple | None:
    """[lo, hi) of tv where `cond` holds, or None when cond is not a bound test of tv."""
    if isinstance(cond, E.Binary) and cond.op == "&&":
        a, b = _interval(cond.a, tv), _interval(cond.b, tv)
        if a is None or b is None:
            return None
        return max(a[0], b[0]), min(a[1], b[1])
    if not (isinstance(cond, E.Binary) and cond.op in ("<", "<=", ">", ">=")):
        return None
    op, a, b = cond.op, cond.a, cond.b
    if isinstance(b, E.Var) and b == tv:  # c < tv  ->  tv > c
        op, a, b = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op], b, a
    if not (isinstance(a, E.Var) and a == tv):
        return None
    c = const_int(b)
    if c is None:
        return None
    big = 1 << 30
    return {"<": (-big, c), "<=": (-big, c + 1), ">": (c + 1, big), ">=": (c, big)}[op]


def _has_tile_op(s) -> bool:
    """A tile op, a nested scope, or a T.Parallel loop (spread over the branch's threads, as the tile ops)."""
    return bool(collect(s, lambda n: isinstance(n, (S.TileOp, H.WarpGroupScope))
                        or isinstance(n, S.For) and n.kind == "parallel"))


class _Scopes(Mutator):
    def __init__(self, tvs, threads: int):
        self.tvs = tvs
        self.threads = threads
        self.range = (0, threads)

    def scope(self, lo, hi, body):
        if lo >= hi:
            return None
        unit = G if not (lo % G or hi % G) else W
        if lo % unit or hi % unit:
            raise ValueError
        outer, self.range = self.range, (lo, hi)
        try:
            inner = self.visit(body)
        finally:
            self.range = outer
        parts = inner.stmts if isinstance(inner, S.SeqStmt) else (inner,)
        if parts and all(isinstance(p, H.WarpGroupScope) for p in parts):
            return inner  # an elif chain: its branches are scopes of their own
        return H.WarpGroupScope(lo // unit, hi // unit, inner, span=getattr(body, "span", None), unit=unit)

    def visit_IfThenElse(self, s: S.IfThenElse):
        iv = None
        for tv in self.tvs:
            iv = _interval(s.cond, tv)
            if iv is not None:
                break
        if iv is None or not (_has_tile_op(s.then_case) or (s.else_case is not None and _has_tile_op(s.else_case))):
            return self.generic(s)
        lo, hi = self.range
        t_lo, t_hi = max(lo, iv[0]), min(hi, iv[1])
        if t_lo >= t_hi:  # the branch never runs in this range
            e_range = (lo, hi)
        elif t_lo == lo:
            e_range = (t_hi, hi)
        elif t_hi == hi:
            e_range = (lo, t_lo)
        else:  # the else-branch would be two intervals
            return self.generic(s)
        try:
            parts = [self.scope(t_lo, t_hi, s.then_case)]
            if s.else_case is not None:
                parts.append(self.scope(*e_range, s.else_case))
        except ValueError:
            return self.generic(s)
        parts = [p for p in parts if p is not None]
        return S.seq(*parts)


def thread_scopes(k: S.KernelLaunch) -> S.KernelLaunch:
    # only a 1-d thread block: tx is then the block's thread index
    if not k.thread_vars or k.threads[1] * k.threads[2] != 1:
        return k
    tvs = [v for v in k.thread_vars if v.name not in ("ty", "tz")]  # ty, tz are 0 in a 1-d block
    body = _Scopes(tvs, k.threads[0]).visit(k.body)
    if body is k.body:
        return k
    used = {v.uid for v in collect(body, lambda n: isinstance(n, E.Var))}
    return replace(k, body=body, thread_vars=tuple(tv for tv in k.thread_vars if tv.uid in used))


class _Kernels(Mutator):
    def visit_KernelLaunch(self, k: S.KernelLaunch):
        return thread_scopes(k)


def thread_scopes_pass(func: S.PrimFunc, ctx=None) -> S.PrimFunc:
    return replace(func, body=_Kernels().visit(func.body))
