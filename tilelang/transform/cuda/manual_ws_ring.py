"""T.Pipelined(num_stages=n) around hand-written warp groups (T.ws): n-stage rings.

Takes: the top-level statements of a kernel (tile-level IR) written with T.ws scopes, mbarriers
and T.tma_copy (manual_ws.py lowers it afterwards). Gives: each pipelined loop with num_stages =
n >= 2 whose body holds T.ws scopes, where the conditions below hold, rewritten so that its
iterations rotate through n copies of what they fill and wait on:
  - every 2-d shared tile a T.tma_copy in the loop fills -> an (n, rows, cols) tile used as
    `X_ring[ko % n, :, :]` (manual_ws's stage windows);
  - every barrier the loop waits on or arrives at -> n copies of it, element e of stage s at
    s * m + e (m elements), indexed with s = ko % n;
  - each wait's parity p(ko) -> p(ko // n): stage s's barrier completes one phase per use, and its
    j-th use is iteration s + j * n, so the phase the user's expression counted per iteration is
    now counted per use of the stage.
So the producer's load of iteration ko + 1 .. ko + n - 1 goes to stages the consumer is not
reading, and overlaps its gemm on ko, as the public TileLang pipelines such loops (its softpipe
example: 1024^3 GEMM 22 -> ~14 us). The tile's and barriers' allocations are replaced.

Conditions (else the loop stays serial and `why` says what failed, for manual_ws's warning):
the loop starts at 0; every such barrier and tile is used only inside the loop; every barrier
element is named by a constant index, waited on exactly once and arrived at exactly once per
iteration (T.tma_copy's transaction bytes aside), none of it under an `if` or inner loop; every
such tile is read only as a whole gemm operand and written only as a whole T.tma_copy destination.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ...arith.simplify import const_int, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer, BufferRegion
from ...ir.visitor import Mutator, Visitor, collect, substitute
from ...op import hopper as H
from ...op import tile_ops as O
from .gemm_paths import whole

_BARRIER_OPS = (H.BarrierWait, H.BarrierArrive, H.BarrierExpectTx, H.TmaCopy)


def ring_loops(stmts: list) -> tuple[list, list]:
    """(new top-level statements, [(loop, why)] for each pipelined T.ws loop left serial)."""
    kept = []
    for i, st in enumerate(stmts):
        for loop in _ws_loops(st):
            n = const_int(E.as_expr(loop.annotation("num_stages", 0) or 0))
            if n is None or n < 2:
                continue
            why = _plan_and_apply(stmts, i, loop, n)
            if isinstance(why, str):
                kept.append((loop, why))
            else:
                stmts = why
    return stmts, kept


def _ws_loops(st) -> list:
    return collect(st, lambda x: isinstance(x, S.For) and x.kind == "pipelined"
                   and collect(x.body, lambda y: isinstance(y, H.WarpGroupScope)))


class _Refs(Visitor):
    """Counts every reference to each buffer (uid), wherever it appears."""

    def __init__(self):
        self.n = Counter()

    def visit(self, node):
        if isinstance(node, Buffer):
            self.n[node.uid] += 1
            return
        super().visit(node)


def _refs(node) -> Counter:
    r = _Refs()
    r.visit(node)
    return r.n


def _unconditional(body, found: list) -> bool:
    """Every barrier op in body is reached once per iteration: not under an if or an inner loop."""
    class _V(Visitor):
        depth = 0
        ok = True

        def visit(self, node):
            if isinstance(node, (S.IfThenElse, S.For, S.While)):
                self.depth += 1
                super().visit(node)
                self.depth -= 1
                return
            if isinstance(node, _BARRIER_OPS):
                found.append(node)
                if self.depth:
                    self.ok = False
            super().visit(node)

    v = _V()
    v.visit(body)
    return v.ok


def _plan_and_apply(stmts: list, at: int, loop: S.For, n: int):
    """The rewritten statement list, or why the loop stays serial."""
    if const_int(loop.start) != 0:
        return "the loop does not start at 0"
    ops: list = []
    if not _unconditional(loop.body, ops):
        return "a barrier or T.tma_copy in it runs under an `if` or an inner loop"
    barriers = {op.barrier.uid: op.barrier for op in ops}
    uses = Counter()
    for op in ops:
        e = const_int(op.index)
        if e is None:
            return f"barrier {op.barrier.name} is indexed by a non-constant expression"
        if isinstance(op, H.BarrierWait):
            uses[(op.barrier.uid, e, "wait")] += 1
        elif isinstance(op, H.BarrierArrive) or (isinstance(op, H.BarrierExpectTx) and op.arrive):
            uses[(op.barrier.uid, e, "arrive")] += 1
    for uid, b in barriers.items():
        for e in {k[1] for k in uses if k[0] == uid} | {const_int(op.index) for op in ops if op.barrier.uid == uid}:
            if uses[(uid, e, "wait")] != 1 or uses[(uid, e, "arrive")] != 1:
                return (f"barrier {b.name}[{e}] is waited on {uses[(uid, e, 'wait')]} and arrived at "
                        f"{uses[(uid, e, 'arrive')]} times per iteration (a ring needs once each)")
    tiles = {}
    for op in ops:
        if isinstance(op, H.TmaCopy):
            x = op.dst.buffer
            if x.scope not in ("shared", "shared.dyn") or x.ndim != 2 or not whole(op.dst, op.dst.buffer):
                return f"T.tma_copy into {x.name} does not fill a whole 2-d shared tile"
            tiles[x.uid] = x
    if not tiles:
        return "no T.tma_copy in it fills a shared tile"
    allowed = Counter()
    for g in collect(loop.body, lambda x: isinstance(x, O.Gemm)):
        for r in (g.A, g.B):
            if r.buffer.uid in tiles and whole(r, r.buffer):
                allowed[r.buffer.uid] += 1
    for op in ops:
        if isinstance(op, H.TmaCopy):
            allowed[op.dst.buffer.uid] += 1
    inside, everywhere = _refs(loop.body), _refs(S.seq(*stmts))
    for uid, x in tiles.items():
        if inside[uid] != allowed[uid]:
            return f"{x.name} is used in it other than as a whole T.gemm operand or T.tma_copy destination"
        if everywhere[uid] != inside[uid] + 1:
            return f"{x.name} is used outside the loop"
    for uid, b in barriers.items():
        if everywhere[uid] != inside[uid] + 1:
            return f"barrier {b.name} is used outside the loop"

    ko = loop.var
    stage = simplify(E.binop("%", ko, E.as_expr(n)))
    new_tiles, new_bars = {}, {}
    for uid, x in tiles.items():
        r = Buffer(x.name + "_ring", (n, *x.shape), x.dtype, x.scope)
        new_tiles[uid] = r
    for uid, b in barriers.items():
        r = Buffer(b.name + "_ring", (n * len(b.barrier_counts),), b.dtype, b.scope)
        r.barrier_counts = tuple(b.barrier_counts) * n
        new_bars[uid] = r

    class _Ring(Mutator):
        def region(self, r: BufferRegion) -> BufferRegion:
            t = new_tiles.get(r.buffer.uid)
            if t is None:
                return r
            return BufferRegion(t, ((stage, E.as_expr(1)),) + tuple((E.as_expr(0), s) for s in r.buffer.shape))

        def bar(self, op):
            b = new_bars[op.barrier.uid]
            m = len(op.barrier.barrier_counts)
            return b, simplify(stage * m + op.index)

        def visit_Gemm(self, op):
            return replace(op, A=self.region(op.A), B=self.region(op.B))

        def visit_TmaCopy(self, op):
            b, i = self.bar(op)
            return replace(op, dst=self.region(op.dst), barrier=b, index=i)

        def visit_BarrierWait(self, op):
            b, i = self.bar(op)
            parity = simplify(substitute(op.parity, {ko: E.binop("//", ko, E.as_expr(n))}))
            return replace(op, barrier=b, index=i, parity=parity)

        def visit_BarrierArrive(self, op):
            b, i = self.bar(op)
            return replace(op, barrier=b, index=i)

        def visit_BarrierExpectTx(self, op):
            b, i = self.bar(op)
            return replace(op, barrier=b, index=i)

    new_loop = replace(loop, kind="serial", annotations=(), body=_Ring().visit(loop.body))

    class _Swap(Mutator):
        def visit_For(self, s):
            return new_loop if s is loop else self.generic(s)

        def visit_Allocate(self, s):
            r = new_tiles.get(s.buffer.uid) or new_bars.get(s.buffer.uid)
            return replace(s, buffer=r) if r is not None else self.generic(s)

    return [_Swap().visit(st) for st in stmts]
