"""Thread-level code: thread indices, barriers, warp shuffles and votes, and the
cross-thread all-reduce (`T.tvm_thread_allreduce` inside `T.attr(T.comm_reducer(...))`).

These name CUDA threads, so they mean something only where a block has threads: the CUDA
target. The CPU backend runs a block on one thread; there a kernel with one thread per
block may read its thread index (0), and barriers are no-ops, but warp shuffles, votes and
the all-reduce stop with an error naming the primitive.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as dt
from ..arith.simplify import const_int
from ..errors import DSLTypeError
from ..frontend import builder as B
from ..ir import expr as E
from ..ir import stmt as S
from ..op.thread_ops import ThreadAllReduce
from .kernel import get_block_binding, get_thread_binding

FULL_MASK = 0xFFFFFFFF
_AXES = {"threadIdx.x": 0, "threadIdx.y": 1, "threadIdx.z": 2}
_BLOCKS = {"blockIdx.x": 0, "blockIdx.y": 1, "blockIdx.z": 2}


def thread_binding(start, stop=None, thread=None, *, annotations=None):
    """The index of this thread along `thread` ("threadIdx.x" / ".y" / ".z", or "blockIdx.*" for the
    block's index in the grid).

    Inside `with T.Kernel`, `[start, stop)` must be the whole extent the kernel launches on that axis.
    Outside any kernel, a loop `for v in T.thread_binding(n, thread=...)` is a launch in the TVM style
    (frontend/binding_launch.py): the grid comes from its blockIdx loops, the threads from its
    threadIdx loops, and the body runs on every thread.

    Example: `kr = T.thread_binding(0, 128, thread="threadIdx.x")`, or::

        for bx in T.thread_binding(T.ceildiv(N, 128), thread="blockIdx.x"):
            for tx in T.thread_binding(128, thread="threadIdx.x"):
                B[bx * 128 + tx] = A[bx * 128 + tx] * 2
    """
    from ..frontend.binding_launch import LaunchAxis

    if thread is None and isinstance(stop, str):  # T.thread_binding(128, "threadIdx.x"), as TVM reads it
        start, stop, thread = 0, start, stop
    if stop is None:
        start, stop = 0, start
    if thread not in _AXES and thread not in _BLOCKS:
        raise DSLTypeError(f"T.thread_binding: thread= must be one of {sorted(_AXES) + sorted(_BLOCKS)}, "
                           f"got {thread!r}")
    if const_int(start) != 0:
        raise DSLTypeError(f"T.thread_binding({start}, {stop}, thread={thread!r}): a launched axis starts at 0")
    if B.current("T.thread_binding").kernel is None:
        return LaunchAxis(thread, stop)
    k = B.in_kernel("T.thread_binding")
    if thread in _BLOCKS:
        dim = _BLOCKS[thread]
        have = k.grid[dim] if dim < len(k.grid) else 1
        if const_int(have) is not None and const_int(stop) != const_int(have):
            raise DSLTypeError(f"T.thread_binding(0, {stop}, thread={thread!r}): the kernel grid is "
                               f"{tuple(k.grid)}; bind [0, {have})")
        return get_block_binding(dim) if dim < len(k.grid) else E.const(0, dt.int32)
    dim = _AXES[thread]
    if const_int(stop) != k.threads[dim]:
        raise DSLTypeError(f"T.thread_binding({start}, {stop}, thread={thread!r}): the kernel launches "
                           f"{k.threads[dim]} threads on that axis (T.Kernel threads={k.threads}); bind [0, "
                           f"{k.threads[dim]})")
    return get_thread_binding(dim)


def launch_thread(thread, extent):
    """`T.launch_thread("threadIdx.x", 128)`: the index along a thread or block axis of the
    enclosing T.Kernel, whose extent on that axis must be `extent`."""
    name = getattr(thread, "name", thread)
    if name in _BLOCKS:
        k = B.in_kernel("T.launch_thread")
        dim = _BLOCKS[name]
        if dim >= len(k.grid) or const_int(k.grid[dim]) not in (None, const_int(extent)):
            raise DSLTypeError(f"T.launch_thread({name!r}, {extent}): the kernel grid is {k.grid}")
        return get_block_binding(dim)
    return thread_binding(0, extent, thread=name)


def _intrinsic(op, args, dtype, what):
    B.in_kernel(what)
    return E.Call(op, tuple(E.as_expr(a) for a in args), dt.as_dtype(dtype))


def _emit(op, args, what):
    B.current().emit(S.Evaluate(_intrinsic(op, args, dt.int32, what)))


def sync_threads(barrier_id=None, arrive_count=None):
    """Block barrier (`__syncthreads()`); with `barrier_id, arrive_count`, the named barrier
    `bar.sync id, count` that `arrive_count` threads (a multiple of 32) meet at; `barrier_id` alone: the
    whole block meets at that named barrier. The compiler's own
    named barriers take ids the kernel's constant ids leave free (transform/cuda/barrier_ids.py).

    Example: `T.sync_threads(2, 256)` -- the 256 threads of two warp groups meet at barrier 2."""
    if barrier_id is None and arrive_count is not None:
        raise DSLTypeError("T.sync_threads(arrive_count=...): name the barrier too (barrier_id)")
    if barrier_id is not None and arrive_count is None:  # the whole block meets at that barrier
        n = 1
        for t in B.in_kernel("T.sync_threads").threads:
            c = const_int(t)
            n = n * c if c is not None and n is not None else None
        if n is None:
            raise DSLTypeError("T.sync_threads(barrier_id): without arrive_count it is the whole block's barrier, and "
                               "the block's thread count must be a constant of the enclosing T.Kernel")
        arrive_count = n
    args = () if barrier_id is None else (barrier_id, arrive_count)
    _emit("tl_sync_threads", args, "T.sync_threads")


def sync_warp(mask=None):
    """Warp barrier (`__syncwarp(mask)`)."""
    _emit("tl_sync_warp", (E.const(FULL_MASK if mask is None else mask, dt.uint32),), "T.sync_warp")


def sync_grid():
    """Grid-wide barrier. At the top level of a `T.Kernel` body the kernel is split into launches
    there (transform/grid_barrier.py: every block's global writes before it are seen after it;
    registers and shared memory are not carried). Inside a loop or a branch it would need a
    cooperative launch, which no backend here performs: rejected at compile time, naming T.sync_grid."""
    _emit("tl_sync_grid", (), "T.sync_grid")


def as_mask(mask):
    return E.const(mask, dt.uint32) if isinstance(mask, int) else E.as_expr(mask)


def _shfl(op, value, lane, width, mask, what):
    value = E.as_expr(value)
    return _intrinsic(op, (as_mask(mask), value, lane, width), value.dtype, what)


def shfl_xor(value, delta, width=32, mask=FULL_MASK):
    """`value` of lane `lane ^ delta` (`__shfl_xor_sync`). Example: `v += T.shfl_xor(v, 16)`."""
    return _shfl("tl_shfl_xor", value, delta, width, mask, "T.shfl_xor")


def shfl_down(value, delta, width=32, mask=FULL_MASK):
    """`value` of lane `lane + delta` (`__shfl_down_sync`; lanes past the end keep their own)."""
    return _shfl("tl_shfl_down", value, delta, width, mask, "T.shfl_down")


def shfl_up(value, delta, width=32, mask=FULL_MASK):
    """`value` of lane `lane - delta` (`__shfl_up_sync`; the first `delta` lanes keep their own)."""
    return _shfl("tl_shfl_up", value, delta, width, mask, "T.shfl_up")


def shfl_sync(value, srcLane, width=32, mask=FULL_MASK):  # noqa: N803  (public argument name)
    """`value` of lane `srcLane` of this `width`-lane group (`__shfl_sync`)."""
    return _shfl("tl_shfl_idx", value, srcLane, width, mask, "T.shfl_sync")


def tvm_warp_shuffle(mask, value, warp_id, width, warp_size=32):
    """TVM's spelling of `T.shfl_sync(value, warp_id, width, mask)`."""
    return _shfl("tl_shfl_idx", value, warp_id, width, mask, "T.tvm_warp_shuffle")


def tvm_warp_shuffle_down(mask, value, offset, width, warp_size=32):
    return _shfl("tl_shfl_down", value, offset, width, mask, "T.tvm_warp_shuffle_down")


def tvm_warp_shuffle_up(mask, value, offset, width, warp_size=32):
    return _shfl("tl_shfl_up", value, offset, width, mask, "T.tvm_warp_shuffle_up")


def check_predicate(p, what):
    p = E.as_expr(p)
    if p.dtype.is_float:
        raise DSLTypeError(f"{what} requires an integer or boolean predicate, got {p.dtype}")
    return p


def any_sync(predicate, mask=FULL_MASK):
    """Non-zero (int32) if any lane in `mask` has a non-zero predicate (`__any_sync`)."""
    return _intrinsic("tl_any_sync", (as_mask(mask), check_predicate(predicate, "T.any_sync")), dt.int32, "T.any_sync")


def all_sync(predicate, mask=FULL_MASK):
    """Non-zero (int32) only if every lane in `mask` has a non-zero predicate (`__all_sync`)."""
    return _intrinsic("tl_all_sync", (as_mask(mask), check_predicate(predicate, "T.all_sync")), dt.int32, "T.all_sync")


def ballot_sync(predicate, mask=FULL_MASK):
    """uint64 bitmask of the lanes in `mask` whose predicate is non-zero (`__ballot_sync`)."""
    return _intrinsic("tl_ballot", (as_mask(mask), check_predicate(predicate, "T.ballot_sync")), dt.uint64,
                      "T.ballot_sync")


def ballot(predicate):
    """`T.ballot_sync(predicate)` over the full warp."""
    return _intrinsic("tl_ballot", (as_mask(FULL_MASK), check_predicate(predicate, "T.ballot")), dt.uint64, "T.ballot")


def activemask():
    """uint64 bitmask of the lanes that are running (`__activemask()`)."""
    return _intrinsic("tl_activemask", (), dt.uint64, "T.activemask")


# ------------------------------------------------------------------ all-reduce
@dataclass(frozen=True)
class CommReducer:
    """`T.comm_reducer(lambda x, y: x + y, [identity])`: an associative, commutative combiner."""

    fn: object
    identity: tuple

    def combine(self, a, b):
        return E.as_expr(self.fn(a, b))


def comm_reducer(combiner, identity):
    """A combiner for T.tvm_thread_allreduce: `T.comm_reducer(lambda x, y: x + y, [T.float32(0)])`."""
    ids = tuple(E.as_expr(i) for i in (identity if isinstance(identity, (list, tuple)) else [identity]))
    if len(ids) != 1:
        raise DSLTypeError(f"T.comm_reducer: one identity value is supported, got {len(ids)}")
    return CommReducer(combiner, ids)


class AttrScope:
    """`with T.attr(node, key, value):` the body, with `node` visible to what it calls."""

    inline_with = True

    def __init__(self, node, key, value):
        self.node, self.key, self.value = node, key, value

    def enter(self):
        b = B.current("T.attr")
        b.attr_stack = getattr(b, "attr_stack", []) + [(self.node, self.key)]

    def exit(self):
        b = B.current("T.attr")
        b.attr_stack = b.attr_stack[:-1]


def attr(node, attr_key, value):
    """An attribute scope. The one with meaning here is
    `T.attr(T.comm_reducer(...), "reduce_scope", ...)`, which gives the combiner to the
    T.tvm_thread_allreduce calls in its body; other keys are hints and change nothing."""
    return AttrScope(node, str(attr_key), value)


class _Emitted:
    """What a statement-like call returns: T.evaluate(...) of it adds nothing more."""


EMITTED = _Emitted()


def evaluate(value):
    """Run an expression for its effect (a call returning nothing useful)."""
    if isinstance(value, _Emitted) or value is None:
        return None
    B.current("T.evaluate").emit(S.Evaluate(E.as_expr(value)))
    return None


def tvm_thread_allreduce(size, *args, dtype="handle"):
    """TVM's block all-reduce: `T.tvm_thread_allreduce(T.uint32(1), value, cond, result[0], *tvars)`.

    Combines `value` of the threads that differ only in the thread indices `tvars` with the
    combiner of the enclosing `T.attr(T.comm_reducer(...), "reduce_scope", ...)` and stores the
    result in `result` of each of them. One value (size 1) and cond True are supported.
    """
    k = B.in_kernel("T.tvm_thread_allreduce")
    n = const_int(size)
    if n != 1:
        raise DSLTypeError(f"T.tvm_thread_allreduce: size must be 1 (one value per thread), got {size}")
    if len(args) < 4:
        raise DSLTypeError("T.tvm_thread_allreduce(size, value, cond, result, *thread_vars): too few arguments")
    value, cond, result, tvars = args[0], args[1], args[2], args[3:]
    if not (cond is True or E.is_const(cond, True) or E.is_const(cond, 1)):
        raise DSLTypeError(f"T.tvm_thread_allreduce: only cond=True is supported, got {cond}")
    if not isinstance(result, E.BufferLoad):
        raise DSLTypeError(f"T.tvm_thread_allreduce: the result must be a buffer element such as out[0], got {result!r}")
    axes = []
    for v in tvars:
        if v not in k.thread_vars:
            raise DSLTypeError(f"T.tvm_thread_allreduce: {v} is not a thread index of this kernel; pass "
                               "variables from T.get_thread_binding / T.thread_binding")
        axes.append(_thread_axis(k, v))
    red = next((n for n, key in reversed(getattr(B.current(), "attr_stack", [])) if isinstance(n, CommReducer)), None)
    if red is None:
        raise DSLTypeError("T.tvm_thread_allreduce must be inside `with T.attr(T.comm_reducer(...), "
                           "\"reduce_scope\", ...)`, which gives its combiner")
    v = E.cast(result.dtype, E.as_expr(value))
    B.current().emit(ThreadAllReduce(v, result, tuple(axes), red.combine, E.cast(result.dtype, red.identity[0])))
    return EMITTED


def _thread_axis(k, v) -> int:
    return ("tx", "ty", "tz").index(v.name)  # the names T.get_thread_binding gives (kernel.py)


def assume(cond=None):
    """A promise that `cond` holds: `T.assume(N % 4 == 0)`. It changes no result here; one the host can
    evaluate (on scalar parameters and symbolic dims only) is checked at each call, and a false one
    raises RuntimeError("Assume: N % 4 == 0")."""
    if cond is not None and not isinstance(cond, (bool, int)):
        from ..frontend.host_checks import host_assume

        host_assume(cond, B.current("T.assume").span)
    return EMITTED
