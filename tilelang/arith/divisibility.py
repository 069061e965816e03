"""What an integer expression is provably a multiple of, under assumed divisors of dynamic dims.

Takes: expressions, and (while `assume_divisors` is active) a map from dynamic dims (`T.dynamic`
Vars) to a divisor the caller promises, e.g. `{k: 8}` when every call passes a k that is a
multiple of 8. Gives: `known_divisor(e)`, the largest constant d this module can prove divides
`e` (0 divides only 0; 1 when nothing is known).

The promise is the JIT's to keep: it compiles a kernel under assumed divisors only when it also
checks them on every call and runs a kernel compiled without them when a call breaks them
(`jit/aligned_dims.py`). Passes never assume anything on their own.
"""
from __future__ import annotations

import contextlib
import contextvars
import math

from ..ir.expr import Binary, Var, as_expr, const_value

_ASSUMED: contextvars.ContextVar = contextvars.ContextVar("tl_assumed_divisors", default=None)


@contextlib.contextmanager
def assume_divisors(divisors: dict):
    """Within the block, each Var key of `divisors` is taken to be a multiple of its value."""
    token = _ASSUMED.set({v.uid: int(d) for v, d in divisors.items()} if divisors else None)
    try:
        yield
    finally:
        _ASSUMED.reset(token)


def assumed_divisor(v: Var) -> int:
    """The divisor assumed for the dynamic dim `v` (1 when none)."""
    got = _ASSUMED.get()
    return got.get(v.uid, 1) if got else 1


def known_divisor(e) -> int:
    """The largest constant this module proves divides the integer expression `e` (0 for e == 0)."""
    e = as_expr(e)
    c = const_value(e)
    if isinstance(c, int) and not isinstance(c, bool):
        return abs(c)
    if isinstance(e, Var):
        return assumed_divisor(e)
    if isinstance(e, Binary) and e.dtype.is_int:
        if e.op in ("+", "-"):
            return math.gcd(known_divisor(e.a), known_divisor(e.b))
        if e.op == "%":  # a % b == a - b * q for an integer q, floored or truncated
            return math.gcd(known_divisor(e.a), known_divisor(e.b))
        if e.op == "*":
            return known_divisor(e.a) * known_divisor(e.b)
        if e.op == "<<":
            s = const_value(e.b)
            if isinstance(s, int) and 0 <= s < 32:
                return known_divisor(e.a) << s
    return 1


def is_multiple(e, n: int) -> bool:
    """`e` is provably a multiple of `n` (n > 0)."""
    d = known_divisor(e)
    return d % n == 0
