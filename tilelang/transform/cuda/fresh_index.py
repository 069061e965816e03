"""Fresh thread indices for a kernel's tile-level copy loops (a retry after ptxas spills).

Takes: a lowered CUDA kernel. Gives: the same kernel where each thread-distributed loop that moves
memory (a Q tile's cp.async loads, an accumulator's stores to a shared tile, a shared tile's copy
out to global) and sits at tile level (inside no loop but a persistent kernel's tile loop) reads
the thread index through `tl_fresh_index(tid)`, an empty volatile asm. The addresses those loops
compute from the thread index are tile-invariant, so ptxas hoists them out of the persistent tile
loop and keeps them live across the k-loop, beside a warp-specialized consumer's accumulators;
where that made it spill (flash decoding's consumer: 368 bytes, 16 64-bit Q addresses), the
fresh index makes it compute them where they are used, once per tile.

    for v in unroll(16): cp_async(&Q_s[f(tid, v)], &Q[g(tid, v)])
        -> let tl_tid_f1 = tl_fresh_index(tid); for v in unroll(16): cp_async(&Q_s[f(tl_tid_f1, v)], ...)

A loop that synchronizes (a k-loop: it waits on barriers or runs wgmma) is the program's, not a
copy loop: it and what it holds keep the thread index (wrapping a warp-specialized consumer's k-loop
hid it from plan_smem, which then gave every shared tile bytes of its own).

On where `tl.fresh_copy_index` is True. Unset, the pipeline recompiles a kernel that spills with it
and keeps whichever build spills less (backend/cuda/pipeline.py, launch_sequence.py); False: never.
"""
from __future__ import annotations

import re
from dataclasses import replace

from ... import dtypes as dt
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import Mutator, collect, substitute
from .raw import Raw

_MEMORY = ("shared", "shared.dyn", "global")
_TILE_LOOP = "tl_tile_iter"  # persistent.py's loop over a block's tiles
_SYNC = re.compile(r"__syncthreads|sync_all_threads|tl_sync_threads|cluster_sync|mbarrier_wait|warpgroup_|wgmma|cp_async_wait")


def _moves_memory(loop: S.For) -> bool:
    def hit(n):
        return isinstance(n, (E.BufferLoad, S.BufferStore)) and n.buffer.scope in _MEMORY
    return bool(collect(loop, hit))


def _synchronizes(loop: S.For) -> bool:
    """A loop of the program (a k-loop: it waits on barriers or runs the tensor cores), not a
    thread-distributed copy loop: it keeps the thread index."""
    return bool(collect(loop, lambda n: isinstance(n, Raw) and _SYNC.search(n.fmt)))


def _uses_tid(node) -> bool:
    return bool(collect(node, lambda n: isinstance(n, E.Var) and n.name == "tid"))


class _Fresh(Mutator):
    def __init__(self):
        self.n = 0

    def visit_For(self, s: S.For):
        if s.var.name == _TILE_LOOP:
            return self.generic(s)
        if _synchronizes(s) or not (_moves_memory(s) and _uses_tid(s)):
            return s  # another loop: what is inside it is not at tile level
        self.n += 1
        fresh = E.Var(f"tl_tid_f{self.n}", dt.int32)
        tids = {n for n in collect(s, lambda n: isinstance(n, E.Var) and n.name == "tid")}  # (one per pass that made one)
        first = next(iter(tids))
        return S.seq(S.LetStmt(fresh, E.Call("tl_fresh_index", (first,), dt.int32)),
                     substitute(s, {t: fresh for t in tids}))


def fresh_copy_indices(k: S.KernelLaunch) -> S.KernelLaunch:
    return replace(k, body=_Fresh().visit(k.body))
