"""Element-copy loops as tile copies, so the cp.async pipeline can stage them.

Takes: a kernel's tile-level IR (the cp.async path, before software pipelining). Gives: each
`T.Parallel` nest whose whole body is one store of a shared tile at exactly the loop's variables
from a global tensor at the same variables plus loop-invariant offsets (a box of the tensor),
same dtype, replaced by the equivalent `T.copy` (gemm_intrinsics' hand-written loads):

    for i, k in T.Parallel(128, 32):                  ->   T.copy(A[by * 128, ko * 32], A_shared)
        A_shared[i, k] = A[by * 128 + i, ko * 32 + k]

The copy reads the same elements; where the box leaves the tensor, T.copy reads zeros where the
loop would have read out of bounds. Loops that are no box (a row gather through an index tensor)
stay loops; `element_copy` says whether the pipeline can still stage one as cp.async.
"""
from __future__ import annotations

from ...arith.simplify import const_int, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import BufferRegion
from ...ir.visitor import Mutator, collect
from ...op import tile_ops as O


def _as_copy(s: S.For):
    vars_, exts, body = [], [], s
    while isinstance(body, S.For) and body.kind == "parallel" and not body.annotations:
        vars_.append(body.var)
        exts.append(const_int(body.extent))
        if const_int(body.start) != 0:
            return None
        body = body.body
    if not isinstance(body, S.BufferStore) or None in exts:
        return None
    dst, val = body.buffer, body.value
    if dst.scope not in ("shared", "shared.dyn") or tuple(body.indices) != tuple(vars_) \
            or tuple(const_int(x) for x in dst.shape) != tuple(exts):
        return None
    if not isinstance(val, E.BufferLoad) or val.buffer.scope != "global" or val.buffer.dtype != dst.dtype:
        return None
    src = val.buffer
    nv = len(vars_)
    if src.ndim < nv:
        return None
    ranges = []
    for d, idx in enumerate(val.indices):
        used = set(collect(idx, lambda n: isinstance(n, E.Var)))
        if d < src.ndim - nv:  # leading dims: one index per copy
            if used & set(vars_) or collect(idx, lambda n: isinstance(n, E.BufferLoad)):
                return None
            ranges.append((idx, 1))
            continue
        v = vars_[d - (src.ndim - nv)]
        start = simplify(idx - v)
        if set(collect(start, lambda n: isinstance(n, E.Var))) & set(vars_) or \
                collect(start, lambda n: isinstance(n, E.BufferLoad)):
            return None
        ranges.append((start, exts[d - (src.ndim - nv)]))
    whole = BufferRegion(dst, tuple((E.as_expr(0), e) for e in exts))
    return O.Copy(BufferRegion(src, tuple(ranges)), whole, span=s.span)


def element_copy(st) -> bool:
    """A T.Parallel nest whose body is one store of a shared tile from a global tensor of the same
    dtype, or zero where a condition fails (`if_then_else(ok, X[..], 0)`, the safe-memory form),
    the innermost loop variable the last index of the tile and of the tensor's last index: an
    element copy the cp.async lowering can stage, a row gather included
    (`KV_s[i, d] = KV[b, Indices[b, s, i], d]`)."""
    vars_, body = [], st
    while isinstance(body, S.For) and body.kind == "parallel" and const_int(body.start) == 0:
        vars_.append(body.var)
        body = body.body
    if not vars_ or not isinstance(body, S.BufferStore) or body.buffer.scope not in ("shared", "shared.dyn"):
        return False
    ld = body.value.a if isinstance(body.value, E.Select) and _is_zero(body.value.b) else body.value
    if not isinstance(ld, E.BufferLoad) or ld.buffer.scope != "global" or ld.buffer.dtype != body.buffer.dtype:
        return False
    j = vars_[-1]
    last = body.indices[-1]
    return isinstance(last, E.Var) and last == j and j in set(collect(ld.indices[-1], lambda n: isinstance(n, E.Var))) \
        and not any(j in set(collect(x, lambda n: isinstance(n, E.Var))) for x in (*body.indices[:-1], *ld.indices[:-1]))


def _is_zero(e) -> bool:
    while isinstance(e, E.Cast):
        e = e.value
    return isinstance(e, E.Const) and not isinstance(e.value, bool) and e.value == 0


def store_of(st) -> S.BufferStore:
    while isinstance(st, S.For):
        st = st.body
    return st


class _Raise(Mutator):
    """Inside T.Pipelined bodies only: elsewhere the loop and the copy run alike."""

    def __init__(self):
        self.inside = 0

    def visit_For(self, s: S.For):
        if s.kind == "parallel" and self.inside:
            cp = _as_copy(s)
            return cp if cp is not None else s
        self.inside += s.kind == "pipelined"
        try:
            return self.generic(s)
        finally:
            self.inside -= s.kind == "pipelined"


def raise_element_copies(k: S.KernelLaunch) -> S.KernelLaunch:
    return _Raise().visit(k)
