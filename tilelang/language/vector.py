"""Lanes of short vector values: `T.extract_lane(v, i)`.

Vector values come from the vector dtype constructors (`T.float32x2(a, b)`, `T.bfloat16x2(A[0], A[1])`),
`T.Broadcast` / `T.Ramp` / `T.Shuffle`, loads with a `T.Ramp` index, `T.ldg64` / `T.ldg128` /
`T.lds64` ..., `T.reinterpret(..., T.float16x2)` and `T.atomic_addx2(..., return_prev=True)`; they
exist while the kernel is parsed and become scalar code (see frontend/vector.py)::

    packed = T.alloc_var(T.bfloat16x2)
    packed = T.bfloat16x2(A[0], A[1])
    B[0] = T.extract_lane(packed, 1)
"""
from __future__ import annotations

from numbers import Integral

from ..errors import DSLTypeError
from ..ir import expr as E


def extract_lane(vector, lane, span=None):
    """Lane `lane` (a constant, 0-based) of a vector value, a scalar of its element dtype:
    `y = T.extract_lane(T.reinterpret(w, T.float16x2), 1)` is the high half of the uint32 w."""
    is_vec = getattr(vector, "is_tl_vector", False)
    if not is_vec and not isinstance(vector, E.Expr):
        raise TypeError(f"extract_lane expects a PrimExpr, but got {type(vector).__name__}")
    lanes = vector.dtype.lanes
    if lanes <= 1:
        raise ValueError(f"extract_lane expects a vector expression, but got dtype {vector.dtype}")
    value = E.const_value(lane) if isinstance(lane, E.Const) else lane
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"extract_lane expects a compile-time integer lane, but got {type(lane).__name__}")
    value = int(value)
    if not 0 <= value < lanes:
        raise IndexError(f"Lane index {value} is out of bounds for dtype {vector.dtype} with {lanes} lanes")
    if not is_vec:
        raise DSLTypeError(f"extract_lane: {vector} is an expression of the vector dtype {vector.dtype}, which "
                           "this implementation does not have (its IR is scalar); build the vector from its lanes "
                           f"(T.{vector.dtype}(a, b, ...)) or hold it with T.alloc_var(T.{vector.dtype})")
    return vector.values[value]
