"""The raw Hopper names of the public TileLang (its TIR intrinsics), as IR nodes.

Unlike the tile ops of op/hopper.py, each of these is one PTX instruction run by every thread
that reaches it (`if tx == 0:` makes one thread issue it), on data the program addresses by hand:

- `BarrierInit(barrier, index, count)`: mbarrier.init of barrier[index] to `count` arrivals
  (T.ptx_init_barrier_thread_count on the barriers of T.create_barriers, which no one else
  initialises: `explicit_init` barriers).
- `TmaLoad(desc, barrier, index, dst, coords)`: cp.async.bulk.tensor: the box of the tensor map
  `desc` (a RawTmaDesc, T.create_tma_descriptor) at element coordinates `coords` (innermost
  first) lands at the shared address `dst`, densely, innermost dim first, with the map's swizzle
  applied to the shared byte address; elements outside the tensor read as zero. Its bytes
  complete on barrier[index] (the program arms the barrier with expect_tx itself).
- `BulkCopy(dst, src, nbytes, barrier, index)`: cp.async.bulk: `nbytes` contiguous bytes global ->
  shared, completing on barrier[index].
- `RawWgmma`: wgmma.mma_async m64nNkK issued by one warp group from 64-bit shared-memory matrix
  descriptors (SS) or A in registers (RS), accumulating into each thread's registers of a
  T.alloc_local buffer in the wgmma D layout (tl/wgmma.h).
- `FenceOperand(ptr, count, is_float)`: a compiler fence on `count` 32-bit registers from `ptr`
  (no instruction; nothing on the CPU).

Descriptors of wgmma operands are plain uint64 values (T.alloc_wgmma_desc is a one-element
local buffer), made and advanced by the E.Calls of DESC_CALLS.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..arith.simplify import const_int, simplify
from ..errors import Span, TileLangError
from ..ir.buffer import Buffer
from ..ir.expr import Expr
from ..ir.stmt import TileOp, default_span
from ..ir.visitor import substitute


# E.Call ops of descriptor arithmetic (printed by codegen/intrinsics.py for CUDA and C):
#   tl_wgmma_desc_make(start pointer, layout_type, lbo >> 4, sbo >> 4) -> uint64 (base offset 0)
#   tl_wgmma_desc_add(desc, units) -> uint64: `units` (16-byte) added to the low 32 bits, as the
#                                     hardware descriptor's low word is advanced
DESC_CALLS = ("tl_wgmma_desc_make", "tl_wgmma_desc_add")

# CUtensorMapDataType -> element bytes (T.create_tma_descriptor's first argument)
TMA_DATA_TYPES = {0: ("uint8", 1), 1: ("uint16", 2), 2: ("uint32", 4), 3: ("int32", 4), 4: ("uint64", 8),
                  5: ("int64", 8), 6: ("float16", 2), 7: ("float32", 4), 8: ("float64", 8), 9: ("bfloat16", 2),
                  10: ("float32_ftz", 4), 11: ("tfloat32", 4), 12: ("tfloat32_ftz", 4)}
TMA_SWIZZLE_BYTES = {0: 0, 1: 32, 2: 64, 3: 128}  # CUtensorMapSwizzle -> bytes
TMA_L2_BYTES = {0: 0, 1: 64, 2: 128, 3: 256}  # CUtensorMapL2promotion -> bytes


@dataclass(frozen=True)
class RawTmaDesc:
    """T.create_tma_descriptor's tensor map: all per-dim tuples innermost dim first.

    dims, strides (bytes, strides[0] the element size): expressions of the kernel's parameters,
    evaluated per launch; box: constants; swizzle in bytes (0, 32, 64, 128); l2: promotion bytes."""

    buffer: Buffer
    data_type: int
    dims: tuple
    strides: tuple
    box: tuple
    swizzle: int
    l2: int

    @property
    def rank(self) -> int:
        return len(self.box)

    @property
    def elem(self) -> int:
        return TMA_DATA_TYPES[self.data_type][1]

    def geometry(self, env: dict) -> tuple[list, list]:
        """(dims, byte strides) for one launch: `env` maps the kernel's scalar and shape Vars to values."""
        out = []
        for x in (self.dims, self.strides):
            vals = [const_int(simplify(substitute(e, env))) for e in x]
            if None in vals:
                raise TileLangError(f"T.create_tma_descriptor over {self.buffer.name}: a dim or stride {list(x)} is "
                                    "not known at launch (only the kernel's scalar and shape parameters are)")
            out.append(vals)
        return out[0], out[1]

    def box_bytes(self) -> int:
        n = self.elem
        for b in self.box:
            n *= b
        return n


@dataclass(frozen=True)
class BarrierInit(TileOp):
    """mbarrier.init: barrier[index] starts phase 0 expecting `count` arrivals (per executing thread)."""

    barrier: Buffer
    index: Expr
    count: Expr
    span: Span | None = default_span()


@dataclass(frozen=True)
class TmaLoad(TileOp):
    """cp.async.bulk.tensor global -> shared of desc's box at `coords` (see the module docstring)."""

    desc: RawTmaDesc
    barrier: Buffer
    index: Expr
    dst: Expr  # address_of(shared element)
    coords: tuple
    span: Span | None = default_span()


@dataclass(frozen=True)
class BulkCopy(TileOp):
    """cp.async.bulk: nbytes from address src (global) to dst (shared), complete_tx on barrier[index]."""

    dst: Expr
    src: Expr
    nbytes: Expr
    barrier: Buffer
    index: Expr
    span: Span | None = default_span()


@dataclass(frozen=True)
class RawWgmma(TileOp):
    """wgmma.mma_async.m64{n}k{k}: D (+)= A @ B for the warp group of the executing thread.

    a: the A descriptor (uint64 expression, SS) or address_of the thread's first A register
    element (RS); b: the B descriptor; d: address_of the thread's first accumulator element;
    a_type / b_type / c_type: dtype names; a_k_major / b_k_major: operand majorness (RS: A is
    K-major); scale_out: 0 overwrites D, else accumulates; scale_a / scale_b: +1 or -1."""

    n: int
    k: int
    a_type: str
    b_type: str
    c_type: str
    rs: bool
    a_k_major: bool
    b_k_major: bool
    a: Expr
    b: Expr
    d: Expr
    scale_out: Expr
    tid: Expr  # the executing thread's index in the block
    scale_a: int = 1
    scale_b: int = 1
    a_regs_elems: int = 0  # RS: elements of each thread's A buffer (its threads' copies are this far apart)
    span: Span | None = default_span()

    @property
    def d_regs(self) -> int:
        """32-bit accumulator registers per thread."""
        return self.n // 4 if self.c_type == "float16" else self.n // 2


@dataclass(frozen=True)
class FenceOperand(TileOp):
    """warpgroup_fence_operand: `count` 32-bit registers from `ptr` (address_of) may change behind
    the compiler's back (no instruction)."""

    ptr: Expr
    count: int
    is_float: bool
    span: Span | None = default_span()
