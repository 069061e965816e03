"""Row indices of swizzled shared tiles split into a per-lane part and a part outside the swizzle.

Takes: the row index (an integer Expr) of an access to a tile in the gemm swizzle
(`tl::swizzle_offset` / `swizzle_span_offset` / `swizzle_xor_offset` of include/tl/gemm_sm80.h),
and a predicate saying which expressions are provably >= 0. Gives: `split_row(row)`, either None
(nothing to split) or `(outer, inner)` with row == outer + inner, outer a multiple of 8 and
inner >= 0.

Every swizzle variant depends on the row only through `row * kRow` and `row % 8` (the XOR term is
`row % 8`, `(row / 2) % 4` or `(row / 4) % 2`), so for such a split

    swizzle(row, col) == outer * kRow + swizzle(inner, col)

The codegen prints the right-hand side. An mma tile loop's row `warp * 64 + i * 16 + (lane & 7) +
(lane >> 4) * 8` then keeps only `lane & 7` inside the swizzle: each unrolled tile's address is one
per-lane register plus an immediate, where ptxas, handed the whole sum, kept one XOR result per
tile (TensorCoreIntrinEmitter.ldmatrix_b: 8 address registers and their adds a K step, 4 more LEA
than A's).
"""
from __future__ import annotations

from ..arith.divisibility import known_divisor
from ..arith.floor_split import linear_sum
from ..arith.simplify import linear_form
from ..ir import expr as E

ROW_PERIOD = 8  # the swizzle's XOR term repeats every 8 rows in every variant


def split_row(row, nonnegative) -> tuple | None:
    """(outer, inner): row == outer + inner, outer a multiple of ROW_PERIOD, inner >= 0; or None
    when no term leaves the swizzle or the rest cannot be shown >= 0."""
    if not isinstance(row, E.Expr) or not row.dtype.is_int:
        return None
    lin = linear_form(row)
    if lin is None:
        return None
    terms, c = lin
    outer, inner = [], []
    for t, k in terms.items():
        if k == 0:
            continue
        (outer if (k * known_divisor(t)) % ROW_PERIOD == 0 else inner).append((t, k))
    c_in = c % ROW_PERIOD
    c_out = c - c_in
    if not outer and c_out == 0:
        return None
    if any(k < 0 or not nonnegative(t) for t, k in inner):
        return None
    return linear_sum(outer, c_out, row.dtype), linear_sum(inner, c_in, row.dtype)
