"""check_dtypes: reject, before lowering, the dtypes our C and CUDA backends cannot compute yet.

Takes a PrimFunc as parsed; gives it back unchanged, or raises `UnsupportedDTypeError`
naming the dtype, where it is used (buffer, parameter or expression, with the user's
source line) and the target. Every dtype name exists in `T.*` (so programs that only
mention float6 or int2 import and run their host code); this pass is the first place
a kernel actually needs one.

    A: T.Tensor((M, K), T.float6_e3m2fn) ->  UnsupportedDTypeError: kernel `main`, parameter A:
                                             dtype float6_e3m2fn is not supported by the cuda backend
                                             yet: of the sub-byte types only float4_e2m1fn, int4 ...
"""
from __future__ import annotations

import dataclasses

from ..errors import TileLangError
from ..ir.buffer import Buffer
from ..ir.stmt import PrimFunc
from ..ir.visitor import Visitor, buffers_used

# Computed by both backends: native C types, float-emulated bit patterns, float32-stored tf32,
# float8_e8m0fnu (power-of-two scales), float4_e2m1fn, int4 and uint4 packed two per byte (see
# codegen/c_expr.py).
SUPPORTED = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                       "float16", "bfloat16", "float32", "float64", "tfloat32", "float8_e4m3fn", "float8_e5m2",
                       "float8_e8m0fnu", "float4_e2m1fn", "int4", "uint4"})


# Addresses (T.access_ptr, T.address_of, T.call_extern("handle", ...)): values of expressions only.
EXPR_ONLY = frozenset({"handle"})


class UnsupportedDTypeError(TileLangError):
    """A kernel uses a dtype the chosen backend cannot store or compute."""


def why_unsupported(d) -> str:
    """The reason, and the usual workaround, for a dtype outside SUPPORTED."""
    if d.lanes != 1:
        return (f"vector dtypes ({d.scalar_name} x {d.lanes} lanes) are not kernel element types here; "
                f"use a buffer of {d.scalar_name} (copies and loops are vectorized automatically)")
    if d.bits < 8 or d.scalar_name in ("float4_e2m1_unpacked",):
        return ("of the sub-byte types only float4_e2m1fn, int4 and uint4 have loads, stores and conversions in our "
                "backends; "
                "keep other packed bytes in a uint8/int8 buffer and unpack them with shifts and masks")
    if d.scalar_name.startswith("float8"):
        return "this float8 format has no conversions in our backends (supported: float8_e4m3fn, float8_e5m2, float8_e8m0fnu)"
    return f"supported dtypes: {', '.join(sorted(SUPPORTED))}"


class _Walk(Visitor):
    """Every expression dtype under a statement, reported with that statement's span."""

    def __init__(self, report):
        self.report = report
        self.span = None

    def generic(self, node):
        span = getattr(node, "span", None)
        outer = self.span
        if span is not None:
            self.span = span
        d = getattr(node, "dtype", None)
        if d is not None and getattr(d, "name", None) not in SUPPORTED | EXPR_ONLY and hasattr(d, "lanes"):
            self.report(d, f"expression {node}", self.span)
        for f in dataclasses.fields(node):
            if f.name not in ("span", "dtype"):
                self.visit(getattr(node, f.name))
        self.span = outer


def check_dtypes(func: PrimFunc, target: str) -> None:
    """Raise UnsupportedDTypeError at the first use of an unsupported dtype in `func`."""

    def report(d, where, span):
        raise UnsupportedDTypeError(f"kernel `{func.name}`, {where}: dtype {d} is not supported by the {target} "
                                    f"backend yet: {why_unsupported(d)}", span or func.span)

    for p in func.params:
        if p.dtype.name not in SUPPORTED:
            report(p.dtype, f"parameter {p.name}", func.span)
    for b in buffers_used(func.body):
        if isinstance(b, Buffer) and b.dtype.name not in SUPPORTED:
            report(b.dtype, f"buffer {b.name} ({b.scope})", _alloc_span(func, b))
    _Walk(report).visit(func.body)


def _alloc_span(func: PrimFunc, buf: Buffer):
    from ..ir.stmt import Allocate
    from ..ir.visitor import collect

    for a in collect(func.body, lambda n: isinstance(n, Allocate) and n.buffer is buf):
        return a.span
    return func.span


def check_dtypes_pass(func: PrimFunc, ctx) -> PrimFunc:
    check_dtypes(func, getattr(ctx.target, "kind", None) or str(ctx.target))
    return func
