"""Move a share of an accumulator's exp2 from MUFU.EX2 to the FMA pipe (tl.enable_exp2_poly).

On sm_90 MUFU.EX2 issues 16 results a clock per SM: attention at head dim 64 spends as long on
the softmax's exp2 (one per score) as on its two gemms. tl_exp2_poly (include/tl/exp2_poly.h)
computes 2^x with FADD / FFMA / one integer op instead, so some exponents can leave the MUFU queue.

Expects: lowered per-thread CUDA IR (lower_tile_ops), where a T.Parallel over an mma / wgmma
accumulator is `for l in unroll(n): <lets>; acc[l] = v` (or column pairs: `for g: for u:
acc[2g + u] = v`; `reg_layouts` gives the buffer's layout), v holding float32 `exp2(x)` calls.
Guarantees: in a store whose slot s is a function of unrolled loop variables alone, each exp2
becomes `select(poly(s), tl_exp2_poly(x), exp2(x))`, where poly(s) holds for the column pairs
q = s // 2 with (q * a) mod b >= b - a: a/b of the pairs, spread evenly (1/4: pairs 3, 7, 11,
...). After unrolling each thread runs a fixed mix with no branch. Row fragments' exp2 (the
softmax rescale), loops over other buffers and other exp2 calls are left alone.

    for l in unroll(64):                       for l in unroll(64):
      acc_s[l] = exp2(acc_s[l] * c - m)    ->    acc_s[l] = ((l >> 1) * 1 % 4 >= 3)
                                                     ? tl_exp2_poly(acc_s[l] * c - m) : exp2(acc_s[l] * c - m)
"""
from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from ... import dtypes as dt
from ...arith.simplify import const_int
from ...errors import LoweringError
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import Mutator, collect
from ...layout.fragment import MmaAccFragment, WgmmaAccFragment

DEFAULT = Fraction(1, 4)


def poly_fraction(value) -> Fraction | None:
    """The pass config's value as a fraction in (0, 1], or None (off): True means 1/4; numbers and
    "a/b" strings are taken as given (denominators up to 64)."""
    if value is None or value is False:
        return None
    if value is True:
        return DEFAULT
    try:
        frac = Fraction(str(value)).limit_denominator(64)
    except (ValueError, ZeroDivisionError):
        frac = None
    if frac is None or not 0 <= frac <= 1:
        raise LoweringError(f"tl.enable_exp2_poly: expected True or a fraction in [0, 1] (0.25, \"3/8\"), "
                            f"got {value!r}")
    return frac if frac > 0 else None


def poly_slot(slot: int, frac: Fraction) -> bool:
    """Slot `slot` of an accumulator takes tl_exp2_poly (the rule the emitted select encodes)."""
    return ((slot // 2) * frac.numerator) % frac.denominator >= frac.denominator - frac.numerator


def _static_slot(index, lets: dict, unrolled: set) -> bool:
    """`index` (through the lets it names) depends on unrolled loop variables and constants only."""
    seen = set()
    todo = [index]
    while todo:
        for v in collect(todo.pop(), lambda n: isinstance(n, E.Var)):
            if v.uid in seen:
                continue
            seen.add(v.uid)
            if v.uid in lets:
                todo.append(lets[v.uid])
            elif v.uid not in unrolled:
                return False
    return True


class _Exp2Split(Mutator):
    """exp2(x) -> select(poly(slot), tl_exp2_poly(x), exp2(x)) in one store's value (cond None:
    tl_exp2_poly(x))."""

    def __init__(self, cond):
        self.cond = cond
        self.count = 0

    def visit_Call(self, e):
        e = self.generic(e)
        if e.op != "exp2" or e.dtype != dt.float32:
            return e
        self.count += 1
        poly = E.Call("tl_exp2_poly", e.args, dt.float32)
        return poly if self.cond is None else E.Select(self.cond, poly, e, dt.float32)


class _Stores(Mutator):
    def __init__(self, reg_layouts: dict, frac: Fraction, lets: dict, unrolled: set):
        self.layouts = reg_layouts
        self.frac = frac
        self.lets = lets  # let var uid -> value (variables are unique: one dict for the body)
        self.unrolled = unrolled  # uids of the variables of unrolled loops
        self.rewritten = 0  # exp2 calls given the split

    def visit_BufferStore(self, st):
        if st.value.dtype != dt.float32 or len(st.indices) != 1:
            return st
        if not isinstance(self.layouts.get(st.buffer.uid), (MmaAccFragment, WgmmaAccFragment)):
            return st
        slot = st.indices[0]
        if not _static_slot(slot, self.lets, self.unrolled):
            return st
        a, b = self.frac.numerator, self.frac.denominator
        q = E.binop("//", slot, E.as_expr(2))
        cond = None if a == b else E.binop(">=", E.binop("%", E.binop("*", q, E.as_expr(a)), E.as_expr(b)),
                                           E.as_expr(b - a))  # None: every slot
        m = _Exp2Split(cond)
        value = m.visit(st.value)
        self.rewritten += m.count
        return st if value is st.value else replace(st, value=value)


def split_exp2(body, reg_layouts: dict, frac: Fraction):
    """(body with the accumulator loops' exp2 split by `frac`, number of exp2 calls split)."""
    lets = {x.var.uid: x.value for x in collect(body, lambda n: isinstance(n, S.LetStmt))}
    unrolled = {x.var.uid for x in collect(body, lambda n: isinstance(n, S.For) and n.kind == "unroll"
                                           and const_int(n.extent) is not None)}
    m = _Stores(reg_layouts, frac, lets, unrolled)
    out = m.visit(body)
    return out, m.rewritten
