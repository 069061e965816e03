"""Integer lets (element-loop coordinates) with their floor divisions split along multiples.

Expects: a lowered CUDA kernel body. Guarantees: every integer `LetStmt` value has gone through
`arith.floor_split.split_floor` (the same value for every input); nothing else changes.

Why: a vector loop's coordinates are its flat group start unflattened, `i = (g * 1024 + tid * 8)
// 128`, `j0 = (g * 1024 + tid * 8) % 128` (codegen: `>> 7`, `& 127`). Split, they read
`i = g * 8 + tid // 16` and `j0 = (tid % 16) * 8`: the unrolled group's part is a constant nvcc folds
into the access's immediate offset, the thread's part is computed once.

    const int32_t i_5 = (((g * 1024) + (tid * 8)) >> 7);    ->  const int32_t i_5 = ((g * 8) + (tid >> 4));
    const int32_t j0 = (((g * 1024) + (tid * 8)) & 127);    ->  const int32_t j0 = ((tid & 15) * 8);

Through lets (`tl.disable_let_floor_through_lets` turns it off): a swizzled copy names its counter
first, `e = g * 1024 + tid * 8; i = e // 128`; a division of an earlier integer let that is a sum
of products is split as if the sum were written out, where that leaves no division of the sum
(the flash-decoding split kernel's K / V refills: 32 cp.async addresses an iteration built from
one base and immediates instead of a shift, mask and multiply each). The CUDA pipeline asks for it
on wgmma kernels only: in mma.sync GEMM loops ptxas then rebuilds the refills' swizzle offsets each
k-step instead of keeping them (4096^3, 128x128 tiles, sm_80: 68 -> 79 non-HMMA instructions).
"""
from __future__ import annotations

from dataclasses import replace

from ...arith.floor_split import split_floor
from ...arith.simplify import linear_form
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import Mutator, collect


class _Lets(Mutator):
    def __init__(self, through_lets: bool):
        self.through_lets = through_lets
        self.linear: dict = {}  # let var -> its value, for integer lets that are sums of products

    # NOTE: a let's value is inlined only later in its own sequence (nested statements included) and
    # only while no let or loop rebinds its variable or a variable it reads (lowering reuses Vars)
    def visit_SeqStmt(self, s: S.SeqStmt):
        saved = dict(self.linear)
        out = self.generic(s)
        self.linear = saved
        return out

    def visit_For(self, s: S.For):
        saved = dict(self.linear)
        self._forget(s.var)
        out = self.generic(s)
        self.linear = saved
        return out

    def _forget(self, var):
        self.linear = {k: v for k, v in self.linear.items() if k is not var and var not in _vars(v)}

    def visit_LetStmt(self, s: S.LetStmt):
        s = self.generic(s)
        if not s.value.dtype.is_int or s.value.dtype.lanes != 1:
            self._forget(s.var)
            return s
        v = split_floor(s.value)
        if self.through_lets:
            v = self._through(v)
            self._forget(s.var)
            if linear_form(v) is not None and not collect(v, lambda n: isinstance(n, E.BufferLoad)) \
                    and s.var not in _vars(v):
                self.linear[s.var] = v
        return s if v == s.value else replace(s, value=v)

    def _through(self, v):
        """`v` with the lets its divisions and remainders divide read inlined, where the split then
        leaves no division of their sum (`i = e // 128` with `e = g * 1024 + tid * 8`)."""
        for n in collect(v, lambda n: isinstance(n, E.Binary) and n.op in ("//", "%")
                         and isinstance(n.a, E.Var) and n.a in self.linear):
            whole = split_floor(replace(n, a=self.linear[n.a]))
            if not any(isinstance(x, E.Binary) and x.op in ("//", "%") and x.a == self.linear[n.a]
                       for x in collect(whole, lambda x: isinstance(x, E.Binary))):
                v = _Replace(n, whole).visit(v)
        return v


def _vars(x) -> set:
    return set(collect(x, lambda n: isinstance(n, E.Var)))


class _Replace(Mutator):
    """One sub-expression (compared structurally) replaced by another."""

    def __init__(self, old, new):
        self.old, self.new = old, new

    def visit_Binary(self, b: E.Binary):
        return self.new if b == self.old else self.generic(b)


def split_let_floors(body, through_lets: bool = True):
    """`body` with its integer lets' floor divisions split (see the module doc); `through_lets`:
    a division of an earlier let's sum is split as if the sum were written out."""
    return _Lets(through_lets).visit(body)
