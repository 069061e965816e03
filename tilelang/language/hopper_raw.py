"""The public TileLang's raw Hopper names (its TIR intrinsics), for programs that address
barriers, tensor maps and wgmma descriptors by hand.

Each call is one PTX instruction run by every thread that reaches it: guard it with
`if tx == 0:` where one thread should issue it. Thin wrappers: each checks its arguments and
appends an op/hopper_raw.py node (lowered by transform/cuda/manual_ws.py on sm_90a and
transform/hopper_cpu.py on the CPU backend).

Barriers by id (the TIR style)::

    T.create_barriers(2)                       # barriers 0 and 1 in shared memory, uninitialised
    if tx == 0:
        T.ptx_init_barrier_thread_count(0, 128)
        T.ptx_init_barrier_thread_count(1, 1)
    T.ptx_fence_barrier_init()
    T.sync_threads()
    T.ptx_arrive_barrier(0)                    # ids work wherever a barrier is taken
    T.ptx_wait_barrier(0)
"""
from __future__ import annotations

from ..arith.simplify import const_int
from ..errors import DSLTypeError
from ..frontend import builder as B
from ..ir.buffer import Buffer
from ..ir.expr import as_expr
from ..ir.stmt import Allocate
from ..op import hopper as H
from ..op import hopper_raw as R
from .hopper import barrier_ref


# ---------------------------------------------------------------- barriers by id
def create_barriers(barrier_count):
    """`barrier_count` mbarriers in shared memory, named by the ids 0 .. barrier_count - 1 in
    T.ptx_init_barrier_thread_count, T.ptx_arrive_barrier, T.ptx_wait_barrier, T.tma_load ... of
    this kernel. They start uninitialised: T.ptx_init_barrier_thread_count(id, count) sets each
    one's arrival count (then T.ptx_fence_barrier_init and T.sync_threads before other threads use
    them). Returns the barrier buffer (ids and `bars[i]` name the same barriers)."""
    k = B.in_kernel("T.create_barriers")
    n = const_int(barrier_count)
    if n is None or n < 1:
        raise DSLTypeError(f"T.create_barriers: barrier_count must be a compile-time integer of at least 1, "
                           f"got {barrier_count!r}")
    if k.barriers is not None:
        raise DSLTypeError("T.create_barriers: this kernel has its barriers already (one call per kernel; ask "
                           "for all of them at once)")
    b = B.current("T.create_barriers")
    buf = Buffer(b.unique("barrier"), (n,), "uint64", "shared.dyn")
    buf.barrier_counts = (0,) * n
    buf.explicit_init = True
    buf.auto_named = False
    b.emit(Allocate(buf))
    k.barriers = buf
    return buf


def ptx_init_barrier_thread_count(barrier_id, thread_count):
    """mbarrier.init: barrier `barrier_id` (of T.create_barriers) starts its phase 0 waiting for
    `thread_count` arrivals. Every thread that runs it initialises the barrier: guard it with
    `if tx == 0:`."""
    B.in_kernel("T.ptx_init_barrier_thread_count")
    buf, i = barrier_ref(barrier_id, "T.ptx_init_barrier_thread_count")
    if not H.explicit_init(buf):
        raise DSLTypeError(f"T.ptx_init_barrier_thread_count: {buf.name} comes from T.alloc_barrier, which "
                           "initialises its barriers with their arrive_count; this call initialises the "
                           "barriers of T.create_barriers")
    c = const_int(thread_count)
    if c is not None and not 1 <= c < (1 << 20):
        raise DSLTypeError(f"T.ptx_init_barrier_thread_count: thread_count must be in [1, 2^20), got {c}")
    B.current().emit(R.BarrierInit(buf, i, as_expr(thread_count)))
