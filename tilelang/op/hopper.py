"""The expert tier (warp groups, mbarriers, TMA copies, register budgets), as IR nodes.

What each means, on every target:

- `WarpGroupScope(lo, hi, body)`: `with T.ws(...)`: `body` runs on the threads of warp groups
  lo..hi-1 (threads [128 lo, 128 hi) of the block) and no others. Tile ops inside it are
  block-level over those threads only.
- `Barrier*`: an mbarrier is a phase counter in shared memory: `count` arrivals (set by
  T.alloc_barrier) complete the current phase. `BarrierArrive` is one arrival per thread that
  runs it; `BarrierWait(parity)` blocks until the phase of that parity has completed (on a
  fresh barrier, parity 1 passes at once: "the phase before the first" counts as completed).
  `BarrierExpectTx` adds bytes the phase also waits for (TMA loads complete them).
- `TmaCopy(src, dst, barrier)`: a bulk global -> shared tile copy issued by one thread of the
  enclosing scope (`leader`: by one thread of each run of that many threads, each with its own
  indices); its bytes complete on `barrier` (the caller arrives and waits itself).
- `TmaStore(src, dst)`: a bulk shared -> global tile copy issued by one thread of the enclosing
  scope (or of each `leader` threads) once every thread's writes of the tile are visible to it,
  then committed as one bulk group; the program waits for it with T.tma_store_wait (the tile may
  be overwritten after the `read` wait, the global bytes are final after the full one). Kernel
  exit waits for every store still in flight.
- `SetMaxNReg(count, inc)`: setmaxnreg for the executing warp group (a hint: no effect on results).
- `FenceProxyAsync`: orders generic-proxy shared memory accesses before async-proxy ones.
- `WaitWgmma(n)`: T.wgmma_gemm is an O.Gemm with wg_wait = -1 (issued, not waited for); the
  wait makes all but the last n batches final. Where everything runs in order it changes nothing.
- `CpAsync`, `CpAsyncBarrierArrive`, `CpAsyncCommit`, `CpAsyncWait`: per-thread asynchronous
  global -> shared copies and their completion (a barrier arrival, or commit groups and waits).
  In program order a copy is done at once and the waits change nothing.
- `AsyncStep(kind, count)`: one raw synchronisation step of the async proxies, as the public
  raw names spell them (T.warpgroup_arrive, T.tma_store_wait, ...; see ASYNC_STEPS). Each orders
  or waits for asynchronous work; in program order they change nothing.

Barriers are `shared.dyn` uint64 buffers with an attribute `barrier_counts` (one arrival count
per barrier); `is_barrier` tells them apart, `explicit_init` those the program initialises itself.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import Span
from ..ir.buffer import Buffer, BufferRegion
from ..ir.expr import Expr
from ..ir.stmt import Stmt, TileOp, default_span

WARP_GROUP = 128  # threads per warp group (Hopper)


def is_barrier(buf) -> bool:
    return isinstance(buf, Buffer) and getattr(buf, "barrier_counts", None) is not None


def explicit_init(buf) -> bool:
    """Barriers of T.create_barriers: no arrival counts of their own (barrier_counts are zeros);
    the program initialises each with T.ptx_init_barrier_thread_count (op/hopper_raw.BarrierInit)."""
    return is_barrier(buf) and getattr(buf, "explicit_init", False)


@dataclass(frozen=True)
class WarpGroupScope(Stmt):
    """`with T.ws(lo, ..., hi - 1)`: body runs on threads [unit lo, unit hi) only.

    unit is 128 (warp groups: T.ws, and `if tx < 256` branches) or 32 (warps: a branch such as
    `if tx < 32` in a 96-thread block, see transform/thread_scopes.py)."""

    lo: int
    hi: int
    body: Stmt
    span: Span | None = default_span()
    unit: int = WARP_GROUP

    @property
    def threads(self) -> int:
        return (self.hi - self.lo) * self.unit

    @property
    def t_lo(self) -> int:
        return self.lo * self.unit

    @property
    def t_hi(self) -> int:
        return self.hi * self.unit


def scope_unit(lo: int, hi: int) -> int | None:
    """The unit of a WarpGroupScope over threads [lo, hi): 128 for whole warp groups, 32 for whole
    warps, 1 for lanes of one warp; None when the range is none of these (no barrier can join it)."""
    if not (lo % WARP_GROUP or hi % WARP_GROUP):
        return WARP_GROUP
    if not (lo % 32 or hi % 32):
        return 32
    return 1 if lo // 32 == (hi - 1) // 32 else None


def scope_over(lo: int, hi: int, body: Stmt, span=None) -> "WarpGroupScope":
    """A WarpGroupScope running body on threads [lo, hi) (a range scope_unit accepts)."""
    unit = scope_unit(lo, hi)
    return WarpGroupScope(lo // unit, hi // unit, body, span=span, unit=unit)


@dataclass(frozen=True)
class BarrierArrive(TileOp):
    """One arrival per executing thread on barrier[index]; with `cta_id`, on that cluster rank's copy
    of the barrier (T.alloc_cluster_barrier, sm_90)."""

    barrier: Buffer
    index: Expr
    span: Span | None = default_span()
    cta_id: Expr | None = None


@dataclass(frozen=True)
class BarrierWait(TileOp):
    """Block until the phase of barrier[index] with parity `parity` (0/1) has completed."""

    barrier: Buffer
    index: Expr
    parity: Expr
    span: Span | None = default_span()


@dataclass(frozen=True)
class BarrierExpectTx(TileOp):
    """Add `tx` expected transaction bytes to barrier[index]'s phase; `arrive`: also one arrival."""

    barrier: Buffer
    index: Expr
    tx: Expr
    arrive: bool = False
    span: Span | None = default_span()


@dataclass(frozen=True)
class TmaCopy(TileOp):
    """dst = src (global -> shared tile), issued by one thread; completes on barrier[index]."""

    src: BufferRegion
    dst: BufferRegion
    barrier: Buffer
    index: Expr
    span: Span | None = default_span()
    leader: int | None = None  # leader_scope_threads: one issuing thread per this many (None: the scope's)


@dataclass(frozen=True)
class TmaStore(TileOp):
    """dst = src (shared tile -> global box), issued by one thread and committed, not waited for."""

    src: BufferRegion
    dst: BufferRegion
    span: Span | None = default_span()
    leader: int | None = None


@dataclass(frozen=True)
class SetMaxNReg(TileOp):
    count: int
    inc: bool
    span: Span | None = default_span()


@dataclass(frozen=True)
class FenceProxyAsync(TileOp):
    span: Span | None = default_span()


@dataclass(frozen=True)
class WaitWgmma(TileOp):
    """wgmma.wait_group: block until at most `count` committed wgmma batches (T.wgmma_gemm) of
    this warp group are still in flight; their accumulators are final after it."""

    count: int
    span: Span | None = default_span()
    fence_first: tuple = ()  # register tiles whose values are computed before the wait (compiler-side fence)
    hold: bool = False  # ptxas may not hoist the wait above the work before it (tl::warpgroup_wait_held)


@dataclass(frozen=True)
class CpAsync(TileOp):
    """Per thread: copy `num_elems` contiguous elements global -> shared (cp.async, asynchronous).

    dst, src: `address_of(element)` calls (T.access_ptr); the element type is dst's. predicate:
    when given and false, the destination is filled with zeros instead."""

    dst: Expr
    src: Expr
    num_elems: Expr
    predicate: Expr | None = None
    span: Span | None = default_span()


@dataclass(frozen=True)
class CpAsyncBarrierArrive(TileOp):
    """cp.async.mbarrier.arrive.noinc: one arrival per executing thread on barrier[index], made
    when all of that thread's earlier cp.async copies have landed (counted in the barrier's
    arrive_count: noinc)."""

    barrier: Buffer
    index: Expr
    span: Span | None = default_span()
    inc: bool = False  # cp.async.mbarrier.arrive (no .noinc): the pending count goes up first, no net arrival


@dataclass(frozen=True)
class CpAsyncCommit(TileOp):
    """cp.async.commit_group: the thread's uncommitted cp.async copies become one group."""

    span: Span | None = default_span()


@dataclass(frozen=True)
class CpAsyncWait(TileOp):
    """cp.async.wait_group: block until at most `count` of the thread's groups are pending."""

    count: int
    span: Span | None = default_span()


# kind -> (PTX it stands for, whether it takes a count)
ASYNC_STEPS = {
    "fence_barrier_init": ("fence.mbarrier_init.release.cluster", False),
    "wgmma_fence": ("wgmma.fence.sync.aligned", False),
    "wgmma_commit": ("wgmma.commit_group.sync.aligned", False),
    "bulk_commit": ("cp.async.bulk.commit_group", False),
    "bulk_wait_read": ("cp.async.bulk.wait_group.read N", True),
    "bulk_wait": ("cp.async.bulk.wait_group N", True),
}


@dataclass(frozen=True)
class AsyncStep(TileOp):
    """One raw async-proxy step (a key of ASYNC_STEPS); `count`: the N of the bulk waits."""

    kind: str
    count: int = 0
    span: Span | None = default_span()
