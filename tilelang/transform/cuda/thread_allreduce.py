"""Lower thread-level statements of user SIMT code on CUDA: T.tvm_thread_allreduce,
and reducer updates (T.alloc_reducer).

Expects: lowered per-thread IR (after lower_kernel), `tid` the flat thread index.
Guarantees: no ThreadAllReduce remains; one over threadIdx.x of a power-of-two extent of at most
32 became an xor butterfly of warp shuffles, any other a store of every thread's value to a
shared scratch row and a loop combining its group's entries (barriers between come from
thread_sync, which runs next); every store `red[i] = red[i] op v` to a reducer tile is an
atomic `op` (many threads fold into one element).

    T.tvm_thread_allreduce(1, acc[0], True, out[0], ty)   (threads (32, 4))
      ->  scr[tid] = acc[0]                ; barrier
          r = id; for m in 0..3: r = r + scr[tid + (m - (tid / 32) % 4) * 32]
          out[0] = r                        ; (barrier before scr is written again)
"""
from __future__ import annotations

from ... import dtypes as dt
from ...errors import LoweringError
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer
from ...ir.visitor import Mutator
from ...op.thread_ops import ThreadAllReduce

_ATOMIC = {"sum": "atomic_add", "max": "atomic_max", "min": "atomic_min"}


class _LowerThreadLevel(Mutator):
    def __init__(self, threads: tuple, tid: E.Var):
        self.threads, self.tid = threads, tid
        self.n = 0

    def visit_ThreadAllReduce(self, s: ThreadAllReduce):
        x, y, _ = self.threads
        if tuple(s.axes) == (0,) and x <= 32 and x & (x - 1) == 0:
            return self._shuffles(s, x)
        total = x * y * self.threads[2]
        self.n += 1
        d = s.result.dtype
        scr = Buffer(f"tl_red_scratch{self.n}", (total,), d, "shared.dyn")
        acc = Buffer(f"tl_red_acc{self.n}", (1,), d, "local")
        strides, exts = (1, x, x * y), self.threads
        coords = (self.tid % x, (self.tid // x) % y, self.tid // (x * y))
        member = self.tid
        loops = []
        for ax in s.axes:
            m = E.Var(f"tl_m{ax}", dt.int32)
            member = member + (m - coords[ax]) * strides[ax]
            loops.append((m, exts[ax]))
        body = S.BufferStore(acc, (E.as_expr(0),), s.combine(E.BufferLoad(acc, (E.as_expr(0),), d),
                                                              E.BufferLoad(scr, (member,), d)))
        for m, ext in reversed(loops):
            body = S.For(m, E.as_expr(0), E.as_expr(ext), "serial", body)
        res = s.result
        return S.seq(S.Allocate(scr), S.Allocate(acc),
                     S.BufferStore(scr, (self.tid,), s.value, span=s.span),
                     S.BufferStore(acc, (E.as_expr(0),), s.identity),
                     body, S.BufferStore(res.buffer, res.indices, E.BufferLoad(acc, (E.as_expr(0),), d),
                                         span=s.span))

    def _shuffles(self, s: ThreadAllReduce, x: int):
        """A reduction over threadIdx.x of a power-of-two extent of at most 32: its groups are
        aligned runs of lanes within one warp, combined by an xor butterfly of shuffles (every
        lane ends with the whole group's value) -- no shared scratch, no barrier."""
        self.n += 1
        d = s.result.dtype
        acc = Buffer(f"tl_red_acc{self.n}", (1,), d, "local")
        ld = E.BufferLoad(acc, (E.as_expr(0),), d)
        steps = [S.BufferStore(acc, (E.as_expr(0),), s.value, span=s.span)]
        off = x // 2
        while off:
            other = E.Call("tl_shfl_xor", (E.const(0xFFFFFFFF, dt.uint32), ld, E.as_expr(off), E.as_expr(32)), d)
            steps.append(S.BufferStore(acc, (E.as_expr(0),), s.combine(ld, other)))
            off //= 2
        res = s.result
        return S.seq(S.Allocate(acc), *steps, S.BufferStore(res.buffer, res.indices, ld, span=s.span))

    def visit_BufferStore(self, s: S.BufferStore):
        op = getattr(s.buffer, "reducer_op", None)
        if op is None:
            return self.generic(s)
        if op not in _ATOMIC:
            raise LoweringError(f"T.alloc_reducer(op={op!r}) updates are not supported on CUDA (sum, max, min are)",
                                s.span)
        cur = E.BufferLoad(s.buffer, s.indices, s.buffer.dtype)
        v = update_operand(s.value, cur, op)
        if v is None:  # a plain write (T.clear / T.fill, a copy into it): not an update
            return s
        return S.Evaluate(E.Call(_ATOMIC[op], (cur, v), s.buffer.dtype), span=s.span)


def update_operand(value, cur, op):
    """v where value is `cur op v` (or `v op cur`), else None."""
    if op == "sum" and isinstance(value, E.Binary) and value.op == "+":
        a, b = value.a, value.b
    elif isinstance(value, E.Call) and value.op == op[:3] and len(value.args) == 2:
        a, b = value.args
    else:
        return None
    a, b = _strip(a), _strip(b)
    if a == cur:
        return value.b if isinstance(value, E.Binary) else value.args[1]
    if b == cur:
        return value.a if isinstance(value, E.Binary) else value.args[0]
    return None


def _strip(e):
    return e.value if isinstance(e, E.Cast) else e


def lower_thread_level(k: S.KernelLaunch, tid: E.Var) -> S.KernelLaunch:
    from dataclasses import replace

    low = _LowerThreadLevel(k.threads, tid)
    return replace(k, body=low.visit(k.body))
