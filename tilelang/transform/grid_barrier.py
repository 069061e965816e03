"""Grid barriers: a `T.sync_grid()` at the top level of a `with T.Kernel` body splits the kernel
into one launch per part, over the same grid and threads, in program order.

Why launches and not a cooperative launch: what a grid barrier guarantees (every block's global
writes before it are visible to every block after it) is what a kernel boundary guarantees, and a
launch boundary needs no co-residency of the blocks (a persistent kernel's grid may be any size).
What it does not keep: registers and shared memory. A part may therefore not touch a shared,
fragment or local buffer (T.alloc_var included) that another part touches: such a kernel stays
whole, as does one with a grid barrier inside a loop or a branch, and the backend launches it
cooperatively (the CPU backend: an OpenMP thread per block; CUDA: every block resident at once,
the barrier tl::sync_grid in tl/sync.h).

Expects: tile-level IR (the parser's output); the kernel body's top level is a flat sequence.
Guarantees: no top-level T.sync_grid remains; each part holds the declarations written before it
that it uses (allocations of its buffers, T.annotate_layout of them, lets, T.use_swizzle), with
fresh block, thread and let variables in every part after the first.

    with T.Kernel(n) as b:                     with T.Kernel(n) as b:
        P = T.alloc_fragment(...)                  P = T.alloc_fragment(...)
        ... P ... -> Part[b]                        ... P ... -> Part[b]
        T.sync_grid()                   ->     with T.Kernel(n) as b_1:
        Q = T.alloc_fragment(...)                  Q = T.alloc_fragment(...)
        ... Part[...] -> Q -> Out[b]               ... Part[...] -> Q -> Out[b_1]
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import LoweringError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.stmt import PrimFunc
from ..ir.visitor import buffers_used, collect, substitute
from ..op import tile_ops as O

_DECLS = (S.Allocate, S.LetStmt, O.Swizzle, O.AnnotateLayout)


def is_grid_barrier(st) -> bool:
    return isinstance(st, S.Evaluate) and isinstance(st.value, E.Call) and st.value.op == "tl_sync_grid"


def split_grid_barriers(func: PrimFunc) -> PrimFunc:
    """`func` with every kernel whose body has top-level grid barriers split into launches there; a
    kernel whose registers or shared memory live across a barrier stays whole (a cooperative launch)."""
    if not collect(func.body, is_grid_barrier):
        return func
    out, changed = [], False
    for st in S.top_level(func.body):
        if isinstance(st, S.KernelLaunch) and any(is_grid_barrier(s) for s in S.top_level(st.body)):
            try:
                out += _split(func.name, st)
                changed = True
            except LoweringError:  # registers / shared memory live across a barrier
                out.append(st)
        else:
            out.append(st)
    return replace(func, body=S.seq(*out)) if changed else func


def _split(fname: str, k: S.KernelLaunch) -> list:
    parts, cur = [], []
    for s in S.top_level(k.body):
        if is_grid_barrier(s):
            parts.append(cur)
            cur = []
        else:
            cur.append(s)
    parts.append(cur)
    owner: dict = {}  # uid of a register / shared buffer -> the part that uses it
    for i, part in enumerate(parts):
        for s in part:
            if isinstance(s, _DECLS):
                continue
            for b in buffers_used(s):
                if b.scope == "global":
                    continue
                j = owner.setdefault(b.uid, i)
                if j != i:
                    raise LoweringError(
                        f"{fname}: {b.scope} buffer {b.name} is used both before and after T.sync_grid(); a grid "
                        "barrier at the top level of a kernel splits it into launches, and register and shared "
                        "memory do not survive a launch: give the code after the barrier its own buffer",
                        getattr(s, "span", None) or k.span)
    launches, earlier = [], []
    for i, part in enumerate(parts):
        used = {v.uid for v in collect(S.seq(*part), lambda n: isinstance(n, E.Var))}
        kept = []
        for d in reversed(earlier):  # last first: a let kept for this part keeps the lets its value reads
            d = _keep(d, i, owner, used, fname, k)
            if d is not None:
                kept.append(d)
                used |= {v.uid for v in collect(d, lambda n: isinstance(n, E.Var))}
        body = kept[::-1] + part
        earlier += [s for s in part if isinstance(s, _DECLS)]
        launch = replace(k, body=S.seq(*body))
        if i:
            fresh = {v: E.Var(v.name, v.dtype) for v in (*k.block_vars, *k.thread_vars)}
            fresh.update({d.var: E.Var(d.var.name, d.var.dtype) for d in body if isinstance(d, S.LetStmt)})
            launch = substitute(launch, fresh)
        launches.append(launch)
    return launches


def _keep(d, i: int, owner: dict, used: set, fname: str, k: S.KernelLaunch):
    """Declaration `d` (written in an earlier part) as part i sees it, or None when i does not need it
    (`used`: uids of the variables part i reads)."""
    if isinstance(d, S.Allocate):
        return d if owner.get(d.buffer.uid) == i else None
    if isinstance(d, O.AnnotateLayout):
        mine = tuple((b, lay) for b, lay in d.layouts if b.scope == "global" or owner.get(b.uid) == i)
        return replace(d, layouts=mine) if mine else None
    if isinstance(d, S.LetStmt):
        if d.var.uid not in used:
            return None
        carried = [b for b in buffers_used(d.value) if b.scope != "global"]
        if carried:
            raise LoweringError(f"{fname}: the value of {d.var.name} reads {carried[0].scope} buffer {carried[0].name} "
                                "before T.sync_grid() and is used after it; register and shared memory do not "
                                "survive the grid barrier (a split into launches)", d.span or k.span)
    return d
