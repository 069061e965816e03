"""Eager-mode declarations: `T.const`, `T.empty`, and symbolic dims `T.dynamic`."""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import DSLSyntaxError, DSLTypeError
from ..frontend import builder as B
from ..ir.expr import Var


def dynamic(name: str, dtype="int32"):
    """A symbolic dimension bound at call time from tensor shapes: `m = T.dynamic("m")`;
    several names ("b, s" or "b s") give a tuple of them."""
    names = [n for n in name.replace(",", " ").split()]
    if len(names) > 1:
        return tuple(Var(n, dt.as_dtype(dtype)) for n in names)
    return Var(name.strip(), dt.as_dtype(dtype))


def symbolic(name: str, dtype="int32") -> Var:
    """Deprecated alias of `T.dynamic`."""
    return dynamic(name, dtype)


def const(name: str, dtype="int32"):
    """Eager mode: compile-time dims named in `names` ("M, N" or "M N"), fixed per specialization.

    Example::

        @tilelang.jit
        def add(A, B, block: int):
            M, N = T.const("M, N")
            A: T.Tensor((M, N), T.float32)
            ...
    """
    b = B.current("T.const")
    if b.eager is None:
        raise DSLSyntaxError("T.const is only valid in an eager-mode @tilelang.jit function body")
    parts = [p for p in name.replace(",", " ").split() if p]
    if not parts:
        raise DSLTypeError("T.const needs at least one name")
    vals = [b.eager.const(p, dt.as_dtype(dtype)) for p in parts]
    return vals[0] if len(vals) == 1 else tuple(vals)


def empty(*shape, dtype="float32"):
    """Eager mode: a new output tensor of `shape`, allocated per call and returned by the kernel:
    `T.empty((M, N), T.float16)`, `T.empty((M, N), dtype=...)` or `T.empty(M, N, dtype=...)`."""
    b = B.current("T.empty")
    if b.eager is None:
        raise DSLSyntaxError("T.empty is only valid in an eager-mode @tilelang.jit function body")
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    elif len(shape) == 2 and isinstance(shape[0], (tuple, list)) and isinstance(shape[1], str):
        shape, dtype = tuple(shape[0]), shape[1]
    elif not shape or any(isinstance(x, (tuple, list, str)) for x in shape):
        raise DSLTypeError(f"T.empty: expected a shape (a tuple, or extents) and dtype=, got {shape!r}")
    return b.eager.declare_output(tuple(shape), dt.as_dtype(dtype))
