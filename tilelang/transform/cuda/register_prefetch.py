"""Synchronous global -> shared element copies of a cp.async pipeline, loaded one iteration ahead.

Takes: a kernel's lowered per-thread CUDA IR (after lower_kernel, before barrier insertion).
Gives: in each serial loop that a T.Pipelined became (its body holds a `cp_async_wait`), each
element copy that cp.async cannot stage (1- or 2-byte elements, strided: a mask column
`mask[b, k * 128 + j, h]` into a shared tile) reads its global elements into registers one
iteration ahead: the store at iteration k writes what a load at iteration k - 1 fetched, so the
store no longer stalls for a memory round trip ahead of the pipeline's wait and barrier. The
load for k + 1 goes out after the body's last cp.async wait (or after the store, if that comes
later): the proxy fence a wait carries on sm_90 (MEMBAR) orders every earlier access of the
thread, so a load issued before it could hold it up.

    for k in T.serial(n):                       pf[l] = mask[g(0, l)]            (l < E, if n > 0)
        for l in T.unroll(E):                   for k in T.serial(n):
            mask_s[f(l)] = mask[g(k, l)]   ->       for l in T.unroll(E):
        wait; barrier; gemm(K)                          mask_s[f(l)] = pf[l]
        ...; wait; barrier; gemm(V)                 wait; barrier; gemm(K)
                                                    ...; wait; barrier
                                                    for l: if k + 1 < n: pf[l] = mask[g(k + 1, l)]
                                                    gemm(V)

Only copies whose source tensor the kernel never writes and whose load index depends on nothing
the loop body computes (the loop variable, the copy's own unrolled loop and its lets, values
fixed before the loop), up to `MAX_REGS` 32-bit registers a thread in all: each element costs
one register for the whole loop. The store stays where it was, so barrier insertion sees the
same shared accesses.
"""
from __future__ import annotations

from dataclasses import replace

from ...arith.simplify import const_int
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer
from ...ir.visitor import Mutator, collect, substitute
from .raw import Raw

MAX_REGS = 8  # prefetch registers a thread, all copies of one loop together


def prefetch_element_copies(body: S.Stmt) -> S.Stmt:
    """`body` with the element copies of its pipelined loops prefetched one iteration ahead."""
    written = {n.buffer.uid for n in collect(body, lambda n: isinstance(n, S.BufferStore))}
    written |= {b.uid for r in collect(body, lambda n: isinstance(n, Raw)) for b in r.writes}
    return _Prefetch(written).visit(body)


def _is_pipelined(loop: S.For) -> bool:
    return loop.kind == "serial" and isinstance(loop.body, S.SeqStmt) and any(
        isinstance(st, Raw) and "cp_async_wait<" in st.fmt for st in loop.body.stmts)


def _element_copy(st):
    """(thread loop, its lets, the guard or None, the store, the global load) of
    `for l: lets; [if guard:] s[..] = g[..]`, else None."""
    if not isinstance(st, S.For) or st.kind != "unroll" or const_int(st.start) != 0 \
            or const_int(st.extent) is None:
        return None
    inner = list(st.body.stmts) if isinstance(st.body, S.SeqStmt) else [st.body]
    lets, store, guard = inner[:-1], inner[-1] if inner else None, None
    if isinstance(store, S.IfThenElse) and store.else_case is None:  # threads past a small tile
        guard, store = store.cond, store.then_case
    if not all(isinstance(x, S.LetStmt) for x in lets) or not isinstance(store, S.BufferStore) \
            or store.buffer.scope not in ("shared", "shared.dyn"):
        return None
    load = store.value
    if not isinstance(load, E.BufferLoad) or load.buffer.scope != "global" \
            or collect((load.indices, guard), lambda n: isinstance(n, E.BufferLoad)):
        return None
    return st, lets, guard, store, load


def _free_vars(node) -> set:
    return set(collect(node, lambda n: isinstance(n, E.Var)))


def _bound_vars(node) -> set:
    return {n.var for n in collect(node, lambda n: isinstance(n, (S.LetStmt, S.For)))}


def _regs(load: E.BufferLoad, extent: int) -> int:
    return extent * max(1, -(-load.buffer.dtype.bytes // 4))


class _Prefetch(Mutator):
    def __init__(self, written: set):
        self.written = written
        self.n = 0

    def visit_For(self, loop: S.For):
        loop = self.generic(loop)
        if not _is_pipelined(loop):
            return loop
        inside = _bound_vars(loop.body)
        stmts, before, after, regs = list(loop.body.stmts), [], {}, 0
        last_wait = max(i for i, st in enumerate(stmts) if isinstance(st, Raw) and "cp_async_wait<" in st.fmt)
        for i, st in enumerate(stmts):
            got = _element_copy(st)
            if got is None:
                continue
            tl_loop, lets, guard, store, load = got
            own = {tl_loop.var} | {x.var for x in lets}
            used = _free_vars((load.indices, guard)) | set().union(*(_free_vars(x.value) for x in lets))
            if load.buffer.uid in self.written or (used - own) & inside \
                    or regs + _regs(load, const_int(tl_loop.extent)) > MAX_REGS:
                continue
            regs += _regs(load, const_int(tl_loop.extent))
            pre, stmts[i], nxt = self._rewrite(loop, tl_loop, lets, guard, store, load)
            before.append(pre)
            after.setdefault(max(i, last_wait), []).append(nxt)
        if not before:
            return loop
        body = [x for i, st in enumerate(stmts) for x in [st, *after.get(i, [])]]
        return S.seq(*before, replace(loop, body=replace(loop.body, stmts=tuple(body))))

    def _rewrite(self, loop: S.For, tl_loop: S.For, lets: list, guard, store: S.BufferStore, load: E.BufferLoad):
        self.n += 1
        ext = const_int(tl_loop.extent)
        pf = Buffer(f"tl_prefetch{self.n}", (ext,), load.buffer.dtype, "local")
        at = (tl_loop.var,)
        end = E.binop("+", loop.start, loop.extent)

        def fetch(k_expr):
            """The copy's loop loading iteration `k_expr`'s elements into pf (fresh loop and let vars)."""
            fresh = {v: E.Var(v.name, v.dtype) for v in [tl_loop.var] + [x.var for x in lets]}
            mapping = {loop.var: k_expr, **fresh}
            body = [S.LetStmt(fresh[x.var], substitute(x.value, mapping)) for x in lets]
            put = S.BufferStore(pf, (fresh[tl_loop.var],), substitute(load, mapping), span=store.span)
            conds = [c for c in (within, None if guard is None else substitute(guard, mapping)) if c is not None]
            if conds:
                put = S.IfThenElse(conds[0] if len(conds) == 1 else E.binop("&&", *conds), put)
            return replace(tl_loop, var=fresh[tl_loop.var], body=S.seq(*body, put))

        within = None
        first = fetch(loop.start)
        if const_int(loop.extent) is None or const_int(loop.extent) <= 0:
            first = S.IfThenElse(E.binop("<", loop.start, end), first)
        use = replace(store, value=E.BufferLoad(pf, at, load.buffer.dtype))
        if guard is not None:
            use = S.IfThenElse(guard, use)
        within = E.binop("<", E.binop("+", loop.var, 1), end)
        nxt = fetch(E.binop("+", loop.var, 1))
        return S.seq(S.Allocate(pf), first), replace(tl_loop, body=S.seq(*lets, use)), nxt
