"""Refuse, on the CPU backend too, a race on shared memory that no barrier can order.

Takes: one `if` of a kernel's SIMT code (no tile ops, no warp exchanges under it) on one interval of
the linear thread index that no barrier can join (`if tx < 48:` in a 128-thread block: neither whole
warps nor lanes of one warp), as cpu_threads meets it. Gives: nothing, or the LoweringError the CUDA
path raises for it.

The CUDA path (transform/cuda/thread_sync.py) cuts such a branch around a block barrier where its
top-level statements race, and refuses a race inside a loop or nested statement of it, as the public
TileLang refuses it, unless the race is none after all: each thread touches its own elements, or a
loop's passes touch elements apart. The CPU backend runs a block's threads one after another between
the barriers it places, so it could run that program, and did: the two backends disagreed. Here the
branch is put through the CUDA path's barrier placement alone, on the CPU pass's IR (SIMT code is the
same statements on both paths), so both refuse the same programs with the same message.
"""
from __future__ import annotations

from ..ir import expr as E
from ..ir import stmt as S
from ..op.hopper import scope_unit


def unjoinable(lo: int, hi: int) -> bool:
    """No barrier can join the threads [lo, hi): they are neither whole warps nor inside one warp."""
    return lo < hi and scope_unit(lo, hi) is None


def check_branch(branch: S.IfThenElse, thread_vars, extents: dict, block_threads: int, axes: dict) -> None:
    """Raise the CUDA path's LoweringError where `branch` (SIMT code on an unjoinable thread interval,
    the kernel's top level) needs a barrier inside a loop or nested statement. `extents`: each thread
    variable's extent; `axes`: thread_scopes.thread_axes of the kernel."""
    from .cuda.thread_sync import insert_syncs

    # the linear thread index, as the CUDA path names it, sets the block's thread count for the branch's sides
    tid = E.Var("tid", E.as_expr(0).dtype)
    tvs = (tid, *thread_vars)
    insert_syncs(S.seq(branch), tvs, (block_threads, *(extents[v] for v in thread_vars)), True, (axes,))
