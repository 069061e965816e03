"""Vector accesses (4 to 16 bytes) for the per-thread element loops of the CUDA lowering.

Expects: the per-element body of an element loop (a T.Parallel, or an elementwise tile op)
whose layout gives each thread `vec` consecutive elements of a row (a FlatFragment with
vec > 1), already lowered: register fragments are per-slot locals indexed by the slot var,
and the body is written over coordinate vars whose last one, j, runs along the row.
Guarantees: `plan_vectors` returns a `VecPlan`: the global/shared accesses that move as
vectors plus the per-lane body rewritten onto their register copies, or why there is none
(`why` names the buffer, for a warning; None when the loop is plainly not a candidate:
a reduction, an atomic, nothing in memory). `vector_loop` emits it: per group of `vec`
lanes, load each vector once, run the body per lane, store each vector once; `serial_vector_loop`
does the same for one thread's `T.vectorized(n)` loop (its n lanes are one vector). A condition
guarding a vector access must have one value on all lanes of a group (a bound on a row
whose length is a multiple of vec), so it is evaluated once, at the group's first lane.

    for l in unroll(32):                        for g in unroll(8):
      i = ..; j = ..                              i = ..; j0 = ..
      C_reg[l] = A_s[i, j] + B_reg[l]    ->       float A_s_v0[4]; tl::load_vec<4>(A_s_v0, &A_s[i, j0], 1)
                                                  for u in unroll(4):
                                                    l = g*4 + u; j = j0 + u
                                                    C_reg[l] = A_s_v0[u] + B_reg[l]
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ... import dtypes as dt
from ...arith.divisibility import is_multiple
from ...arith.simplify import const_int, linear_form, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer
from ...ir.visitor import Mutator, collect, substitute

MEMORY = ("global", "shared", "shared.dyn")


@dataclass
class VecAccess:
    buffer: Buffer
    indices: tuple  # at lane j, as the body wrote them
    store: bool
    guard: tuple  # conditions (at lane j) under which the body touches it
    regs: Buffer  # the per-lane register copy


@dataclass
class VecPlan:
    vec: int
    accesses: list = field(default_factory=list)
    body: object = None  # the per-lane body on the register copies; None: stays scalar
    why: str | None = None
    lane: E.Var | None = None  # the lane var u that indexes the register copies

    @property
    def ok(self) -> bool:
        return self.body is not None


class NotVector(Exception):
    """The body stays scalar; `why` is set when that drops a fast path the user could have."""

    def __init__(self, why: str | None = None):
        super().__init__(why)
        self.why = why


def _vars(e) -> set:
    return set(collect(e, lambda n: isinstance(n, E.Var)))


def _aligned_rest(terms: dict, const: int, skip, vec: int) -> bool:
    return const % vec == 0 and all(c % vec == 0 for t, c in terms.items() if t is not skip and t != skip)


def _row_col_pair(row, col, buf: Buffer) -> bool:
    """row, col = e // W, e % W with W the buffer's row length: one flat element offset e."""
    return isinstance(row, E.Binary) and isinstance(col, E.Binary) and row.op == "//" and col.op == "%" \
        and row.a == col.a and const_int(row.b) is not None and const_int(row.b) == const_int(col.b) \
        == const_int(buf.shape[-1])


class _Planner:
    """Walks the body once: records vector accesses and rewrites them onto register copies."""

    def __init__(self, j: E.Var, lane_vars, vec: int):
        self.j, self.vec = j, vec
        self.lane = {j, *lane_vars}
        self.u = E.Var("u", dt.int32)
        self.loads: dict = {}  # (uid, indices, guard) -> VecAccess
        self.stores: dict = {}  # (uid, indices) -> VecAccess
        self.accesses: list = []

    # ---------------------------------------------------------------- statements
    def stmt(self, s, guard: tuple):
        if isinstance(s, S.SeqStmt):
            return S.SeqStmt(tuple(self.stmt(x, guard) for x in s.stmts), span=s.span)
        if isinstance(s, S.IfThenElse):
            cond = self.expr(s.cond, guard)
            then = self.stmt(s.then_case, guard + (s.cond,))
            other = None if s.else_case is None else self.stmt(s.else_case, guard + (E.logical_not(s.cond),))
            return S.IfThenElse(cond, then, other, span=s.span)
        if isinstance(s, S.BufferStore):
            idx = tuple(self.expr(i, guard) for i in s.indices)
            val = self.expr(s.value, guard)
            acc = self.access(s.buffer, tuple(s.indices), True, guard)
            if acc is None:
                return S.BufferStore(s.buffer, idx, val, span=s.span)
            return S.BufferStore(acc.regs, (self.u,), val, span=s.span)
        raise NotVector()  # loops, lets, atomics, allocations: not an elementwise body

    # ---------------------------------------------------------------- expressions
    def expr(self, e, guard: tuple):
        if isinstance(e, E.BufferLoad):
            idx = tuple(self.expr(i, guard) for i in e.indices)
            acc = self.access(e.buffer, tuple(e.indices), False, guard)
            return E.BufferLoad(e.buffer, idx, e.dtype) if acc is None else E.BufferLoad(acc.regs, (self.u,), e.dtype)
        if isinstance(e, E.Select):
            a = self.expr(e.a, guard + (e.cond,))
            if _zero(e.b, positive=True) and self.zero_filled(a, guard + (e.cond,)):
                return a  # `ok ? X[..] : 0` of a vector load under `ok`: the load's zero fill is the 0
            return E.Select(self.expr(e.cond, guard), a, self.expr(e.b, guard + (E.logical_not(e.cond),)), e.dtype)
        if isinstance(e, E.Binary):
            a = self.expr(e.a, guard)
            right = {"&&": (e.a,), "||": (E.logical_not(e.a),)}.get(e.op, ())  # short-circuit
            return E.Binary(e.op, a, self.expr(e.b, guard + right), e.dtype)
        if isinstance(e, E.Unary):
            return E.Unary(e.op, self.expr(e.a, guard), e.dtype)
        if isinstance(e, E.Cast):
            v = self.expr(e.value, guard)
            if isinstance(v, E.Cast) and v.value.dtype == e.dtype and e.dtype.is_float and v.dtype.is_float \
                    and e.dtype.bits < v.dtype.bits <= 64 and v.dtype.bits >= 32:
                return v.value  # a 16/32-bit float widened and narrowed back: itself
            return E.Cast(e.dtype, v)
        if isinstance(e, E.Call):
            if e.op == "address_of":
                raise NotVector()
            return E.Call(e.op, tuple(self.expr(a, guard) if isinstance(a, E.Expr) else a for a in e.args), e.dtype)
        if isinstance(e, (E.Var, E.Const)) or not isinstance(e, E.Expr):
            return e
        if collect(e, lambda n: isinstance(n, E.BufferLoad)):
            raise NotVector()
        return e

    def zero_filled(self, x, guard: tuple) -> bool:
        """x (maybe widened) is a lane of a vector load made under exactly `guard`: zero when it fails."""
        while isinstance(x, E.Cast) and x.dtype.is_float and x.value.dtype.is_float and x.dtype.bits >= x.value.dtype.bits:
            x = x.value
        if not (isinstance(x, E.BufferLoad) and len(x.indices) == 1 and x.indices[0] is self.u):
            return False
        return any(a.regs is x.buffer and not a.store and tuple(a.guard) == tuple(guard) for a in self.accesses)

    # ---------------------------------------------------------------- accesses
    def access(self, buf: Buffer, indices: tuple, store: bool, guard: tuple) -> VecAccess | None:
        if buf.scope not in MEMORY:
            return None  # registers: per lane anyway
        if buf.dtype.bits < 8:
            raise NotVector()  # packed nibbles: each lane's access is a nibble read / atomic nibble write
        if not any(self.lane & _vars(i) for i in indices):
            if store:
                raise NotVector()  # every lane writes one element: not elementwise
            return None  # one value for the whole row: a scalar load per lane
        name = f"{buf.name}[{', '.join(str(i) for i in indices)}]"
        why = self.contiguous(buf, indices)
        if why is None:
            nbytes = self.vec * buf.dtype.bytes
            if not (nbytes in (4, 8) or nbytes % 16 == 0):
                why = f"{self.vec} elements of {buf.dtype} are {nbytes} bytes, not a 4/8/16-byte vector"
        if why is not None:
            raise NotVector(f"{name} {why}")
        for c in guard:
            if not self.uniform(c):
                raise NotVector(f"{name} is {'written' if store else 'read'} under the condition `{c}`, which can "
                                f"differ between the {self.vec} elements of one vector")
        if store:
            return self.add_store(buf, indices, guard, name)
        if any(k[0] == buf.uid for k in self.stores):
            raise NotVector(f"{name} is read after {buf.name} is written in the same iteration")
        key = (buf.uid, indices, guard)
        if key not in self.loads:
            self.loads[key] = self.new(buf, indices, False, guard)
        return self.loads[key]

    def add_store(self, buf, indices, guard, name):
        if (buf.uid, indices) in self.stores:
            raise NotVector(f"{name} is written twice in one iteration")
        if any(k[0] == buf.uid and k[1] != indices for k in self.loads):
            raise NotVector(f"{buf.name} is read and written at different elements in one iteration")
        acc = self.new(buf, indices, True, guard)
        self.stores[(buf.uid, indices)] = acc
        return acc

    def new(self, buf, indices, store, guard) -> VecAccess:
        regs = Buffer(f"{buf.name}_v{len(self.accesses)}", (self.vec,), buf.dtype, "local")
        acc = VecAccess(buf, indices, store, guard, regs)
        self.accesses.append(acc)
        return acc

    def contiguous(self, buf: Buffer, indices: tuple) -> str | None:
        """None when lanes j0..j0+vec-1 touch consecutive, vec-aligned elements, else why not."""
        if buf.strides is not None:
            return "has explicit strides"
        *outer, last = indices
        if outer and _row_col_pair(outer[-1], last, buf):  # [e // W, e % W], W the row length: flat e
            outer, last = outer[:-1], last.a
        if any(self.lane & _vars(self.without_group_quotients(x)) for x in outer):
            return "changes row within a vector (only the last index may follow the loop's last variable)"
        if collect(last, lambda n: isinstance(n, E.BufferLoad)):
            return "is indexed through a load"
        terms, const = linear_form(simplify(E.as_expr(last)))
        lead = self.j if terms.get(self.j, 0) == 1 else next(  # j itself, or (j + r) % c: c a multiple of vec
            (t for t, c in terms.items() if c == 1 and self.group_aligned(t, "%")), None)
        if lead is None or any(self.lane & _vars(t) for t in terms if t is not lead and t != lead):
            return f"is not contiguous in {self.j.name} (last index {last})"
        if not _aligned_rest(terms, const, lead, self.vec):
            return f"has a column offset that is not provably a multiple of {self.vec} (last index {last})"
        if buf.ndim > 1:
            if not is_multiple(buf.shape[-1], self.vec):
                return f"has rows of {buf.shape[-1]} elements, not a multiple of {self.vec}"
        return None

    def group_aligned(self, t, op: str) -> bool:
        """t is `L // c` or `L % c` (op) with c a multiple of vec and L = j + (a multiple of vec, free
        of the other lane vars): over the lanes j0 .. j0 + vec - 1 of a group (j0 a multiple of vec)
        `L // c` keeps one value and `L % c` runs through vec consecutive values."""
        if not (isinstance(t, E.Binary) and t.op == op and self.lane & _vars(t.a)):
            return False
        c = const_int(t.b)
        if c is None or c <= 0 or c % self.vec:
            return False
        terms, const = linear_form(simplify(E.as_expr(t.a)))
        return terms.get(self.j, 0) == 1 and _aligned_rest(terms, const, self.j, self.vec) and \
            not any(self.lane & _vars(x) for x in terms if x is not self.j and x != self.j)

    def without_group_quotients(self, x):
        """x with every group-uniform `L // c` (group_aligned) replaced by a lane-free placeholder:
        C_shared[i // 16, j // 16, i % 16, j % 16] keeps its tile indices over a group of 8 j's."""
        class _Sub(Mutator):
            def visit_Binary(s_, e):
                if self.group_aligned(e, "//"):
                    return E.Var("tl_group_quotient", e.dtype)
                return s_.generic(e)
        return _Sub().visit(x)

    def uniform(self, c) -> bool:
        """Does condition c have one value on every lane j = j0 + u (j0 a multiple of vec)?"""
        fv = _vars(c)
        if not fv & self.lane:
            return True
        if fv & (self.lane - {self.j}):
            return False  # depends on a per-lane register value
        if isinstance(c, E.Unary) and c.op == "!":
            return self.uniform(c.a)
        if not isinstance(c, E.Binary):
            return False
        if c.op in ("&&", "||"):
            return self.uniform(c.a) and self.uniform(c.b)
        diff = {"<": lambda a, b: a - b, "<=": lambda a, b: a - b - 1,  # every form as d < 0
                ">": lambda a, b: b - a, ">=": lambda a, b: a - b}.get(c.op)
        if diff is None or not (c.a.dtype.is_int and c.b.dtype.is_int):
            return False
        terms, const = linear_form(simplify(diff(c.a, c.b)))
        coef = terms.get(self.j, 0)
        if coef == -1:  # d < 0  <=>  !(-d - 1 < 0)
            terms, const = {t: -k for t, k in terms.items()}, -const - 1
        elif coef != 1:
            return False
        others = [t for t in terms if t is not self.j and t != self.j]
        return not any(self.lane & _vars(t) for t in others) and _aligned_rest(terms, const, self.j, self.vec)


def plan_vectors(body, j: E.Var, lane_vars, vec: int, lets: dict | None = None) -> VecPlan:
    """Plan `vec`-lane vectors for a per-element body; `lane_vars` also vary per lane (slot var).
    lets: index arithmetic bound outside the body (`index_base = i * 1024 + tx * 4`), read through."""
    p = _Planner(j, lane_vars, vec)
    try:
        new = p.stmt(_inline_lets(body, lets or {}), ())
    except NotVector as e:
        return VecPlan(vec, why=e.why)
    if not p.accesses:
        return VecPlan(vec)
    return VecPlan(vec, p.accesses, new, lane=p.u)


def _inline_lets(body, outer: dict):
    """A body whose `let`s compute index arithmetic (no loads, no calls: `index = i*1024 + tx*4 + v`) with
    each name replaced by its value (and the names in `outer`, bound around it), so the planner sees
    the accesses' real indices."""
    used = set(collect(body, lambda n: isinstance(n, E.Var)))
    names = {v: x for v, x in outer.items() if v in used}
    for _ in range(4):  # outer lets may name earlier ones
        nxt = {v: substitute(x, names) for v, x in names.items()}
        if nxt == names:
            break
        names = nxt
    if not isinstance(body, S.SeqStmt):
        return substitute(body, names) if names else body
    out = []
    for st in body.stmts:
        st = substitute(st, names) if names else st
        if isinstance(st, S.LetStmt) and not collect(st.value, lambda n: isinstance(n, (E.BufferLoad, E.Call))):
            names[st.var] = st.value
            continue
        out.append(st)
    return S.SeqStmt(tuple(out), span=body.span)


def vector_widths(body, j: E.Var) -> list:
    """Element sizes (bytes) of the global/shared accesses that follow j: what picks a width."""
    out = []
    for n in collect(body, lambda n: isinstance(n, (E.BufferLoad, S.BufferStore))):
        if n.buffer.scope in MEMORY and any(j in _vars(i) for i in n.indices):
            out.append(n.buffer.dtype.bytes)
    return out


def _addr(buf: Buffer, indices) -> E.Expr:
    return E.Call("address_of", (E.BufferLoad(buf, tuple(indices), buf.dtype),), dt.uint64)


def _all(conds) -> E.Expr:
    out = None
    for c in dict.fromkeys(conds):
        out = c if out is None else E.logical_and(out, c)
    return E.as_expr(True) if out is None else out


def _vector_accesses(plan: VecPlan, at0: dict, raw) -> tuple[list, list]:
    """(before the lanes, after them): each access's register copy and its vector load, and
    each vector store, at the group's first lane (`at0` maps the lane var to it)."""
    pre, post = [], []
    for a in plan.accesses:
        pre.append(S.Allocate(a.regs))
        shared = (a.buffer,) if a.buffer.scope != "global" else ()
        pred = simplify(substitute(_all(a.guard), at0))
        fmt, args = [], []  # one statement per access, whatever its words: one write to sync against
        for n, lane0 in _chunks(plan.vec, a.buffer, at0):
            mem = _addr(a.buffer, tuple(substitute(i, lane0) for i in a.indices))
            regs = _addr(a.regs, (E.as_expr(simplify(next(iter(lane0.values())) - next(iter(at0.values())))),))
            k = len(args)
            if a.store:
                fmt.append(f"tl::store_vec<{n}>({{{k}}}, {{{k + 1}}});")
                args += [mem, regs]
            else:
                fmt.append(f"tl::load_vec<{n}>({{{k}}}, {{{k + 1}}}, {{{k + 2}}});")
                args += [regs, mem, pred]
        if a.store:
            st = raw(" ".join(fmt), tuple(args), writes=shared)
            post.append(st if const_int(pred) == 1 or pred == E.as_expr(True) else S.IfThenElse(pred, st))
        else:
            pre.append(raw(" ".join(fmt), tuple(args), reads=shared))
    return pre, post


def _chunks(vec: int, buf: Buffer, at0: dict) -> list:
    """[(lanes, {lane var: first lane})] per word of one vector access: a shared vector wider than
    16 bytes is one 16-byte word per chunk, each addressed at its own first lane, since a swizzle
    keeps a 16-byte chunk contiguous but moves chunks apart (a flat row of 8 floats stored into a
    swizzled tile: two STS.128, not eight bank-conflicting STS.32); global vectors stay whole."""
    per = 16 // buf.dtype.bytes
    if buf.scope == "global" or vec * buf.dtype.bytes <= 16:
        return [(vec, at0)]
    (j, j0), = at0.items()
    return [(per, {j: simplify(j0 + c * per) if c else j0}) for c in range(vec // per)]


def cp_async_copy(plan: VecPlan) -> tuple | None:
    """(global load, shared store) when the planned body is one vector of a shared tile copied
    from one global vector, or zeros where the load's condition fails (`if_then_else(ok, X[..], 0)`):
    what one cp.async with a zero-fill predicate does. None for any other body."""
    if len(plan.accesses) != 2 or not isinstance(plan.body, S.BufferStore):
        return None
    ld, st = plan.accesses
    if ld.store or not st.store or ld.buffer.scope != "global" or st.buffer.scope not in ("shared", "shared.dyn") \
            or ld.buffer.dtype != st.buffer.dtype or plan.body.buffer is not st.regs \
            or plan.vec * st.buffer.dtype.bytes not in (4, 8, 16):
        return None
    v = plan.body.value
    if isinstance(v, E.Select) and _zero(v.b) and ld.guard == st.guard + (v.cond,):
        v = v.a
    elif ld.guard != st.guard and not (len(ld.guard) == len(st.guard) + 1 and ld.guard[:-1] == st.guard):
        return None  # (one condition more: the planner already dropped its `ok ? X[..] : 0`)
    if not (isinstance(v, E.BufferLoad) and v.buffer is ld.regs):
        return None
    return ld, st


def _zero(e, positive: bool = False) -> bool:
    """e is a constant 0 (through casts); positive: not a float -0.0 (whose bits are not all zero)."""
    while isinstance(e, E.Cast):
        e = e.value
    if not (isinstance(e, E.Const) and not isinstance(e.value, bool) and e.value == 0):
        return False
    return not positive or not isinstance(e.value, float) or math.copysign(1.0, e.value) > 0


def _cp_async(ld: VecAccess, st: VecAccess, vec: int, at0: dict, raw) -> S.Stmt:
    """The copy as one cp.async per vector, its completion left to the caller's wait + barrier
    (a T.Pipelined stage): the shared writes are not recorded for barrier insertion."""
    nb = vec * st.buffer.dtype.bytes
    dst = _addr(st.buffer, tuple(substitute(i, at0) for i in st.indices))
    src = _addr(ld.buffer, tuple(substitute(i, at0) for i in ld.indices))
    pred = simplify(substitute(_all(ld.guard), at0))
    cp = raw(f"tl::cp_async_zfill<{nb}>({{0}}, {{1}}, {{2}});", (dst, src, pred))
    if not st.guard:
        return cp
    return S.IfThenElse(simplify(substitute(_all(st.guard), at0)), cp)


def group_coords(layout, g, tid) -> tuple:
    """(flat index of the group's first element or None, its coordinates) for thread tid's vector
    group g: a flat layout's group_start, or an accumulator's column pair (slots 2g, 2g + 1)."""
    if getattr(layout, "pair_cols", False):
        return None, layout.coords(tid, g * 2)
    from .lower_tile_ops import unflatten

    e0 = layout.group_start(g, tid)
    return e0, unflatten(e0, layout.shape)


def vector_loop(plan: VecPlan, layout, tid, lvar: E.Var, cvars: list, raw, annotations=(),
                cp_async: bool = False) -> S.For:
    """Emit the planned group loop over a FlatFragment (or LaneColFragment) `layout` (vec == plan.vec),
    or over an accumulator's column pairs (`pair_cols`, vec == 2).
    cp_async: a global -> shared copy body (`cp_async_copy`) becomes one cp.async per vector."""
    vec, j = plan.vec, cvars[-1]
    g, u = E.Var("g", dt.int32), plan.lane
    j0 = E.Var(f"{j.name}0", dt.int32)
    e0, coords = group_coords(layout, g, tid)
    lets = [S.LetStmt(v, simplify(c)) for v, c in zip(cvars[:-1], coords[:-1])]
    lets.append(S.LetStmt(j0, simplify(coords[-1])))
    copy = cp_async_copy(plan) if cp_async else None
    if copy is not None:
        group = S.seq(*lets, _cp_async(*copy, vec, {j: j0}, raw))
        if not layout.exact:
            group = S.IfThenElse(E.binop("<", e0, layout.numel), group)
        return S.For(g, E.as_expr(0), E.as_expr(layout.nlocal // vec), "unroll", group, annotations)
    pre, post = _vector_accesses(plan, {j: j0}, raw)
    lane = [S.LetStmt(j, j0 + u)]
    if lvar in _vars(plan.body):
        lane.insert(0, S.LetStmt(lvar, g * vec + u))
    inner = S.For(u, E.as_expr(0), E.as_expr(vec), "unroll", S.seq(*lane, plan.body))
    group = S.seq(*lets, *pre, inner, *post)
    if not layout.exact:
        group = S.IfThenElse(E.binop("<", e0, layout.numel), group)
    return S.For(g, E.as_expr(0), E.as_expr(layout.nlocal // vec), "unroll", group, annotations)


def serial_vector_loop(plan: VecPlan, loop: S.For, raw) -> S.Stmt:
    """Emit the planned vectors of one thread's `T.vectorized(n)` loop (vec == n): load each
    vector once, run the body per lane (loop var = start + u), store each vector once."""
    k, u = loop.var, plan.lane
    pre, post = _vector_accesses(plan, {k: loop.start}, raw)
    inner = S.For(u, E.as_expr(0), E.as_expr(plan.vec), "unroll",
                  S.seq(S.LetStmt(k, simplify(loop.start + u)), plan.body))
    return S.seq(*pre, inner, *post)


def _atomic_pair_body(body):
    """(guard, call) when body is `[if guard:] atomic_add(dst[...], value)` with dst a float32 global
    buffer and no return value; else None."""
    guard = None
    while isinstance(body, S.IfThenElse) and body.else_case is None:  # nested guards: their conjunction
        guard = body.cond if guard is None else E.binop("&&", guard, body.cond)
        body = body.then_case
    if not (isinstance(body, S.Evaluate) and isinstance(body.value, E.Call) and body.value.op == "atomic_add"
            and len(body.value.args) == 2):
        return None
    target, value = body.value.args
    if not (isinstance(target, E.BufferLoad) and target.buffer.scope == "global"
            and target.buffer.dtype.name == "float32"):
        return None
    if collect(value, lambda n: isinstance(n, E.BufferLoad) and n.buffer is target.buffer):
        return None
    return guard, body.value


def atomic_vector_loop(layout, body, tid, lvar: E.Var, cvars: list, raw, annotations=()) -> S.For | None:
    """A float32 atomic add per element as one vector reduction (`tl_atomic_add_v{n}_f32`: 8 or 16
    bytes, red.global.add.v2/v4.f32 on sm_90; n atomics before it) per n adjacent elements of a row:
    - an mma / wgmma accumulator (`pair_cols`: slots 2q, 2q + 1 are columns c, c + 1 of one row): n = 2;
    - a flat layout dealing each thread `vec` consecutive row elements (FlatFragment): n = vec (2 or 4),
      the values read per lane (a shared tile's elements, `T.atomic_add(dQ[...], dq_shared)`).
    Fewer atomic requests to L2 (the split-K GEMM's epilogue: half; linear attention's: a quarter).
    None when the body is not one such atomic, its n elements are not adjacent and n * 4-byte
    aligned, or its condition can differ between them (the loop stays scalar)."""
    got = _atomic_pair_body(_inline_lets(body, {}))
    if got is None:
        return None
    guard, call = got
    target, value = call.args
    j = cvars[-1]
    if getattr(layout, "pair_cols", False) and layout.nlocal % 2 == 0:
        vec, flat = 2, False
    elif type(layout).__name__ == "FlatFragment" and layout.vec in (2, 4):
        vec, flat = layout.vec, True
    else:
        return None
    p = _Planner(j, (lvar,), vec)
    if p.contiguous(target.buffer, tuple(target.indices)) is not None:
        return None
    if guard is not None and not p.uniform(guard):
        return None
    q = E.Var("q", dt.int32)
    e0, coords = group_coords(layout, q, tid)
    lets = [S.LetStmt(v, simplify(c)) for v, c in zip(cvars, coords)]
    lanes = [substitute(value, {lvar: q * vec + u, j: j + u} if u else {lvar: q * vec}) for u in range(vec)]
    args = ", ".join(f"{{{k + 1}}}" for k in range(vec))
    st = raw(f"tl_atomic_add_v{vec}_f32({{0}}, {args});", (_addr(target.buffer, tuple(target.indices)), *lanes))
    if guard is not None:
        st = S.IfThenElse(guard, st)
    group = S.seq(*lets, st)
    if flat and not layout.exact:
        group = S.IfThenElse(E.binop("<", e0, layout.numel), group)
    return S.For(q, E.as_expr(0), E.as_expr(layout.nlocal // vec), "unroll", group, annotations)
