"""Explicit 32-bit loads and stores: `T.ldg32` / `T.lds32` (global / shared) return the 4 bytes
at an element's address as a uint32, `T.stg32` / `T.sts32` store a uint32's 4 bytes there.

The source or destination is an element (`x[i]`) or a region of 4 bytes (`x[i:i+2]` of a
16-bit tensor). The value is built from the elements' bits (little-endian, element i in the
low bits), so it means the same on every backend; `pred=False` skips a load (giving 0) or a
store. The 64-, 128- and 256-bit forms return vector values (uint32x2 / x4 / x8), which this
implementation does not have: they are errors that say so.

    w = T.ldg32(x[2 * i:2 * i + 2])      # two float16 as one word
    T.sts32(s[2 * i:2 * i + 2], w)

`T.__ldg(x[i])` (or `T.__ldg(x, i)`) is the element x[i] read through CUDA's read-only data cache
(`__ldg(&x[i])`); the CPU backend reads it plainly.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..arith.simplify import const_int, simplify
from ..errors import DSLTypeError
from ..frontend import builder as B
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer, BufferRegion
from .thread import EMITTED

U32 = dt.uint32


def _elements(x, what, scopes):
    """The 4 bytes of x as (buffer, [index tuples]) of its elements, lowest address first."""
    if isinstance(x, E.BufferLoad):
        buf, start, n = x.buffer, tuple(x.indices), 1
    elif isinstance(x, BufferRegion):
        buf = x.buffer
        exts = [const_int(e) for _, e in x.ranges]
        if None in exts or any(e != 1 for e in exts[:-1]):
            raise DSLTypeError(f"{what}: the region must be contiguous along the last dim, got {x!r}")
        start, n = tuple(lo for lo, _ in x.ranges), exts[-1]
    elif isinstance(x, Buffer):
        buf, start, n = x, (E.as_expr(0),) * x.ndim, 1
        for s in x.shape:
            n *= const_int(s) or 0
    else:
        raise DSLTypeError(f"{what} expects a buffer element or region such as x[i] or x[i:i+2], got {x!r}")
    if scopes and buf.scope not in scopes:
        raise DSLTypeError(f"{what}: {buf.name} is a {buf.scope} buffer; {what} works on {' / '.join(scopes)} memory")
    if buf.dtype.bits * n != 32 or buf.dtype.bits not in (8, 16, 32):
        raise DSLTypeError(f"{what}: x[...] must cover 4 bytes in 1, 2 or 4 elements; got {n} of {buf.dtype}")
    idx = [start[:-1] + (simplify(start[-1] + j),) for j in range(n)]
    return buf, idx


def _load32(src, pred, what, scopes):
    B.in_kernel(what)
    buf, idx = _elements(src, what, scopes)
    bits = buf.dtype.bits
    word = None
    for j, at in enumerate(idx):
        v = E.BufferLoad(buf, at, buf.dtype)
        u = v if buf.dtype == dt.as_dtype(f"uint{bits}") else E.Call("reinterpret", (v,), dt.as_dtype(f"uint{bits}"))
        part = E.cast(U32, u)
        if j:
            part = E.binop("<<", part, E.const(bits * j, U32))
        word = part if word is None else E.binop("|", word, part)
    return word if pred is None else E.select(E.as_expr(pred), word, E.const(0, U32))


def _store32(dst, value, pred, what, scopes):
    B.in_kernel(what)
    buf, idx = _elements(dst, what, scopes)
    bits = buf.dtype.bits
    w = E.cast(U32, E.as_expr(value))
    ut = dt.as_dtype(f"uint{bits}")
    stores = []
    for j, at in enumerate(idx):
        part = E.cast(ut, E.binop(">>", w, E.const(bits * j, U32)) if j else w)
        v = part if buf.dtype == ut else E.Call("reinterpret", (part,), buf.dtype)
        stores.append(S.BufferStore(buf, at, v))
    body = S.seq(*stores)
    B.current().emit(body if pred is None else S.IfThenElse(E.as_expr(pred), body))
    return EMITTED


_GLOBAL, _SHARED = ("global",), ("shared", "shared.dyn")


def ldg32(src, pred=None):
    """The 4 bytes of global memory at `src` (x[i] or x[i:i+k]) as a uint32; 0 where pred is False."""
    return _load32(src, pred, "T.ldg32", _GLOBAL)


def stg32(dst, value, pred=None):
    """Store the uint32 `value`'s 4 bytes to global memory at `dst`, unless pred is False."""
    return _store32(dst, value, pred, "T.stg32", _GLOBAL)


def lds32(src):
    """The 4 bytes of shared memory at `src` as a uint32."""
    return _load32(src, None, "T.lds32", _SHARED)


def sts32(dst, value):
    """Store the uint32 `value`'s 4 bytes to shared memory at `dst`."""
    return _store32(dst, value, None, "T.sts32", _SHARED)


def _vector(name, bits):
    def f(*args, **kwargs):
        raise DSLTypeError(f"T.{name} returns or takes a {bits}-bit vector value (uint32x{bits // 32}), which this "
                           f"implementation does not have: use T.{name[:3]}32 per word, or a T.copy / T.vectorized "
                           "loop, which the compiler turns into vector loads and stores")
    f.__name__ = name
    f.__doc__ = f"Not supported: T.{name} works on uint32x{bits // 32} vector values (see the module docstring)."
    return f


def ldg64(src, pred=None):
    """Not supported: a 64-bit vector (uint32x2) form (see the module docstring)."""
    return _vector("ldg64", 64)()


def ldg128(src, pred=None):
    """Not supported: a 128-bit vector (uint32x4) form (see the module docstring)."""
    return _vector("ldg128", 128)()


def ldg256(src, pred=None):
    """Not supported: a 256-bit vector (uint32x8) form (see the module docstring)."""
    return _vector("ldg256", 256)()


def stg64(dst, value, pred=None):
    """Not supported: a 64-bit vector (uint32x2) form (see the module docstring)."""
    return _vector("stg64", 64)()


def stg128(dst, value, pred=None):
    """Not supported: a 128-bit vector (uint32x4) form (see the module docstring)."""
    return _vector("stg128", 128)()


def stg256(dst, value, pred=None):
    """Not supported: a 256-bit vector (uint32x8) form (see the module docstring)."""
    return _vector("stg256", 256)()


def lds64(src):
    """Not supported: a 64-bit vector (uint32x2) form (see the module docstring)."""
    return _vector("lds64", 64)()


def lds128(src):
    """Not supported: a 128-bit vector (uint32x4) form (see the module docstring)."""
    return _vector("lds128", 128)()


def sts64(dst, value):
    """Not supported: a 64-bit vector (uint32x2) form (see the module docstring)."""
    return _vector("sts64", 64)()


def sts128(dst, value):
    """Not supported: a 128-bit vector (uint32x4) form (see the module docstring)."""
    return _vector("sts128", 128)()


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
