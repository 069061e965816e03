"""The producer's form of a guarded pipelined body's condition (warp_specialize.py, `_guarded_copies`).

Takes: the condition `cond` of `if cond:` around a T.Pipelined body, the kernel's top-level
statements before that loop, and the kernel body. Gives: `cond` with each read of a small
fragment that a `T.copy(global_region, frag)` before the loop filled (and nothing else writes)
replaced by the global element the copy read, or None where another read of non-scalar memory
remains. The producer thread never runs the consumers' code, so it cannot read their fragment;
the global element holds the same value as long as nothing in the kernel writes that tensor.
Block-sparse attention's per-row mask (`T.copy(Mask[bz, by, bx, :], block_mask)`, then
`if block_mask[k] != 0:` around the loop body) is the case:

    T.copy(Mask[bz, by, bx, :], block_mask)        producer:  if Mask[bz, by, bx, k] != 0: tma K, V
    for k in T.Pipelined(n):                 ->    consumers: if block_mask[k] != 0: gemm ...
        if block_mask[k] != 0: ...
"""
from __future__ import annotations

from ...arith.ranges import Ranges
from ...arith.simplify import const_int
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import BufferRegion
from ...ir.visitor import Mutator, collect
from ...op import tile_ops as O

SCALAR = ("local", "local.var")


def producer_guard(cond, k: S.KernelLaunch, prefix: list) -> E.Expr | None:
    """cond readable by the producer thread (scalars, globals, loop and block variables), or None."""
    body, sources = k.body, {}
    for ld in collect(cond, lambda n: isinstance(n, E.BufferLoad)):
        b = ld.buffer
        if b.scope in SCALAR + ("global",) or b.uid in sources:
            continue
        src = _filling_copy(b, prefix, body)
        if src is None or not _in_bounds(src, k, prefix):
            return None
        sources[b.uid] = src
    return _ToGlobal(sources).visit(cond) if sources else cond


def _filling_copy(frag, prefix: list, body) -> BufferRegion | None:
    """The global region whose elements `frag` holds: one top-level T.copy(global, frag) of all of
    frag before the loop, frag written nowhere else, the global tensor written nowhere in the kernel."""
    if frag.scope != "fragment" or len(frag.shape) != 1:
        return None
    fills = [st for st in prefix if isinstance(st, O.Copy) and st.dst.buffer.uid == frag.uid]
    regions = collect(body, lambda n: isinstance(n, BufferRegion) and n.buffer.uid == frag.uid)
    stores = collect(body, lambda n: isinstance(n, S.BufferStore) and n.buffer.uid == frag.uid)
    if len(fills) != 1 or stores or len(regions) != 1:
        return None
    copy = fills[0]
    src = copy.src
    if src.buffer.scope != "global" or src.buffer.dtype != frag.dtype or not _read_only(src.buffer, body):
        return None
    (start, ext), = copy.dst.ranges
    n = const_int(frag.shape[0])
    wide = [const_int(e) for _, e in src.ranges if const_int(e) != 1]
    if const_int(start) != 0 or const_int(ext) != n or n is None or wide != [n]:
        return None
    return src


def _in_bounds(src: BufferRegion, k, prefix: list) -> bool:
    """Every element of the region lies inside its tensor (the copy read 0 outside it; a plain
    load would read out of bounds)."""
    r = Ranges()
    r.kernel(k)
    for st in prefix:
        if isinstance(st, S.LetStmt):
            r.let(st.var, st.value)
    for (start, ext), n in zip(src.ranges, src.buffer.shape):
        lo = r.lower(start)
        if lo is None or lo < 0 or not r.below(E.binop("+", start, ext), E.binop("+", n, 1)):
            return False
    return True


def _read_only(g, body) -> bool:
    """The kernel reads global tensor g (loads, copy sources) and never writes it."""
    regions = collect(body, lambda n: isinstance(n, BufferRegion) and n.buffer.uid == g.uid)
    srcs = collect(body, lambda n: isinstance(n, O.Copy) and n.src.buffer.uid == g.uid)
    stores = collect(body, lambda n: isinstance(n, S.BufferStore) and n.buffer.uid == g.uid)
    atomics = collect(body, lambda n: isinstance(n, E.Call) and not n.op.startswith("tl_") and
                      ("atomic" in n.op or n.op.startswith("extern:")) and
                      collect(n, lambda x: isinstance(x, E.BufferLoad) and x.buffer.uid == g.uid))
    return not stores and not atomics and len(regions) == len(srcs)


class _ToGlobal(Mutator):
    def __init__(self, sources: dict):
        self.sources = sources

    def visit_BufferLoad(self, ld):
        src = self.sources.get(ld.buffer.uid)
        if src is None:
            return self.generic(ld)
        (i,) = tuple(self.visit(x) for x in ld.indices)
        idx = tuple(s if const_int(e) == 1 else E.binop("+", s, i) for s, e in src.ranges)
        return E.BufferLoad(src.buffer, idx, ld.dtype)
