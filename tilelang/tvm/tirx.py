"""`tvm.tirx`: expression builders that user helpers call outside `T.*`, on our IR.

Example (a helper of the dequantize examples)::

    mask = tirx.const((1 << nbit) - 1, T.uint16)
    f4 = (val >> (pos.astype(T.uint16) * tirx.const(nbit, T.uint16))) & mask
    return tirx.reinterpret(T.float16, f4 << tirx.const(10, T.uint16))

`IndexMap` (index_map.py): `IndexMap.from_func(fn, index_dtype=T.int32).map_indices([i, j])`.
The node classes (`IntImm`, `Var`, `Add`, `Select`, `Cast`, `Call` ...) are tirx_nodes.py's.
"""
from __future__ import annotations

from ..dtypes import as_dtype
from ..errors import DSLTypeError
from ..ir import expr as E
from .index_map import IndexMap
from .tirx_nodes import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Broadcast,
    BufferLoad,
    Call,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    PrimExpr,
    Ramp,
    Shuffle,
    SizeVar,
    StringImm,
    Sub,
    Var,
)


def const(value, dtype=None, span=None) -> E.Const:
    """A constant of `dtype`; without one, int -> int32 (int64 when it does not fit), float -> float32,
    bool -> bool."""
    return E.const(value, dtype)


def reinterpret(dtype, value, span=None) -> E.Expr:
    """The bits of `value` read as `dtype` (same width): `reinterpret(T.float16, u16)`."""
    d = as_dtype(dtype)
    v = E.as_expr(value)
    if d.bits * d.lanes != v.dtype.bits * v.dtype.lanes:
        raise DSLTypeError(f"tirx.reinterpret: {v.dtype} ({v.dtype.bits} bits) cannot be reinterpreted as "
                           f"{d} ({d.bits} bits); the widths must match")
    return E.call("reinterpret", v, dtype=d)



def decl_buffer(shape, dtype="float32", name="buffer", data=None, strides=None, elem_offset=None, scope="",
                data_alignment=-1, offset_factor=0, buffer_type="", axis_separators=None, span=None):
    """A buffer outside a kernel, for the helpers that take one (layout makers such as
    `make_full_bank_swizzled_layout(tirx.decl_buffer((8, 64), "float16", scope="shared"))`).
    Storage aliasing (`data=`, `elem_offset=`) and axis separators are not supported."""
    from ..ir.buffer import SCOPES, Buffer

    if data is not None or elem_offset is not None or axis_separators:
        raise DSLTypeError("tirx.decl_buffer: data= / elem_offset= / axis_separators= (a view of other storage) "
                           "are not supported; declare the view in the kernel with T.Tensor(shape, dtype, buf.data) "
                           "or T.view")
    scope = scope or "global"
    if scope not in SCOPES:
        raise DSLTypeError(f"tirx.decl_buffer: unknown scope {scope!r}; expected one of {sorted(SCOPES)}")
    if not isinstance(shape, (list, tuple)):
        shape = (shape,)
    return Buffer(name, tuple(shape), as_dtype(dtype), scope, strides=tuple(strides) if strides else None)


def call_extern(dtype, func_name, *args, span=None) -> E.Expr:
    """`func_name(*args)` with result type `dtype` ("void" / "handle" for none): T.call_extern, inside a
    kernel body."""
    from ..language.extern import call_extern as t_call_extern

    return t_call_extern(dtype, func_name, *args)


def Select(condition, true_value, false_value, span=None) -> E.Expr:
    """`true_value if condition else false_value`, both sides evaluated. A Python bool condition is an
    error here: a helper's `a == b` that Python already decided is usually a mistake."""
    if isinstance(condition, bool) and (isinstance(true_value, E.Expr) or isinstance(false_value, E.Expr)):
        raise DSLTypeError("tirx.Select: the condition is a Python bool, not an expression; build it from "
                           "expressions (`a == b`, tirx.EQ(a, b), `a < b`)")
    return E.select(condition, true_value, false_value)


__all__ = [
    "EQ",
    "GE",
    "GT",
    "LE",
    "LT",
    "NE",
    "Add",
    "And",
    "Broadcast",
    "BufferLoad",
    "Call",
    "Cast",
    "Div",
    "FloatImm",
    "FloorDiv",
    "FloorMod",
    "IndexMap",
    "IntImm",
    "Let",
    "Max",
    "Min",
    "Mod",
    "Mul",
    "Not",
    "Or",
    "PrimExpr",
    "Ramp",
    "Select",
    "Shuffle",
    "SizeVar",
    "StringImm",
    "Sub",
    "call_extern",
    "Var",
    "const",
    "decl_buffer",
    "reinterpret",
]
