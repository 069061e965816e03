"""Statements of thread-level code: buffer declarations over existing storage, imported
device source, and the cross-thread all-reduce of `T.tvm_thread_allreduce`.

They sit beside the tile ops (op/tile_ops.py) but are not block-collective tiles:
`DeclBuffer` names memory that already exists (a pointer loaded at run time, or another
buffer viewed with a new shape/dtype); `ImportSource` is text for the generated file's top;
`ThreadAllReduce` combines one value per thread over the threads that differ only in
`axes` (0 = threadIdx.x, 1 = .y, 2 = .z) and stores the result in every one of them.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import Span
from ..ir.buffer import Buffer
from ..ir.expr import BufferLoad, Expr
from ..ir.stmt import TileOp, default_span


@dataclass(frozen=True)
class DeclBuffer(TileOp):
    """`buffer` is the memory at `data`: an int64/handle address (T.make_tensor) or another
    Buffer whose storage it reinterprets (T.reshape / T.view); scopes like Allocate."""

    buffer: Buffer
    data: object  # Expr | Buffer
    span: Span | None = default_span()

    def buffers(self) -> list:
        return [self.buffer] + ([self.data] if isinstance(self.data, Buffer) else [])


@dataclass(frozen=True)
class ImportSource(TileOp):
    """Source text placed once at the top of the generated file (T.import_source)."""

    source: str
    span: Span | None = default_span()


@dataclass(frozen=True)
class ThreadAllReduce(TileOp):
    """result <- combine(value of every thread of the group); a group is the threads whose
    indices agree on every thread axis not in `axes`. `combine(a, b) -> Expr` is the
    T.comm_reducer function, `identity` its neutral element."""

    value: Expr
    result: BufferLoad
    axes: tuple
    combine: object  # Python callable (Expr, Expr) -> Expr, compared by identity
    identity: Expr
    span: Span | None = default_span()
