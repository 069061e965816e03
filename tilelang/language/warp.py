"""Warp- and block-level thread primitives: lane / warp / warp-group indices, leader election,
block votes (`T.syncthreads_count` ...), warp matches, warp all-reduces, the one-sided named
barrier and programmatic dependent launch (`T.pdl_sync` / `T.pdl_trigger`).

The indices and the election are arithmetic on the linear thread id (x fastest), so they mean
the same on every backend. The collectives are calls the CUDA target prints as device-header
helpers (include/tl/thread.h) and the CPU target runs through its per-thread model
(transform/cpu_lanes.py: every thread deposits its operand, then each computes its result).

    lane = T.get_lane_idx()                 # linear thread id % 32
    s = T.warp_reduce_sum(x[tx])            # every lane of the warp: the warp's sum
    n = T.syncthreads_count(x[tx] > 0)      # every thread: how many threads saw x > 0
"""
from __future__ import annotations

from .. import dtypes as dt
from ..arith.simplify import const_int
from ..errors import DSLTypeError
from ..frontend import builder as B
from ..ir import expr as E
from ..ir import stmt as S
from .kernel import get_thread_binding
from .thread import EMITTED, FULL_MASK, as_mask, check_predicate

WARP_SIZE = 32
WARPS_PER_GROUP = 4


def _linear_tid(what: str):
    """tx + X * (ty + Y * tz) of the enclosing kernel (axes of extent 1 left out)."""
    k = B.in_kernel(what)
    X, Y, Z = k.threads
    t = get_thread_binding(0)
    if Y > 1:
        t = t + X * get_thread_binding(1)
    if Z > 1:
        t = t + X * Y * get_thread_binding(2)
    return t


def _size(v, what: str, default: int):
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, E.Expr)):
        raise DSLTypeError(f"{what}: a warp size / count must be an int or an integer expression, got {v!r}")
    c = const_int(v)
    if c is not None and c <= 0:
        raise DSLTypeError(f"{what}: a warp size / count must be positive, got {c}")
    return v


def get_lane_idx(warp_size=None):
    """This thread's lane in its warp: the linear thread id modulo `warp_size` (32).

    Example: `if T.get_lane_idx() == 0: out[T.get_warp_idx()] = acc[0]`.
    """
    return _linear_tid("T.get_lane_idx") % _size(warp_size, "T.get_lane_idx", WARP_SIZE)


def get_warp_idx(warp_size=None):
    """This thread's warp in the block: the linear thread id divided by `warp_size` (32)."""
    return _linear_tid("T.get_warp_idx") // _size(warp_size, "T.get_warp_idx", WARP_SIZE)


def get_warp_idx_sync(warp_size=None):
    """T.get_warp_idx for a converged warp (the same value here)."""
    return _linear_tid("T.get_warp_idx_sync") // _size(warp_size, "T.get_warp_idx_sync", WARP_SIZE)


def get_warp_group_idx(warp_size=None, warps_per_group=None):
    """This thread's warp group: linear thread id // (warp_size * warps_per_group), 32 * 4 by default.

    Example: `T.get_warp_group_idx(32, 2)` counts groups of 64 threads.
    """
    if warps_per_group is not None and warp_size is None:
        raise DSLTypeError("T.get_warp_group_idx(warp_size, warps_per_group): give warp_size too when "
                           "warps_per_group is given")
    ws = _size(warp_size, "T.get_warp_group_idx", WARP_SIZE)
    wg = _size(warps_per_group, "T.get_warp_group_idx", WARPS_PER_GROUP)
    return _linear_tid("T.get_warp_group_idx") // (ws * wg)


def shuffle_elect(thread_extent):
    """True for exactly one thread of each group of `thread_extent` consecutive threads (the
    group's first); `thread_extent=0` elects one thread of the whole block.

    Example: `if T.shuffle_elect(128): T.mbarrier_arrive(bar)` (one arrival per warp group).
    """
    n = const_int(thread_extent)
    if n is None or n < 0:
        raise DSLTypeError(f"T.shuffle_elect(thread_extent): a non-negative integer constant, got {thread_extent!r}")
    t = _linear_tid("T.shuffle_elect")
    return E.compare("==", t if n == 0 else t % n, 0)


# ------------------------------------------------------------------ collectives
def _call(op, args, dtype, what):
    B.in_kernel(what)
    return E.Call(op, tuple(E.as_expr(a) for a in args), dt.as_dtype(dtype))


def syncthreads_count(predicate):
    """Block barrier that returns, to every thread, how many threads of the block passed a
    non-zero `predicate` (`__syncthreads_count`). Every thread of the block must reach it."""
    return _call("tl_syncthreads_count", (check_predicate(predicate, "T.syncthreads_count"),), dt.int32,
                 "T.syncthreads_count")


def syncthreads_and(predicate):
    """Block barrier that returns non-zero (int32) only if every thread's `predicate` is non-zero."""
    return _call("tl_syncthreads_and", (check_predicate(predicate, "T.syncthreads_and"),), dt.int32, "T.syncthreads_and")


def syncthreads_or(predicate):
    """Block barrier that returns non-zero (int32) if any thread's `predicate` is non-zero."""
    return _call("tl_syncthreads_or", (check_predicate(predicate, "T.syncthreads_or"),), dt.int32, "T.syncthreads_or")


def _match_value(value, what):
    v = E.as_expr(value)
    if v.dtype.bits not in (8, 16, 32, 64) or v.dtype.lanes != 1:
        raise DSLTypeError(f"{what}: the value must be a scalar of 1, 2, 4 or 8 bytes, got {v.dtype}")
    return v


def match_any_sync(value, mask=FULL_MASK):
    """uint32 bitmask of the lanes in `mask` whose `value` has the same bits as this lane's
    (`__match_any_sync`). Example: `peers = T.match_any_sync(key[tx])`."""
    return _call("tl_match_any", (as_mask(mask), _match_value(value, "T.match_any_sync")), dt.uint32,
                 "T.match_any_sync")


def match_all_sync(value, mask=FULL_MASK):
    """`mask` (uint32) if every lane in `mask` holds the same bits in `value`, else 0 (`__match_all_sync`)."""
    return _call("tl_match_all", (as_mask(mask), _match_value(value, "T.match_all_sync")), dt.uint32,
                 "T.match_all_sync")


def _warp_reduce(kind, value):
    what = f"T.warp_reduce_{kind}"
    v = E.as_expr(value)
    if kind.startswith("bit") and v.dtype.is_float:
        raise DSLTypeError(f"{what} needs an integer value, got {v.dtype}")
    return _call(f"tl_warp_reduce_{kind}", (v,), v.dtype, what)


def warp_reduce_sum(value):
    """The sum of `value` over the 32 lanes of this warp, returned to every lane (all lanes
    must call it). Example: `total = T.warp_reduce_sum(part[0])`."""
    return _warp_reduce("sum", value)


def warp_reduce_max(value):
    """The maximum of `value` over the 32 lanes of this warp, returned to every lane."""
    return _warp_reduce("max", value)


def warp_reduce_min(value):
    """The minimum of `value` over the 32 lanes of this warp, returned to every lane."""
    return _warp_reduce("min", value)


def warp_reduce_bitand(value):
    """The bitwise and of an integer `value` over the 32 lanes of this warp, returned to every lane."""
    return _warp_reduce("bitand", value)


def warp_reduce_bitor(value):
    """The bitwise or of an integer `value` over the 32 lanes of this warp, returned to every lane."""
    return _warp_reduce("bitor", value)


# ------------------------------------------------------------------ barriers, launch
def _emit(op, args, what):
    B.current().emit(S.Evaluate(_call(op, args, dt.int32, what)))
    return EMITTED


def named_barrier_arrive(barrier_id, thread_count):
    """Arrive at named barrier `barrier_id` (1-15) without waiting (`bar.arrive`); the threads
    that wait there call `T.sync_threads(barrier_id, thread_count)`. `thread_count` counts both
    sides and is a multiple of 32. On CUDA the compiler's own named barriers (T.ws branches,
    warp-specialized consumers, ping-pong turns) take ids the kernel's constant ids leave free;
    a non-constant id in such a kernel is a LoweringError (transform/cuda/barrier_ids.py).

    Example (producer / consumer warp groups)::

        if tx < 128:  # producer
            ...; T.named_barrier_arrive(1, 256)
        else:         # consumer
            T.sync_threads(1, 256); ...
    """
    c = const_int(thread_count)
    if c is not None and (c <= 0 or c % 32):
        raise DSLTypeError(f"T.named_barrier_arrive: thread_count must be a positive multiple of 32, got {c}")
    i = const_int(barrier_id)
    if i is not None and not 0 <= i < 16:
        raise DSLTypeError(f"T.named_barrier_arrive: barrier_id must be in [0, 16), got {i}")
    return _emit("tl_named_barrier_arrive", (barrier_id, thread_count), "T.named_barrier_arrive")


def pdl_trigger():
    """Programmatic dependent launch: let the next kernel on the stream start launching
    (`griddepcontrol.launch_dependents`; CUDA sm_90 and newer). Results do not depend on it."""
    return _emit("tl_pdl_trigger", (), "T.pdl_trigger")


def pdl_sync():
    """Programmatic dependent launch: wait until the kernels this one depends on have completed
    and their writes are visible (`griddepcontrol.wait`; CUDA sm_90 and newer). Example: call it
    before the first read of a tensor the previous kernel writes."""
    return _emit("tl_pdl_sync", (), "T.pdl_sync")
