"""The tile-op statements: what each T.* block-level operation means, as IR nodes.

Each is a frozen dataclass (a `TileOp` statement). Lowering rules are registered per target in
`op/registry.py` (CUDA: one module per family in `transform/cuda/ops/`; CPU:
`transform/lower_tile_ops_cpu.py`); see docs/ADDING_A_TILE_OP.md.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import Span
from ..ir.buffer import Buffer, BufferRegion
from ..ir.expr import Expr
from ..ir.stmt import TileOp, default_span


@dataclass(frozen=True)
class Copy(TileOp):
    """dst[region] = src[region] (cast to dst dtype); out-of-range global reads give 0, writes are dropped."""

    src: BufferRegion
    dst: BufferRegion
    disable_tma: bool = False
    async_group: bool = False  # set by software pipelining: issue cp.async, leave commit/wait to the pipeline
    span: Span | None = default_span()
    no_wait: bool = False  # T.async_copy: cp.async + commit, the program waits (T.ptx_wait_group)
    safe_values: tuple = ()  # ((tensor name, value), ...) of the T.sblock's T.annotate_safe_value around it


@dataclass(frozen=True)
class Im2Col(TileOp):
    """dst = block (nhw, cblk) of the im2col matrix of the NHWC image src (T.im2col, see op/im2col.py):
    row m is output pixel nhw*block_M + m, column k is (kh, kw, c) = cblk*block_K + k; padding reads 0.
    Made only where whole vectors of channels move at once (`im2col.im2col_vector`)."""

    src: BufferRegion  # the whole image
    dst: BufferRegion  # the (block_M, block_K) tile
    nhw: Expr
    cblk: Expr
    kernel: int
    stride: int
    dilation: int
    pad: int
    async_group: bool = False  # set by software pipelining, as on Copy
    span: Span | None = default_span()


@dataclass(frozen=True)
class Fill(TileOp):
    dst: BufferRegion
    value: Expr
    span: Span | None = default_span()


@dataclass(frozen=True)
class Gemm(TileOp):
    """C += op(A) @ op(B) (C = ... when clear_accum); op is a transpose when transpose_*."""

    A: BufferRegion
    B: BufferRegion
    C: BufferRegion
    transpose_A: bool = False
    transpose_B: bool = False
    clear_accum: bool = False
    policy: str = "Square"
    k_pack: int = 1
    wg_wait: int = 0
    span: Span | None = default_span()
    # "int4" / "uint4": A and B are byte tiles holding two such values a byte, K counted in bytes
    # (CUDA, transform/cuda/nibble_tiles.py); "" otherwise
    packed: str = ""

    @property
    def mnk(self) -> tuple:
        from .regions import matrix_extents

        a, b = matrix_extents(self.A), matrix_extents(self.B)
        m, k = (a[1], a[0]) if self.transpose_A else (a[0], a[1])
        n = b[0] if self.transpose_B else b[1]
        return m, n, k


@dataclass(frozen=True)
class Reduce(TileOp):
    """dst = reduce_kind(src, dim); kind: sum max min abssum absmax bitand bitor bitxor (op/reduce_rules.py).
    clear=False folds dst in; nan_propagate: a NaN wins a max / min (float16 / bfloat16)."""

    kind: str
    src: Buffer
    dst: Buffer
    dim: int
    clear: bool = True
    span: Span | None = default_span()
    nan_propagate: bool = False


@dataclass(frozen=True)
class FinalizeReducer(TileOp):
    """T.finalize_reducer: combine the partials of a T.alloc_reducer tile that several threads
    hold (op: sum max min bitand bitor bitxor); afterwards every copy holds the whole result."""

    buffer: Buffer
    op: str
    span: Span | None = default_span()


@dataclass(frozen=True)
class CumSum(TileOp):
    """Inclusive scan of src along dim into dst; kind: "sum" (T.cumsum) or "max" (T.cummax). A scan of
    regions (`T.cumsum(S[r0:r1, :], dim=0)`) has their first elements in src_start / dst_start and their
    common extents in `extents`; empty tuples: the whole buffers."""

    src: Buffer
    dst: Buffer
    dim: int
    reverse: bool = False
    span: Span | None = default_span()
    kind: str = "sum"
    src_start: tuple = ()
    dst_start: tuple = ()
    extents: tuple = ()

    def scan_extents(self) -> tuple:
        """The extents of the scanned box (the src buffer's shape when the op covers whole buffers)."""
        return tuple(self.extents) if self.extents else tuple(self.src.shape)


@dataclass(frozen=True)
class AtomicTile(TileOp):
    """dst[region] <kind>= src (a region of equal shape, or a scalar value). kind: add max min."""

    kind: str
    dst: BufferRegion
    src: object  # BufferRegion | Expr
    span: Span | None = default_span()


@dataclass(frozen=True)
class Swizzle(TileOp):
    """T.use_swizzle: remap block indices for L2 locality (no effect on results)."""

    panel_size: int
    order: str = "row"
    enable: bool = True
    span: Span | None = default_span()


@dataclass(frozen=True)
class AnnotateLayout(TileOp):
    layouts: tuple  # ((Buffer, layout), ...)
    span: Span | None = default_span()


@dataclass(frozen=True)
class DeviceAssert(TileOp):
    cond: Expr
    msg: str = ""
    span: Span | None = default_span()


@dataclass(frozen=True)
class Print(TileOp):
    """T.print: a scalar (every thread that runs it), a buffer (once per block, by thread
    `lane` on CUDA) or, with obj None, the message alone."""

    obj: object  # Expr | Buffer | None
    msg: str = ""
    span: Span | None = default_span()
    lane: int = 0
