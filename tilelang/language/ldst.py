"""Explicit 32/64/128/256-bit loads and stores: `T.ldg32` / `T.lds32` (global / shared) return the
4 bytes at an element's address as a uint32, `T.ldg64` / `ldg128` / `ldg256` / `lds64` / `lds128`
8, 16 or 32 bytes as a uint32x2 / x4 / x8 vector value (frontend/vector.py); `T.stg32` / `T.sts32`
store a uint32's bytes, `T.stg64` ... / `T.sts64` ... a vector value of as many bits.

The source or destination is an element (`x[i]`: the bytes from x[i] on, along its last dim), a
region of exactly those bytes (`x[i:i+2]` of a 16-bit tensor for 32 bits), or a whole buffer (from
its first element). The value is built from the elements' bits (little-endian, element i in the
low bits), so it means the same on every backend; `pred=False` skips a load (giving 0) or a store.
The wide forms are the scalar accesses of their elements in the generated code.

    w = T.ldg32(x[2 * i:2 * i + 2])      # two float16 as one word
    T.sts32(s[2 * i:2 * i + 2], w)
    Y[4 * i:4 * i + 4] = T.reinterpret(T.ldg128(X[4 * i:4 * i + 4], pred=i < n), T.float32x4)

`T.__ldg(x[i])` (or `T.__ldg(x, i)`) is the element x[i] read through CUDA's read-only data cache
(`__ldg(&x[i])`); the CPU backend reads it plainly.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..arith.simplify import const_int, simplify
from ..errors import DSLTypeError
from ..frontend import builder as B
from ..frontend import vector as V
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer, BufferRegion
from .thread import EMITTED


def _elements(x, bits, what, scopes):
    """The `bits` bits at x as (buffer, [index tuples]) of its elements, lowest address first."""
    if isinstance(x, E.BufferLoad):
        buf, start, n = x.buffer, tuple(x.indices), None
    elif isinstance(x, BufferRegion):
        buf = x.buffer
        exts = [const_int(e) for _, e in x.ranges]
        if None in exts or any(e != 1 for e in exts[:-1]):
            raise DSLTypeError(f"{what}: the region must be contiguous along the last dim, got {x!r}")
        start, n = tuple(lo for lo, _ in x.ranges), exts[-1]
    elif isinstance(x, Buffer):
        buf, start, n = x, (E.as_expr(0),) * x.ndim, None
    else:
        raise DSLTypeError(f"{what} expects a buffer element or region such as x[i] or x[i:i+2], got {x!r}")
    if scopes and buf.scope not in scopes:
        raise DSLTypeError(f"{what}: {buf.name} is a {buf.scope} buffer; {what} works on {' / '.join(scopes)} memory")
    eb = buf.dtype.bits
    if eb not in (8, 16, 32, 64) or buf.dtype.is_bool or bits % eb:
        raise DSLTypeError(f"{what}: {bits} bits of {buf.dtype} elements are not supported (8-, 16-, 32- or "
                           "64-bit numbers whose width divides the access)")
    if n is not None and n * eb != bits:
        raise DSLTypeError(f"{what}: x[...] must cover {bits // 8} bytes ({bits // eb} elements of {buf.dtype}); "
                           f"got {n}")
    n = bits // eb
    if isinstance(x, Buffer) and buf.static_shape is not None and buf.numel() < n:
        raise DSLTypeError(f"{what}: {buf.name} has fewer than the {n} elements of {bits // 8} bytes")
    return buf, [start[:-1] + (simplify(start[-1] + j),) for j in range(n)]


def _load(src, pred, bits, what, scopes):
    """The bits at src as a uint32 (32 bits) or a uint32xN vector; 0 where pred is False."""
    B.in_kernel(what)
    buf, idx = _elements(src, bits, what, scopes)
    loads = [E.BufferLoad(buf, at, buf.dtype) for at in idx]
    elems = loads[0] if len(loads) == 1 else V.VectorValue(loads)
    words = V.reinterpret(elems, dt.uint32.with_lanes(bits // 32), what)
    if pred is None:
        return words
    p = E.as_expr(pred)
    sel = [E.select(p, w, E.const(0, dt.uint32)) for w in V.lanes_of(words)]
    return sel[0] if len(sel) == 1 else V.VectorValue(sel)


def _store(dst, value, pred, bits, what, scopes):
    B.in_kernel(what)
    buf, idx = _elements(dst, bits, what, scopes)
    if bits == 32 and not getattr(value, "is_tl_vector", False):
        value = E.cast(dt.uint32, E.as_expr(value, dt.uint32))
    lanes = V.lanes_of(V.reinterpret(value, buf.dtype.with_lanes(len(idx)), what))
    body = S.seq(*(S.BufferStore(buf, at, v) for at, v in zip(idx, lanes)))
    B.current().emit(body if pred is None else S.IfThenElse(E.as_expr(pred), body))
    return EMITTED


_GLOBAL, _SHARED = ("global",), ("shared", "shared.dyn")


def ldg32(src, pred=None):
    """The 4 bytes of global memory at `src` (x[i] or x[i:i+k]) as a uint32; 0 where pred is False."""
    return _load(src, pred, 32, "T.ldg32", _GLOBAL)


def ldg64(src, pred=None):
    """The 8 bytes of global memory at `src` as a uint32x2 vector; 0 where pred is False:
    `T.reinterpret(T.ldg64(X[2 * i:2 * i + 2]), T.float32x2)`."""
    return _load(src, pred, 64, "T.ldg64", _GLOBAL)


def ldg128(src, pred=None):
    """The 16 bytes of global memory at `src` as a uint32x4 vector; 0 where pred is False."""
    return _load(src, pred, 128, "T.ldg128", _GLOBAL)


def ldg256(src, pred=None):
    """The 32 bytes of global memory at `src` as a uint32x8 vector; 0 where pred is False."""
    return _load(src, pred, 256, "T.ldg256", _GLOBAL)


def stg32(dst, value, pred=None):
    """Store the uint32 `value`'s 4 bytes to global memory at `dst`, unless pred is False."""
    return _store(dst, value, pred, 32, "T.stg32", _GLOBAL)


def stg64(dst, value, pred=None):
    """Store a 64-bit vector value (uint32x2, float32x2 ...) to global memory at `dst`, unless pred is False."""
    return _store(dst, value, pred, 64, "T.stg64", _GLOBAL)


def stg128(dst, value, pred=None):
    """Store a 128-bit vector value (uint32x4 ...) to global memory at `dst`, unless pred is False."""
    return _store(dst, value, pred, 128, "T.stg128", _GLOBAL)


def stg256(dst, value, pred=None):
    """Store a 256-bit vector value (uint32x8 ...) to global memory at `dst`, unless pred is False."""
    return _store(dst, value, pred, 256, "T.stg256", _GLOBAL)


def lds32(src):
    """The 4 bytes of shared memory at `src` as a uint32."""
    return _load(src, None, 32, "T.lds32", _SHARED)


def lds64(src):
    """The 8 bytes of shared memory at `src` as a uint32x2 vector."""
    return _load(src, None, 64, "T.lds64", _SHARED)


def lds128(src):
    """The 16 bytes of shared memory at `src` as a uint32x4 vector."""
    return _load(src, None, 128, "T.lds128", _SHARED)


def sts32(dst, value):
    """Store the uint32 `value`'s 4 bytes to shared memory at `dst`."""
    return _store(dst, value, None, 32, "T.sts32", _SHARED)


def sts64(dst, value):
    """Store a 64-bit vector value (uint32x2 ...) to shared memory at `dst`."""
    return _store(dst, value, None, 64, "T.sts64", _SHARED)


def sts128(dst, value):
    """Store a 128-bit vector value (uint32x4 ...) to shared memory at `dst`."""
    return _store(dst, value, None, 128, "T.sts128", _SHARED)


def __ldg(load_or_buf, index=None):
    """The element of a global tensor at `x[i]` read through the read-only data cache: `T.__ldg(x[i])`, or
    `T.__ldg(x, i)` / `T.__ldg(x, (i, j))` with a buffer and its index. CUDA: `__ldg(&x[i])` (float8 elements,
    which __ldg has no overload for, load plainly); CPU: a plain load. The element's dtype."""
    if isinstance(load_or_buf, Buffer):
        if index is None:
            raise ValueError("T.__ldg(Buffer, index) requires an index when passing a Buffer")
        idx = tuple(index) if isinstance(index, (list, tuple)) else (index,)
        ld = E.BufferLoad(load_or_buf, tuple(E.as_expr(i) for i in idx), load_or_buf.dtype)
    elif isinstance(load_or_buf, E.BufferLoad):
        ld = load_or_buf
    else:
        raise TypeError(f"T.__ldg expects a BufferLoad such as x[i] or a Buffer and an index, got {load_or_buf!r}")
    if ld.buffer.scope != "global":
        raise DSLTypeError(f"T.__ldg: {ld.buffer.name} is a {ld.buffer.scope} buffer; the read-only data cache "
                           "serves global tensors")
    return E.Call("ldg", (ld,), ld.dtype)
