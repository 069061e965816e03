"""legalize_negative_index: an index that is negative wherever it runs counts from the end of its dim.

Takes a PrimFunc as parsed (tile level, before any lowering); gives it back with every element load and
store index that range analysis proves negative -- over the T.Kernel grid, the block's thread indices,
the enclosing loops (a symbolic extent N gives [0, N - 1]) and lets, narrowed by enclosing `if`s -- replaced by `extent + index`, Python style,
as the public TileLang does on every target:

    for i in T.serial(4):                   for i in T.serial(4):
        B[i] = A[-i - 1]          ->            B[i] = A[16 + (-i - 1)]     # A has 16 elements

An index whose sign is unknown or varies (`A[i - 1]` for i in [0, 3], `A[shift + i]`) is left as written,
except a lane of a vector index (`A[T.Ramp(t - 2, 1, 4)]`, marked by the parser, frontend/vector.py): it
is wrapped at run time (`l < 0 ? extent + l : l`), as the public TileLang does for vector indices.
Constant negative indices were already wrapped by the parser (Buffer.__getitem__ / the store path);
slices (tile-op regions) are not touched. Both backends run this pass first.
"""
from __future__ import annotations

from dataclasses import replace

from ..arith.ranges import Ranges, TrackRanges
from ..arith.simplify import const_int, simplify
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.stmt import PrimFunc
from ..ir.visitor import Mutator


class _Wrap(TrackRanges, Mutator):
    def __init__(self):
        self.ranges = Ranges()

    def visit_KernelLaunch(self, k: S.KernelLaunch):
        self.ranges.kernel(k)
        threads = {v: (0, n - 1) for v, n in zip(k.thread_vars, k.threads) if isinstance(n, int) and n > 0}
        with self.ranges.scoped(threads):
            return self.generic(k)

    def visit_For(self, s: S.For):
        with self.ranges.loop(s):
            # `for r in T.serial(N)`: r is in [0, N - 1] for a symbolic N, so `-r - 1` is negative
            sym = s.var not in self.ranges.of and const_int(E.as_expr(s.start)) == 0 \
                and E.as_expr(s.extent).dtype.is_int
            if sym:
                self.ranges.sym[s.var] = E.as_expr(s.extent)
            try:
                return self.generic(s)
            finally:
                if sym:
                    self.ranges.sym.pop(s.var, None)

    def wrapped(self, buf, indices) -> tuple:
        if buf.scope == "local.var":
            return indices
        out = []
        for idx, dim in zip(indices, buf.shape):
            if isinstance(idx, E.Call) and idx.op == E.VECTOR_LANE_INDEX:
                out.append(self.lane(idx.args[0], dim))
                continue
            t = E.as_expr(idx).dtype
            hi = self.ranges.upper(_Negations().visit(E.as_expr(idx))) if t.is_int and t.is_signed else None
            out.append(simplify(E.as_expr(dim) + idx) if hi is not None and hi < 0 else idx)
        return indices if all(a is b for a, b in zip(out, indices)) else tuple(out)

    def lane(self, idx, dim):
        """A lane of a vector (T.Ramp) index: wrapped where proved negative, kept where proved not, and
        wrapped at run time where its sign is unknown (the public TileLang's rule for vector indices)."""
        e = _Negations().visit(idx)
        hi, lo = self.ranges.upper(e), self.ranges.lower(e)
        if lo is not None and lo >= 0:
            return idx
        wrapped = simplify(E.as_expr(dim) + idx)
        return wrapped if hi is not None and hi < 0 else E.select(idx < 0, wrapped, idx)

    def visit_BufferLoad(self, e: E.BufferLoad):
        e2 = self.generic(e)
        idx = self.wrapped(e2.buffer, e2.indices)
        return e2 if idx is e2.indices else E.BufferLoad(e2.buffer, idx, e2.dtype)

    def visit_BufferStore(self, s: S.BufferStore):
        s2 = self.generic(s)
        idx = self.wrapped(s2.buffer, s2.indices)
        return s2 if idx is s2.indices else replace(s2, indices=idx)


class _Negations(Mutator):
    """`-x` on integers as `x * -1`, a form the linear range analysis reads (`-i - 1`)."""

    def visit_Unary(self, e: E.Unary):
        a = self.visit(e.a)
        if e.op == "-" and e.dtype.is_int:
            return E.Binary("*", a, E.const(-1, e.dtype), e.dtype)
        return e if a is e.a else replace(e, a=a)


def legalize_negative_index(func: PrimFunc, ctx=None) -> PrimFunc:
    body = _Wrap().visit(func.body)
    return func if body is func.body else replace(func, body=body)
