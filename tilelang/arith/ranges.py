"""Integer ranges of block and loop variables, and bounds of index expressions over them.

Passes that walk the IR record what they pass through -- the T.Kernel grid, loops with
constant start and extent, `LetStmt`s, the conditions of `if`s -- and ask for the interval
of an index. It is a plain interval analysis over `linear_form` sums (plus `%`, `//`, `min`,
`max` by constants), so it proves `by*128 + i < 4096` for `by` in [0, 31] and `i` in
[0, 127], and answers None (unknown) for anything it cannot bound: callers keep their
guards then.

    r = Ranges()
    r.kernel(k)                      # bx in [0, ceildiv(N, 256) - 1], ...
    with r.loop(s):                  # ko in [start, start + extent - 1]
        r.bounds(by * 128 + 127)     # -> (127, 4095)
"""
from __future__ import annotations

from contextlib import contextmanager

from ..ir import expr as E
from ..ir.visitor import collect
from .simplify import const_int, linear_form, simplify


class Ranges:
    def __init__(self, minmax_calls: bool = False):
        # minmax_calls: integer `T.min` / `T.max` calls (E.Call "min" / "max") are bounded like the
        # Binary min / max (`loop_ed = T.min(by * 4 + 8, 16)` is at most 16). Opt-in per pass
        # (tl.disable_minmax_call_ranges turns it off where it is on).
        self.minmax_calls = minmax_calls
        self.of: dict = {}  # Var -> (lo, hi), inclusive ints
        self.values: dict = {}  # Var -> its LetStmt value, where that is load-free index arithmetic
        self.sym: dict = {}  # block Var -> its symbolic grid extent G: the Var is in [0, G - 1]

    # ------------------------------------------------------------ recording
    def kernel(self, k) -> None:
        """Block variables of a KernelLaunch range over its grid: [0, n - 1] for a constant n;
        for a symbolic extent G (`T.Kernel(seq_len, batch)`) the Var is below G, which `upper`
        and `lower` use (`by < batch` holds), never `bounds`."""
        for v, g in zip(k.block_vars, k.grid):
            n = const_int(E.as_expr(g))
            self._set(v, (0, n - 1) if n is not None and n > 0 else None)
            self.sym.pop(v, None)
            if n is None and E.as_expr(g).dtype.is_int:
                self.sym[v] = E.as_expr(g)

    def let(self, var, value) -> None:
        """`var = value` (a LetStmt, flat): var takes value's bounds, or none when unknown.

        NOTE: a later LetStmt may rebind a block variable (persistent kernels recompute bx, by
        per tile); the grid range is then replaced by what the new value proves, never kept."""
        self._set(var, self.bounds(value))
        self.sym.pop(var, None)
        g = self._sym_extent(value) if var not in self.of and var.dtype.is_int else None
        if g is not None:
            self.sym[var] = g
        if var.dtype.is_int and not collect(value, lambda n: isinstance(n, (E.BufferLoad, E.Call))):
            self.values[var] = value
        else:
            self.values.pop(var, None)

    def _sym_extent(self, value):
        """G' where `value` is a block variable of a symbolic grid of G blocks (an alias: G) or
        one divided by a constant c > 0 (`s_i = bx // 2`: G / c where c divides every term of G,
        else ceildiv(G, c)); value is then in [0, G' - 1]. None otherwise."""
        e = simplify(E.as_expr(value))
        if isinstance(e, E.Var):
            return self.sym.get(e) if e not in self.of else None
        if not (isinstance(e, E.Binary) and e.op in ("//", "/") and isinstance(e.a, E.Var)
                and e.a in self.sym and e.a not in self.of):
            return None
        c = const_int(e.b)
        if c is None or c <= 0:
            return None
        g = self.sym[e.a]
        lin = linear_form(simplify(g))
        if lin is not None and lin[1] % c == 0 and all(k % c == 0 for k in lin[0].values()):
            out = E.as_expr(lin[1] // c)
            for t, k in lin[0].items():
                out = out + t * (k // c)
            return simplify(out)
        return simplify((g + (c - 1)) // c)

    @contextmanager
    def loop(self, s):
        """Within a For loop's body: its variable ranges over [start, start + extent - 1]; with a
        symbolic start or extent, over [least start, greatest start + extent - 1] by the ranges of
        what they read (`for k in range(by * 4, 16)`: k in [0, 15] where by >= 0)."""
        lo, ext = const_int(E.as_expr(s.start)), const_int(E.as_expr(s.extent))
        if lo is not None and ext is not None:
            r = (lo, lo + ext - 1) if ext > 0 else None
        else:
            first = self.bounds(s.start)
            last = self.bounds(simplify(E.as_expr(s.start) + E.as_expr(s.extent) - 1))
            r = (first[0], last[1]) if first is not None and last is not None and first[0] <= last[1] else None
        with self.scoped({s.var: r}):
            yield

    def coords(self, cvars, shape):
        """Scope in which element coordinates of a loop over `shape` range over [0, extent - 1]."""
        ns = [const_int(E.as_expr(n)) for n in shape]
        return self.scoped({c: (0, n - 1) if n is not None and n > 0 else None for c, n in zip(cvars, ns)})

    @contextmanager
    def where(self, cond):
        """Within the then-branch of `if cond`: ranges tightened by the comparisons it ANDs."""
        with self.scoped(self._refined(cond)):
            yield

    @contextmanager
    def scoped(self, new: dict):
        old = {v: self.of.get(v) for v in new}
        for v, r in new.items():
            self._set(v, r)
        try:
            yield
        finally:
            for v, r in old.items():
                self._set(v, r)

    def _set(self, v, r):
        if r is None:
            self.of.pop(v, None)
        else:
            self.of[v] = r

    # ------------------------------------------------------------ queries
    def bounds(self, e) -> tuple | None:
        """(lo, hi) of integer expression e, or None when some term is unbounded."""
        e = simplify(E.as_expr(e))
        lin = linear_form(e)
        if lin is None:
            return None
        lo = hi = lin[1]
        for t, c in lin[0].items():
            b = self._term(t)
            if b is None:
                return None
            lo += min(c * b[0], c * b[1])
            hi += max(c * b[0], c * b[1])
        return lo, hi

    def upper(self, e) -> int | None:
        """Greatest value of e, or None; unlike `bounds` it also bounds block variables of a
        symbolic grid (`by - batch` is at most -1 where by < batch)."""
        return self._side(e, 1)

    def lower(self, e) -> int | None:
        """Least value of e, or None (block variables of a symbolic grid are >= 0)."""
        return self._side(e, 0)

    def _side(self, e, hi: int) -> int | None:
        # NOTE: e is linear in each such block variable v in [0, G - 1]: its extreme takes v at
        # an end, G - 1 where the coefficient's sign points the way asked, else 0.
        e = simplify(E.as_expr(e))
        lin = linear_form(e)
        if lin is None:
            return None
        sym = {t: c for t, c in lin[0].items() if isinstance(t, E.Var) and t in self.sym and t not in self.of}
        for t, c in sym.items():
            e = e - t * c
            if (c > 0) == bool(hi):
                e = e + (self.sym[t] - 1) * c
        b = self.bounds(simplify(e) if sym else e)
        return None if b is None else b[hi]

    def below(self, e, n) -> bool:
        """Provably e < n (n an int or an expression)."""
        u = self.upper(E.as_expr(e) - n)
        return u is not None and u < 0

    def decide(self, cond) -> bool | None:
        """True / False where the ranges decide condition `cond` (integer comparisons, combined
        with and / or), else None (`k * 128 + j >= 256` for k in [0, 1], j in [0, 127]: False)."""
        if not isinstance(cond, E.Binary):
            return None
        if cond.op in ("&&", "||") or (cond.op in ("&", "|") and cond.dtype.name == "bool"):
            a, b = self.decide(cond.a), self.decide(cond.b)
            if cond.op in ("&&", "&"):
                return False if False in (a, b) else True if a is True and b is True else None
            return True if True in (a, b) else False if a is False and b is False else None
        if cond.op not in ("<", "<=", ">", ">=", "==", "!=") or not (
                E.as_expr(cond.a).dtype.is_int and E.as_expr(cond.b).dtype.is_int):
            return None
        d = E.as_expr(cond.a) - cond.b
        lo, hi = self.lower(d), self.upper(d)
        if lo is None and hi is None:
            return None
        big = float("inf")  # an unknown side: no comparison with it decides anything
        lo, hi = (-big if lo is None else lo), (big if hi is None else hi)
        table = {"<": (hi < 0, lo >= 0), "<=": (hi <= 0, lo > 0), ">": (lo > 0, hi <= 0), ">=": (lo >= 0, hi < 0),
                 "==": (lo == hi == 0, lo > 0 or hi < 0), "!=": (lo > 0 or hi < 0, lo == hi == 0)}
        yes, no = table[cond.op]
        return True if yes else False if no else None

    def nonneg(self, e) -> bool:
        lo = self.lower(e)
        return lo is not None and lo >= 0

    def _term(self, t) -> tuple | None:
        if isinstance(t, E.Var):
            return self.of.get(t)
        if isinstance(t, E.Select) and t.dtype.is_int:  # either branch
            a, b = self.bounds(t.a), self.bounds(t.b)
            return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
        mm = self._minmax(t)
        if mm is not None:
            op, a, b = mm
            a, b = self.bounds(a), self.bounds(b)
            if a is None or b is None:
                return None
            f = min if op == "min" else max
            return f(a[0], b[0]), f(a[1], b[1])
        if not isinstance(t, E.Binary) or not t.dtype.is_int:
            return None
        if t.op in ("min", "max"):
            a, b = self.bounds(t.a), self.bounds(t.b)
            if a is None or b is None:
                return None
            f = min if t.op == "min" else max
            return f(a[0], b[0]), f(a[1], b[1])
        c = const_int(t.b)
        if t.op == "&" and c is not None and c >= 0:  # any x & m with m >= 0 is in [0, m]
            a = self.bounds(t.a)
            return (0, c) if a is None or a[0] < 0 else (0, min(c, a[1]))
        a = self.bounds(t.a)
        if c is not None and c > 0 and a is None and t.op == "%" and self.nonneg(t.a):
            return 0, c - 1  # `bx % 2` of a block variable of a symbolic grid
        if t.op == ">>" and c is not None and 0 <= c < 63 and a is not None:  # arithmetic shift: floor
            return a[0] >> c, a[1] >> c
        if c is None or c <= 0 or a is None:
            return None
        if t.op == "//" or (t.op == "/" and a[0] >= 0):  # C division truncates: floor only for x >= 0
            return a[0] // c, a[1] // c
        if t.op == "%" and a[0] >= 0:  # C remainder takes the sign of x
            return (a[0], a[1]) if a[1] < c else (0, c - 1)
        return None

    def _minmax(self, t) -> tuple | None:
        """(op, a, b) of an integer min / max call where minmax_calls is on, else None."""
        if self.minmax_calls and isinstance(t, E.Call) and t.op in ("min", "max") and len(t.args) == 2 \
                and t.dtype.is_int:
            return t.op, t.args[0], t.args[1]
        return None

    def upper_split(self, e, depth: int = 4) -> int | None:
        """Greatest value of e like `upper`, but a min / max term (Binary, or a call where
        minmax_calls is on) is split into its arguments first, which keeps what they share with
        the rest of e: a trip count `min(by * 4 + 8, 16) - by * 4` is at most
        min(upper(8), upper(16 - by * 4)) = 8, where the plain interval sum says 16."""
        e = simplify(E.as_expr(e))
        lin = linear_form(e)
        if lin is not None and depth > 0:
            for t, c in lin[0].items():
                if isinstance(t, E.Binary) and t.op in ("min", "max") and t.dtype.is_int:
                    op, a, b = t.op, t.a, t.b
                else:
                    mm = self._minmax(t)
                    if mm is None:
                        continue
                    op, a, b = mm
                rest = e - t * c
                ua = self.upper_split(rest + E.as_expr(a) * c, depth - 1)
                ub = self.upper_split(rest + E.as_expr(b) * c, depth - 1)
                if (op == "min") == (c > 0):  # e <= rest + c * a and e <= rest + c * b: either bounds it
                    known = [u for u in (ua, ub) if u is not None]
                    return min(known) if known else None
                return None if ua is None or ub is None else max(ua, ub)
        return self.upper(e)

    def _refined(self, cond) -> dict:
        """Var -> tightened range for each `x < y`-style comparison ANDed into cond."""
        out: dict = {}
        for c in _conjuncts(cond):
            if not isinstance(c, E.Binary) or c.op not in ("<", "<=", ">", ">="):
                continue
            # normalize to d <= 0
            d = {"<": c.a - c.b + 1, "<=": c.a - c.b, ">": c.b - c.a + 1, ">=": c.b - c.a}[c.op]
            lin = linear_form(simplify(d))
            if lin is None:
                continue
            for v, k in lin[0].items():
                if not isinstance(v, E.Var) or v not in self.of or k == 0:
                    continue
                rest = self.bounds(simplify(d - v * k))
                if rest is None:
                    continue
                lo, hi = out.get(v, self.of[v])
                if k > 0:  # k*v <= -rest_lo
                    hi = min(hi, (-rest[0]) // k)
                else:  # -|k|*v <= -rest_lo  ->  v >= ceil(rest_lo / |k|)
                    lo = max(lo, -((-rest[0]) // -k))
                out[v] = (lo, hi)
        return out


def _conjuncts(cond):
    if isinstance(cond, E.Binary) and cond.op == "&&":
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


class TrackRanges:
    """Mixin for IR Mutators: keeps `self.ranges` current through LetStmts and the branches of
    ifs. The subclass creates `self.ranges`, records grids with `self.ranges.kernel(k)`, and
    visits loop bodies inside `with self.ranges.loop(s):` (loops are lowered differently per pass)."""

    def visit_SeqStmt(self, s):
        # NOTE: a LetStmt scopes over the rest of its sequence only: its range must not leak out
        # (a persistent kernel's rebound bx is not the bx of the code after its tile loop).
        saved, values, sym = dict(self.ranges.of), dict(self.ranges.values), dict(self.ranges.sym)
        try:
            return self.generic(s)
        finally:
            self.ranges.of, self.ranges.values, self.ranges.sym = saved, values, sym

    def visit_LetStmt(self, s):
        self.ranges.let(s.var, s.value)
        return self.generic(s)

    def visit_IfThenElse(self, s):
        cond = self.visit(s.cond)
        with self.ranges.where(s.cond):
            then = self.visit(s.then_case)
        other = self.visit(s.else_case) if s.else_case is not None else None
        if cond is s.cond and then is s.then_case and other is s.else_case:
            return s
        return type(s)(cond, then, other, span=s.span)
