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
  enclosing scope; its bytes complete on `barrier` (the caller arrives and waits itself).
- `SetMaxNReg(count, inc)`: setmaxnreg for the executing warp group (a hint: no effect on results).
- `FenceProxyAsync`: orders generic-proxy shared memory accesses before async-proxy ones.

Barriers are `shared.dyn` uint64 buffers with an attribute `barrier_counts` (one arrival count
per barrier); `is_barrier` tells them apart.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import Span
from ..ir.buffer import Buffer, BufferRegion
from ..ir.expr import Expr
from ..ir.stmt import Stmt, TileOp, _span

WARP_GROUP = 128  # threads per warp group (Hopper)


def is_barrier(buf) -> bool:
    return isinstance(buf, Buffer) and getattr(buf, "barrier_counts", None) is not None


@dataclass(frozen=True)
class WarpGroupScope(Stmt):
    """`with T.ws(lo, ..., hi - 1)`: body runs on threads [128 lo, 128 hi) only."""

    lo: int
    hi: int
    body: Stmt
    span: Span | None = _span()

    @property
    def threads(self) -> int:
        return (self.hi - self.lo) * WARP_GROUP


@dataclass(frozen=True)
class BarrierArrive(TileOp):
    """One arrival per executing thread on barrier[index]."""

    barrier: Buffer
    index: Expr
    span: Span | None = _span()


@dataclass(frozen=True)
class BarrierWait(TileOp):
    """Block until the phase of barrier[index] with parity `parity` (0/1) has completed."""

    barrier: Buffer
    index: Expr
    parity: Expr
    span: Span | None = _span()


@dataclass(frozen=True)
class BarrierExpectTx(TileOp):
    """Add `tx` expected transaction bytes to barrier[index]'s phase; `arrive`: also one arrival."""

    barrier: Buffer
    index: Expr
    tx: Expr
    arrive: bool = False
    span: Span | None = _span()


@dataclass(frozen=True)
class TmaCopy(TileOp):
    """dst = src (global -> shared tile), issued by one thread; completes on barrier[index]."""

    src: BufferRegion
    dst: BufferRegion
    barrier: Buffer
    index: Expr
    span: Span | None = _span()


@dataclass(frozen=True)
class SetMaxNReg(TileOp):
    count: int
    inc: bool
    span: Span | None = _span()


@dataclass(frozen=True)
class FenceProxyAsync(TileOp):
    span: Span | None = _span()
