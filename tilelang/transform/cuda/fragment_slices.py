"""T.Parallel loops over a sub-block of a register fragment: which slots each thread runs.

Expects: one T.Parallel nest (its variables, extents and body) whose fragment accesses all
index one tile as `F[v0 + o0, v1 + o1, ...]`: each loop variable plus an offset free of the
loop variables, e.g. an accumulator stored in row chunks through a shared staging tile:

    for s in range(2):                                   # (a serial loop: unrolled first)
        for i, j in T.Parallel(32, 512):
            if i < 16:
                stage[i, j] = acc[i + s * 16, j]

Guarantees: `fragment_slice` describes such a loop (None for any other loop, including the
plain one over the whole tile); `slice_slots` gives, for constant offsets, the register slots
of F's layout whose element lies in the slice on every thread -- each thread then runs the
body once per such slot, the loop variables derived from the slot's coordinates minus the
offsets -- or None when some slot is inside the slice on some threads only (the slice cuts
through the layout's pattern: the fragment is demoted to shared memory instead).

    acc: mma 32x512 over 1x8 warps (slot l -> row 16*(l // 32) + ...)
    s = 0: slots 0..31,  s = 1: slots 32..63  -> acc_reg[l] per thread, no shared copy
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

from ...arith.simplify import const_int, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import collect, substitute

MAX_OFFSET_CASES = 16  # values of the enclosing loop variables an offset may take (each is unrolled)
LOOP_KINDS = ("serial", "unroll")  # enclosing loops that may carry an offset (and are unrolled for it)


@dataclass(frozen=True)
class FragmentSlice:
    """A T.Parallel nest reading / writing fragments at `vars + offsets` over `box`.

    box: per loop variable the inclusive (lo, hi) range it runs over: the loop's extent,
    narrowed by a leading `if` of comparisons of loop variables with constants (that `if`
    is then dropped from `body`, the slots chosen cover exactly it)."""

    buffers: tuple
    offsets: tuple  # one Expr per dimension
    box: tuple
    body: S.Stmt
    whole: bool = False  # the loop runs over the whole tile: at offset 0 it is the plain loop (its `if` per slot)

    def plain_at(self, offsets) -> bool:
        """At these constant offsets the loop is the plain one over the tile, guard and all."""
        return self.whole and all(o == 0 for o in offsets)


def _split_index(idx, var):
    """idx == var + offset with offset free of `var`: the offset, else None."""
    off = simplify(idx - var)
    return None if var.uid in _vars_of(off) else off


def _vars_of(e) -> dict:
    """uid -> Var of the variables in e."""
    return {v.uid: v for v in collect(e, lambda n: isinstance(n, E.Var))}


def _is(a, v) -> bool:
    return isinstance(a, E.Var) and a.uid == v.uid


def fragment_slice(vars_, exts, body, is_fragment) -> FragmentSlice | None:
    """The slice description of this T.Parallel nest, or None (see the module docstring).
    is_fragment(buf): whether buf's accesses count (register fragments)."""
    shape_ext = [const_int(e) for e in exts]
    if any(n is None or n <= 0 for n in shape_ext):
        return None
    accesses = [n for n in collect(body, lambda n: isinstance(n, (E.BufferLoad, S.BufferStore)))
                if is_fragment(n.buffer)]
    if not accesses:
        return None
    first = accesses[0].indices
    if len(first) != len(vars_):
        return None
    offsets = []
    for idx, v in zip(first, vars_):
        off = _split_index(idx, v)
        if off is None or set(_vars_of(off)) & {v.uid for v in vars_}:
            return None
        offsets.append(off)
    for a in accesses[1:]:
        if len(a.indices) != len(first) or any(const_int(x - y) != 0 for x, y in zip(a.indices, first)):
            return None
    bufs = tuple({id(a.buffer): a.buffer for a in accesses}.values())
    if any(b.ndim != len(vars_) for b in bufs):
        return None
    whole = all(shape_ext[d] == const_int(b.shape[d]) for b in bufs for d in range(len(vars_)))
    box = [(0, n - 1) for n in shape_ext]
    body, new_box = _absorb_guard(body, vars_, box)
    if whole and new_box == box and all(const_int(o) == 0 for o in offsets):
        return None  # the plain loop over the whole tile: its own layout drives it
    return FragmentSlice(bufs, tuple(offsets), tuple(new_box), body, whole)


def _absorb_guard(body, vars_, box):
    """`if v < c and v >= c2 ...: rest` (comparisons of loop variables with constants only)."""
    if not isinstance(body, S.IfThenElse) or body.else_case is not None:
        return body, box
    new = list(box)
    for c in _conjuncts(body.cond):
        lim = _var_bound(c, vars_)
        if lim is None:
            return body, box
        d, lo, hi = lim
        new[d] = (max(new[d][0], lo), min(new[d][1], hi))
    return body.then_case, new


def _conjuncts(c):
    if isinstance(c, E.Binary) and c.op == "&&":
        return _conjuncts(c.a) + _conjuncts(c.b)
    return [c]


def _var_bound(c, vars_):
    """(dim, lo, hi) for `v < k`-style comparisons (either side), else None."""
    op = getattr(c, "op", None)
    if op not in ("<", "<=", ">", ">="):
        return None
    a, b = c.a, c.b
    flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
    if not any(_is(a, v) for v in vars_):
        a, b, op = b, a, flip[op]
    k = const_int(b)
    d = next((i for i, v in enumerate(vars_) if _is(a, v)), None)
    if d is None or k is None:
        return None
    big = 1 << 40
    return {"<": (d, -big, k - 1), "<=": (d, -big, k), ">": (d, k + 1, big), ">=": (d, k, big)}[op]


def offset_cases(offsets, loops) -> list | None:
    """Every constant value the offsets take over the enclosing loops [(var, start, extent)],
    or None when an offset depends on something else (or on too many values)."""
    free = {}
    for o in offsets:
        free.update(_vars_of(o))
    ranges = {}
    for var, start, ext in loops:
        if var.uid in free:
            lo, n = const_int(start), const_int(ext)
            if lo is None or n is None:
                return None
            ranges[var] = range(lo, lo + n)
    if set(free) - {v.uid for v in ranges}:
        return None
    names = list(ranges)
    count = 1
    for v in names:
        count *= len(ranges[v])
    if count > MAX_OFFSET_CASES:
        return None
    out = []
    for vals in itertools.product(*(ranges[v] for v in names)):
        m = {v: E.as_expr(x) for v, x in zip(names, vals)}
        consts = tuple(const_int(substitute(o, m)) for o in offsets)
        if any(c is None for c in consts):
            return None
        out.append(consts)
    return out


@lru_cache(maxsize=256)
def slice_slots(layout, offsets: tuple, box: tuple) -> tuple | None:
    """Slots l of `layout` whose element minus `offsets` lies in `box` on every thread (None when
    some slot is inside on some threads only). Checked numerically over all threads."""
    shape = tuple(layout.shape)
    inside = None
    for t in range(layout.threads):
        mine = []
        for l in range(layout.nlocal):
            c = layout.coords(t, l)
            ok = all(0 <= x < n for x, n in zip(c, shape)) and \
                all(lo <= x - o <= hi for x, o, (lo, hi) in zip(c, offsets, box))
            mine.append(ok)
        if inside is None:
            inside = mine
        elif mine != inside:
            return None
    return tuple(l for l, ok in enumerate(inside or []) if ok)


def slot_runs(slots) -> list:
    """Consecutive slots as (first, count) runs: each becomes one unrolled loop."""
    runs = []
    for l in slots:
        if runs and runs[-1][0] + runs[-1][1] == l:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((l, 1))
    return runs
