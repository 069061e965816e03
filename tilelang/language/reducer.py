"""Reducers (`T.alloc_reducer` ... `T.finalize_reducer`) and `T.cummax`.

A reducer is a tile that many threads fold contributions into (`acc[i] += v` inside a
T.Parallel, or `T.reducer_update(acc[i], v)`); `T.finalize_reducer` makes the combined
result readable. It is a fragment: on the GPU, folded into across the rows of a T.Parallel
driven by a register tile, each thread keeps partials of the rows it covers in registers and
finalize combines them with warp shuffles (transform/cuda/ops/reducer.py); used any other way
it lives in shared memory, its updates are atomics and finalize only orders them. The CPU runs
a block on one thread, so its updates are plain and finalize does nothing.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import DSLTypeError, ShapeMismatchError
from ..frontend import builder as B
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer
from ..op import tile_ops as O
from .alloc import alloc_fragment
from .math import infinity
from .thread import EMITTED

_OPS = ("sum", "max", "min", "bitand", "bitor", "bitxor")


def alloc_reducer(shape, dtype, op="sum", replication=None):
    """A reducer tile: `acc = T.alloc_reducer((M,), "float32", op="sum")`; `replication` is
    the legacy knob ("all" / "none") and does not change results."""
    if op not in _OPS:
        raise DSLTypeError(f"T.alloc_reducer: op must be one of {_OPS}, got {op!r}")
    d = dt.as_dtype(dtype)
    if op.startswith("bit") and not d.is_int:
        raise DSLTypeError(f"T.alloc_reducer: op={op!r} needs an integer dtype, got {d}")
    if replication not in (None, "all", "none"):
        raise DSLTypeError(f"T.alloc_reducer: replication must be 'all' or 'none', got {replication!r}")
    buf = alloc_fragment(shape, d)
    buf.reducer_op = op  # read by layout inference (per-thread partials) and the CUDA lowering (atomics)
    return buf


def _identity(op, d):
    if op in ("sum", "bitor", "bitxor"):
        return E.const(0, d)
    if op == "bitand":
        return E.const(-1 if d.kind == "int" else (1 << d.bits) - 1, d)
    from .math import max_value, min_value

    if op == "max":
        return -infinity(d) if d.is_float else min_value(d)
    return infinity(d) if d.is_float else max_value(d)


def _reducer(acc, what) -> Buffer:
    buf = acc if isinstance(acc, Buffer) else getattr(acc, "buffer", None)
    if buf is None or getattr(buf, "reducer_op", None) is None:
        raise DSLTypeError(f"{what}: expected a buffer from T.alloc_reducer, got {acc!r}")
    return buf


def reducer_init(reducer, init=None):
    """Start a reduction: every element the op's identity (or `init_value`)."""
    from .tile import fill

    buf = _reducer(reducer, "T.reducer_init")
    fill(buf, _identity(buf.reducer_op, buf.dtype) if init is None else init)
    return EMITTED


def reducer_update(target, value):
    """Fold `value` into one reducer element: `T.reducer_update(acc[i], x[i, j])`."""
    if not isinstance(target, E.BufferLoad):
        raise DSLTypeError(f"T.reducer_update: expected a reducer element such as acc[i], got {target!r}")
    buf = _reducer(target, "T.reducer_update")
    v = E.cast(buf.dtype, E.as_expr(value, buf.dtype))
    B.current("T.reducer_update").emit(S.BufferStore(buf, target.indices, combine(buf.reducer_op, target, v)))
    return EMITTED


def combine(op, a, b):
    """The reducer op applied to two values (the update `acc[i] = combine(acc[i], v)`)."""
    return {"sum": lambda: a + b, "max": lambda: E.call("max", a, b), "min": lambda: E.call("min", a, b),
            "bitand": lambda: a & b, "bitor": lambda: a | b, "bitxor": lambda: a ^ b}[op]()


def finalize_reducer(reducer, dst=None, batch=1, annotations=None):
    """End a reduction: the combined values are readable in the reducer (or copied to `dst`)."""
    from .tile import copy

    buf = _reducer(reducer, "T.finalize_reducer")
    if batch < 1:
        raise DSLTypeError(f"T.finalize_reducer: batch must be >= 1, got {batch}")
    if dst is not None:
        if tuple(dst.shape) != tuple(buf.shape):
            raise ShapeMismatchError(f"T.finalize_reducer: {dst.name}{tuple(dst.shape)} is not the reducer's shape "
                                     f"{tuple(buf.shape)}")
    B.current("T.finalize_reducer").emit(O.FinalizeReducer(buf, buf.reducer_op))
    if dst is not None:
        copy(buf, dst)
    return EMITTED


def cummax(src, dst=None, dim=0, reverse=False, annotations=None):
    """Inclusive running maximum of a tile along `dim` (in place when dst is None)."""
    from .tile import scan_op

    B.in_kernel("T.cummax")
    B.current().emit(scan_op("T.cummax", "max", src, dst, dim, reverse))
