"""Block indices of grid dimensions of extent 1 are the constant 0.

Why: `T.Kernel(S, B, kv_group * NH)` launched with B = 1 and one head block (the sparse MLA
backward's regression size) still reads blockIdx.y and blockIdx.z, and every global index keeps
their terms: `(int64_t)by * 294912 + (int64_t)Indices[..] * 576 + (int64_t)bz * 576` costs a 64-bit
add with carry and two wide multiplies per gathered row address (per dKV atomic), where
`Indices[..] * 576` is one wide multiply-add. The value is 0 in every block of such a grid.

Expects: a KernelLaunch before lowering (its grid extents as the user wrote them).
Guarantees: each block var whose grid extent is the constant 1 is replaced by 0 throughout the
body (any later rebinding of it, a persistent kernel's per-tile coordinates, stays 0 for such
a dimension); the grid itself is unchanged. Off switch: pass config `tl.disable_unit_grid_fold`.
"""
from __future__ import annotations

from dataclasses import replace

from ...arith.simplify import const_int
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import substitute


def fold_unit_grid(k: S.KernelLaunch) -> S.KernelLaunch:
    """k with its extent-1 block vars replaced by 0 in the body."""
    zero = {v: E.Const(0, v.dtype) for v, g in zip(k.block_vars, k.grid) if const_int(E.as_expr(g)) == 1}
    if not zero:
        return k
    return replace(k, body=substitute(k.body, zero))
