"""Split T.Parallel loops at the barriers of their body (both backends).

A barrier at the top level of a T.Parallel body (T.sync_threads, T.sync_grid) means every element's
statements before it run before any element's statements after it. The CPU backend runs a T.Parallel
nest as one serial loop per block, and the CUDA backend deals the elements to the threads in guarded
per-thread loops (a barrier there would be reached by some threads only, or a different number of
times), so this pass splits the nest there, one nest per part, the barrier between them (where
cpu_threads / the C codegen give it its meaning on the CPU: a no-op between the block's serial loops for
T.sync_threads, the grid barrier for T.sync_grid; on CUDA a __syncthreads every thread reaches).

Expects: tile-level IR (the parser's output), before cpu_threads.
Guarantees: no barrier call is left inside a T.Parallel loop. A barrier under a branch or a serial
loop inside the nest, or a value bound (`x = ...`) before a barrier and read after it, is refused
with a LoweringError at the barrier's line (keep it in a buffer: `L[i] = ...`).

    for i in T.Parallel(n):                 for i in T.Parallel(n):
        L[i] = A[n - 1 - i]                     L[i] = A[n - 1 - i]
        T.sync_grid()               ->      T.sync_grid()
        A[i] = A[i] + L[i]                  for i_1 in T.Parallel(n):
                                                A[i_1] = A[i_1] + L[i_1]
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import LoweringError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.stmt import PrimFunc
from ..ir.visitor import Mutator, collect, substitute

BARRIERS = {"tl_sync_threads": "T.sync_threads", "tl_sync_grid": "T.sync_grid"}


def is_barrier(st) -> bool:
    return isinstance(st, S.Evaluate) and isinstance(st.value, E.Call) and st.value.op in BARRIERS


class _Split(Mutator):
    def visit_For(self, s: S.For):
        if s.kind != "parallel":
            return self.generic(s)
        loops, body = [s], s.body
        while isinstance(body, S.For) and body.kind == "parallel":
            loops.append(body)
            body = body.body
        if not collect(body, lambda n: isinstance(n, E.Call) and n.op in BARRIERS):
            return s
        stmts = list(S.top_level(body))
        for st in stmts:
            inner = collect(st, lambda n: isinstance(n, E.Call) and n.op in BARRIERS)
            if inner and not is_barrier(st):
                raise LoweringError(f"{BARRIERS[inner[0].op]} under a branch or loop inside a T.Parallel loop: the "
                                    "CPU backend splits a T.Parallel loop at a barrier of its body's top level only; "
                                    "move the barrier out of the branch or loop", getattr(st, "span", None) or s.span)
        return S.seq(*_parts(loops, stmts))


def _parts(loops: list, stmts: list) -> list:
    """The nest `loops` around each run of `stmts` between barriers, the barriers between them."""
    out, cur, bound, first = [], [], set(), True
    for st in stmts + [None]:
        if st is not None and not is_barrier(st):
            cur.append(st)
            continue
        if cur:
            read = {v.uid for v in collect(S.seq(*cur), lambda n: isinstance(n, E.Var))}
            late = [x for x in bound if x.uid in read]
            if late:
                raise LoweringError(f"{late[0].name} is bound before a barrier inside a T.Parallel loop and read "
                                    "after it; the CPU backend splits the loop at the barrier: keep the value in "
                                    "a buffer indexed by the loop variables instead",
                                    getattr(st, "span", None) or loops[0].span)
            bound |= {x.var for x in cur if isinstance(x, S.LetStmt)}
            out.append(_nest(loops, cur, fresh=not first))
            cur, first = [], False
        if st is not None:
            out.append(st)
    return out


def _nest(loops: list, stmts: list, fresh: bool):
    body = S.seq(*stmts)
    if fresh:  # sibling loops get their own loop variables
        new = {lp.var: E.Var(lp.var.name, lp.var.dtype) for lp in loops}
        body = substitute(body, new)
        loops = [replace(lp, var=new[lp.var]) for lp in loops]
    for lp in reversed(loops):
        body = replace(lp, body=body)
    return body


def split_parallel_barriers(func: PrimFunc, ctx=None) -> PrimFunc:
    if not collect(func.body, lambda n: isinstance(n, E.Call) and n.op in BARRIERS):
        return func
    return replace(func, body=_Split().visit(func.body))
