"""Skip a wgmma accumulator's mask fill on the tiles the mask does not touch.

Expects: lowered per-thread CUDA IR, as fold_accum_clear.py does; the kernel's thread index Var
and thread count, and its block variables. A mask fill is a thread loop over all of a register
accumulator C, `for l in [0, n): <lets>; C[l] = select(cond, 0, x)` (or `select(cond, x, 0)`),
followed in the same statement sequence -- with only statements that do not mention C in between
-- by a wgmma gemm into the whole of C that accumulates (fold_accum_clear's gemm Raw, no clear).
Guarantees: where `cond` is a comparison of integer sums (or an `&&` / `||` / `!` of them), the
pass forms a block-uniform condition U -- built from block variables, enclosing loop variables
and lets of those only -- under which cond holds (or fails, for `select(cond, x, 0)`) for every
element of C on every thread: each comparison is written `e >= 0` with e = U-part + T-part, the
T-part (the thread index, the fill's slot and the lets in its body) bounded below over the
thread range of the branch (a warp-specialized consumer: [0, consumers - 1]) and the fill's
slots. The fill then runs only when U is false, and the gemm clears C (scale-d = 0 on its first
k-step) when U is true: it writes every element of C, with the value the fill and an
accumulating gemm would give (0 + the product). Where U cannot be formed, nothing changes.
Only gemms of one 64-row block per warpgroup are taken: with two (128 rows on one warpgroup,
which row_block_fission.py splits), NVRTC 13.0 spilled 96 bytes a thread in causal attention
D64 128 x 128 (0 without the runtime clear; 320 against 0 without the fission). Near the register
limit the guarded fill can still cost registers (D64 192 x 128 on three consumer warpgroups,
128 registers: 32 bytes spilled); the CUDA pipeline then rebuilds without this pass and keeps
the build that spills less (backend/cuda/pipeline.py).

Post-mask (`post_mask`, off: `tl.disable_unmasked_post_mask`): where the fill's other value is an
infinity (`select(cond, 0, -inf)`), the gemm always clears C and the masked tiles add the fill to
C after the gemm's wait instead -- `C[l] = select(cond, 0, -inf) + C[l]`, the value the fill and an
accumulating gemm give (adding 0 or an infinity rounds nothing). The fill no longer writes C before
the gemm: with the previous iteration's P.V wgmma still in flight across the loop's back edge (the
consumers' ping-pong turns), writing the 64 score registers there made ptxas wait for that wgmma
first (its C7517 "wgmma.wait_group is injected") on every diagonal tile of causal attention (D64 192
x 128 on three warpgroups, D128 128 x 128 on two). Taken only where the gemm's wait<0> follows in
the same statement list with nothing touching C in between (or the gemm waits itself), and only in
blocks of at most POST_MASK_THREADS consumer threads: on three consumer warpgroups (128 registers a
thread) the H100 run (2026-12-06, benchmarks/attention.py, 3 interleaved rounds, same call) of D64
causal 192 x 128 fell from 371.1 to 251.6 TFLOP/s with it (the device's NVRTC spilled), while two
warpgroups gained: D64 128 x 128 349.4 -> 365.4, D128 128 x 128 529.5 -> 550.5 (cuDNN 514.7).
NVRTC 13.5 compiles the three-warpgroup post-mask without that spill or serialized wgmma, but it did
not gain there either (H100, 2026-12-06, 13.5 loaded over the device's 13.0, 3 rounds: 361.9 with,
368.4 without), so the limit stays whatever the NVRTC. `tl.unmasked_post_mask_threads` sets it.

Causal attention fills the scores tile with `bx * bM + i >= k * bN + j ? 0 : -inf` on every key
tile; only the diagonal tiles (k * bN + bN - 1 > bx * bM) have a masked element. At D64 with
128 x 128 tiles the fill is ~150 of the ~780 SASS instructions of a key tile (64 compares,
64 selects, index arithmetic); on the tiles left of the diagonal, which are most of them, the
pass saves them and the register moves that seeded the accumulator.

    for l in unroll(64):                               if (!(bx * 128 >= k * 128 + 127)) {
      acc_s[l] = (bx*128 + i >= k*128 + j) ? 0 : -inf     for l in unroll(64): acc_s[l] = ...
    tl::mbarrier_wait(...);                     ->     }
    tl::gemm_ss_sm90<...>(Q_s, K_s, acc_s);            tl::mbarrier_wait(...);
                                                       tl::gemm_ss_sm90<...>(Q_s, K_s, acc_s,
                                                           (bx * 128 >= k * 128 + 127));
"""
from __future__ import annotations

import math
import re
from dataclasses import replace

from ...arith.ranges import Ranges
from ...arith.simplify import const_int, linear_form, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import Mutator, collect, substitute
from .fold_accum_clear import GEMM_HEAD as _GEMM
from .fold_accum_clear import (
    accumulator,
    clearing_call,
    mentions,
    wgmma_elems,
    whole_register_store,
)
from .raw import Raw

_CALL = "({0}, {1}, {2});"
_UNIFORM_CALL = "({0}, {1}, {2}, {3});"
_PURE = ("min", "max", "abs")  # calls whose value is their arguments' (causal trip counts: T.min)
_NEG = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def _is_zero(e) -> bool:
    v = E.const_value(E.as_expr(e))
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == 0


def mask_fill(st):
    """(C, cond, zero_when) of a mask fill `for l: <lets>; C[l] = select(cond, 0, x)` over all of
    register buffer C (zero_when True) or `select(cond, x, 0)` (False); cond has the body's lets
    substituted. None for anything else."""
    found = whole_register_store(st)
    if found is None:
        return None
    lets, store = found
    b = store.buffer
    if b.dtype.name not in ("float32", "float16"):
        return None
    v = store.value
    if not isinstance(v, E.Select):
        return None
    if _is_zero(v.a) == _is_zero(v.b):
        return None
    other = v.b if _is_zero(v.a) else v.a
    if any(isinstance(n, E.BufferLoad) and n.buffer.uid == b.uid for n in collect(other, lambda n: True)):
        return None
    cond = v.cond
    for let in reversed(lets):
        cond = substitute(cond, {let.var: let.value})
    return b, cond, _is_zero(v.a)


_WAIT0 = re.compile(r"^(?:tl::fence_accumulator<\d+>\(\w+\); )*tl::warpgroup_wait(?:_held)?<0>\(\);")


def _infinite(e) -> bool:
    v = E.const_value(E.as_expr(e))
    return isinstance(v, float) and math.isinf(v)


def _post_mask(st, zero_when: bool):
    """The fill loop `st` rewritten to add its value to C: `C[l] = select(cond, 0, x) + C[l]`
    (zero_when; `select(cond, x, 0) + C[l]` otherwise), where x is an infinity; else None."""
    lets, store = whole_register_store(st)
    v = store.value
    if not _infinite(v.b if zero_when else v.a):
        return None
    acc = E.BufferLoad(store.buffer, tuple(store.indices), store.buffer.dtype)
    new = replace(store, value=E.binop("+", v, acc))
    body = S.seq(*lets, new) if lets else new
    return replace(st, body=body)


def _gemm_waits(fmt: str) -> bool:
    """Whether a wgmma gemm Raw waits for its own wgmma (its last template argument is not -1)."""
    head = fmt[: fmt.index(">(")] if ">(" in fmt else fmt
    return not head.rstrip().endswith("-1")


class _Fold(Mutator):
    def __init__(self, tid, threads: int, block_vars, post_mask: bool = True):
        self.post_mask = post_mask
        self.posted = 0
        self.ranges = Ranges()
        self.ranges.of[tid] = (0, threads - 1)
        self.tid = tid
        self.uniform = set(block_vars)  # Vars one value for the whole block
        self.count = 0

    # ------------------------------------------------------------ uniformity and ranges
    def _is_uniform(self, e) -> bool:
        e = E.as_expr(e)
        if collect(e, lambda n: isinstance(n, E.BufferLoad) or (isinstance(n, E.Call) and n.op not in _PURE)):
            return False  # (a register or shared value may differ between threads)
        return all(v in self.uniform for v in collect(e, lambda n: isinstance(n, E.Var)))

    def visit_WSSplit(self, s):
        lo, hi = self.ranges.of.get(self.tid, (0, s.consumers))
        with self.ranges.scoped({self.tid: (max(lo, s.consumers), hi)}):
            prod = self.visit(s.producer)
        with self.ranges.scoped({self.tid: (lo, min(hi, s.consumers - 1))}):
            cons = self.visit(s.consumer)
        return s if prod is s.producer and cons is s.consumer else replace(s, producer=prod, consumer=cons)

    def visit_WarpGroupScope(self, s):
        lo, hi = self.ranges.of.get(self.tid, (0, s.t_hi - 1))
        with self.ranges.scoped({self.tid: (max(lo, s.t_lo), min(hi, s.t_hi - 1))}):
            return self.generic(s)

    def visit_For(self, s):
        uniform = self._is_uniform(s.start) and self._is_uniform(s.extent)
        with self.ranges.loop(s):
            if uniform:
                self.uniform.add(s.var)
            try:
                return self.generic(s)
            finally:
                self.uniform.discard(s.var)

    def visit_LetStmt(self, s):
        self.ranges.let(s.var, s.value)
        if self._is_uniform(s.value):
            self.uniform.add(s.var)
        else:
            self.uniform.discard(s.var)
        return self.generic(s)

    def visit_SeqStmt(self, s):
        saved = dict(self.ranges.of), dict(self.ranges.values), dict(self.ranges.sym), set(self.uniform)
        try:
            stmts, plans = [], {}
            for i, st in enumerate(s.stmts):
                new = self.visit(st)
                stmts.append(new)
                plan = self._plan(s.stmts, i)
                if plan is not None:
                    plans[i] = plan
        finally:
            self.ranges.of, self.ranges.values, self.ranges.sym, self.uniform = saved
        if not plans:
            return s if all(a is b for a, b in zip(stmts, s.stmts)) else S.seq(*stmts)
        self.count += len(plans)
        after: dict = {}  # statement index -> post-masks to run after it
        for i, (j, full) in plans.items():
            post = self._posted(stmts, i, j) if self.post_mask else None
            g = stmts[j]
            if post is not None:
                w, loop = post
                self.posted += 1
                stmts[i] = S.seq()
                stmts[j] = replace(g, fmt=clearing_call(g.fmt))
                after.setdefault(w, []).append(S.IfThenElse(E.logical_not(full), loop, None))
                continue
            stmts[i] = S.IfThenElse(E.logical_not(full), stmts[i], None)
            stmts[j] = replace(g, fmt=g.fmt[: -len(_CALL)] + _UNIFORM_CALL, args=tuple(g.args) + (full,))
        out = []
        for k, st in enumerate(stmts):
            out.append(st)
            out += after.get(k, [])
        return S.seq(*out)

    def _posted(self, stmts, i, j):
        """(index of the statement after which the mask is added, the post-mask loop) for the fill at
        stmts[i] and its gemm at stmts[j], or None (see the module docstring)."""
        found = mask_fill(stmts[i])
        if found is None:
            return None
        b, _, zero_when = found
        loop = _post_mask(stmts[i], zero_when)
        if loop is None:
            return None
        if _gemm_waits(stmts[j].fmt):
            return j, loop
        for w in range(j + 1, len(stmts)):
            st = stmts[w]
            if isinstance(st, Raw) and _WAIT0.match(st.fmt):
                return w, loop
            if mentions(st, b):
                return None
        return None

    # ------------------------------------------------------------ the rewrite
    def _plan(self, stmts, i):
        """(index of the gemm, U) for a mask fill at stmts[i] (ranges as at stmts[i]), else None."""
        found = mask_fill(stmts[i])
        if found is None:
            return None
        b, cond, zero_when = found
        for j in range(i + 1, len(stmts)):
            nxt = stmts[j]
            acc = accumulator(nxt)
            if acc is not None and acc.uid == b.uid:
                if not nxt.fmt.endswith(_CALL) or wgmma_elems(nxt.fmt) != const_int(b.shape[0]):
                    return None
                m = _GEMM.match(nxt.fmt)
                if m is None or int(m.group(2)) // int(m.group(5)) != 64:
                    return None  # two 64-row blocks a warpgroup: see the module docstring
                break
            if mentions(nxt, b):
                return None
        else:
            return None
        with self.ranges.loop(stmts[i]):
            full = self._always(cond if zero_when else E.logical_not(cond), stmts[i].var)
        return None if full is None else (j, simplify(full))

    def _always(self, cond, slot):
        """A block-uniform condition under which `cond` holds for every thread and slot, or None."""
        if isinstance(cond, E.Unary) and cond.op == "!":
            inner = _negate(cond.a)
            return None if isinstance(inner, E.Unary) and inner.op == "!" else self._always(inner, slot)
        if not isinstance(cond, E.Binary):
            return None
        if _logical(cond):
            a, b = self._always(cond.a, slot), self._always(cond.b, slot)
            if cond.op in ("&&", "&"):
                return None if a is None or b is None else E.logical_and(a, b)
            return a if b is None else b if a is None else E.logical_or(a, b)
        if cond.op not in _NEG or not (E.as_expr(cond.a).dtype.is_int and E.as_expr(cond.b).dtype.is_int):
            return None
        a, b = E.as_expr(cond.a), E.as_expr(cond.b)
        # as `e >= 0` (`e > 0` is `e - 1 >= 0` on integers); `==` / `!=` are not sums' bounds
        e = {">=": a - b, ">": a - b - 1, "<=": b - a, "<": b - a - 1}.get(cond.op)
        if e is None:
            return None
        lin = linear_form(simplify(e))
        if lin is None:
            return None
        terms, c = lin
        uni, var = E.as_expr(c), E.as_expr(0)
        for t, k in terms.items():
            if self._is_uniform(t) and slot not in collect(t, lambda n: isinstance(n, E.Var)):
                uni = uni + t * k
            else:
                var = var + t * k
        lo = self.ranges.lower(simplify(var))
        if lo is None:
            return None
        return E.compare(">=", simplify(uni + lo), 0)


def _negate(c):
    if isinstance(c, E.Unary) and c.op == "!":
        return c.a
    if isinstance(c, E.Binary) and c.op in _NEG:
        return E.Binary(_NEG[c.op], c.a, c.b, c.dtype)
    if _logical(c):
        return E.Binary("||" if c.op in ("&&", "&") else "&&", _negate(c.a), _negate(c.b), c.dtype)
    return E.logical_not(c)


def _logical(c) -> bool:
    """An and / or of conditions (`&` / `|` on bools: the DSL's `(a) | (b)`)."""
    return isinstance(c, E.Binary) and (c.op in ("&&", "||") or (c.op in ("&", "|") and c.dtype.name == "bool"))


POST_MASK_THREADS = 256  # two consumer warpgroups (see the module docstring)


def fold_unmasked_tiles(body, tid, threads: int, block_vars, post_mask: bool = True,
                        post_mask_threads: int = POST_MASK_THREADS):
    """(`body` with each wgmma accumulator's mask fill run only where a block-uniform test finds a
    masked element, the gemm clearing the accumulator otherwise, the number of fills so guarded);
    post_mask: infinite masks are added after the gemm's wait instead, in blocks of at most
    post_mask_threads threads (`tl.unmasked_post_mask_threads`; see the module docstring)."""
    f = _Fold(tid, threads, block_vars, post_mask and threads <= post_mask_threads)
    out = f.visit(body)
    return out, f.count
