"""T.gemm_sp: C += decompress(A_sparse, E) @ B for 2:4 (or 1:2 for 32-bit) structured sparse A.

Takes: A_sparse (M, K/2) holding the kept values of every group of A's row (2 of 4 for 8- and
16-bit dtypes, 1 of 2 for 32-bit), E (M, K / e_factor) the metadata, B and C as in T.gemm.
Each 4-bit field of an E element describes one group, lowest field first: bits [1:0] and
[3:2] are the positions of the group's two kept values (for 32-bit A, bits [1:0] // 2 is the
position of the one kept value: 0b0100 -> 0, 0b1110 -> 1). e_factor = (E bits / 4) * group.
This is the row-major ("natural") metadata of tilelang.cuda.intrinsics.sparse_layout and of
the peer examples' compressor.

Gives: `decompressed(op)`, the statements of the dense path every target runs:

    T.gemm_sp(A_s, E_s, B_s, C)   ->   A_dense = alloc_shared((M, K))
                                       for m, k in T.Parallel(M, K):
                                           f = (E_s[m, k // 4 // 4] >> 4 * (k // 4 % 4)) & 15
                                           A_dense[m, k] = A_s[m, 2 (k//4)] if k % 4 == f & 3 else
                                                           A_s[m, 2 (k//4) + 1] if k % 4 == f >> 2 else 0
                                       T.gemm(A_dense, B_s, C)
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as dt
from ..errors import Span
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer, BufferRegion
from ..ir.stmt import TileOp, default_span
from . import tile_ops as O
from .regions import matrix_dims

# kept values, group size per A dtype width
GROUP = {32: (1, 2), 16: (2, 4), 8: (2, 4)}


def e_factor(a_dtype, e_dtype) -> int:
    """How many dense A elements one metadata element describes."""
    _, group = GROUP[dt.as_dtype(a_dtype).bits]
    return dt.as_dtype(e_dtype).bits // 4 * group


@dataclass(frozen=True)
class GemmSp(TileOp):
    A: BufferRegion  # compressed values: (M, K/2), (K/2, M) with transpose_A
    E: BufferRegion  # metadata: (M, K/e_factor), (K/e_factor, M) with transpose_E
    B: BufferRegion
    C: BufferRegion
    transpose_A: bool = False
    transpose_E: bool = False
    transpose_B: bool = False
    clear_accum: bool = False
    policy: str = "Square"
    span: Span | None = default_span()

    @property
    def mnk(self) -> tuple:
        from .regions import matrix_extents

        a, c = matrix_extents(self.A), matrix_extents(self.C)
        return c[0], c[1], 2 * (a[0] if self.transpose_A else a[1])


def _at(r: BufferRegion, a, b) -> E.BufferLoad:
    idx = list(r.starts)
    for d, v in zip(matrix_dims(r), (a, b)):
        idx[d] = idx[d] + v
    return E.BufferLoad(r.buffer, tuple(idx), r.buffer.dtype)


def dense_value(op: GemmSp, m, k) -> E.Expr:
    """Element (m, k) of the dense A that op.A and op.E describe."""
    a_bits = op.A.buffer.dtype.bits
    kept, group = GROUP[a_bits]
    fields = op.E.buffer.dtype.bits // 4
    g, p = k // group, k % group
    meta = _at(op.E, g // fields, m) if op.transpose_E else _at(op.E, m, g // fields)
    f = (E.cast(dt.int32, meta) >> (4 * (g % fields))) & 15

    def val(j):
        return _at(op.A, kept * g + j, m) if op.transpose_A else _at(op.A, m, kept * g + j)
    zero = E.const(0, op.A.buffer.dtype)
    if kept == 1:
        return E.select(E.binop("==", p, (f & 3) >> 1), val(0), zero)
    return E.select(E.binop("==", p, f & 3), val(0), E.select(E.binop("==", p, (f >> 2) & 3), val(1), zero))


def decompressed(op: GemmSp, name: str = "A_dense") -> S.Stmt:
    """Allocate a dense (M, K) shared tile, fill it from op.A / op.E, then T.gemm it with op.B."""
    m, n, k = op.mnk
    dense = Buffer(name, (m, k), op.A.buffer.dtype, "shared.dyn")
    i, j = E.Var("sm", dt.int32), E.Var("sk", dt.int32)
    fill = S.For(i, E.as_expr(0), E.as_expr(m), "parallel",
                 S.For(j, E.as_expr(0), E.as_expr(k), "parallel",
                       S.BufferStore(dense, (i, j), dense_value(op, i, j), span=op.span)), span=op.span)
    gemm = O.Gemm(dense.region(), op.B, op.C, False, op.transpose_B, op.clear_accum, op.policy, span=op.span)
    return S.seq(S.Allocate(dense, span=op.span), fill, gemm)
