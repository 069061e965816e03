"""`TensorCoreIntrinEmitterWithLadderTransform`: the mma.sync emitter for operands whose shared tiles
were pre-permuted ("Ladder" layouts, as BitBLAS produces them), chosen per operand by TransformKind:

    0 NonTransform         a row-major 2-d tile: exactly TensorCoreIntrinEmitter
    1 InterWarpTransform   a 4-d tile (tiles_s, tiles_k, 16, K) of row-major 16 x K micro tiles;
                           ldmatrix reads each micro tile at the usual lane offsets
    2 IntraWarpTransform   4-d, each micro tile permuted so that lane l's ldmatrix row is the 16
                           bytes at flat offset l * local_size of the micro tile
    3 LDMatrixTransform    4-d, each micro tile holds the fragment itself: lane l's slots are flat
                           elements l * local_size .. +local_size, copied without ldmatrix (with
                           num_elems_per_byte > 1 for B, the packed bytes: local_size / per byte)

Kinds 1-3 need the K-contiguous storage (A not transposed, B transposed) and 16-column B tiles.
"""
from __future__ import annotations

from enum import IntEnum

from .... import dtypes as dt
from ....errors import DSLTypeError
from ....frontend import builder as B
from ....ir import expr as E
from ..layout.mma_layout import ldmatrix_row
from .mma_macro_generator import TensorCoreIntrinEmitter
from .warp_tile_ops import check_local, emit_unrolled, fill_slots, ldmatrix_call, operand_elem, operand_region

__all__ = ["TransformKind", "TensorCoreIntrinEmitterWithLadderTransform"]


class TransformKind(IntEnum):
    NonTransform = 0
    InterWarpTransform = 1
    IntraWarpTransform = 2
    LDMatrixTransform = 3


def _kind(value, what) -> TransformKind:
    try:
        return TransformKind(int(value))
    except (TypeError, ValueError):
        raise DSLTypeError(f"TensorCoreIntrinEmitterWithLadderTransform: {what} must be 0, 1, 2 or 3 "
                           f"(a TransformKind), got {value!r}") from None


class TensorCoreIntrinEmitterWithLadderTransform(TensorCoreIntrinEmitter):
    """TensorCoreIntrinEmitter whose ldmatrix_a / ldmatrix_b read Ladder-permuted tiles (module doc)."""

    def __init__(self, a_dtype="float16", b_dtype="float16", accum_dtype="float16", a_transposed=False,
                 b_transposed=False, block_row_warps=2, block_col_warps=2, warp_row_tiles=8, warp_col_tiles=8,
                 chunk=16, reduce_k=1, num_elems_per_byte=1, is_m_first=False, transform_kind_a=0,
                 transform_kind_b=0, thread_var=None):
        super().__init__(a_dtype=a_dtype, b_dtype=b_dtype, accum_dtype=accum_dtype, a_transposed=a_transposed,
                         b_transposed=b_transposed, block_row_warps=block_row_warps,
                         block_col_warps=block_col_warps, warp_row_tiles=warp_row_tiles,
                         warp_col_tiles=warp_col_tiles, chunk=chunk, reduce_k=reduce_k,
                         num_elems_per_byte=num_elems_per_byte, is_m_first=is_m_first, thread_var=thread_var)
        self.transform_kind_a = _kind(transform_kind_a, "transform_kind_a")
        self.transform_kind_b = _kind(transform_kind_b, "transform_kind_b")
        if self.transform_kind_a and self.a_transposed:
            raise DSLTypeError("TensorCoreIntrinEmitterWithLadderTransform: transform_kind_a > 0 needs A stored "
                               "K-contiguous (a_transposed=False)")
        if self.transform_kind_b and not self.b_transposed:
            raise DSLTypeError("TensorCoreIntrinEmitterWithLadderTransform: transform_kind_b > 0 needs B stored "
                               "K-contiguous (b_transposed=True)")
        if self.transform_kind_b and self.n_dim != 16:
            raise DSLTypeError("TensorCoreIntrinEmitterWithLadderTransform: transform_kind_b > 0 needs "
                               f"warp_col_tiles a multiple of 16, got {self.warp_col_tiles}")

    def _ladder_load(self, local, shared, ki, rk, operand):
        """The kind 1-3 load of operand "A" or "B" (see the module doc)."""
        what = f"ldmatrix_{operand.lower()}"
        B.in_kernel(f"TensorCoreIntrinEmitterWithLadderTransform.{what}")
        kind = self.transform_kind_a if operand == "A" else self.transform_kind_b
        base, buf = operand_region(shared, what)
        if len(buf.shape) != 4:
            raise DSLTypeError(f"TensorCoreIntrinEmitterWithLadderTransform.{what}: transform kind {int(kind)} "
                               f"reads a 4-d shared tile (tiles, k tiles, 16, k), got {buf.name}{tuple(buf.shape)}")
        lane, warp_n, warp_m = self._ids()
        bits = dt.as_dtype(self.a_dtype if operand == "A" else self.b_dtype).bits
        size = self.local_size_a if operand == "A" else self.local_size_b
        count, span = (self.warp_rows, self.warp_row_tiles) if operand == "A" else (self.warp_cols, self.warp_col_tiles)
        warp = warp_m if operand == "A" else warp_n
        t = E.Var("mi" if operand == "A" else "nj", dt.int32)
        ti = (warp * span) // 16 + t  # micro tile along M / N
        tk = (rk * self.chunk) // self.k_dim + ki  # micro tile along K
        if kind == TransformKind.LDMatrixTransform:
            per = size // (self.num_elems_per_byte if operand == "B" else 1)
            inner = int(buf.shape[-1])
            check_local(local, count * per, what, operand)

            def load(s):
                f = lane * per + s
                return operand_elem(buf, base, (ti, tk, f // inner, f % inner))
            emit_unrolled(t, count, fill_slots(local, t * per, per, load))
            return
        check_local(local, count * size, what, operand)
        if kind == TransformKind.InterWarpTransform:
            r, c = ldmatrix_row(operand, lane, bits, True)
        else:  # IntraWarpTransform: lane l's 16-byte row at flat l * size of the micro tile
            inner = int(buf.shape[-1])
            r, c = (lane * size) // inner, (lane * size) % inner
        src = operand_elem(buf, base, (ti, tk, r, c))
        emit_unrolled(t, count, ldmatrix_call(False, 4, src, local, t * size, what))

    def ldmatrix_a(self, A_local_buf, A_shared_buf, ki, rk=0):
        if self.transform_kind_a == TransformKind.NonTransform:
            return super().ldmatrix_a(A_local_buf, A_shared_buf, ki, rk)
        return self._ladder_load(A_local_buf, A_shared_buf, ki, rk, "A")

    def ldmatrix_b(self, B_local_buf, B_shared_buf, ki, rk=0):
        if self.transform_kind_b == TransformKind.NonTransform:
            return super().ldmatrix_b(B_local_buf, B_shared_buf, ki, rk)
        return self._ladder_load(B_local_buf, B_shared_buf, ki, rk, "B")
