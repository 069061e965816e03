"""Check the lifecycle of reducers (`T.alloc_reducer` without `replication=`) once a kernel is parsed.

Takes the parsed body; gives nothing back, or raises `ReducerEpochError` at the user's line. A reducer
is opaque outside its three ops, and each allocation has exactly one epoch:

    acc = T.alloc_reducer((M,), "float32", op="sum")
    T.reducer_init(acc)                      # once, outside any T.Parallel
    for i, j in T.Parallel(M, N):
        T.reducer_update(acc[i], x[i, j])    # only between init and finalize, only inside T.Parallel
    T.finalize_reducer(acc, dst)             # once, in the init's loop/branch (or an `if` inside it)

Rejected: `acc[i] += v`, T.clear / T.fill / T.copy into the reducer, reading `acc[...]` anywhere, a
second init or finalize, an update before init or after finalize, an epoch that never closes, and a
finalize in another loop iteration or branch than its init (it would run without an init, or
combine already-combined partials). The legacy reducer (`replication="all"` / `"none"`) keeps the
ordinary-tile semantics and is not checked here.

The reducer ops note where they were emitted (`mark`): the (kind, source position) of each statement
survives the parser's rewrites of loop bodies, which object identity would not.
"""
from __future__ import annotations

import dataclasses

from ..errors import TileLangError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer, BufferRegion
from ..ir.visitor import Visitor
from ..op import tile_ops as O


class ReducerEpochError(TileLangError):
    """A T.alloc_reducer tile used outside T.reducer_init / T.reducer_update / T.finalize_reducer rules."""


_FIX = "T.reducer_init(acc); T.reducer_update(acc[i], v) inside T.Parallel; T.finalize_reducer(acc, dst)"


def is_epoch_reducer(buf) -> bool:
    """A reducer whose accesses this module checks: allocated without the legacy `replication=` and
    touched by T.reducer_init / T.reducer_update / T.finalize_reducer(acc, dst). One that only meets
    legacy syntax (T.clear, `acc[i] += v`, in-place finalize) stays an ordinary reducer tile."""
    return isinstance(buf, Buffer) and bool(getattr(buf, "reducer_epoch", None))


def mark(buf: Buffer, kind: str, stmts) -> None:
    """Record that `stmts` (just emitted) are the reducer op `kind` ("init", "update", "finalize")."""
    for st in stmts:
        buf.reducer_epoch.add((kind, getattr(st, "span", None)))


def _kind(buf: Buffer, st) -> str | None:
    marks = buf.reducer_epoch
    span = getattr(st, "span", None)
    return next((k for k in ("init", "update", "finalize") if (k, span) in marks), None)


def check_reducer_epochs(body) -> None:
    """Raise ReducerEpochError at the first misuse of a reducer in `body` (see the module docstring)."""
    v = _EpochChecker()
    v.visit(body)
    for buf, (state, span) in v.state.items():
        if state == "allocated":
            raise ReducerEpochError(f"reducer `{buf.name}` is allocated but never initialized: every T.alloc_reducer "
                                    f"needs exactly one T.reducer_init and one T.finalize_reducer ({_FIX})", span)
        if state == "active":
            raise ReducerEpochError(f"reducer `{buf.name}` is initialized but never finalized: call "
                                    f"T.finalize_reducer({buf.name}, dst) exactly once after its updates", span)


class _EpochChecker(Visitor):
    def __init__(self):
        self.state: dict = {}  # reducer Buffer -> (allocated | active | finalized, span of the last event)
        self.init_ctx: dict = {}  # reducer Buffer -> the (node id, branch) frames enclosing its init
        self.ctx: list = []  # (id(node), branch, is_if) per enclosing loop / branch
        self.parallel = 0
        self.span = None

    def visit(self, node):
        sp = getattr(node, "span", None) if isinstance(node, S.Stmt) else None
        if sp is None:
            return super().visit(node)
        outer, self.span = self.span, sp
        try:
            super().visit(node)
        finally:
            self.span = outer

    def fail(self, msg):
        raise ReducerEpochError(msg, self.span)

    # ---- scopes ----------------------------------------------------------------------------------
    def _scoped(self, node, branch, body, is_if=False):
        self.ctx.append((id(node), branch, is_if))
        self.visit(body)
        self.ctx.pop()

    def visit_For(self, f: S.For):
        self.visit((f.start, f.extent))
        self.parallel += f.kind == "parallel"
        self._scoped(f, 0, f.body)
        self.parallel -= f.kind == "parallel"

    def visit_While(self, w: S.While):
        self.visit(w.cond)
        self._scoped(w, 0, w.body)

    def visit_IfThenElse(self, s: S.IfThenElse):
        self.visit(s.cond)
        self._scoped(s, 0, s.then_case, True)
        if s.else_case is not None:
            self._scoped(s, 1, s.else_case, True)

    # ---- reducer events and opaque access --------------------------------------------------------
    def visit_Allocate(self, a: S.Allocate):
        if is_epoch_reducer(a.buffer):
            self.state[a.buffer] = ("allocated", self.span)
        self.generic(a)

    def visit_Fill(self, f: O.Fill):
        buf = f.dst.buffer
        if not is_epoch_reducer(buf):
            return self.generic(f)
        if _kind(buf, f) != "init":
            self.fail(f"illegal store to reducer `{buf.name}` (T.fill / T.clear): a reducer starts from "
                      f"T.reducer_init({buf.name}) or T.reducer_init({buf.name}, value)")
        self._init(buf)
        self.visit(f.value)

    def _init(self, buf):
        if self.parallel:
            self.fail(f"T.reducer_init on reducer `{buf.name}` may not appear inside a T.Parallel loop: "
                      "open the epoch before the loop that updates it")
        if self.state[buf][0] != "allocated":
            self.fail(f"double T.reducer_init on reducer `{buf.name}`: each allocation has exactly one epoch "
                      "(allocate another reducer for a second reduction)")
        self.state[buf] = ("active", self.span)
        self.init_ctx[buf] = list(self.ctx)

    def visit_BufferStore(self, st: S.BufferStore):
        buf = st.buffer
        if not is_epoch_reducer(buf):
            return self.generic(st)
        if _kind(buf, st) != "update":
            self.fail(f"illegal store to reducer `{buf.name}`: use T.reducer_update({buf.name}[indices], value) "
                      "instead of ordinary writes (including `acc[i] += v`, T.clear and T.fill)")
        state = self.state[buf][0]
        if state == "allocated":
            self.fail(f"T.reducer_update on reducer `{buf.name}` before T.reducer_init({buf.name})")
        if state == "finalized":
            self.fail(f"T.reducer_update on reducer `{buf.name}` after T.finalize_reducer")
        if not self.parallel:
            self.fail(f"T.reducer_update on reducer `{buf.name}` outside any T.Parallel loop is not supported: "
                      "how many times a thread-uniform update contributes is ambiguous; wrap it in a T.Parallel")
        self.visit(st.indices)
        _ContributionReads(self, buf, st.indices).visit(st.value)

    def visit_FinalizeReducer(self, f: O.FinalizeReducer):
        buf = f.buffer
        if not is_epoch_reducer(buf):
            return self.generic(f)
        if self.parallel:
            self.fail(f"T.finalize_reducer on reducer `{buf.name}` may not appear inside a T.Parallel loop")
        state = self.state[buf][0]
        if state == "allocated":
            self.fail(f"T.finalize_reducer on reducer `{buf.name}` before T.reducer_init({buf.name})")
        if state == "finalized":
            self.fail(f"double T.finalize_reducer on reducer `{buf.name}`")
        self._in_scope(buf)
        self.state[buf] = ("finalized", self.span)

    def _in_scope(self, buf):
        init, here = self.init_ctx[buf], self.ctx
        ok = len(init) <= len(here) and here[:len(init)] == init and all(is_if for _, _, is_if in here[len(init):])
        if not ok:
            self.fail(f"T.finalize_reducer on reducer `{buf.name}` is not in the scope of its T.reducer_init: the "
                      "epoch must close in the same loop iteration and branch it opened in (or in an `if` nested "
                      "there); move the finalize next to the init's loop/branch level")

    def visit_BufferLoad(self, ld: E.BufferLoad):
        if is_epoch_reducer(ld.buffer):
            self.fail(f"illegal read of reducer `{ld.buffer.name}`: a reducer has no readable value; read the "
                      f"destination of T.finalize_reducer({ld.buffer.name}, dst) instead")
        self.generic(ld)

    def visit_BufferRegion(self, r: BufferRegion):
        if is_epoch_reducer(r.buffer):
            self.fail(f"illegal use of reducer `{r.buffer.name}` in a tile op: a reducer may only appear in "
                      f"T.reducer_init, T.reducer_update and T.finalize_reducer ({_FIX})")
        self.generic(r)

    def generic(self, node):
        if isinstance(node, S.TileOp):
            bufs = [b for b in node.buffers() if is_epoch_reducer(b)]
            if bufs and all(_kind(b, node) == "finalize" for b in bufs):  # the finalize's copy into dst
                return self.visit(tuple(r for r in _regions(node) if not is_epoch_reducer(r.buffer)))
            if bufs and not isinstance(node, O.FinalizeReducer):
                self.fail(f"illegal use of reducer `{bufs[0].name}`: a reducer may only appear in T.reducer_init, "
                          f"T.reducer_update and T.finalize_reducer ({_FIX})")
        super().generic(node)


def _regions(op):
    return [getattr(op, f.name) for f in dataclasses.fields(op) if isinstance(getattr(op, f.name), BufferRegion)]


class _ContributionReads(Visitor):
    """The reads of an update's value other than its target (`acc[i]` in acc[i] = combine(acc[i], v))."""

    def __init__(self, outer: _EpochChecker, buf: Buffer, indices):
        self.outer, self.buf, self.indices = outer, buf, tuple(indices)

    def visit_BufferLoad(self, ld: E.BufferLoad):
        if ld.buffer is self.buf and len(ld.indices) == len(self.indices) and all(
                E.structurally_equal(E.as_expr(a), E.as_expr(b)) for a, b in zip(ld.indices, self.indices)):
            return self.outer.visit(ld.indices)
        self.outer.visit(ld)
