"""Integer/float expression simplifier: constant folding, identities, and linear sums.

Index expressions are normalized to `sum(coeff * term) + const` so `i*4 + 4 - 4`
prints as `i*4` and bounds checks against constants fold away.
"""
from __future__ import annotations

import math

from ..ir.expr import Binary, Cast, Const, Expr, Select, Unary, Var, as_expr, const_value
from ..ir.visitor import Mutator


def _fold(op, a, b, dtype):
    if dtype.is_int or dtype.is_bool and op not in ("+", "-", "*"):
        if op == "/" and isinstance(a, int):
            if b == 0:
                return None
            q = abs(a) // abs(b)
            return q if (a >= 0) == (b >= 0) else -q
        if op == "//":
            return None if b == 0 else a // b
        if op == "%":
            return None if b == 0 else a % b
    fns = {
        "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
        "/": lambda: a / b if b != 0 else None, "min": lambda: min(a, b), "max": lambda: max(a, b),
        "<": lambda: a < b, "<=": lambda: a <= b, ">": lambda: a > b, ">=": lambda: a >= b,
        "==": lambda: a == b, "!=": lambda: a != b, "&&": lambda: bool(a and b), "||": lambda: bool(a or b),
        "&": lambda: a & b, "|": lambda: a | b, "^": lambda: a ^ b, "<<": lambda: a << b, ">>": lambda: a >> b,
    }
    if op not in fns:
        return None
    try:
        return fns[op]()
    except (TypeError, ZeroDivisionError, OverflowError):
        return None


def linear_form(e) -> tuple[dict, int] | None:
    """Integer expression as ({term: coeff}, const) when it is a sum of scaled terms."""
    v = const_value(e)
    if isinstance(v, int) and not isinstance(v, bool):
        return {}, v
    if isinstance(e, Binary) and e.dtype.is_int:
        if e.op in ("+", "-"):
            la, lb = linear_form(e.a), linear_form(e.b)
            if la is None or lb is None:
                return None
            sign = 1 if e.op == "+" else -1
            terms = dict(la[0])
            for t, c in lb[0].items():
                terms[t] = terms.get(t, 0) + sign * c
            return terms, la[1] + sign * lb[1]
        if e.op == "*":
            ca, cb = const_value(e.a), const_value(e.b)
            if isinstance(cb, int):
                la = linear_form(e.a)
                if la is not None:
                    return {t: c * cb for t, c in la[0].items()}, la[1] * cb
            if isinstance(ca, int):
                lb = linear_form(e.b)
                if lb is not None:
                    return {t: c * ca for t, c in lb[0].items()}, lb[1] * ca
    return {e: 1}, 0



def aligned(e, n: int) -> bool:
    """`e` is provably a multiple of n: every coefficient and the constant of its linear form are."""
    from .divisibility import known_divisor  # assumed divisors of dynamic dims (a JIT promise)

    lin = linear_form(simplify(as_expr(e)))
    return lin is not None and lin[1] % n == 0 and all((c * known_divisor(t)) % n == 0 for t, c in lin[0].items())

def _merge_divmod(terms: dict) -> dict:
    """k*c*(x // c) + k*(x % c) == k*x (floor division and modulo, any sign of x)."""
    for t, k in list(terms.items()):
        if not (isinstance(t, Binary) and t.op == "%" and k != 0 and t in terms):
            continue
        c = const_value(t.b)
        div = Binary("//", t.a, t.b, t.dtype)
        if isinstance(c, int) and c > 0 and terms.get(div, 0) == k * c:
            del terms[t], terms[div]
            lin = linear_form(t.a)
            for u, ku in lin[0].items():
                terms[u] = terms.get(u, 0) + k * ku
            terms[_CONST] = terms.get(_CONST, 0) + k * lin[1]
    return terms


_CONST = Const(1, None)  # placeholder key for a constant produced by _merge_divmod


def wrap_int(value: int, dtype) -> int:
    """`value` as the C type holds it: narrow (8/16-bit) and unsigned integers wrap around.

    NOTE: int32/int64 are kept exact; C leaves signed overflow undefined, and an index that
    overflows is a bug to surface, not a value to fold.
    """
    if dtype.kind == "uint":
        return value % (1 << dtype.bits)
    if dtype.kind == "int" and dtype.bits < 32:
        half = 1 << (dtype.bits - 1)
        return (value + half) % (1 << dtype.bits) - half
    return value


def _rebuild(terms: dict, c: int, dtype) -> Expr:
    c += terms.pop(_CONST, 0)
    out = None
    for t, k in terms.items():
        if k == 0:
            continue
        if k == 1:
            term = t
        elif k == -1 and out is not None:
            out = Binary("-", out, t, dtype)
            continue
        else:
            term = Binary("*", t, Const(k, dtype), dtype)
        out = term if out is None else Binary("+", out, term, dtype)
    if out is None:
        return Const(c, dtype)
    if c > 0:
        out = Binary("+", out, Const(c, dtype), dtype)
    elif c < 0:
        out = Binary("-", out, Const(-c, dtype), dtype)
    return out


class _Simplifier(Mutator):
    def visit_Binary(self, e: Binary):
        a, b = self.visit(e.a), self.visit(e.b)
        ca, cb = const_value(a), const_value(b)
        if ca is not None and cb is not None and isinstance(a, Const) and isinstance(b, Const):
            r = _fold(e.op, ca, cb, a.dtype if e.op not in ("<", "<=", ">", ">=", "==", "!=") else e.dtype)
            if r is not None and not (isinstance(r, float) and (math.isnan(r) or math.isinf(r))):
                if e.dtype.is_int and isinstance(r, float):
                    r = None
                if r is not None:
                    if e.dtype.is_bool:
                        return Const(bool(r), e.dtype)
                    return Const(float(r), e.dtype) if e.dtype.is_float else Const(wrap_int(r, e.dtype), e.dtype)
        op = e.op
        # NOTE: only for integers: in IEEE arithmetic -0.0 + 0.0 is +0.0, so `x + 0.0` is not `x`.
        if op == "+" and cb == 0 and not e.dtype.is_float:
            return a
        if op == "+" and ca == 0 and a.dtype == e.dtype and not e.dtype.is_float:
            return b
        if op in ("min", "max") and a == b:
            return a
        if op == "-" and cb == 0:
            return a
        if op == "*" and (cb == 1):
            return a
        if op == "*" and ca == 1 and b.dtype == e.dtype:
            return b
        if op == "*" and e.dtype.is_int and (ca == 0 or cb == 0):
            return Const(0, e.dtype)
        if op in ("//", "/") and cb == 1 and e.dtype.is_int:
            return a
        if op == "%" and cb == 1 and e.dtype.is_int:
            return Const(0, e.dtype)
        if op == "&&":
            if ca is True:
                return b
            if cb is True:
                return a
            if ca is False or cb is False:
                return Const(False, e.dtype)
        if op == "||":
            if ca is False:
                return b
            if cb is False:
                return a
            if ca is True or cb is True:
                return Const(True, e.dtype)
        if op in ("+", "-", "*") and e.dtype.is_int:
            new = Binary(op, a, b, e.dtype)
            lin = linear_form(new)
            if lin is not None and len(lin[0]) <= 8:
                return _rebuild(_merge_divmod(lin[0]), lin[1], e.dtype)
            return new
        if op in ("//", "%") and e.dtype.is_int and isinstance(cb, int) and cb > 0:
            lin = linear_form(a)
            if lin is not None and all(k % cb == 0 for k in lin[0].values()) and lin[0]:
                # (k*cb*x + c) // cb == k*x + c // cb, (..) % cb == c % cb  (x >= 0 not needed)
                if op == "//":
                    return _rebuild({t: k // cb for t, k in lin[0].items()}, lin[1] // cb, e.dtype)
                return Const(lin[1] % cb, e.dtype)
        if a is e.a and b is e.b:
            return e
        return Binary(op, a, b, e.dtype)

    def visit_Unary(self, e: Unary):
        a = self.visit(e.a)
        v = const_value(a)
        if isinstance(a, Const):
            if e.op == "-":
                return Const(-v, e.dtype)
            if e.op == "!":
                return Const(not v, e.dtype)
        return e if a is e.a else Unary(e.op, a, e.dtype)

    def visit_Select(self, e: Select):
        c = self.visit(e.cond)
        if isinstance(c, Const):
            return self.visit(e.a if c.value else e.b)
        a, b = self.visit(e.a), self.visit(e.b)
        return Select(c, a, b, e.dtype)

    def visit_Cast(self, e: Cast):
        v = self.visit(e.value)
        if isinstance(v, Const) and not e.dtype.is_float and not v.dtype.is_float and not e.dtype.is_bool:
            return Const(wrap_int(int(v.value), e.dtype), e.dtype)
        if isinstance(v, Const) and e.dtype.name in ("float32", "float64") and not v.dtype.is_bool:
            return Const(float(v.value), e.dtype)
        if v.dtype == e.dtype:
            return v
        return e if v is e.value else Cast(e.dtype, v)


def simplify(node):
    """Simplify an expression, or every expression inside a statement/function."""
    if isinstance(node, (int, float)):
        return node
    return _Simplifier().visit(node)


def const_int(e) -> int | None:
    v = const_value(simplify(as_expr(e)) if not isinstance(e, int) else e)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def prove_lt(a, b) -> bool:
    """True when a < b holds for sure (both sides constant after simplification)."""
    d = const_int(as_expr(b) - a)
    return d is not None and d > 0


__all__ = ["simplify", "const_int", "prove_lt", "wrap_int", "Var"]
