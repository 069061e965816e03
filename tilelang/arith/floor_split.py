"""Floor divisions and remainders by constants split along the multiples in their dividend.

Takes: an integer expression. Gives: `split_floor(e)`, the same value for every input, where each
`a // c` and `a % c` (floor semantics, constant c > 0) whose dividend is a sum `M + R`, M's every
term a multiple of c, is rewritten

    (M + R) // c  ->  M / c + R // c          (M + R) % c  ->  R % c

and a remainder part `k * x + r` with c % k == 0 and 0 <= r < k (x of any sign) becomes

    (k * x + r) // c  ->  x // (c / k)        (k * x + r) % c  ->  (x % (c / k)) * k + r

A vector group's coordinates `(g * 1024 + tid * 8) // 128`, `(g * 1024 + tid * 8) % 128` (a 128-
column tile copied 8 elements a thread) become `g * 8 + tid // 16` and `(tid % 16) * 8`: the
unrolled group's part a constant, the thread's part computed once, where the whole sum made nvcc
shift, sign-fix and widen every group's address on its own (the mma epilogue's 16 row stores:
one IMAD.WIDE and two LEA each).
"""
from __future__ import annotations

from ..ir import expr as E
from ..ir.visitor import Mutator
from .simplify import const_int, linear_form, simplify


def linear_sum(parts, c: int, dtype):
    """The expression sum(t * k for t, k in parts) + c (terms with k == 1 unscaled, c == 0 left out)."""
    out = None
    for t, k in parts:
        term = t if k == 1 else E.Binary("*", t, E.Const(k, dtype), dtype)
        out = term if out is None else E.Binary("+", out, term, dtype)
    if out is None:
        return E.Const(c, dtype)
    return out if c == 0 else E.Binary("+", out, E.Const(c, dtype), dtype)


def _split(op: str, a, c: int, dtype):
    """The rewritten `a op c`, or None when no rule applies."""
    lin = linear_form(a)
    if lin is None:
        return None
    terms, const = lin
    whole = [(t, k) for t, k in terms.items() if k and k % c == 0]
    rest = [(t, k) for t, k in terms.items() if k and k % c != 0]
    q, r = divmod(const, c)
    if len(rest) == 1 and rest[0][1] > 0 and c % rest[0][1] == 0 and r < rest[0][1]:
        (x, k), m = rest[0], c // rest[0][1]
        if op == "//":
            inner = E.Binary("//", x, E.Const(m, dtype), dtype) if m > 1 else x
            return linear_sum([(t, kk // c) for t, kk in whole] + [(inner, 1)], q, dtype)
        inner = E.Binary("%", x, E.Const(m, dtype), dtype) if m > 1 else E.Const(0, dtype)
        return linear_sum([(inner, k)], r, dtype)
    if not whole and q == 0:
        return None
    if not rest:
        return linear_sum([(t, kk // c) for t, kk in whole], q, dtype) if op == "//" else E.Const(r, dtype)
    part = E.Binary(op, linear_sum(rest, r, dtype), E.Const(c, dtype), dtype)
    if op == "%":
        return part
    return linear_sum([(t, kk // c) for t, kk in whole] + [(part, 1)], q, dtype)


class _FloorSplit(Mutator):
    def visit_Binary(self, e):
        a, b = self.visit(e.a), self.visit(e.b)
        c = const_int(b) if e.op in ("//", "%") and e.dtype.is_int else None
        if c is not None and c > 1:
            got = _split(e.op, a, c, e.dtype)
            if got is not None:
                return got
        if a is e.a and b is e.b:
            return e
        return E.Binary(e.op, a, b, e.dtype)


def split_floor(e):
    """`e` with its floor divisions and remainders by constants split (see the module doc)."""
    return simplify(_FloorSplit().visit(simplify(e)))
