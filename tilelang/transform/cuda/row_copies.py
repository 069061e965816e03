"""Stores from a loop over a row fragment, whose rows are each held by several threads.

A RowFragment (layout/fragment.py; also RowBlockFragment, AccColumnFragment) keeps each row on every lane of an mma quad, and on each
warp (warpgroup) of a column split, so a T.Parallel driven by one runs a row's body on every
copy. Registers are private; memory other threads see (shared, fragments kept in shared
memory, global) is stored by one copy (`RowFragment.first_copy`): the copies would race on a
read-modify-write (`m[i] = max(m[i], r[i])`), and atomics would add once per copy.

A buffer the body also reads back is forwarded through a register: the body reads and
writes the register and the first copy stores it at the end, so no copy reads what another
copy's store may or may not have reached (compute-sanitizer racecheck: the copies are in
different warps when the columns are split). Where the body first reads the old value,
every copy loads it into its register, and the store moves to a second loop over the slots,
which thread_sync separates from the first with a barrier: no copy overwrites an element
another copy has yet to read.

    for i in T.Parallel(M):           for l: s_row[l] = s[i]; s_row[l] = s_row[l] * 2 + r[l]
        s[i] = s[i] * 2 + r[i]   ->          t[l] = s_row[l] + 1
        t[i] = s[i] + 1               __syncthreads()
                                      for l: if (first copy) s[i] = s_row[l]
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field

from ... import dtypes as dt
from ...arith.simplify import const_int, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer
from ...ir.visitor import Mutator, collect, substitute
from .ops.base import THREAD_LOCAL, THREAD_LOOP
from .raw import Raw

_SHARED = ("shared", "shared.dyn")


def _storage(b: Buffer) -> int:
    return (getattr(b, "view_base", None) or b).uid


@dataclass
class RowStorePlan:
    """Per stored buffer (storage uid): `single` ones are stored where they are, on the first copy
    (the body reads them only inside that store); `forward` ones (uid -> (buffer, indices)) go
    through a register, `old` of them loading the old value first (two loops); `kept` ones
    (uid -> why) stay stored by every copy."""

    single: set = field(default_factory=set)
    forward: dict = field(default_factory=dict)
    old: set = field(default_factory=set)
    kept: dict = field(default_factory=dict)


def plan_row_stores(body: S.Stmt, visible, owned) -> RowStorePlan:
    """visible(buffer): a store to it is seen by other threads; owned(buffer, indices): the element
    is this row's alone and in bounds (storing back its old value is harmless)."""
    plan = RowStorePlan()
    stores = collections.defaultdict(list)
    for st in collect(body, lambda n: isinstance(n, S.BufferStore) and visible(n.buffer)):
        stores[_storage(st.buffer)].append(st)
    loads = collections.Counter(_storage(ld.buffer) for ld in collect(body, lambda n: isinstance(n, E.BufferLoad)))
    for uid, sts in stores.items():
        own = sum(1 for st in sts for ld in collect(st, lambda n: isinstance(n, E.BufferLoad))
                  if _storage(ld.buffer) == uid)  # m[i] = max(m[i], r[i]) reads m inside its store only
        if len(sts) == 1 and loads[uid] == own:
            plan.single.add(uid)
            continue
        why = _not_forwardable(body, uid, sts)
        reads_old, stored = _reads_before_store(body, uid, False)
        if why is None and not stored:  # the register starts as the old value, stored back unchanged
            reads_old = True
            if not owned(sts[0].buffer, sts[0].indices):
                why = "not every path through the body stores it, and its index is not the row's"
        if why is None and reads_old and sts[0].buffer.scope not in _SHARED:
            why = "the body reads its old value, and no barrier orders global memory between the copies"
        if why is not None:
            plan.kept[uid] = (sts[0].buffer, why)
            continue
        plan.forward[uid] = (sts[0].buffer, sts[0].indices)
        if reads_old:
            plan.old.add(uid)
    return plan


def _not_forwardable(body, uid, sts) -> str | None:
    """Why the stores and loads of one buffer cannot share a register (None: they can)."""
    buf, idx = sts[0].buffer, sts[0].indices
    uses = sts + collect(body, lambda n: isinstance(n, E.BufferLoad) and _storage(n.buffer) == uid)
    if any(u.buffer.uid != buf.uid or len(u.indices) != len(idx)
           or not all(E.structurally_equal(a, b) for a, b in zip(u.indices, idx)) for u in uses):
        return "the body reads or writes it at another element"
    bound = {n.var.uid for n in collect(body, lambda n: isinstance(n, (S.LetStmt, S.For)))}
    if collect(idx, lambda n: isinstance(n, E.BufferLoad) or isinstance(n, E.Var) and n.uid in bound):
        return "its index is computed inside the body"
    if collect(body, lambda n: isinstance(n, Raw) and any(_storage(b) == uid for b in (*n.reads, *n.writes))
               or isinstance(n, E.Call) and n.op == "address_of" and _storage(n.args[0].buffer) == uid):
        return "the body takes its address"
    if collect(body, lambda n: isinstance(n, E.Call) and n.op.startswith("atomic_") and n.args
               and isinstance(n.args[0], E.BufferLoad) and _storage(n.args[0].buffer) == uid):
        return "an atomic updates it"
    return None


def _reads_before_store(st, uid, stored) -> tuple[bool, bool]:
    """(a load of the buffer may run before it is stored, it is stored on every path), walking
    `st` in program order from `stored` (already stored on every path)."""
    def reads(node):
        return not stored and bool(collect(node, lambda n: isinstance(n, E.BufferLoad) and _storage(n.buffer) == uid))

    if isinstance(st, S.SeqStmt):
        early = False
        for x in st.stmts:
            r, stored = _reads_before_store(x, uid, stored)
            early |= r
        return early, stored
    if isinstance(st, S.BufferStore) and _storage(st.buffer) == uid:
        return reads(st), True
    if isinstance(st, S.IfThenElse):
        r0 = reads(st.cond)
        r1, s1 = _reads_before_store(st.then_case, uid, stored)
        r2, s2 = _reads_before_store(st.else_case, uid, stored) if st.else_case is not None else (False, stored)
        return r0 or r1 or r2, s1 and s2
    if isinstance(st, (S.For, S.While)):  # it may run no pass: what it stores does not count after it
        head = st.cond if isinstance(st, S.While) else (st.start, st.extent)
        r, _ = _reads_before_store(st.body, uid, stored)
        return reads(head) or r, stored
    return reads(st), stored


def _owned(buf: Buffer, idx, row, rows: int) -> bool:
    """buf[idx] is row `row`'s element: the row index in one dimension (of at least `rows`
    elements), constants in bounds in the others."""
    hits = [d for d, x in enumerate(idx) if E.structurally_equal(x, row)]
    if len(idx) != len(buf.shape) or len(hits) != 1 or (const_int(buf.shape[hits[0]]) or 0) < rows:
        return False
    return all(d in hits or (const_int(x) is not None and 0 <= const_int(x) < (const_int(n) or 0))
               for d, (x, n) in enumerate(zip(idx, buf.shape)))


class _RowStores(Mutator):
    """Forwarded buffers read and write their registers (uid -> (register, slot)); other stores
    (and atomics) that are not kept run on the first copy."""

    def __init__(self, plan: RowStorePlan, first, regs: dict):
        self.plan, self.first, self.regs = plan, first, regs

    def visit_BufferLoad(self, e: E.BufferLoad):
        reg = self.regs.get(_storage(e.buffer))
        return E.BufferLoad(reg[0], (reg[1],), reg[0].dtype) if reg is not None else self.generic(e)

    def visit_BufferStore(self, s: S.BufferStore):
        uid = _storage(s.buffer)
        if uid in self.regs:
            reg, slot = self.regs[uid]
            return S.BufferStore(reg, (slot,), self.visit(s.value), span=s.span)
        s = self.generic(s)
        return S.IfThenElse(self.first, s) if uid in self.plan.single else s

    def visit_Evaluate(self, s: S.Evaluate):
        s = self.generic(s)
        call = s.value
        return S.IfThenElse(self.first, s) if isinstance(call, E.Call) and call.op.startswith("atomic_") else s


@dataclass
class _Registers:
    """What forwarding adds to one slot's body: regs (uid -> (register, its slot)), pre (its first
    statements), post (its last), and, for buffers whose old value is read, decls (before the loop)
    and after (the body of the second slot loop)."""

    regs: dict = field(default_factory=dict)
    pre: list = field(default_factory=list)
    post: list = field(default_factory=list)
    decls: list = field(default_factory=list)
    after: list = field(default_factory=list)


def _registers(low, rows, plan: RowStorePlan, l, first) -> _Registers:
    out = _Registers()
    for uid, (buf, idx) in plan.forward.items():
        low.nrow_regs = getattr(low, "nrow_regs", 0) + 1
        name = f"{buf.name}_row{low.nrow_regs}"
        if uid in plan.old:  # every copy reads the old value; the store waits for a barrier
            reg = Buffer(name, (rows.nlocal,), buf.dtype, "local")
            out.decls.append(S.Allocate(reg))
            out.pre.append(S.BufferStore(reg, (l,), E.BufferLoad(buf, idx, buf.dtype)))
            out.after.append(S.IfThenElse(first, S.BufferStore(buf, idx, E.BufferLoad(reg, (l,), buf.dtype))))
            out.regs[uid] = (reg, l)
        else:
            reg = Buffer(name, (1,), buf.dtype, "local.var")
            out.pre.append(S.Allocate(reg))
            out.post.append(S.IfThenElse(first, S.BufferStore(buf, idx, reg[0])))
            out.regs[uid] = (reg, E.as_expr(0))
    return out


def _only_first_copy_stores(b: S.Stmt, plan: RowStorePlan) -> bool:
    """The slot body's only effects are the stores that run on the first copy (no register
    writes, forwarded or kept buffers, calls or atomics)."""
    if plan.forward or plan.kept:
        return False
    stores = collect(b, lambda n: isinstance(n, S.BufferStore))
    return bool(stores) and all(_storage(st.buffer) in plan.single for st in stores) and \
        not collect(b, lambda n: isinstance(n, (S.Evaluate, Raw, S.Allocate)))


def row_loop(low, rows, make_body):
    """low.slot_loop(rows, make_body), its stores that other threads see made once per row (module
    docstring); the buffers every copy still stores are reported through low.warn. `rows` is any
    layout that keeps copies (`replicated`): its first_copy(tid, l) picks the storing copy of slot l.
    Where the first copy is the same thread for every slot and the body only stores (a row block's
    logits to global memory), the test wraps the whole slot loop once rather than each store
    (`if (tid % 4 == 0) { for l: if (bounds) store }`: ptxas predicates the unrolled stores off one
    address, where a test inside each bounds check made a branch region and a rebuilt 64-bit
    address per store; low.first_copy_outside, tl.disable_row_store_hoist)."""
    made = {}
    hoist = []  # the slot-independent first-copy test, where the body qualifies (make_body runs once)

    def visible(b: Buffer) -> bool:
        return b.scope not in THREAD_LOCAL and low.reg(b) is None

    def body(l, cvars):
        first = rows.first_copy(low.tid, l)
        b = make_body(l, cvars)
        plan = plan_row_stores(b, visible, lambda buf, idx: _owned(buf, idx, cvars[0], rows.rows))
        for buf, why in plan.kept.values():
            where = f" (line {low.where.line})" if getattr(low.where, "line", None) else ""
            low.warn(f"T.Parallel{where}: every thread holding a row stores {buf.name} and reads it back ({why}); "
                     "copies of a row in other warps may race (compute-sanitizer racecheck)")
        r = made["regs"] = _registers(low, rows, plan, l, first)
        made["l"], made["cvars"] = l, cvars
        first = simplify(first)
        if getattr(low, "first_copy_outside", False) and \
                l.uid not in {v.uid for v in collect(first, lambda n: isinstance(n, E.Var))} and \
                _only_first_copy_stores(b, plan):
            hoist.append(first)
            return b
        return S.seq(*r.pre, _RowStores(plan, first, r.regs).visit(b), *r.post)

    loop = low.slot_loop(rows, body)
    if hoist:
        return S.IfThenElse(hoist[0], loop)
    if not made["regs"].after:
        return loop
    l2 = E.Var("l", dt.int32)  # the second loop: the same slots, fresh variables
    cv2 = [E.Var(v.name, v.dtype) for v in made["cvars"]]
    lets = [S.LetStmt(v, simplify(c)) for v, c in zip(cv2, rows.coords(low.tid, l2))]
    stores = substitute(S.seq(*made["regs"].after), {made["l"]: l2, **dict(zip(made["cvars"], cv2))})
    return S.seq(*made["regs"].decls, loop,
                 S.For(l2, E.as_expr(0), E.as_expr(rows.nlocal), "unroll", S.seq(*lets, stores), THREAD_LOOP))
