"""Integer lets (element-loop coordinates) with their floor divisions split along multiples.

Expects: a lowered CUDA kernel body. Guarantees: every integer `LetStmt` value has gone through
`arith.floor_split.split_floor` (the same value for every input); nothing else changes.

Why: a vector loop's coordinates are its flat group start unflattened, `i = (g * 1024 + tid * 8)
// 128`, `j0 = (g * 1024 + tid * 8) % 128` (codegen: `>> 7`, `& 127`). Split, they read
`i = g * 8 + tid // 16` and `j0 = (tid % 16) * 8`: the unrolled group's part is a constant nvcc folds
into the access's immediate offset, the thread's part is computed once.

    const int32_t i_5 = (((g * 1024) + (tid * 8)) >> 7);    ->  const int32_t i_5 = ((g * 8) + (tid >> 4));
    const int32_t j0 = (((g * 1024) + (tid * 8)) & 127);    ->  const int32_t j0 = ((tid & 15) * 8);
"""
from __future__ import annotations

from dataclasses import replace

from ...arith.floor_split import split_floor
from ...ir import stmt as S
from ...ir.visitor import Mutator


class _Lets(Mutator):
    def visit_LetStmt(self, s: S.LetStmt):
        s = self.generic(s)
        if not s.value.dtype.is_int or s.value.dtype.lanes != 1:
            return s
        v = split_floor(s.value)
        return s if v == s.value else replace(s, value=v)


def split_let_floors(body):
    """`body` with its integer lets' floor divisions split (see the module doc)."""
    return _Lets().visit(body)
