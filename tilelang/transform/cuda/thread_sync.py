"""Insert `__syncthreads()` where block-level statements race on shared memory.

Expects: lowered per-thread IR; per-thread element loops carry the annotation
("tl.thread_loop", True) and count as one unit; other loops and ifs are block-level
(uniform) containers.
Guarantees: between a write of a shared buffer and any later read or write of it by
another statement (and between a read and a later write) there is a barrier; loops
get one at the end of the body when the next iteration, up to its first barrier on every
path, would race with this one, and one before the loop (not inside it) when the body races
with what came before it. No barrier is put inside an if (or loop) whose condition (trip
count) may differ between threads - it reads a thread index, or a thread's own local values:
threads that skip it would never arrive; one goes before it instead. The exception is a branch
on one interval of the linear thread index that whole warps or lanes of one warp take
(`if tx < 64:`, `if 32 <= tx < 96:`, the else of `if tx < 64` in a 128-thread block): races
inside it get a barrier of those threads (a named barrier, or __syncwarp), as the public
TileLang's partial barriers give; a branch over other threads (`if tx < 48:`) whose statements
race is cut into one `if` per race-free run with a __syncthreads between, as the public TileLang
cuts it (tl.disable_branch_barriers: neither, as before).

    T.copy(A, A_s)  ; T.gemm(A_s, ...)        ->  copy ; __syncthreads() ; gemm
"""
from __future__ import annotations

import re
from dataclasses import replace

from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer
from ...arith.ranges import Ranges
from ...arith.simplify import const_int, linear_form, simplify
from ...ir.visitor import Mutator, Visitor, collect, substitute
from ...op.hopper import scope_over, scope_unit
from ...errors import LoweringError
from ..thread_scopes import thread_interval
from .divergence import Divergence, divergence
from .lower_tile_ops import Raw, sync

_SHARED = ("shared", "shared.dyn")


def _storage(b: Buffer) -> int:
    """The uid of the memory a buffer names (a T.reshape / T.view alias names its base's)."""
    return getattr(b, "view_base", b).uid


class _Nodes(Visitor):
    """The loads, stores, calls and Raw statements of a statement. Inside a Raw, a load of a buffer
    the Raw declares it writes is its destination address (`tl::store_vec<8>(&X[i], regs)`), not a read."""

    def __init__(self):
        self.found = []

    def visit_Raw(self, n):
        self.found.append(n)
        dst = {_storage(b) for b in n.writes}
        inner = _Nodes()
        inner.visit(n.args)
        self.found += [x for x in inner.found if not (isinstance(x, E.BufferLoad) and _storage(x.buffer) in dst)]

    def generic(self, node):
        if isinstance(node, (E.BufferLoad, S.BufferStore, E.Call)):
            self.found.append(node)
        super().generic(node)


def _private(b: Buffer) -> bool:
    """A staging tile each consumer warpgroup writes and TMA-stores only its own rows of, behind
    that warpgroup's own named barriers (ws_epilogue.wg_chunk): no block barrier orders it."""
    return getattr(b, "wg_private", False) or getattr(getattr(b, "view_base", b), "wg_private", False)


def accesses(st) -> tuple[set, set]:
    """(reads, writes): storage uids of the shared buffers `st` may read and write (warpgroup-private
    staging tiles left out, see `_private`)."""
    reads, writes = set(), set()
    walk = _Nodes()
    walk.visit(st)
    for n in walk.found:
        if isinstance(n, Raw):
            reads |= {_storage(b) for b in n.reads if b.scope in _SHARED and not _private(b)}
            writes |= {_storage(b) for b in n.writes if b.scope in _SHARED and not _private(b)}
        elif isinstance(n, E.Call) and (n.op.startswith("atomic_") or n.op == "tl_atomic_store"):
            target = n.args[0]  # read-modify-write: the load inside is collected as the read
            if isinstance(target, E.BufferLoad) and target.buffer.scope in _SHARED:
                writes.add(_storage(target.buffer))
        elif isinstance(n, E.Call) and n.op.startswith(("extern:", "tl_dp4a")):
            for a in n.args:  # T.call_extern(..., T.access_ptr(S, "w")): it may write what it points at
                if isinstance(a, E.Call) and a.op == "address_of" and a.args[0].buffer.scope in _SHARED \
                        and not _private(a.args[0].buffer):
                    writes.add(_storage(a.args[0].buffer))
        elif isinstance(n, S.BufferStore):
            if n.buffer.scope in _SHARED and not _private(n.buffer):
                writes.add(_storage(n.buffer))
        elif isinstance(n, E.BufferLoad) and n.buffer.scope in _SHARED and not _private(n.buffer):
            reads.add(_storage(n.buffer))
    return reads, writes


def _conflict(pending, acc) -> bool:
    pr, pw = pending
    r, w = acc
    return _hits(pw, r | w) or _hits(pr, w)


# Accesses inside `T.ws` scopes are tagged ("ws", uid): the user's barriers order them against
# other scopes' (no __syncthreads: the other warp groups never reach it), but not against code
# all the block's threads run.
def _hits(a: set, b: set) -> bool:
    pa = {x for x in a if not isinstance(x, tuple)}
    pb = {x for x in b if not isinstance(x, tuple)}
    ta = {x[1] for x in a if isinstance(x, tuple)}
    tb = {x[1] for x in b if isinstance(x, tuple)}
    return bool(pa & (pb | tb)) or bool(ta & pb)


def _scope_hits(a: set, b: set):
    """The threads [lo, hi) a barrier must join when a scope's access in `a` and one in `b` touch one
    buffer from thread ranges that share threads (two `if tx < 32:` branches in a row, one writing what
    the other reads: the same threads, but not each its own elements); None when none do. Scopes over
    disjoint threads are ordered by the program's own barriers (T.ws producers and consumers)."""
    lo = hi = None
    for x in a:
        if not isinstance(x, tuple):
            continue
        for y in b:
            if isinstance(y, tuple) and x[1] == y[1] and x[2] < y[3] and y[2] < x[3]:
                lo = min(x[2], y[2]) if lo is None else min(lo, x[2], y[2])
                hi = max(x[3], y[3]) if hi is None else max(hi, x[3], y[3])
    return None if lo is None else (lo, hi)


def _scope_conflict(pending, acc):
    pr, pw = pending
    r, w = acc
    ranges = [x for x in (_scope_hits(pw, r | w), _scope_hits(pr, w)) if x is not None]
    if not ranges:
        return None
    return min(x[0] for x in ranges), max(x[1] for x in ranges)


def _without_scoped(pending, rng):
    """pending, less the scope accesses a barrier over the threads rng has ordered."""
    def keep(acc):
        return {x for x in acc if not (isinstance(x, tuple) and rng[0] <= x[2] and x[3] <= rng[1])}
    return keep(pending[0]), keep(pending[1])


def _range_barrier(rng):
    """A barrier of the threads [lo, hi) only: their named barrier (whole warps) or __syncwarp (one warp)."""
    return scope_over(rng[0], rng[1], sync())


def _is_scope(st) -> bool:
    return type(st).__name__ == "WarpGroupScope"


def _tagged(st) -> tuple[set, set]:
    """accesses(st), with those inside T.ws scopes tagged ("ws", uid, first thread, end thread)."""
    if _is_scope(st):
        r, w = accesses(st)
        return {("ws", u, st.t_lo, st.t_hi) for u in r}, {("ws", u, st.t_lo, st.t_hi) for u in w}
    scopes = collect(st, _is_scope)
    if not scopes:
        return accesses(st)
    reads, writes = set(), set()
    for sc in scopes:
        r, w = _tagged(sc)
        reads |= r
        writes |= w
    plain = _Unscoped().visit(st)
    r, w = accesses(plain)
    return reads | r, writes | w


class _Unscoped(Mutator):
    def visit_WarpGroupScope(self, s):
        return replace(s, body=S.SeqStmt(()))


def _is_barrier(st) -> bool:
    if isinstance(st, S.Evaluate) and isinstance(st.value, E.Call):  # the user's T.sync_threads()
        return st.value.op == "tl_sync_threads" and not st.value.args
    return isinstance(st, Raw) and "__syncthreads();" in st.fmt


def _exposed(st) -> tuple[set, set, bool]:
    """(reads, writes, barred): the shared accesses `st` can make before it has certainly passed
    a barrier, and whether every path through it passes one. Loops count whole and as unbarred
    (they may run zero times)."""
    if _is_barrier(st):
        r, w = accesses(st)
        return r, w, True
    if isinstance(st, S.SeqStmt):
        reads, writes = set(), set()
        for x in st.stmts:
            r, w, barred = _exposed(x)
            reads |= r
            writes |= w
            if barred:
                return reads, writes, True
        return reads, writes, False
    if _is_scope(st):
        r, w = _tagged(st)
        return r, w, False
    if isinstance(st, S.IfThenElse):
        r0, w0 = accesses(S.Evaluate(st.cond))
        r1, w1, b1 = _exposed(st.then_case)
        r2, w2, b2 = _exposed(st.else_case) if st.else_case is not None else (set(), set(), False)
        return r0 | r1 | r2, w0 | w1 | w2, b1 and b2
    r, w = _tagged(st)
    return r, w, False


def _barred(st) -> bool:
    """Every path through st passes a barrier (a loop of a constant trip count >= 1 whose body does)."""
    if _is_barrier(st):
        return True
    if isinstance(st, S.SeqStmt):
        return any(_barred(x) for x in st.stmts)
    if isinstance(st, S.IfThenElse):
        return st.else_case is not None and _barred(st.then_case) and _barred(st.else_case)
    if isinstance(st, S.For):
        n = const_int(E.as_expr(st.extent))
        return n is not None and n >= 1 and _barred(st.body)
    return False


def _lands_copies(st) -> bool:
    return isinstance(st, Raw) and "cp_async_wait" in st.fmt and bool(st.writes)


def _is_container(st) -> bool:
    if isinstance(st, S.For):
        return not st.annotation("tl.thread_loop", False)
    return isinstance(st, (S.IfThenElse, S.SeqStmt, S.While))


def _own_elements(st, uid: int, thread_ranges: dict) -> bool:
    """Every access of the shared buffer uid in st is a plain load or store of one buffer whose index has one
    dim that one thread variable moves by the same step in each access (`S[tx]`, `S[2 * tx + 1, j]`); its other
    terms, constants and loops inside st, keep every access of one thread within less than that step
    (`S[2 * tx]` with `S[2 * tx + 1]`; `S[tx * 4 + k]`, k < 4): each thread touches its own elements only, so
    no barrier is needed between threads."""
    forms, raw = [], False
    for n in collect(st, lambda n: isinstance(n, (E.BufferLoad, S.BufferStore, Raw, E.Call))):
        if isinstance(n, Raw):
            raw = raw or uid in {_storage(b) for b in (*n.reads, *n.writes)}
        elif isinstance(n, E.Call):
            raw = raw or any(isinstance(a, E.Call) and a.op == "address_of" and _storage(a.args[0].buffer) == uid
                             for a in n.args)
        elif _storage(n.buffer) == uid:
            forms.append((n.buffer, [linear_form(i) for i in n.indices]))
    if raw or not forms or any(b is not forms[0][0] for b, _ in forms):
        return False
    loops = {f.var: (const_int(E.as_expr(f.start)), const_int(E.as_expr(f.extent)))
             for f in collect(st, lambda n: isinstance(n, S.For))}
    moved = None  # (dim, thread variable, its step), the same in every access
    lo = hi = None  # the least and greatest element of that dim one thread reaches, less its thread's offset
    for _, index in forms:
        dims = [(d, f) for d, f in enumerate(index)
                if f is None or any(c and v in thread_ranges for v, c in f[0].items())]
        if len(dims) != 1 or dims[0][1] is None:
            return False
        d, (terms, const) = dims[0]
        threads = [(v, c) for v, c in terms.items() if c and v in thread_ranges]
        if len(threads) != 1 or moved is not None and (moved[0] != d or moved[1] is not threads[0][0]
                                                       or moved[2] != threads[0][1]):
            return False
        moved = (d, *threads[0])
        a = b = const
        for v, c in terms.items():
            if v is moved[1] or not c:
                continue
            first, trips = loops.get(v, (None, None))
            if first is None or trips is None or trips < 1:
                return False
            ends = (c * first, c * (first + trips - 1))
            a, b = a + min(ends), b + max(ends)
        lo, hi = (a, b) if lo is None else (min(lo, a), max(hi, b))
    return hi - lo < abs(moved[2])


class _Sync:
    """quiet > 0: inside a branch (or loop) whose condition differs between threads, where a
    __syncthreads() some threads never reach would hang the block: barriers go before it."""

    def __init__(self, div: Divergence, thread_ranges: dict | None = None, apart: bool = True, axes=None):
        self.div = div
        # ways to name the linear thread index: dicts of thread variable -> (its step in it, extent)
        # ({tid: (1, n)}, {tx: (1, X), ty: (X, Y)}); a branch's condition must use one; None: no branch barriers
        self.axes = axes
        self.block_threads = max(thread_ranges.values(), default=0) if thread_ranges else 0
        self.branch = None  # (first thread, end thread) of the enclosing thread-interval branch
        self.apart = apart  # passes_apart may drop a loop's end barrier (tl.disable_sync_pass_ranges)
        self.quiet = 0
        self.thread_ranges = thread_ranges or {}  # thread index variable -> its extent
        self.loops: list = []  # enclosing block-level loops (their passes may overlap in time too)
        self.scope = None  # (first thread, end thread) of the enclosing T.ws / thread-index branch
        self.unjoined = None  # (if, lo, hi): the innermost quiet branch on a thread interval no barrier can join

    def disjoint_passes(self, loop, end, nxt) -> bool:
        """The next pass of `loop` only overwrites shared elements this pass wrote, and no thread in
        any pass writes an element another thread or pass writes (`disjoint_writes`): no barrier."""
        (er, ew), (nr, nw) = end, nxt
        if not isinstance(loop, S.For) or _hits(ew, nr) or _hits(er, nw):
            return False
        both = ew & nw
        if any(isinstance(x, tuple) for x in both):
            return False
        return bool(both) and disjoint_writes(loop, both, self.thread_ranges, self.loops)

    def apart_passes(self, loop, body, end, nxt) -> bool:
        """Every shared buffer this pass's tail and the next pass's head both touch (one of them
        writing) is accessed at elements the two passes never share (`passes_apart`): no barrier."""
        (er, ew), (nr, nw) = end, nxt
        both = (er & nw) | (ew & nr) | (ew & nw)
        if not both or any(isinstance(x, tuple) for x in both) or not isinstance(loop, S.For):
            return False
        if not _barred(body):  # the new body (its barriers placed) must pass one on every path
            return False
        return all(passes_apart(loop, u, self.thread_ranges, self.scope, self.loops, self.div.vars) for u in both)

    def own_named_barrier(self, st) -> bool:
        """The program's `T.sync_threads(id, n)` inside an interval branch of n threads."""
        if self.branch is None or not (isinstance(st, S.Evaluate) and isinstance(st.value, E.Call)):
            return False
        c = st.value
        return c.op == "tl_sync_threads" and len(c.args) == 2 and const_int(c.args[1]) == self.branch[1] - self.branch[0]

    def sync_stmt(self):
        """The barrier of the threads running here: the block's, or an interval branch's."""
        return sync() if self.branch is None else _range_barrier(self.branch)

    def barrier(self, out, pending, acc):
        if self.quiet:
            self.refuse(pending, acc)
            return pending
        out.append(self.sync_stmt())
        return (set(), set())

    def refuse(self, pending, acc):
        """A barrier is needed (acc after pending) where the threads running here cannot all meet: inside a
        branch on an interval of threads that is neither whole warps nor inside one warp, in a place the branch
        cannot be cut (a loop inside it). Raised as the public TileLang refuses it, unless every buffer the two
        share is one each thread only touches at its own elements (`_own_elements`); elsewhere (a branch on
        data) a race is the program's own."""
        if self.unjoined is None:
            return
        st, lo, hi = self.unjoined
        (pr, pw), (r, w) = pending, acc
        shared = {x for x in (pw & (r | w)) | (pr & w) if not isinstance(x, tuple)}
        if all(_own_elements(st, u, self.thread_ranges) for u in shared):
            return
        who = f"threads [{lo}, {hi})" if lo is not None else "the threads that skip it"
        raise LoweringError(f"shared memory needs a barrier inside `if {st.cond}` ({who}), inside a loop or nested "
                            "statement the branch cannot be cut around, and no barrier can join those threads: they "
                            "are neither whole warps nor inside one warp. Make the branch cover whole warps, or "
                            "write the loop around the branch", getattr(st, "span", None))

    def unjoinable(self, st, side: int):
        """(st, lo, hi) for the threads taking side 0 (then) or 1 (else) of st (`sides`; lo = hi = None for an
        else side of two pieces); None when st is no branch on one thread interval alone."""
        sides = self.sides(st)
        if sides is None or sides[0] is not None:
            return None
        rng = sides[1 + side]
        return (st, *rng) if rng is not None else (st, None, None)

    def quietly(self, unjoined, run, *args):
        """run(*args) with no barriers; unjoined (see `unjoinable`): refuse a race there instead."""
        outer = self.unjoined
        self.unjoined = unjoined
        self.quiet += 1
        try:
            return run(*args)
        finally:
            self.quiet -= 1
            self.unjoined = outer

    def interval(self, st):
        """thread_interval of an if's condition, read with the one naming of the thread index it uses
        (self.axes); None for no if, or no interval."""
        if not self.axes or not isinstance(st, S.IfThenElse):
            return None
        used = {v for v in collect(st.cond, lambda n: isinstance(n, E.Var)) if any(v in a for a in self.axes)}
        return next((thread_interval(st.cond, a) for a in self.axes if used <= set(a)), None)

    def sides(self, st):
        """(rest, then range, else range): the thread-free terms of st's condition (thread_interval) and the
        threads taking each side of st, an if on one interval of the linear thread index, within the threads
        running here; the else range None when it is two pieces, or when rest may send every thread there
        (`if tx < 64 and k > 0`). None when st is no such if."""
        iv = self.interval(st)
        if iv is None:
            return None
        lo, hi = self.branch or self.scope or (0, self.block_threads)
        t_lo, t_hi = max(lo, iv[0]), min(hi, iv[1])
        else_rng = None if iv[2] is not None else (t_hi, hi) if t_lo == lo else (lo, t_lo) if t_hi == hi else None
        return iv[2], (t_lo, t_hi), else_rng

    def branch_ranges(self, st):
        """(then range, else range) of the threads taking each side of an if on one interval of the
        linear thread index (`sides`); a side's range is None when no barrier can join its threads (not
        whole warps, nor inside one warp; an else that is two pieces). None when st is no such branch."""
        sides = self.sides(st)
        if sides is None or sides[0] is not None and self.div.reads_divergent(sides[0]):
            return None
        _, (t_lo, t_hi), else_rng = sides
        if t_lo >= t_hi:
            return None
        fits = [r if r is not None and r[0] < r[1] and scope_unit(*r) is not None else None
                for r in ((t_lo, t_hi), else_rng)]
        return None if fits == [None, None] else tuple(fits)

    def cut_branch(self, st, pending, out):
        """An if (no else) on one interval of threads that no barrier can join (`if tx < 48:`), whose top-level
        statements race with each other: cut into one `if` per race-free run of them with a block barrier
        between (every thread reaches it), as the public TileLang does; the runs themselves stay quiet. Only where
        the condition reads nothing the branch writes, so every run's `if` takes the same threads. None
        when st is no such branch, or has no race between its statements."""
        iv = self.interval(st) if getattr(st, "else_case", None) is None else None
        if iv is None or iv[2] is not None or collect(st.cond, lambda n: isinstance(n, E.Call)):
            return None
        written = {_storage(n.buffer) for n in collect(st.then_case, lambda n: isinstance(n, S.BufferStore))}
        if any(_storage(n.buffer) in written for n in collect(st.cond, lambda n: isinstance(n, E.BufferLoad))):
            return None
        runs, cur, seen = [], [], (set(), set())
        for x in (st.then_case.stmts if isinstance(st.then_case, S.SeqStmt) else (st.then_case,)):
            acc = _tagged(x)
            if cur and _conflict(seen, acc):
                runs.append(cur)
                cur, seen = [], (set(), set())
            cur.append(x)
            seen = (seen[0] | acc[0], seen[1] | acc[1])
        if not runs:
            return None
        runs.append(cur)
        acc = _tagged(st)
        if _conflict(pending, acc):
            pending = self.barrier(out, pending, acc)
        ifs = []
        for run in runs:
            ifs.append(S.IfThenElse(st.cond, self.in_branch(S.seq(*run), None, self.unjoinable(st, 0)), None, span=st.span))
        for i in ifs[:-1]:
            out += [i, self.sync_stmt()]
        return ifs[-1], (pending[0] | acc[0], pending[1] | acc[1])

    def in_branch(self, body, rng, unjoined=None):
        """body processed on the threads rng (barriers over them), or quiet when rng is None (a race refused
        there when unjoined, see `unjoinable`)."""
        if body is None:
            return None
        if rng is None:
            return self.quietly(unjoined, self.block, body, (set(), set()))[0]
        outer = self.branch, self.scope
        self.branch = self.scope = rng
        try:
            return self.block(body, (set(), set()))[0]
        finally:
            self.branch, self.scope = outer

    def seq(self, stmts, pending):
        out = []
        # consecutive T.ws scopes run side by side (their warp groups may wait on each other's
        # mbarriers): a barrier one of them needs against what came before the run goes before
        # the run's first scope, never between two of them (there it would hang a block whose
        # earlier scope waits on a later one, as sparse_mla's producer waits on its consumers)
        run_start, run_acc = None, (set(), set())
        for st in stmts:
            if not _is_scope(st):
                run_start = None
            if type(st).__name__ == "WSSplit":  # warp-specialized: consumers sync among themselves
                outer = self.thread_ranges  # the consumer branch runs on threads below st.consumers
                self.thread_ranges = {v: min(n, st.consumers) for v, n in outer.items()}
                try:
                    cons, _ = self.block(st.consumer, (set(), set()))
                finally:
                    self.thread_ranges = outer
                out.append(replace(st, consumer=cons))
                pending = (set(), set())
                continue
            if _is_scope(st):  # its warp groups sync among themselves (named barrier, see codegen)
                acc = _tagged(st)
                if run_start is None:
                    run_start, run_acc = len(out), (set(), set())
                if _conflict(pending, acc) and not self.quiet:
                    out.insert(run_start, self.sync_stmt())  # scopes over other threads never race with it (tagged)
                    pending = run_acc
                rng = _scope_conflict(pending, acc)
                if rng is not None and not self.quiet:  # an earlier scope over some of its threads
                    out.append(_range_barrier(rng))
                    pending = _without_scoped(pending, rng)
                run_acc = (run_acc[0] | acc[0], run_acc[1] | acc[1])
                outer_scope, self.scope = self.scope, (st.t_lo, st.t_hi)
                try:
                    inner, _ = self.block(st.body, (set(), set()))
                finally:
                    self.scope = outer_scope
                out.append(replace(st, body=inner))
                pending = (pending[0] | acc[0], pending[1] | acc[1])
                continue
            if isinstance(st, S.SeqStmt):
                inner, pending = self.seq(st.stmts, pending)
                out.extend(inner)
            elif _is_container(st) and not isinstance(st, S.SeqStmt):
                new, pending = self.container(st, pending, out)
                out.append(new)
            else:
                acc = accesses(st)
                # a cp.async wait that names the copies' buffers as written (cp_async_waits.py) is
                # where their data lands for this thread: pending from here on, whatever barrier
                # went between the copy and it; the copy itself already raced with what came before
                if _conflict(pending, acc) and not _lands_copies(st):
                    pending = self.barrier(out, pending, acc)
                pending = (pending[0] | acc[0], pending[1] | acc[1])
                out.append(st)
                if (_is_barrier(st) or self.own_named_barrier(st)) and not self.quiet:
                    pending = (set(), set())  # one already there (a pipeline's, the program's) orders what came before
        return out, pending

    def block(self, st, pending):
        stmts = st.stmts if isinstance(st, S.SeqStmt) else (st,)
        out, pending = self.seq(stmts, pending)
        return S.seq(*out), pending

    def container(self, st, pending, out):
        splits = not self.quiet and self.div.splits(st)
        ranges = self.branch_ranges(st) if splits else None
        if splits and (ranges is None or ranges[0] is None) and (cut := self.cut_branch(st, pending, out)) is not None:
            return cut
        if ranges is not None:  # one interval of threads: barriers of those threads inside
            acc = _tagged(st)
            if _conflict(pending, acc):
                pending = self.barrier(out, pending, acc)
            then = self.in_branch(st.then_case, ranges[0], self.unjoinable(st, 0))
            other = self.in_branch(st.else_case, ranges[1], self.unjoinable(st, 1))
            return S.IfThenElse(st.cond, then, other, span=st.span), (pending[0] | acc[0], pending[1] | acc[1])
        if splits:
            # NOTE: no barrier inside: one before it when it races with what came before;
            # races between its own statements are the program's (threads that skip it never
            # arrive). After it, everything it may have touched is pending.
            acc = _tagged(st)
            if _conflict(pending, acc):
                pending = self.barrier(out, pending, acc)
            new, _ = self.quietly(self.unjoinable(st, 0), self.container, st, pending, [])
            return new, (pending[0] | acc[0], pending[1] | acc[1])
        if isinstance(st, S.IfThenElse):
            acc = accesses(S.Evaluate(st.cond))
            if _conflict(pending, acc):
                pending = self.barrier(out, pending, acc)
            then, p1 = self.block(st.then_case, pending)
            other, p2 = (self.block(st.else_case, pending) if st.else_case is not None else (None, pending))
            return S.IfThenElse(st.cond, then, other, span=st.span), (p1[0] | p2[0], p1[1] | p2[1])
        # the loop's bounds (For: once, before it) or condition (While: before every pass) read too
        head = accesses(S.Evaluate(st.cond)) if isinstance(st, S.While) else \
            accesses(S.SeqStmt((S.Evaluate(E.as_expr(st.start)), S.Evaluate(E.as_expr(st.extent)))))
        body_acc = _tagged(st.body)
        if isinstance(st, S.While):
            body_acc = (body_acc[0] | head[0], body_acc[1] | head[1])
        # racing with what came before the loop: one barrier before it, not one per pass
        if _conflict(pending, head) or _conflict(pending, body_acc):
            pending = self.barrier(out, pending, (head[0] | body_acc[0], head[1] | body_acc[1]))
        rng = _scope_conflict(pending, body_acc)
        if rng is not None and not self.quiet:  # a scope before it and one inside it, over shared threads
            out.append(_range_barrier(rng))
            pending = _without_scoped(pending, rng)
        pending = (pending[0] | head[0], pending[1] | head[1])  # the body must not overwrite them early
        self.loops.append(st)
        try:
            body, end = self.block(st.body, pending)
        finally:
            self.loops.pop()
        nr, nw, _ = _exposed(body)  # the next pass, up to its first barrier (a While's condition first)
        if isinstance(st, S.While):
            nr, nw = nr | head[0], nw | head[1]
        if _conflict(end, (nr, nw)) and not self.disjoint_passes(st, end, (nr, nw)) \
                and not (self.apart and self.apart_passes(st, body, end, (nr, nw))):
            if self.quiet:
                self.refuse(end, (nr, nw))
            else:
                body = S.seq(body, self.sync_stmt())
                end = (set(), set())
        rng = _scope_conflict(end, (nr, nw))
        if rng is not None and not self.quiet:  # a scope of this pass and one of the next, over shared threads
            body = S.seq(body, _range_barrier(rng))
            end = _without_scoped(end, rng)
        if isinstance(st, S.For):
            new = S.For(st.var, st.start, st.extent, st.kind, body, st.annotations, span=st.span)
        else:
            new = S.While(st.cond, body, span=st.span)
        # after the loop: what the body left pending, plus what it did if it ran zero times
        return new, (end[0] | pending[0], end[1] | pending[1])


def insert_syncs(body: S.Stmt, thread_vars=(), thread_extents=(), apart: bool = True, axes=None) -> S.Stmt:
    """thread_vars: the thread index variables (tid, tx...): branches on them get no barrier inside,
    except branches on one interval of threads (axes: the ways to name the linear thread index, each a
    dict of thread variable -> (its step in it, its extent) as thread_scopes.thread_interval reads them:
    `({tid: (1, n)}, {tx: (1, X), ty: (X, Y)})`; None: no such barriers).
    thread_extents: their ranges (a loop whose passes write disjoint elements needs no barrier between them).
    apart: a loop whose consecutive passes touch disjoint elements (passes_apart) needs none either."""
    sync_ = _Sync(divergence(body, thread_vars), dict(zip(thread_vars, thread_extents)), apart, axes)
    out, _ = sync_.seq(body.stmts if isinstance(body, S.SeqStmt) else (body,), (set(), set()))
    return S.seq(*out)


_VEC_STORE = re.compile(r"^tl::store_vec<(\d+)>\(\{0\}, \{1\}\);$")


def _flat_index(st: S.BufferStore):
    """The row-major element offset of a store, with `(e // W, e % W)` index pairs (W the last
    extent) read back as e."""
    idx, shape = list(st.indices), list(st.buffer.shape)
    if len(idx) >= 2 and isinstance(idx[-2], E.Binary) and isinstance(idx[-1], E.Binary) \
            and idx[-2].op == "//" and idx[-1].op == "%" and idx[-2].a == idx[-1].a \
            and const_int(idx[-2].b) == const_int(idx[-1].b) == const_int(shape[-1]):
        idx[-2:] = [idx[-1].a]
        shape[-2:] = [shape[-2] * shape[-1]]
    flat = E.as_expr(0)
    for i, n in zip(idx, shape):
        flat = flat * n + i
    return simplify(flat)


def disjoint_writes(loop: S.For, uids: set, thread_ranges: dict, outer=()) -> bool:
    """Each shared buffer in `uids` has one store (or vector store) in the loop body, at an element
    offset that is an injective function of the thread index and of the variables it uses among
    the loop's, the loops' around it (`outer`) and the constant loops' inside it (`i*2048 + tx*8 + v`
    over tx < 256, i < 8, v < 8): two threads never write one element, whatever passes they are in
    (or, with no thread index in it, all threads write the same element of each pass, `X[k]`)."""
    lets = {st.var: st.value for st in collect(loop.body, lambda n: isinstance(n, S.LetStmt))}
    ranges = dict(thread_ranges)
    for f in [*outer, loop] + collect(loop.body, lambda n: isinstance(n, S.For)):
        lo, ext = (const_int(f.start), const_int(f.extent)) if isinstance(f, S.For) else (None, None)
        if lo is not None and ext is not None:  # a variable of another loop may not appear in an offset
            ranges[f.var] = (lo, ext)
    for uid in uids:
        stores = collect(loop.body, lambda n: isinstance(n, S.BufferStore) and _storage(n.buffer) == uid)
        others = [n for n in collect(loop.body, lambda n: isinstance(n, (Raw, E.Call)))
                  if uid in accesses(S.Evaluate(n) if isinstance(n, E.Call) else n)[1]]
        vec = [n for n in others if isinstance(n, Raw) and _VEC_STORE.match(n.fmt)]
        if len(stores) + len(vec) != 1 or len(others) != len(vec):
            return False
        if vec:  # tl::store_vec<n>(&X[idx], regs): elements idx .. idx + n - 1
            lane = E.Var("tl_lane", E.as_expr(0).dtype)
            ranges[lane] = (0, int(_VEC_STORE.match(vec[0].fmt).group(1)))
            dst = vec[0].args[0].args[0]
            flat = simplify(_flat_index(S.BufferStore(dst.buffer, dst.indices, E.as_expr(0))) + lane)
        else:
            flat = _flat_index(stores[0])
        for _ in range(8):  # the lets inside the body, innermost names first
            nxt = simplify(substitute(flat, lets))
            if nxt == flat:
                break
            flat = nxt
        form = linear_form(flat)
        if form is None or not _mixed_radix(form[0], ranges):
            return False
        # equal offsets must mean one thread: a term that alone tells the block's threads apart;
        # or no thread term at all (every thread stores one element per pass, `X[k] = A[k]`): the
        # offsets are distinct across passes, so threads only meet inside one pass's store, which
        # no barrier could order
        block = max(thread_ranges.values(), default=0)
        if any(t in thread_ranges for t in form[0]) and \
                not any(t in thread_ranges and thread_ranges[t] == block and c for t, c in form[0].items()):
            return False
    return True


def _mixed_radix(terms: dict, ranges: dict) -> bool:
    """sum(c * x) over variables of known ranges takes distinct values for distinct points."""
    spans = []
    for t, c in terms.items():
        if not isinstance(t, E.Var) or t not in ranges or c == 0:
            return False
        r = ranges[t]
        n = r[1] if isinstance(r, tuple) else r
        spans.append((abs(c), n))
    reach = 0
    for c, n in sorted(spans):
        if c <= reach:
            return False
        reach += c * (n - 1)
    return True



def _flat(buf, indices):
    """Row-major element offset of buf[indices] (None for a shape that is not static)."""
    shape = buf.static_shape
    if shape is None or len(shape) != len(indices):
        return None
    flat = E.as_expr(0)
    for i, n in zip(indices, shape):
        flat = flat * n + i
    return simplify(flat)


def passes_apart(loop: S.For, uid: int, thread_ranges: dict, scope=None, outer=(), divergent=frozenset()) -> bool:
    """No element of shared buffer `uid` that pass k of `loop` touches is touched by pass k + 1 (one of
    the two accesses a write), for any two threads: every access is a plain element load or store
    whose offset, inner lets inlined, is bounded apart from every other's in the next pass (loop
    variable k + 1, its own thread index and inner loop variables; enclosing loops' variables the
    same). The caller checks that the body passes a barrier on every path, so that pass k + 2
    starts after pass k has ended. `scope`: the thread range [lo, hi) of the enclosing warp-group branch, if any.
    An offset that reads memory, or a variable that may differ between threads (`divergent`) other
    than the thread indices themselves, proves nothing: the two passes' threads see different values.

        for r in 4: flag[r*16 + t/8] = ... ; sync ; if flag[r*16 + t/8]: ...   (t < 128)
        pass r touches [16r, 16r + 15], pass r + 1 [16r + 16, 16r + 31]: no barrier at the end
    """
    lo, ext = const_int(E.as_expr(loop.start)), const_int(E.as_expr(loop.extent))
    if lo is None or ext is None:
        return False
    if ext < 2:
        return True
    raws = collect(loop.body, lambda n: isinstance(n, Raw) and uid in set().union(*accesses(n)))
    calls = collect(loop.body, lambda n: isinstance(n, E.Call) and (
        n.op == "address_of" or n.op.startswith(("atomic_", "extern:", "tl_dp4a")) or n.op == "tl_atomic_store")
        and bool(collect(n, lambda m: isinstance(m, E.BufferLoad) and _storage(m.buffer) == uid)))
    if raws or calls:
        return False
    lets = {st.var: st.value for st in collect(loop.body, lambda n: isinstance(n, S.LetStmt))}
    acc = [(n, False) for n in collect(loop.body, lambda n: isinstance(n, E.BufferLoad) and _storage(n.buffer) == uid)]
    acc += [(n, True) for n in collect(loop.body, lambda n: isinstance(n, S.BufferStore) and _storage(n.buffer) == uid)]
    if not any(w for _, w in acc):
        return True
    offs = []
    for n, w in acc:
        f = _flat(n.buffer, n.indices)
        if f is None:
            return False
        for _ in range(8):  # the lets inside the body, innermost names first
            nxt = simplify(substitute(f, lets))
            if nxt == f:
                break
            f = nxt
        if collect(f, lambda m: isinstance(m, E.BufferLoad)) or any(
                v in divergent and v not in thread_ranges for v in collect(f, lambda m: isinstance(m, E.Var))):
            return False
        offs.append((f, w))
    r = Ranges()
    block = max(thread_ranges.values(), default=0)
    copies = {}
    for v, n in thread_ranges.items():
        a, b = 0, n - 1
        if scope is not None and n == block:  # the block's thread index (tid, or tx of a 1-d block)
            a, b = max(a, scope[0]), min(b, scope[1] - 1)
        r.of[v] = (a, b)
        copies[v] = E.Var(v.name + "_next", v.dtype)
        r.of[copies[v]] = (a, b)
    for f in [*outer] + collect(loop.body, lambda n: isinstance(n, S.For)):
        a, n = const_int(E.as_expr(f.start)), const_int(E.as_expr(f.extent))
        if a is None or n is None or n < 1:
            continue
        r.of[f.var] = (a, a + n - 1)
        if f not in outer:  # an inner loop's variable runs afresh in the next pass
            copies[f.var] = E.Var(f.var.name + "_next", f.var.dtype)
            r.of[copies[f.var]] = (a, a + n - 1)
    r.of[loop.var] = (lo, lo + ext - 2)
    step = {**copies, loop.var: loop.var + 1}
    for fa, wa in offs:
        for fb, wb in offs:
            if not (wa or wb):
                continue
            d = r.bounds(simplify(substitute(fb, step) - fa))
            if d is None or d[0] <= 0 <= d[1]:
                return False
    return True
