"""Guard global-memory accesses that user code makes inside T.Parallel loops.

Expects: tile-level IR (before tile-op lowering; tile ops guard themselves).
Guarantees: a store to a global tensor inside a T.Parallel loop happens only when every
index is inside the tensor, and a load outside it reads 0 -- unless bounds analysis over
the block indices and loop ranges proves the access in range, in which case nothing changes
(aligned kernels keep their code). Stores to global tensors in an innermost serial loop (one
with no loop inside, as the public TileLang guards them) are guarded the same way: a
`for k in T.serial(block_K // threads): Logits[bx, k * threads + tx] = ...` does not write past
the row. Turned off by pass config tl.disable_safe_memory_legalize.

    for i, j in T.Parallel(32, 128):                  for i, j in T.Parallel(32, 128):
        C[by*32 + i, j] = A[by*32 + i, j] + 1   ->        if by*32 + i < M:
                                                              C[by*32 + i, j] = T.if_then_else(by*32 + i < M, A[...], 0) + 1
"""
from __future__ import annotations

from dataclasses import replace

from ..arith.ranges import Ranges, TrackRanges
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.stmt import PrimFunc
from ..ir.visitor import Mutator, collect
from .pass_config import get as config


class _Legalize(TrackRanges, Mutator):
    def __init__(self, minmax_calls: bool = False):
        self.ranges = Ranges(minmax_calls)
        self.parallel = 0
        self.leaf = 0  # inside an innermost serial loop: its global stores are guarded

    def visit_KernelLaunch(self, k: S.KernelLaunch):
        self.ranges.kernel(k)
        return self.generic(k)

    def visit_For(self, s: S.For):
        par = s.kind == "parallel"
        leaf = not par and not collect(s.body, lambda n: isinstance(n, S.For))
        self.parallel += par
        self.leaf += leaf
        with self.ranges.loop(s):
            out = self.generic(s)
        self.parallel -= par
        self.leaf -= leaf
        return out

    def cond(self, buf, indices):
        out = True
        for idx, dim in zip(indices, buf.shape):
            if not self.ranges.nonneg(idx):
                out = E.logical_and(out, E.binop(">=", idx, 0))
            if not self.ranges.below(idx, dim):
                out = E.logical_and(out, E.binop("<", idx, dim))
        return out

    def visit_BufferLoad(self, e: E.BufferLoad):
        e2 = self.generic(e)
        if not self.parallel or e.buffer.scope != "global":
            return e2
        c = self.cond(e.buffer, e2.indices)
        return e2 if c is True else E.select(c, e2, E.const(0, e.buffer.dtype))

    def target_call(self, e: E.Call):
        """An atomic (or address_of) on a global element: its first argument is an address, kept
        a load; (the call with its arguments guarded, the condition to guard it by, or True)."""
        t = e.args[0]
        idx = tuple(self.visit(i) for i in t.indices)
        call = replace(e, args=(replace(t, indices=idx), *(self.visit(a) for a in e.args[1:])))
        if not self.parallel or t.buffer.scope != "global" or e.op == "address_of":
            return call, True
        return call, self.cond(t.buffer, idx)

    def visit_Call(self, e: E.Call):
        if not _addresses(e):
            return self.generic(e)
        call, c = self.target_call(e)
        return call if c is True else E.select(c, call, E.const(0, e.dtype))

    def visit_Evaluate(self, s: S.Evaluate):
        if not _addresses(s.value):
            return self.generic(s)
        call, c = self.target_call(s.value)
        st = replace(s, value=call)
        return st if c is True else S.IfThenElse(c, st, span=s.span)

    def visit_BufferStore(self, s: S.BufferStore):
        s2 = self.generic(s)
        if not (self.parallel or self.leaf) or s.buffer.scope != "global":
            return s2
        c = self.cond(s.buffer, s2.indices)
        return s2 if c is True else S.IfThenElse(c, s2, span=s.span)


def _addresses(e) -> bool:
    return isinstance(e, E.Call) and (e.op.startswith("atomic_") or e.op in ("tl_atomic_load", "tl_atomic_store",
                                      "address_of")) and bool(e.args) and isinstance(e.args[0], E.BufferLoad)


def legalize_safe_memory(func: PrimFunc, ctx=None) -> PrimFunc:
    if ctx is not None and config(ctx.pass_configs, "tl.disable_safe_memory_legalize", False):
        return func
    calls = ctx is None or not config(ctx.pass_configs, "tl.disable_minmax_call_ranges", False)
    return replace(func, body=_Legalize(calls).visit(func.body))
