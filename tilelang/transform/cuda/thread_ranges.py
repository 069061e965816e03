"""Thread-index divisions that a branch's thread range decides (range folding inside warp groups).

Why: a fragment's element loop indexes with its layout's thread terms, written for the whole
block: `j = (tid / 128) * 256 + ((l / 4) & 31) * 8 + (tid % 4) * 2` for an accumulator of one
warp group in a 384-thread kernel. Inside that warp group's branch (`if (tid < 128)`, or
`tid_wg = tid - 128` in the next one) `tid / 128` is a constant, but neither nvcc nor ptxas
carries the branch's range into the division. Left in, the per-thread term `(tid / 128) * 256`
meets the unrolled slot's constant in a panel tile's column: the staging stores of an epilogue
(sparse_mla_fwd_pipelined: 64 pair stores a warp group) then each compute their address with
OR / XOR chains instead of one base register plus an immediate offset (~5 integer instructions
a store, spills in the 168-register warp group). The same holds for `tl_fresh_index(tid)`, an
opaque copy of the thread index: its value is the thread index, so its range is the branch's.

Expects: a lowered CUDA kernel body (WarpGroupScope branches, LetStmt coordinates, Raw
statements), its thread index Var and thread count.
Guarantees: every integer `x // c`, `x % c`, `x >> s`, `x & (2^s - 1)` by a constant whose
operand x is proven (thread index in [0, threads - 1], narrowed by WarpGroupScope branches and
`if` conditions; loop, grid and let ranges) to stay in one quotient [q c, q c + c - 1], x >= 0,
becomes the constant q (quotients) or `x - q c` (remainders); a comparison of two constants this
leaves becomes its truth value, and an `&&` / `||` with a constant side is reduced. Values are the
same for every input the ranges admit; nothing else changes.

    if (tid < 128) { ... j = (tid / 128) * 256 + ... }  ->  if (tid < 128) { ... j = 0 * 256 + ... }
"""
from __future__ import annotations

from dataclasses import replace

from ...arith.ranges import Ranges, TrackRanges
from ...arith.simplify import const_int, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import Mutator, substitute


def _modulus(e) -> tuple | None:
    """('q', d) for x // d and x >> s (d = 2^s), ('r', d) for x % d and x & (d - 1); d > 0 constant."""
    if not (isinstance(e, E.Binary) and e.dtype.is_int and e.op in ("//", "%", ">>", "&")):
        return None
    c = const_int(e.b)
    if c is None:
        return None
    if e.op == ">>":
        return ("q", 1 << c) if 0 <= c < 31 else None
    if e.op == "&":
        return ("r", c + 1) if c >= 0 and (c + 1) & c == 0 else None
    return ("q" if e.op == "//" else "r", c) if c > 0 else None


class _Fold(TrackRanges, Mutator):
    def __init__(self, tid, threads: int):
        self.ranges = Ranges()
        self.ranges.of[tid] = (0, threads - 1)
        self.tid = tid

    def visit_KernelLaunch(self, k):
        self.ranges.kernel(k)
        x = _block_x_var(k)
        if x is not None:  # `tx` of a one-dimensional block is the thread index: branches narrow it
            k = replace(k, body=substitute(k.body, {x: self.tid}))
        return self.generic(k)

    def visit_For(self, s):
        with self.ranges.loop(s):
            return self.generic(s)

    def visit_WarpGroupScope(self, s):
        lo, hi = self.ranges.of.get(self.tid, (0, s.t_hi - 1))
        with self.ranges.scoped({self.tid: (max(lo, s.t_lo), min(hi, s.t_hi - 1))}):
            return self.generic(s)

    def visit_LetStmt(self, s):
        v = s.value
        if isinstance(v, E.Call) and v.op == "tl_fresh_index" and len(v.args) == 1:
            # an opaque copy of its argument: the same value, so the same range
            self.ranges.let(s.var, v)
            b = self.ranges.bounds(v.args[0])
            if b is not None:
                self.ranges.of[s.var] = b
            return self.generic(s)
        return super().visit_LetStmt(s)

    def visit_Binary(self, e):
        e = self.generic(e)
        m = _modulus(e)
        if m is None:
            return _decided(e)
        kind, d = m
        b = self.ranges.bounds(e.a)
        if b is None or b[0] < 0:
            return e
        if b[0] // d != b[1] // d:
            return _as_bit_op(e, kind, d)
        q = b[0] // d
        if kind == "q":
            return E.Const(q, e.dtype)
        return e.a if q == 0 else simplify(E.Binary("-", e.a, E.Const(q * d, e.dtype), e.dtype))


def _as_bit_op(e, kind: str, d: int):
    """A floor division / remainder of a value proven >= 0 by a power of two d as `>> s` / `& (d - 1)`:
    the same value, and the C compiler sees no signed division (`(tid - 256) / 8` of a warp group
    printed through tl_floordiv_i32 hides that the quotient and remainder are small and >= 0)."""
    if e.op not in ("//", "%") or d & (d - 1) or isinstance(e.a, (E.Var, E.Const)):
        return e  # a plain variable's nonnegative division the code generator prints itself
    if kind == "q":
        return E.Binary(">>", e.a, E.Const(d.bit_length() - 1, e.b.dtype), e.dtype)
    return E.Binary("&", e.a, E.Const(d - 1, e.b.dtype), e.dtype)


def _block_x_var(k):
    """The Var T.get_thread_binding() binds to the x thread index of a one-dimensional block (the
    code generator prints `tid % threads`: that is tid itself), or None."""
    t = tuple(k.threads) + (1, 1)
    if t[1] != 1 or t[2] != 1:
        return None
    xs = [v for v in k.thread_vars if v.name not in ("ty", "tz")]
    return xs[0] if len(xs) == 1 else None


_CMP = ("<", "<=", ">", ">=", "==", "!=")


def _decided(e):
    """A comparison of two constants (a folded `tid / 128 < 1`) as its truth value; `&&` / `||` with a
    constant side as the other side or the constant (simplify decides both)."""
    if e.op in _CMP and const_int(e.a) is not None and const_int(e.b) is not None:
        return simplify(e)
    if e.op in ("&&", "||") and any(isinstance(c, E.Const) and c.dtype.is_bool for c in (e.a, e.b)):
        return simplify(e)
    return e


def fold_thread_ranges(body: S.Stmt, tid, threads: int) -> S.Stmt:
    return _Fold(tid, threads).visit(body)
