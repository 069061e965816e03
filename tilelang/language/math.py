"""Scalar math usable anywhere in a kernel: `T.exp2(x)`, `T.max(a, b)`, `T.if_then_else(c, a, b)`."""
from __future__ import annotations

import math as _m

from .. import dtypes as dt
from ..arith.simplify import const_int
from ..ir import expr as E


def _unary(op):
    def fn(x):
        x = E.as_expr(x)
        return E.call(op, x)
    fn.__name__ = op
    fn.__doc__ = f"Elementwise `{op}` of a scalar expression (float result)."
    return fn


exp, exp2, log, log2, log10, sqrt, rsqrt, tanh, sigmoid = (_unary(n) for n in (
    "exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "sigmoid"))
sin, cos, erf, floor, ceil, round, trunc, log1p, expm1, exp10 = (_unary(n) for n in (
    "sin", "cos", "erf", "floor", "ceil", "round", "trunc", "log1p", "expm1", "exp10"))
fast_exp, fast_exp2, fast_log, fast_log2 = exp, exp2, log, log2
__exp, __exp2, __log, __log2 = exp, exp2, log, log2


def abs(x):
    """|x| (keeps the dtype)."""
    return E.call("abs", x)


def max(a, b, *rest):
    """The larger of the arguments."""
    if not isinstance(a, E.Expr) and not isinstance(b, E.Expr) and not rest:
        return a if a >= b else b
    out = E.call("max", a, b)
    for r in rest:
        out = E.call("max", out, r)
    return out


def min(a, b, *rest):
    if not isinstance(a, E.Expr) and not isinstance(b, E.Expr) and not rest:
        return a if a <= b else b
    out = E.call("min", a, b)
    for r in rest:
        out = E.call("min", out, r)
    return out


def pow(a, b):
    return E.call("pow", a, b)


def if_then_else(cond, a, b):
    """`a` where cond holds, else `b` (both evaluated)."""
    return E.select(cond, a, b)


Select = if_then_else


def cast(value, dtype):
    """Convert `value` to `dtype`: `T.cast(x, "float16")`."""
    return E.cast(dtype, value)


def Cast(dtype, value):
    return E.cast(dtype, value)


def infinity(dtype):
    """+inf of a float dtype: `-T.infinity(accum_dtype)` initializes a max reduction."""
    return E.const(float("inf"), dt.as_dtype(dtype))


def max_value(dtype):
    d = dt.as_dtype(dtype)
    if d.is_float:
        return E.const({"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38,
                        "float64": 1.7976931348623157e308, "float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}[d.name], d)
    return E.const((1 << (d.bits - 1)) - 1 if d.kind == "int" else (1 << d.bits) - 1, d)


def min_value(dtype):
    d = dt.as_dtype(dtype)
    if d.is_float:
        return -max_value(d)
    return E.const(-(1 << (d.bits - 1)) if d.kind == "int" else 0, d)


def ceildiv(a, b):
    """ceil(a / b) for non-negative integers (Python ints fold at parse time)."""
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return (E.as_expr(a) + b - 1) // b


def floordiv(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    return E.binop("//", a, b)


def floormod(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a % b
    return E.binop("%", a, b)


def truncdiv(a, b):
    return E.binop("/", E.as_expr(a), b)


def truncmod(a, b):
    a = E.as_expr(a)
    return a - E.binop("/", a, b) * b


def bitwise_and(a, b): return E.binop("&", a, b)
def bitwise_or(a, b): return E.binop("|", a, b)
def bitwise_xor(a, b): return E.binop("^", a, b)
def bitwise_not(a): return E.unop("~", a)
def shift_left(a, b): return E.binop("<<", a, b)
def shift_right(a, b): return E.binop(">>", a, b)
def And(a, b): return E.logical_and(a, b)
def Or(a, b): return E.logical_or(a, b)
def Not(a): return E.logical_not(a)


def reinterpret(value, dtype):
    """Bit-cast a scalar to a same-width dtype."""
    d = dt.as_dtype(dtype)
    return E.call("reinterpret", value, dtype=d)


def clamp(x, lo, hi):
    return min(max(x, lo), hi)


_ = (_m, const_int)
