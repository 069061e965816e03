"""Global-memory indices without the divisions a layout put in them (range-aware div/mod folding).

Why: an element loop over a register fragment binds its coordinates to the thread index and the
(unrolled) slot, `i = (l / 12) * 16 + lane / 4 + ((l % 4) / 2) * 8`; a global layout indexes with
`(k * 32 + i) / 8`, `i % 8`, `j / 8`, `j % 2` of them (the attention backward's dQ atomics through
`make_dq_layout`). Printed as they stand, nvcc computes each element's address from scratch, in
64-bit arithmetic: ~10 instructions and a few live registers per atomic, spilled across the k-loop.
With the ranges known (lane / 4 < 8) the quotient and remainder split exactly:
`(k * 32 + i) / 8 == k * 4 + (l / 12) * 2 + (l % 4) / 2`, `i % 8 == lane / 4`, so each index is a
per-thread part plus a per-slot constant, and each atomic a constant offset from one base address.

Expects: a lowered CUDA kernel (element loops with LetStmt coordinates), its thread index Var and
thread count.
Guarantees: a global BufferLoad / BufferStore inside an unrolled element loop in the body of an
innermost loop that is not unrolled (a k-loop), outside cp.async copies (their source pointers are
hoisted and bumped per tile by the lowering), has its coordinate lets inlined (those reading only
the thread index and loop variables: a persistent kernel's rebound bx / by are never looked
through) and every `//`, `%`, `>>`, `&` by a constant split as `(c * X + R) // c == X + R // c`,
`(c * X + R) % c == R % c` where the ranges prove 0 <= R (+ the constant's remainder) < c (floor
semantics, so the value is the same for every input). The flat offset (static shapes) is then
printed as the thread's 64-bit part plus the unrolled slot's constant, which nvcc folds into an
immediate address offset. Other accesses, and those where nothing folds, are left as they were:
an epilogue after the k-loop keeps its addresses (ptxas would hoist a thread base above the
k-loop, live beside the accumulators).

    for l in unroll(24): atomic_add(&dQ_phys[bz*N0 + ((k*32 + i) >> 3)*49152 + ... + (j % 2)*32 + ...])
        -> atomic_add(&dQ_phys[(int64)(tid % 32) + (int64)(tid / 32)*192 + ... + (int64)k*196608
                               + (int64)(((l % 4) & 1)*32 + ((l / 4) % 3)*64 + ...)])
"""
from __future__ import annotations

from ...arith.ranges import Ranges, TrackRanges
from ...arith.simplify import const_int, linear_form, simplify
from ... import dtypes as dt
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import Mutator, collect, substitute

_DIVS = ("//", "%", ">>", "&")


def _as_divmod(e):
    """(op, a, c) for e = a // c or a % c with a constant c > 0 (shifts and low-bit masks as such)."""
    if not (isinstance(e, E.Binary) and e.dtype.is_int and e.op in _DIVS):
        return None
    c = const_int(e.b)
    if c is None or c <= 0:
        return None
    if e.op == ">>":
        return ("//", e.a, 1 << c) if c < 31 else None
    if e.op == "&":
        return ("%", e.a, c + 1) if (c + 1) & c == 0 else None
    return e.op, e.a, c


def _mixed(e, unrolled) -> int:
    """Divisions in e that no compiler folds per element: of a value that reads both an unrolled
    loop's variable (a constant in each unrolled copy) and anything else (the thread index, a
    block index, a k-loop variable). A division of per-slot constants folds at compile time; one
    of the thread index alone is computed once per thread."""
    def bad(n):
        if _as_divmod(n) is None:
            return False
        vs = {v for v in collect(n, lambda m: isinstance(m, E.Var))}
        return bool(vs & unrolled) and bool(vs - unrolled)
    return len(collect(e, bad))


def _sum(terms: dict, const: int, dtype) -> E.Expr:
    """sum(k * t) + const as an expression of dtype."""
    out = E.Const(const, dtype)
    for t, k in terms.items():
        out = E.Binary("+", out, t if k == 1 else E.Binary("*", t, E.Const(k, dtype), dtype), dtype)
    return simplify(out)


def _count(e) -> int:
    return len(collect(e, lambda n: _as_divmod(n) is not None))


class _Split(Mutator):
    def __init__(self, ranges: Ranges):
        self.ranges = ranges

    def visit_Binary(self, e):
        e = self.generic(e)
        got = _as_divmod(e)
        if got is None:
            return e
        op, a, c = got
        lin = linear_form(simplify(a))
        if lin is None:
            return e
        terms, k0 = lin
        keep = {t: k for t, k in terms.items() if k % c == 0}
        rest = {t: k for t, k in terms.items() if k % c != 0}
        q0, r0 = divmod(k0, c)
        r = _sum(rest, r0, e.dtype)
        b = self.ranges.bounds(r)
        if b is None or b[0] < 0 or b[1] >= c:
            return e
        if op == "%":
            return simplify(r)
        return _sum({t: k // c for t, k in keep.items()}, q0, e.dtype)


class _FoldIndices(TrackRanges, Mutator):
    def __init__(self, tid, threads: int):
        self.ranges = Ranges()
        self.ranges.of[tid] = (0, threads - 1)
        self.tid = tid
        self.unrolled: set = set()
        self.loops: set = set()  # variables of the enclosing loops
        self.innermost: list = []  # per enclosing loop that is not unrolled: it holds no such loop

    def visit_KernelLaunch(self, k):
        self.ranges.kernel(k)
        return self.generic(k)

    def visit_For(self, s):
        unrolled = _unrolled(s)
        if unrolled:
            self.unrolled.add(s.var)
        else:  # NOTE: only the innermost real loop's accesses are rewritten (see _indices)
            self.innermost.append(not collect(s.body, lambda n: isinstance(n, S.For) and not _unrolled(n)))
        self.loops.add(s.var)
        try:
            with self.ranges.loop(s):
                return self.generic(s)
        finally:
            self.unrolled.discard(s.var)
            self.loops.discard(s.var)
            if not unrolled:
                self.innermost.pop()

    def _inline(self, e):
        """e with the let-bound coordinates it reads replaced by their values, where those read only
        the thread index, enclosing loop variables and other such lets. NOTE: never through a
        value that reads a block variable or an outer let: persistent kernels rebind bx / by per
        tile, so such a value names a variable whose meaning has changed since."""
        lets, pure = self.ranges.values, {self.tid} | self.loops
        ok: dict = {}

        def inlinable(v, depth=0):
            if v not in ok:
                ok[v] = depth < 8 and v in lets and all(
                    u in pure or inlinable(u, depth + 1) for u in _vars(lets[v]))
            return ok[v]

        for _ in range(8):  # let values may name earlier lets
            names = {v for v in _vars(e) if v not in pure and inlinable(v)}
            if not names:
                break
            e = substitute(e, {v: lets[v] for v in names})
        return e

    def _indices(self, buf, indices):
        """New indices of a global access, or None to keep them."""
        # Only in the body of an innermost k-loop-like loop: its per-thread base is recomputed per
        # iteration. Elsewhere (an epilogue after the k-loop) ptxas hoists the thread's part of
        # every address above the k-loop, live beside the accumulators (spills in GEMMs).
        if not self.unrolled or not self.innermost or not self.innermost[-1]:
            return None
        full = [self._inline(i) for i in indices]
        if not any(_vars(i) & self.unrolled for i in full):
            return None  # the same address in every unrolled copy
        new = [simplify(_Split(self.ranges).visit(i)) if _count(i) else i for i in full]
        fewer = sum(_mixed(i, self.unrolled) for i in new) < sum(_mixed(i, self.unrolled) for i in full)
        # a slot-dependent index of an outer dimension is printed `(int64_t)idx * stride`: nvcc
        # multiplies per element; in the last dimension it folds the slot's constant already
        outer = any(_vars(i) & self.unrolled for i in full[:-1])
        if not (fewer or outer):
            return None
        flat = self._flat(buf, new)
        if flat is not None:
            return flat
        return tuple(new) if fewer else None

    def _flat(self, buf, idx):
        """idx as one offset into the last dimension: the thread's part (64-bit) plus the part that
        reads only unrolled loop variables (a constant in each copy: an immediate address offset),
        or None (a dynamic shape, explicit strides, a non-linear index)."""
        shape = buf.static_shape
        if shape is None or getattr(buf, "strides", None) or len(idx) != len(shape):
            return None
        stride, flat = 1, {}
        const = 0
        for d in range(len(shape) - 1, -1, -1):
            lin = linear_form(idx[d])
            if lin is None:
                return None
            for t, k in lin[0].items():
                flat[t] = flat.get(t, 0) + k * stride
            const += lin[1] * stride
            stride *= shape[d]
        slot = {t: k for t, k in flat.items() if k and _vars(t) <= self.unrolled}
        rest = {t: k for t, k in flat.items() if k and t not in slot}
        if not slot or not rest:
            return None
        i64 = dt.int64
        out = None
        for t, k in rest.items():
            term = E.Cast(i64, t) if t.dtype != i64 else t
            term = term if k == 1 else E.Binary("*", term, E.Const(k, i64), i64)
            out = term if out is None else E.Binary("+", out, term, i64)
        out = E.Binary("+", out, E.Cast(i64, _sum(slot, const, dt.int32)), i64)
        return tuple(E.Const(0, dt.int32) for _ in shape[:-1]) + (out,)

    def visit_Raw(self, r):
        # cp.async copies keep their addresses: their source pointers are hoisted out of the k-loop
        # and bumped per tile (lower_async), which reads the index as the lowering wrote it
        if "cp_async" in r.fmt or r.fmt.lstrip().startswith("const auto"):
            return r
        return self.generic(r)

    def visit_BufferLoad(self, e):
        e = self.generic(e)
        if e.buffer.scope != "global":
            return e
        idx = self._indices(e.buffer, e.indices)
        return e if idx is None else E.BufferLoad(e.buffer, idx, e.dtype)

    def visit_BufferStore(self, s):
        s = self.generic(s)
        if s.buffer.scope != "global":
            return s
        idx = self._indices(s.buffer, s.indices)
        return s if idx is None else S.BufferStore(s.buffer, idx, s.value, span=s.span)


def _unrolled(s) -> bool:
    return s.kind == "unroll"


def _vars(e) -> set:
    return {v for v in collect(e, lambda n: isinstance(n, E.Var))}


def fold_index_divmod(body, tid, threads: int):
    return _FoldIndices(tid, threads).visit(body)
