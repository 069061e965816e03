"""The raw Hopper names of the public TileLang (its TIR intrinsics), as IR nodes.

Unlike the tile ops of op/hopper.py, each of these is one PTX instruction run by every thread
that reaches it (`if tx == 0:` makes one thread issue it), on data the program addresses by hand:

- `BarrierInit(barrier, index, count)`: mbarrier.init of barrier[index] to `count` arrivals
  (T.ptx_init_barrier_thread_count on the barriers of T.create_barriers, which no one else
  initialises: `explicit_init` barriers).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import Span
from ..ir.buffer import Buffer
from ..ir.expr import Expr
from ..ir.stmt import TileOp, default_span


@dataclass(frozen=True)
class BarrierInit(TileOp):
    """mbarrier.init: barrier[index] starts phase 0 expecting `count` arrivals (per executing thread)."""

    barrier: Buffer
    index: Expr
    count: Expr
    span: Span | None = default_span()
