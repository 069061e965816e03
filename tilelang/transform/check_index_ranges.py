"""check_index_ranges: warn, before lowering, where a loop indexes a tile past its shape.

Takes a PrimFunc as parsed; gives it back unchanged. Every load and store of a shared,
fragment or local tile inside loops with constant bounds has each index that is linear in the
loop variables bounded over the loops' ranges, narrowed by enclosing `if v < c` guards (a
T.if_then_else's branches are not narrowed). Where the index can leave [0, dim) of a constant dim, an
`IndexRangeWarning` names the buffer, the index, its range and the user's source line.

    s = T.alloc_shared([1], dtype)
    for i in T.Parallel(64):                    IndexRangeWarning: line 7: s[i]: i runs over
        s[i] = A[by]                      ->    0 .. 63 but dim 0 of s has 1 element

(A fragment indexed by its loop's own variables holds the loop's extents: widen_fragments runs
first and declares it so.)

The access is compiled as written: out of range it reads and writes memory that is not the
tile's (another tile's, or past the block's shared memory), so this is a warning about the
program, not a check on the hardware.
"""
from __future__ import annotations

import warnings

from ..arith.simplify import const_int, linear_form, simplify
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.stmt import PrimFunc
from ..ir.visitor import Visitor

TILE_SCOPES = ("shared", "shared.dyn", "fragment", "local")


class IndexRangeWarning(UserWarning):
    """A tile index that a loop can take out of the tile's shape."""


class _Ranges(Visitor):
    def __init__(self):
        self.ranges: dict = {}  # Var -> (lo, hi), inclusive
        self.span = None
        self.found: dict = {}  # (buffer name, index text) -> message

    def visit_For(self, s: S.For):
        lo, n = const_int(s.start), const_int(s.extent)
        outer = self.ranges.get(s.var)
        if lo is not None and n is not None and n > 0:
            self.ranges[s.var] = (lo, lo + n - 1)
        self.visit(s.body)
        if outer is None:
            self.ranges.pop(s.var, None)
        else:
            self.ranges[s.var] = outer

    def visit_IfThenElse(self, s: S.IfThenElse):
        self.visit(s.cond)
        saved = dict(self.ranges)
        self._narrow(s.cond)
        self.visit(s.then_case)
        self.ranges = saved
        if s.else_case is not None:
            self.visit(s.else_case)

    def _narrow(self, c):
        if isinstance(c, E.Binary) and c.op == "&&":
            self._narrow(c.a)
            self._narrow(c.b)
            return
        if not isinstance(c, E.Binary) or c.op not in ("<", "<=", ">", ">="):
            return
        a, b, op = c.a, c.b, c.op
        if not isinstance(a, E.Var):  # c < v  ->  v > c
            a, b, op = b, a, {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op]
        k = const_int(b)
        if not isinstance(a, E.Var) or a not in self.ranges or k is None:
            return
        lo, hi = self.ranges[a]
        if op == "<":
            hi = min(hi, k - 1)
        elif op == "<=":
            hi = min(hi, k)
        elif op == ">":
            lo = max(lo, k + 1)
        else:
            lo = max(lo, k)
        self.ranges[a] = (lo, hi)

    def generic(self, node):
        if isinstance(node, S.Stmt) and getattr(node, "span", None) is not None:
            self.span = node.span
        super().generic(node)

    def visit_BufferStore(self, s: S.BufferStore):
        if getattr(s, "span", None) is not None:
            self.span = s.span
        self._check(s.buffer, s.indices)
        self.visit(s.indices)
        self.visit(s.value)

    def visit_BufferLoad(self, e: E.BufferLoad):
        self._check(e.buffer, e.indices)
        self.visit(e.indices)

    def _check(self, buf, indices):
        if buf.scope not in TILE_SCOPES or len(indices) != len(buf.shape):
            return
        for d, (i, dim) in enumerate(zip(indices, buf.shape)):
            n = const_int(dim)
            lf = linear_form(simplify(E.as_expr(i)))
            if n is None or lf is None:
                continue
            terms, lo = lf
            if not terms or any(not isinstance(t, E.Var) or t not in self.ranges for t in terms):
                continue
            hi = lo
            for t, c in terms.items():
                a, b = self.ranges[t]
                lo, hi = lo + min(c * a, c * b), hi + max(c * a, c * b)
            if lo >= 0 and hi < n:
                continue
            key = (buf.name, str(i))
            if key in self.found:
                continue
            line = getattr(self.span, "line", None)
            where = f"line {line}: " if line else ""
            self.found[key] = (f"{where}{buf.name}[{', '.join(str(x) for x in indices)}]: {i} runs over {lo} .. {hi} "
                               f"but dim {d} of {buf.name} has {n} element{'s' if n != 1 else ''} (indices "
                               f"0 .. {n - 1}); out of range it reads and writes memory that is not {buf.name}'s")


def check_index_ranges(func: PrimFunc) -> list[str]:
    """The warnings' messages (also issued as IndexRangeWarning)."""
    v = _Ranges()
    v.visit(func.body)
    for msg in v.found.values():
        warnings.warn(f"{func.name}: {msg}", IndexRangeWarning, stacklevel=4)
    return list(v.found.values())


def check_index_ranges_pass(func: PrimFunc, ctx) -> PrimFunc:
    check_index_ranges(func)
    return func
