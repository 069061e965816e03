"""Calling code the kernel does not define: `T.call_extern`, `T.import_source`,
`T.access_ptr`, and `T.dp4a` (a four-way int8 dot product).

`T.import_source(text)` puts `text` at the top of the generated file (CUDA C++ on the CUDA
target, C on the CPU target), and `T.call_extern(dtype, "name", *args)` calls a function it
(or the target's header) defines; pointers come from `T.access_ptr`.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import DSLTypeError, DSLValueError
from ..frontend import builder as _builder
from ..ir import expr as E
from ..ir.buffer import Buffer, BufferRegion
from ..op.thread_ops import ImportSource
from .thread import EMITTED


def _dtype(d):
    return dt.as_dtype("handle" if d in (None, "void") else d)


def call_extern(*args, **kwargs):
    """Call the device function `func_name(*args)` with result type `dtype` ("handle" for none).

    Written `T.call_extern(dtype, func_name, *args)`, or with the type as a keyword,
    `T.call_extern(func_name, *args, dtype=dtype)`.
    Example: `T.call_extern("handle", "decode_i4s_to_f16", T.access_ptr(B_q, "r"), T.access_ptr(B, "w"), 8)`.
    """
    _builder.in_kernel("T.call_extern")
    if "dtype" in kwargs:
        args = (kwargs.pop("dtype"),) + args
    kwargs.pop("span", None)  # a TVM source location; ours comes from the builder
    if kwargs:
        raise DSLTypeError(f"T.call_extern: unexpected keyword arguments {sorted(kwargs)}; "
                           "only dtype= may be given by name")
    if len(args) < 2:
        raise DSLTypeError("T.call_extern: expected (dtype, func_name, *args), got "
                           f"{len(args)} positional argument(s)")
    dtype, func_name, *args = args
    if not isinstance(func_name, str) or not func_name.replace("_", "a").replace("::", "a").isalnum():
        raise DSLTypeError(f"T.call_extern: the function name must be an identifier, got {func_name!r}")
    return E.Call("extern:" + func_name, tuple(E.as_expr(a) for a in args), _dtype(dtype))


def import_source(source=None):
    """Put `source` (device code defining functions for T.call_extern) at the top of the file."""
    if source is None:
        return EMITTED
    if not isinstance(source, str):
        raise DSLTypeError(f"T.import_source: expected the source text, got {type(source).__name__}")
    _builder.current("T.import_source").emit(ImportSource(source))
    return EMITTED


def access_ptr(base, access_type="r", *extents, offset=0, extent=None, ignore_last_ndim=0):
    """The address of a buffer element: `T.access_ptr(A_local, "w")` (its first element),
    `T.access_ptr(A[i, j], "r")` or a region's first element, plus `offset` elements."""
    if isinstance(access_type, str) and not set(access_type) <= {"r", "w"} or access_type == "":
        raise DSLTypeError(f"T.access_ptr: access_type must be 'r', 'w' or 'rw', got {access_type!r}")
    if isinstance(base, Buffer):
        ld = E.BufferLoad(base, tuple(E.as_expr(0) for _ in base.shape) or (E.as_expr(0),), base.dtype)
    elif isinstance(base, BufferRegion):
        ld = E.BufferLoad(base.buffer, tuple(E.as_expr(s) for s in base.starts), base.buffer.dtype)
    elif isinstance(base, E.BufferLoad):
        ld = base
    else:
        raise DSLTypeError(f"T.access_ptr: expected a buffer, a region or an element, got {base!r}")
    if not E.is_const(offset, 0):
        idx = list(ld.indices)
        idx[-1] = idx[-1] + offset
        ld = E.BufferLoad(ld.buffer, tuple(idx), ld.dtype)
    if ld.buffer.scope == "fragment":
        raise DSLTypeError(f"T.access_ptr: {ld.buffer.name} is a fragment, whose elements are spread over "
                           "threads; take pointers to shared, local or global buffers")
    return E.Call("address_of", (ld,), dt.as_dtype("handle"))


def dp4a(A, B, C):
    """C[0] += A[0]*B[0] + ... + A[3]*B[3] with A, B four int8 values and C int32.

    Example: `T.dp4a(a_local[k * 4], b_local[k * 4], acc)` (elements or buffers).
    """
    ptrs = []
    for name, x, want in (("A", A, dt.int8), ("B", B, dt.int8), ("C", C, dt.int32)):
        buf = x if isinstance(x, Buffer) else getattr(x, "buffer", None)
        if buf is None:
            raise DSLTypeError(f"T.dp4a: {name} must be a buffer or a buffer element, got {x!r}")
        if buf.dtype != want:
            raise DSLValueError(f"T.dp4a requires {want} {name}, got {name}.dtype='{buf.dtype}'")
        ptrs.append(access_ptr(x, "rw" if name == "C" else "r"))
    _builder.current("T.dp4a").emit(_stmt(E.Call("tl_dp4a", tuple(ptrs), dt.int32)))
    return EMITTED


def _stmt(call):
    from ..ir.stmt import Evaluate

    return Evaluate(call)
