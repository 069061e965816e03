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

import math
import numbers

from .. import dtypes as dt
from ..arith.simplify import const_int
from ..errors import DSLCheckError, DSLTypeError, DSLValueError, ShapeMismatchError
from ..frontend import builder as B
from ..frontend.reducer_epochs import mark
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
    if op.startswith("bit") and not (d.is_int or d.name == "bool"):
        raise DSLCheckError(f"T.alloc_reducer: bitwise reducer op={op!r} needs an integer dtype (int*, uint* or "
                            f"bool), got {d}")
    if replication not in (None, "all", "none"):
        raise DSLTypeError(f"T.alloc_reducer: replication must be 'all' or 'none', got {replication!r}")
    if replication is not None and op.startswith("bit"):
        raise DSLCheckError(f"T.alloc_reducer: the legacy reducer (replication={replication!r}) supports "
                            f"op='sum', 'max' or 'min', got op={op!r}; drop `replication` for a bitwise reducer")
    buf = alloc_fragment(shape, d)
    buf.reducer_op = op  # read by layout inference (per-thread partials) and the CUDA lowering (atomics)
    if replication is None:  # lifecycle-checked once a reducer op touches it (frontend/reducer_epochs.py)
        buf.reducer_epoch = set()
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


def _emitted(buf, kind, emit):
    """Run `emit` and mark what it emitted as the reducer op `kind` (checked after parsing)."""
    frame = B.current().frames[-1]
    n = len(frame)
    emit()
    if getattr(buf, "reducer_epoch", None) is not None:
        mark(buf, kind, frame[n:])


def reducer_init(reducer, init=None):
    """Open a reducer's epoch: each element starts from the op's identity (sum 0, max lowest, min highest,
    bitand all ones, bitor/bitxor 0), or from `init` (a Python number, or an expression of the reducer's
    dtype). Once per T.alloc_reducer, outside any T.Parallel:

        acc = T.alloc_reducer((M,), "float32", op="sum")
        T.reducer_init(acc)
    """
    from .tile import fill

    buf = _reducer(reducer, "T.reducer_init")
    if init is not None and not isinstance(init, (bool, int, float)):
        d = getattr(init, "dtype", None)
        if d is not None and dt.as_dtype(d) != buf.dtype:
            raise DSLTypeError(f"T.reducer_init: the init value's dtype {dt.as_dtype(d)} does not match reducer "
                               f"`{buf.name}` dtype {buf.dtype}; pass a Python number or cast it "
                               f"(T.cast(value, {str(buf.dtype)!r}))")
    _emitted(buf, "init", lambda: fill(buf, _identity(buf.reducer_op, buf.dtype) if init is None else init))
    return EMITTED


def reducer_update(target, value):
    """Fold `value` into one reducer element: `T.reducer_update(acc[i], x[i, j])`."""
    if not isinstance(target, E.BufferLoad):
        raise DSLTypeError(f"T.reducer_update: expected a reducer element such as acc[i], got {target!r}")
    buf = _reducer(target, "T.reducer_update")
    v = E.cast(buf.dtype, E.as_expr(value, buf.dtype))
    store = S.BufferStore(buf, target.indices, combine(buf.reducer_op, target, v))
    _emitted(buf, "update", lambda: B.current("T.reducer_update").emit(store))
    return EMITTED


def combine(op, a, b):
    """The reducer op applied to two values (the update `acc[i] = combine(acc[i], v)`)."""
    return {"sum": lambda: a + b, "max": lambda: E.call("max", a, b), "min": lambda: E.call("min", a, b),
            "bitand": lambda: a & b, "bitor": lambda: a | b, "bitxor": lambda: a ^ b}[op]()


def _check_batch(buf, batch):
    """`batch` output elements share one collective: a positive divisor of the reducer's size."""
    if isinstance(batch, bool) or not isinstance(batch, numbers.Integral):
        raise DSLTypeError(f"T.finalize_reducer: batch must be a Python int, got {batch!r}")
    batch = int(batch)
    if batch < 1:
        raise DSLValueError(f"T.finalize_reducer: batch must be >= 1, got {batch}")
    dims = [const_int(e) for e in buf.shape]
    total = 0 if None in dims else math.prod(dims)  # a symbolic size is checked by nothing here
    if total and batch > total:
        raise DSLValueError(f"T.finalize_reducer: batch={batch} exceeds total output elements of reducer "
                            f"`{buf.name}` ({total}); use a batch that divides {total}")
    if total and total % batch:
        raise DSLValueError(f"T.finalize_reducer: batch={batch} must evenly divide the {total} output elements of "
                            f"reducer `{buf.name}`")


def finalize_reducer(reducer, dst=None, batch=1, annotations=None):
    """End a reduction: the combined values are readable in the reducer (or copied to `dst`)."""
    from .tile import copy

    buf = _reducer(reducer, "T.finalize_reducer")
    _check_batch(buf, batch)
    if dst is not None:
        if tuple(dst.shape) != tuple(buf.shape):
            raise ShapeMismatchError(f"T.finalize_reducer: {dst.name}{tuple(dst.shape)} is not the reducer's shape "
                                     f"{tuple(buf.shape)}")
    if dst is None:
        if getattr(buf, "reducer_epoch", None):  # reducer_init / reducer_update marked it
            raise DSLTypeError(f"T.finalize_reducer: reducer `{buf.name}` is used with T.reducer_init / "
                               f"T.reducer_update, so it has no readable value: pass a destination, "
                               f"T.finalize_reducer({buf.name}, dst)")
        B.current("T.finalize_reducer").emit(O.FinalizeReducer(buf, buf.reducer_op))
        return EMITTED

    def emit():
        B.current("T.finalize_reducer").emit(O.FinalizeReducer(buf, buf.reducer_op))
        copy(buf, dst)

    _emitted(buf, "finalize", emit)
    return EMITTED


def cummax(src, dst=None, dim=0, reverse=False, annotations=None):
    """Inclusive running maximum of a tile along `dim` (in place when dst is None)."""
    from .tile import scan_op

    B.in_kernel("T.cummax")
    B.current().emit(scan_op("T.cummax", "max", src, dst, dim, reverse))
