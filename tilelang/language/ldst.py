"""Explicit 32/64/128/256-bit loads and stores: `T.ldg32` / `T.lds32` (global / shared) return the
4 bytes at an element's address as a uint32, `T.ldg64` / `ldg128` / `ldg256` / `lds64` / `lds128`
8, 16 or 32 bytes as a uint32x2 / x4 / x8 vector value (frontend/vector.py); `T.stg32` / `T.sts32`
store a uint32's bytes, `T.stg64` ... / `T.sts64` ... a vector value of as many bits.

The source or destination is an element (`x[i]`: the bytes from x[i] on, along its last dim), a
region of exactly those bytes (`x[i:i+2]` of a 16-bit tensor for 32 bits), or a whole buffer (from
its first element). The value is built from the elements' bits (little-endian, element i in the
low bits), so it means the same on every backend; `pred=False` skips a load (giving 0) or a store.
The wide forms move their elements through a local array in one T.vectorized loop: one 8/16-byte
access on CUDA where the address is proved aligned, else one access per element.

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
from .alloc import alloc_local
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


def _moved(buf, idx, staged, load: bool) -> S.Stmt:
    """`staged[j] = buf[idx[j]]` (or the other way) as one T.vectorized loop over the elements: the
    CUDA lowering moves them as one 8/16-byte access where it proves the address aligned, else one
    element at a time."""
    j = E.Var(B.current().unique("lane"), dt.int32)
    at = idx[0][:-1] + (simplify(idx[0][-1] + j),)
    mem, reg = E.BufferLoad(buf, at, buf.dtype), E.BufferLoad(staged, (j,), buf.dtype)
    body = S.BufferStore(staged, (j,), mem) if load else S.BufferStore(buf, at, reg)
    return S.For(j, E.const(0), E.const(len(idx)), "vectorized", body)


def _load(src, pred, bits, what, scopes):
    """The bits at src as a uint32 (32 bits) or a uint32xN vector; 0 where pred is False."""
    B.in_kernel(what)
    buf, idx = _elements(src, bits, what, scopes)
    p = None if pred is None else E.as_expr(pred)
    if len(idx) == 1:
        word = V.reinterpret(E.BufferLoad(buf, idx[0], buf.dtype), dt.uint32, what)
        return word if p is None else E.select(p, word, E.const(0, dt.uint32))
    staged = alloc_local((len(idx),), buf.dtype)  # zero bits where pred is False
    b = B.current()
    if p is not None:
        for k in range(len(idx)):
            b.emit(S.BufferStore(staged, (E.const(k),), E.cast(buf.dtype, E.const(0))))
    move = _moved(buf, idx, staged, load=True)
    b.emit(move if p is None else S.IfThenElse(p, move))
    elems = V.VectorValue([E.BufferLoad(staged, (E.const(k),), buf.dtype) for k in range(len(idx))])
    return V.reinterpret(elems, dt.uint32.with_lanes(bits // 32), what)


def _store(dst, value, pred, bits, what, scopes):
    B.in_kernel(what)
    buf, idx = _elements(dst, bits, what, scopes)
    if bits == 32 and not getattr(value, "is_tl_vector", False):
        value = E.cast(dt.uint32, E.as_expr(value, dt.uint32))
    lanes = V.lanes_of(V.reinterpret(value, buf.dtype.with_lanes(len(idx)), what))
    b = B.current()
    if len(idx) == 1:
        body = S.BufferStore(buf, idx[0], lanes[0])
    else:
        staged = alloc_local((len(idx),), buf.dtype)
        for k, v in enumerate(lanes):
            b.emit(S.BufferStore(staged, (E.const(k),), v))
        body = _moved(buf, idx, staged, load=False)
    b.emit(body if pred is None else S.IfThenElse(E.as_expr(pred), body))
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
