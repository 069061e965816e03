"""widen_fragments: a fragment indexed by a T.Parallel's own loop variables holds the loop's extents.

Takes a PrimFunc as parsed; gives it back with each such fragment declared at, per dim, the
larger of its shape and the loop's extent (a new Buffer replacing the old one everywhere).

Why: the public TileLang lays out a fragment accessed as `F[i, j]` inside
`for i, j in T.Parallel(M, N)` with that loop's layout, whatever F was declared as
(ParallelOp::CompleteBufferFragment returns the loop layout when the indices are the loop
variables), so the fragment holds M x N values. Programs rely on it: the peer suite's
attention_sink forward kernel declares `sinks = T.alloc_fragment([heads])` and writes and reads
it as `sinks[i]` for i < block_M. Here a fragment's declared shape is what is allocated, so such
a loop read and wrote past it (compute-sanitizer memcheck: writes past the block's shared
memory on CUDA; past a C array on the CPU).

    sinks = T.alloc_fragment((1,), "float16")          sinks = T.alloc_fragment((64,), "float16")
    for i in T.Parallel(64):                      ->   for i in T.Parallel(64):
        sinks[i] = Sinks[by]                               sinks[i] = Sinks[by]

Only fragments (registers in the public TileLang) widen; a shared or local tile indexed past its
shape is the program's error (check_index_ranges warns).
"""
from __future__ import annotations

from dataclasses import replace

from ..arith.simplify import const_int
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer
from ..ir.stmt import PrimFunc
from ..ir.visitor import ReplaceBuffers, buffers_used, collect


def _wider_shapes(body) -> dict:
    """Buffer uid -> (buffer, widened shape) for fragments some parallel nest indexes past."""
    out: dict = {}
    viewed = {b.view_base.uid for b in buffers_used(body) if getattr(b, "view_base", None) is not None}
    for loop in collect(body, lambda n: isinstance(n, S.For) and n.kind == "parallel"):
        vars_, exts, inner = [], [], loop
        while isinstance(inner, S.For) and inner.kind == "parallel":
            vars_.append(inner.var)
            exts.append(const_int(inner.extent) if const_int(inner.start) == 0 else None)
            inner = inner.body
        for acc in collect(inner, lambda n: isinstance(n, (E.BufferLoad, S.BufferStore))):
            buf = acc.buffer
            if buf.scope != "fragment" or tuple(acc.indices) != tuple(vars_) or None in exts \
                    or getattr(buf, "view_base", None) is not None or buf.uid in viewed:
                continue
            dims = [const_int(d) for d in buf.shape]
            if None in dims:
                continue
            cur = out.get(buf.uid, (buf, tuple(dims)))[1]
            out[buf.uid] = (buf, tuple(max(c, e) for c, e in zip(cur, exts)))
    return {uid: (b, s) for uid, (b, s) in out.items() if s != tuple(const_int(d) for d in b.shape)}


def widen_fragments(func: PrimFunc) -> PrimFunc:
    wider = _wider_shapes(func.body)
    if not wider:
        return func
    mapping = {}
    for uid, (old, shape) in wider.items():
        new = Buffer(old.name, shape, old.dtype, old.scope)
        mapping[uid] = new
    return replace(func, body=ReplaceBuffers(mapping).visit(func.body))


def widen_fragments_pass(func: PrimFunc, ctx) -> PrimFunc:
    return widen_fragments(func)
