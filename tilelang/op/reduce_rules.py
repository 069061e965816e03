"""What a reduction kind means, for every lowering of T.reduce_* (O.Reduce): its identity and
its combiner.

Kinds: sum, abssum (sum of |x|), max, min, absmax (max of |x|), bitand, bitor, bitxor (integer
tiles). With `nan_propagate` (T.reduce_max/min/absmax(..., nan_propagate=True), float16 /
bfloat16 tiles) a NaN operand wins a max / min, as CUDA's __hmax_nan does; without it the
combiner is the plain max / min, whose NaN handling is the target's.

    comb = combiner("max", nan_propagate=True)
    comb(a, b)  ->  a != a ? a : (b != b ? b : max(a, b))      (compared as float32)
"""
from __future__ import annotations

from .. import dtypes as dt
from ..ir import expr as E

BIT_KINDS = ("bitand", "bitor", "bitxor")
KINDS = ("sum", "abssum", "max", "min", "absmax") + BIT_KINDS
ABS_KINDS = ("abssum", "absmax")
NAN_KINDS = ("max", "min", "absmax")

_PLAIN = {"sum": lambda a, b: a + b, "abssum": lambda a, b: a + b,
          "max": lambda a, b: E.call("max", a, b), "absmax": lambda a, b: E.call("max", a, b),
          "min": lambda a, b: E.call("min", a, b), "bitand": lambda a, b: E.binop("&", a, b),
          "bitor": lambda a, b: E.binop("|", a, b), "bitxor": lambda a, b: E.binop("^", a, b)}


def _is_nan(x):
    f = E.cast(dt.float32, x)
    return E.compare("!=", f, f)


def combiner(kind: str, nan_propagate: bool = False):
    """f(acc, v) -> the folded value, for a reduction of `kind`."""
    plain = _PLAIN[kind]
    if not (nan_propagate and kind in NAN_KINDS):
        return plain
    return lambda a, b: E.select(_is_nan(a), a, E.select(_is_nan(b), b, plain(a, b)))


def identity(kind: str, d: dt.DType):
    """The value a cleared destination starts from (the fold of no elements)."""
    if kind in ("max", "min"):
        if d.is_float:
            return E.const(float("-inf") if kind == "max" else float("inf"), d)
        return int_limit(d, low=kind == "max")
    if kind == "bitand":
        return E.const(True, d) if d.is_bool else E.const(-1 if d.kind == "int" else (1 << d.bits) - 1, d)
    return E.const(0, d)


def int_limit(d: dt.DType, low: bool):
    """The smallest (low) or largest value of integer dtype d."""
    if d.kind == "uint":
        return E.const(0 if low else (1 << d.bits) - 1, d)
    return E.const(-(1 << (d.bits - 1)) if low else (1 << (d.bits - 1)) - 1, d)
