"""`T.any_of(buf)` / `T.all_of(buf)`: whether any / every element of a buffer or region is
non-zero, as one boolean expression that the thread evaluating it reads in full.

    if T.any_of(mask_local):            ->  if (m[0] != 0 || m[1] != 0 || m[2] != 0 || m[3] != 0)
"""
from __future__ import annotations

import itertools

from .. import dtypes as dt
from ..arith.simplify import const_int
from ..errors import DSLTypeError
from ..frontend import builder as B
from ..ir import expr as E
from ..ir.buffer import Buffer, BufferRegion

MAX_ELEMS = 1024  # elements one thread reads in an unrolled expression


def _elements(x, what):
    if isinstance(x, Buffer):
        buf, ranges = x, tuple((E.as_expr(0), s) for s in x.shape)
    elif isinstance(x, BufferRegion):
        buf, ranges = x.buffer, x.ranges
    else:
        raise DSLTypeError(f"{what} expects a buffer or a region such as mask[i, 0:n], got {x!r}")
    if buf.scope == "local.fragment" or buf.scope == "fragment":
        raise DSLTypeError(f"{what}: {buf.name} is a fragment, spread over the block's threads; copy it to a shared "
                           "or local buffer first")
    exts = [const_int(n) for _, n in ranges]
    if None in exts:
        raise DSLTypeError(f"{what}: the extents of {buf.name} must be constants, got {[n for _, n in ranges]}")
    total = 1
    for n in exts:
        total *= n
    if total > MAX_ELEMS:
        raise DSLTypeError(f"{what}: {total} elements is more than one thread reads here ({MAX_ELEMS}); reduce the "
                           "buffer with T.reduce_* first")
    for idx in itertools.product(*(range(n) for n in exts)):
        at = tuple(lo + i for (lo, _), i in zip(ranges, idx))
        yield E.compare("!=", E.BufferLoad(buf, at, buf.dtype), E.const(0, buf.dtype))


def any_of(buffer):
    """True if any element of `buffer` (a buffer or region) is non-zero. Example: `if T.any_of(flags): ...`."""
    B.in_kernel("T.any_of")
    out = E.const(False, dt.as_dtype("bool"))
    for i, e in enumerate(_elements(buffer, "T.any_of")):
        out = e if i == 0 else E.logical_or(out, e)
    return out


def all_of(buffer):
    """True if every element of `buffer` (a buffer or region) is non-zero."""
    B.in_kernel("T.all_of")
    out = E.const(True, dt.as_dtype("bool"))
    for i, e in enumerate(_elements(buffer, "T.all_of")):
        out = e if i == 0 else E.logical_and(out, e)
    return out
