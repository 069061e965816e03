"""Runs of adjacent float32 atomic adds as one vector reduction (CUDA lowering, after the element loops).

Why: `T.atomic_addx4(dKV[b, idx, g, d * 4], acc_s[i, d * 4])` (the sparse MLA backward's dKV
scatter) is four element atomics, each under the same out-of-range guard of its gathered row.
Printed as such, each is a scalar `atomicAdd` (RED.E.ADD.F32) with its own branch, its own 64-bit
address and its own shared-memory read: four L2 requests where sm_90 has one
`red.global.add.v4.f32` (the public build's `AtomicAddx4`), and four LDS.32 where one LDS.128 reads
the values. The same holds for any body that adds 2 or 4 neighbouring elements one statement each.

Expects: a lowered CUDA kernel body: statements `[if g:] atomic_add(dst[..., x + k], v_k)` (the
lowering of single-element atomics, guarded by their bounds check) and LetStmt coordinates.
Guarantees: each maximal run of n = 4 (else 2) consecutive such statements in one sequence, with
one guard g (structurally equal), one float32 global `dst` without explicit strides, equal
indices but the last, last indices x, x + 1, .., x + n - 1 with x provably a multiple of n (read
through the sequence's lets) and a row length a multiple of n, and values v_k not reading dst,
becomes `[if g:] tl_atomic_add_v{n}_f32(&dst[..., x], v_0, .., v_{n-1})`; when the v_k are
the elements y .. y + n - 1 of one shared float32 row (y a multiple of n, rows a multiple of n,
no strides) they are read as one n-element vector (`tl_atomic_add_v{n}_f32_from`). Every element
is still added exactly once; only the number of requests changes. Other statements are unchanged.
Off switch: pass config `tl.disable_atomic_runs`.

A vector reduction made earlier (`tl_atomic_add_v{n}_f32(&dst, v_0, .., v_{n-1})`, vectorize's
`T.atomic_add(dK[...], dk_shared)`) whose values are such a shared row reads them the same way
(`source=True`): one LDS.128 for four LDS.32, which in a swizzled staging tile (16-byte chunks
XORed by row, staging_swizzle) also hit 2-4 wavefronts each where the vector read is one per
quarter warp. Off switch: pass config `tl.disable_atomic_vector_source`.
"""
from __future__ import annotations

import re

from ... import dtypes as dt
from ...arith.divisibility import is_multiple
from ...arith.simplify import const_int, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer
from ...ir.visitor import Mutator, collect, substitute
from .raw import Raw

_SHARED = ("shared", "shared.dyn")


def _unguard(s):
    """(guard or None, atomic_add call) for `[if g:] atomic_add(dst, v)` (no else), else None."""
    guard = None
    while isinstance(s, S.IfThenElse) and s.else_case is None:
        guard = s.cond if guard is None else E.binop("&&", guard, s.cond)
        s = s.then_case
    if isinstance(s, S.SeqStmt) and len(s.stmts) == 1:
        s = s.stmts[0]
    if not (isinstance(s, S.Evaluate) and isinstance(s.value, E.Call) and s.value.op == "atomic_add"
            and len(s.value.args) == 2):
        return None
    dst, val = s.value.args
    if not (isinstance(dst, E.BufferLoad) and dst.buffer.scope == "global" and dst.buffer.dtype.name == "float32"
            and dst.buffer.strides is None and val.dtype.name == "float32"):
        return None
    if collect(val, lambda n: isinstance(n, E.BufferLoad) and n.buffer is dst.buffer):
        return None
    return guard, s.value


def _offset(a: E.BufferLoad, b: E.BufferLoad) -> int | None:
    """b's element minus a's when they index one buffer and differ only in the last index, else None."""
    if a.buffer is not b.buffer or len(a.indices) != len(b.indices) or a.indices[:-1] != b.indices[:-1]:
        return None
    return const_int(simplify(E.as_expr(b.indices[-1]) - E.as_expr(a.indices[-1])))


def _aligned(ld: E.BufferLoad, n: int, lets: dict) -> bool:
    """ld's flat element offset is a multiple of n: its last index is, and so is every row stride."""
    buf: Buffer = ld.buffer
    if buf.strides is not None:
        return False
    if len(buf.shape) > 1 and not is_multiple(buf.shape[-1], n):
        return False
    last = E.as_expr(ld.indices[-1])
    return is_multiple(simplify(substitute(last, lets)) if lets else last, n)


def _shared_row(vals, n: int, lets: dict) -> E.BufferLoad | None:
    """The first of n values that are consecutive, n-aligned elements of one shared float32 row."""
    v0 = vals[0]
    if not (isinstance(v0, E.BufferLoad) and v0.buffer.scope in _SHARED and v0.buffer.dtype.name == "float32"):
        return None
    if any(not isinstance(v, E.BufferLoad) or _offset(v0, v) != k for k, v in enumerate(vals)):
        return None
    return v0 if _aligned(v0, n, lets) else None


def _addr(ld: E.BufferLoad) -> E.Expr:
    return E.Call("address_of", (E.BufferLoad(ld.buffer, tuple(ld.indices), ld.dtype),), dt.uint64)


# a vector reduction of n separate values (vectorize.atomic_vector_loop, run_at below)
_VECTOR_ADD = re.compile(r"^tl_atomic_add_v([24])_f32\(\{0\}(?:, \{\d\})+\);$")


class _Runs(Mutator):
    def __init__(self, source: bool = True):
        self.lets: dict = {}
        self.merged = 0
        self.source = source

    def visit_Raw(self, r: Raw):
        """`tl_atomic_add_v{n}_f32(&dst, v_0, ..)` of one shared row's aligned elements: read as one vector."""
        m = _VECTOR_ADD.match(r.fmt) if self.source else None
        if m is None or len(r.args) != int(m.group(1)) + 1:
            return r
        n = int(m.group(1))
        src = _shared_row(list(r.args[1:]), n, self.lets)
        if src is None:
            return r
        return Raw(f"tl_atomic_add_v{n}_f32_from({{0}}, {{1}});", (r.args[0], _addr(src)),
                   reads=tuple(dict.fromkeys((*r.reads, src.buffer))), writes=r.writes, span=r.span)

    def visit_SeqStmt(self, s: S.SeqStmt):
        saved = self.lets
        self.lets = dict(saved)
        items, scope = [], []  # scope[i]: the lets in force at items[i]
        for x in s.stmts:
            scope.append(self.lets)
            items.append(self.visit(x))
            if isinstance(x, S.LetStmt):
                self.lets = {**self.lets, x.var: substitute(x.value, self.lets) if self.lets else x.value}
        self.lets = saved
        out, i = [], 0
        while i < len(items):
            got = self.run_at(items, i, scope[i])
            if got is None:
                out.append(items[i])
                i += 1
            else:
                out.append(got[0])
                i += got[1]
        return S.SeqStmt(tuple(out), span=s.span)

    def run_at(self, items, i: int, lets: dict):
        first = _unguard(items[i])
        if first is None:
            return None
        for n in (4, 2):
            if i + n > len(items):
                continue
            parts = [first] + [_unguard(x) for x in items[i + 1:i + n]]
            if any(p is None for p in parts):
                continue
            guard = first[0]
            dsts = [p[1].args[0] for p in parts]
            if any(p[0] != guard for p in parts) or any(_offset(dsts[0], d) != k for k, d in enumerate(dsts)):
                continue
            if not _aligned(dsts[0], n, lets):
                continue
            vals = [p[1].args[1] for p in parts]
            src = _shared_row(vals, n, lets)
            if src is not None:
                st = Raw(f"tl_atomic_add_v{n}_f32_from({{0}}, {{1}});", (_addr(dsts[0]), _addr(src)),
                         reads=(src.buffer,))
            else:
                args = ", ".join(f"{{{k + 1}}}" for k in range(n))
                st = Raw(f"tl_atomic_add_v{n}_f32({{0}}, {args});", (_addr(dsts[0]), *vals))
            self.merged += 1
            return (st if guard is None else S.IfThenElse(guard, st)), n
        return None


def merge_atomic_runs(body, source: bool = True):
    """body with its runs of adjacent float32 atomic adds merged (see the module docstring);
    source: vector reductions of one shared row's elements read them as one vector."""
    return _Runs(source).visit(body)
