"""Shared-memory indices without the divisions that a flat element counter put in them.

Why: a thread-level loop over a shared tile often indexes it by one running element number,
`index = i * 1024 + tx * 4; B_s[index // 64, index % 64]` (the dequant GEMMs' per-thread
transactions). Printed as they stand, the row is `((i*1024 + tid*4) >> 6)` and the offset
`(int64_t)row * 64 + (... & 63)`: nvcc recomputes a shift, a mask, a multiply and an add per
unrolled copy (8 copies, ~10 SASS each, in the dequant's k-loop, against none in the public build,
whose address is one base plus an immediate per copy).

Expects: a lowered CUDA kernel and the set of shared buffers that have a layout function
(panels / swizzles: their row and column are arguments of tl::panel_xor_offset and friends).
Guarantees: in every index of a shared-memory access (loads, stores, and addresses inside inline
statements), `(c*X + R) // c` becomes `X + R // c` and `(c*X + R) % c` becomes `R % c` (`>> k` and
`& (2^k - 1)` read as `// 2^k` and `% 2^k`); a term `(g*Y) // c` with g | c becomes `Y // (c/g)` and
`(g*Y) % c` becomes `(Y % (c/g)) * g`. Both hold for every integer in floor semantics (the IR's),
so no range is needed. A tile with no layout function and a static shape is then indexed by its
flat offset in the last dimension, simplified, so `(x // 64) * 64 + x % 64` is `x`. Power-of-two
divisions are printed back as shifts and masks.

    B_s[(i*1024 + tid*4) >> 6, (i*1024 + tid*4) & 63]       ->  B_s[0, i*1024 + tid*4]
    D_s[(i*2048 + tid*8) >> 7, (i*2048 + tid*8) & 127]      ->  D_s[i*16 + (tid >> 4), (tid & 15) * 8]
        (D_s paneled: tl::panel_xor_offset<128>(row, col))
"""
from __future__ import annotations

import math

from ... import dtypes as dt
from ...arith.simplify import const_int, linear_form, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import Mutator, collect

_SHARED = ("shared", "shared.dyn")


def _divmod_of(e):
    """(op, a, c) for e = a // c, a % c, a >> k, a & (2^k - 1) with a constant c > 1; else None."""
    if not (isinstance(e, E.Binary) and e.dtype.kind == "int" and e.dtype.bits >= 32):
        return None
    c = const_int(e.b)
    if c is None or c <= 0:
        return None
    if e.op == ">>":
        return ("//", e.a, 1 << c) if 0 < c < 31 else None
    if e.op == "&":
        return ("%", e.a, c + 1) if c > 0 and (c + 1) & c == 0 else None
    if e.op in ("//", "%") and c > 1:
        return e.op, e.a, c
    return None


def _sum(terms: dict, const: int, dtype) -> E.Expr:
    out = E.Const(const, dtype)
    for t, k in terms.items():
        out = E.Binary("+", out, t if k == 1 else E.Binary("*", t, E.Const(k, dtype), dtype), dtype)
    return simplify(out)


def split_divmod(op: str, a: E.Expr, c: int, dtype) -> E.Expr | None:
    """a // c or a % c (floor) with the multiples of c pulled out of a's linear form and a common
    factor of the rest cancelled against c; None when nothing changes."""
    lin = linear_form(simplify(a))
    if lin is None:
        return None
    terms, k0 = lin
    whole = {t: k // c for t, k in terms.items() if k % c == 0}
    rest = {t: k for t, k in terms.items() if k % c != 0}
    q0, r0 = divmod(k0, c)
    g = 0
    for k in (*rest.values(), r0):
        g = math.gcd(g, k)
    g = g if g > 1 and c % g == 0 else 1
    if not whole and q0 == 0 and g == 1:
        return None
    if not rest and r0 == 0:
        return _sum(whole, q0, dtype) if op == "//" else E.Const(0, dtype)
    inner = _sum({t: k // g for t, k in rest.items()}, r0 // g, dtype)
    cg = E.Const(c // g, dtype)
    if op == "%":
        m = E.Binary("%", inner, cg, dtype)
        return m if g == 1 else E.Binary("*", m, E.Const(g, dtype), dtype)
    q = E.Binary("//", inner, cg, dtype)
    return simplify(E.Binary("+", _sum(whole, q0, dtype), q, dtype)) if whole or q0 else q


class _Split(Mutator):
    def visit_Binary(self, e):
        e = self.generic(e)
        got = _divmod_of(e)
        if got is None:
            return e
        new = split_divmod(*got, e.dtype)
        return e if new is None else new


class _Shifts(Mutator):
    """`// 2^k` and `% 2^k` back as `>> k` and `& (2^k - 1)` (both floor semantics)."""

    def visit_Binary(self, e):
        e = self.generic(e)
        c = const_int(e.b) if e.op in ("//", "%") and e.dtype.kind == "int" else None
        if c is None or c <= 1 or c & (c - 1):
            return e
        if e.op == "//":
            return E.Binary(">>", e.a, E.Const(c.bit_length() - 1, e.dtype), e.dtype)
        return E.Binary("&", e.a, E.Const(c - 1, e.dtype), e.dtype)


def _count(e) -> int:
    return len(collect(e, lambda n: _divmod_of(n) is not None))


class _SharedIndices(Mutator):
    def __init__(self, laid: set):
        self.laid = laid

    def _indices(self, buf, indices):
        if buf.scope not in _SHARED or not any(_count(i) for i in indices):
            return None
        if any(i.dtype.kind != "int" or i.dtype.bits < 32 for i in indices):
            return None
        flat_ok = all(i.dtype == dt.int32 for i in indices)
        split = [simplify(_Split().visit(i)) for i in indices]
        shape = getattr(buf, "static_shape", None)
        if (flat_ok and buf.uid not in self.laid and shape is not None and len(shape) == len(split) > 1
                and not getattr(buf, "strides", None) and buf.dtype.bits >= 8):
            flat, stride = E.Const(0, dt.int32), 1
            for d in range(len(shape) - 1, -1, -1):
                flat = E.Binary("+", flat, E.Binary("*", split[d], E.Const(stride, split[d].dtype), split[d].dtype)
                                if stride != 1 else split[d], dt.int32)
                stride *= shape[d]
            if stride < 2 ** 31:
                split = [E.Const(0, dt.int32)] * (len(shape) - 1) + [simplify(flat)]
        new = [_Shifts().visit(i) for i in split]
        if tuple(new) == tuple(indices):
            return None
        return tuple(new)

    def visit_BufferLoad(self, e):
        e = self.generic(e)
        idx = self._indices(e.buffer, e.indices)
        return e if idx is None else E.BufferLoad(e.buffer, idx, e.dtype)

    def visit_BufferStore(self, s):
        s = self.generic(s)
        idx = self._indices(s.buffer, s.indices)
        return s if idx is None else S.BufferStore(s.buffer, idx, s.value, span=s.span)


def split_shared_indices(body, laid: set):
    """`body` with its shared-memory indices divided out (see the module docstring); `laid`: uids
    of the shared tiles indexed through a layout function (their indices stay two-dimensional)."""
    return _SharedIndices(laid).visit(body)
