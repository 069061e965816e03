"""Guard global-memory accesses that user code makes inside T.Parallel loops.

Expects: tile-level IR (before tile-op lowering; tile ops guard themselves).
Guarantees: a store to a global tensor inside a T.Parallel loop happens only when every
index is inside the tensor, and a load outside it reads 0 -- unless bounds analysis over
the block indices and loop ranges proves the access in range, in which case nothing changes
(aligned kernels keep their code). Stores to global tensors in an innermost serial loop (one
with no loop inside, as the public TileLang guards them) are guarded the same way: a
`for k in T.serial(block_K // threads): Logits[bx, k * threads + tx] = ...` does not write past
the row. Turned off by pass config tl.disable_safe_memory_legalize.

T.annotate_safe_value({A: v}) (func attr "tl.safe_value_map"; inside a T.sblock, the block's T.Parallel
loops' annotation of that name and its copies' Copy.safe_values) makes out-of-range loads of A read v
instead of 0; a T.copy from A becomes the T.Parallel loop it means, with that select, since the
copy paths (cp.async zero-fill, TMA) can only fill zeros.

    for i, j in T.Parallel(32, 128):                  for i, j in T.Parallel(32, 128):
        C[by*32 + i, j] = A[by*32 + i, j] + 1   ->        if by*32 + i < M:
                                                              C[by*32 + i, j] = T.if_then_else(by*32 + i < M, A[...], 0) + 1
"""
from __future__ import annotations

from dataclasses import replace

from .. import dtypes as dt
from ..arith.ranges import Ranges, TrackRanges
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.stmt import PrimFunc
from ..ir.visitor import Mutator, collect
from ..op import tile_ops as O
from ..op.regions import squeezed
from .lower_tile_ops_cpu import in_bounds, region_indices
from .pass_config import get as config

SAFE_VALUES = "tl.safe_value_map"  # T.annotate_safe_value (language/annotations.py): ((tensor name, value), ...)


class _Legalize(TrackRanges, Mutator):
    def __init__(self, minmax_calls: bool = False, safe: dict | None = None):
        self.ranges = Ranges(minmax_calls)
        self.safe = safe or {}  # tensor name -> the value its out-of-range reads give (0 when absent)
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
        outer = self.safe
        scoped = s.annotation(SAFE_VALUES)  # a T.sblock's T.annotate_safe_value (language/blocks.py)
        if scoped:
            self.safe = {**outer, **dict(scoped)}
        try:
            with self.ranges.loop(s):
                out = self.generic(s)
        finally:
            self.safe = outer
            self.parallel -= par
            self.leaf -= leaf
        if scoped and isinstance(out, S.For):
            out = replace(out, annotations=tuple((k, v) for k, v in out.annotations if k != SAFE_VALUES))
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
        return e2 if c is True else E.select(c, e2, self.safe_value(e.buffer, e.dtype))

    def safe_value(self, buf, dtype):
        """What an out-of-range read of `buf` gives, as `dtype`."""
        v = self.safe.get(buf.name, 0) if buf.scope == "global" else 0
        return E.cast(dtype, E.as_expr(v)) if isinstance(v, E.Expr) else E.const(v, dtype)

    def visit_Copy(self, op: O.Copy):
        """A T.copy from a tensor with a safe value: the elementwise T.Parallel loop it means, its
        out-of-range source elements reading the safe value."""
        if op.safe_values:  # a T.sblock's T.annotate_safe_value (language/blocks.py) around this copy
            outer, self.safe = self.safe, {**self.safe, **dict(op.safe_values)}
            try:
                return self.visit_Copy(replace(op, safe_values=()))
            finally:
                self.safe = outer
        if op.src.buffer.scope != "global" or _is_zero(self.safe.get(op.src.buffer.name, 0)):
            return self.generic(op)
        ext = squeezed(op.dst.extents)
        vs = [E.Var(f"sv{d}", dt.int32) for d in range(len(ext))]
        si, di = region_indices(op.src, vs), region_indices(op.dst, vs)
        ok_s, ok_d = in_bounds(op.src, si, self.ranges), in_bounds(op.dst, di, self.ranges)
        val = E.cast(op.dst.buffer.dtype, E.BufferLoad(op.src.buffer, si, op.src.buffer.dtype))
        if ok_s is not True:
            val = E.select(ok_s, val, self.safe_value(op.src.buffer, op.dst.buffer.dtype))
        body = S.BufferStore(op.dst.buffer, di, val, span=op.span)
        if ok_d is not True:
            body = S.IfThenElse(ok_d, body, span=op.span)
        for v, n in reversed(list(zip(vs, ext))):
            body = S.For(v, E.as_expr(0), E.as_expr(n), "parallel", body, span=op.span)
        return body

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
        return call if c is True else E.select(c, call, self.safe_value(e.args[0].buffer, e.dtype))

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


class _SafeCopies(_Legalize):
    """Only the T.copy rewrite (tl.disable_safe_memory_legalize: user loads and stores stay unguarded)."""

    def visit_BufferLoad(self, e):
        return self.generic(e)

    visit_BufferStore = visit_Call = visit_Evaluate = visit_BufferLoad


def legalize_safe_memory(func: PrimFunc, ctx=None) -> PrimFunc:
    safe = dict(func.attr(SAFE_VALUES, ()) or ())
    calls = ctx is None or not config(ctx.pass_configs, "tl.disable_minmax_call_ranges", False)
    if ctx is not None and config(ctx.pass_configs, "tl.disable_safe_memory_legalize", False):
        return replace(func, body=_SafeCopies(calls, safe).visit(func.body))  # T.sblock ones too
    return replace(func, body=_Legalize(calls, safe).visit(func.body))


def _is_zero(v) -> bool:
    """A safe value that changes nothing (out-of-range reads give 0 anyway)."""
    return not isinstance(v, E.Expr) and v == 0
