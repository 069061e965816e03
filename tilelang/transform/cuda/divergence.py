"""Which values may differ between the threads of a block (thread divergence analysis).

Takes lowered per-thread IR and the thread index variables (tid, tx, ...). Gives a
`Divergence`: the variables and thread-private buffers (local, local.var, registers) whose
values may differ from thread to thread, so that `splits(stmt)` says whether the threads can
disagree on taking an if or on a loop's trip count. thread_sync uses it to keep
__syncthreads() out of branches only some threads take (those never reach it: a hang).

Taint rules, iterated to a fixpoint (a variable or buffer is divergent when):
    a let / loop variable's value (bounds) reads a divergent variable or buffer;
    a private buffer is stored a divergent value or at a divergent index, or is stored
    under an if / loop that splits (a store only some threads make);
    a load of shared or global memory is divergent only through its indices.

    tx = tid % 128; acc[0] = x[tx]     ->  divergent {tid, tx, acc};  `if acc[0] > 0` splits
    n[0] = 4; if n[0] == 4: ...        ->  n is uniform: the if does not split
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import Visitor, collect

PRIVATE = ("local", "local.var")  # scopes each thread holds its own copy of


@dataclass
class Divergence:
    vars: set = field(default_factory=set)
    bufs: set = field(default_factory=set)  # uids of private buffers

    def reads_divergent(self, node) -> bool:
        """Whether expression (or statement) `node` may compute different values in different threads."""
        for n in collect(node, lambda x: isinstance(x, (E.Var, E.BufferLoad))):
            if isinstance(n, E.Var) and n in self.vars:
                return True
            if isinstance(n, E.BufferLoad) and n.buffer.scope in PRIVATE and n.buffer.uid in self.bufs:
                return True
        return False

    def splits(self, st) -> bool:
        """Whether the threads may disagree on taking this if / on this loop's trip count."""
        if isinstance(st, S.For):
            return self.reads_divergent(_bounds(st))
        if isinstance(st, (S.IfThenElse, S.While)):
            return self.reads_divergent(st.cond)
        return False


def _bounds(st: S.For) -> S.Stmt:
    return S.SeqStmt((S.Evaluate(E.as_expr(st.start)), S.Evaluate(E.as_expr(st.extent))))


class _Taint(Visitor):
    def __init__(self, d: Divergence):
        self.d = d
        self.split = 0  # enclosing ifs / loops that split
        self.grew = False

    def add_var(self, v):
        if v not in self.d.vars:
            self.d.vars.add(v)
            self.grew = True

    def visit_LetStmt(self, s: S.LetStmt):
        if self.split or self.d.reads_divergent(s.value):
            self.add_var(s.var)

    def visit_BufferStore(self, s: S.BufferStore):
        b = s.buffer
        if b.scope not in PRIVATE or b.uid in self.d.bufs:
            return
        if self.split or self.d.reads_divergent(s.value) or any(self.d.reads_divergent(i) for i in s.indices):
            self.d.bufs.add(b.uid)
            self.grew = True

    def nested(self, st, body_fields):
        sp = self.d.splits(st)
        self.split += sp
        try:
            for f in body_fields:
                self.visit(getattr(st, f))
        finally:
            self.split -= sp

    def visit_For(self, s: S.For):
        if self.split or self.d.splits(s):
            self.add_var(s.var)
        self.nested(s, ("body",))

    def visit_While(self, s: S.While):
        self.nested(s, ("body",))

    def visit_IfThenElse(self, s: S.IfThenElse):
        self.nested(s, ("then_case", "else_case"))


def divergence(body: S.Stmt, thread_vars) -> Divergence:
    d = Divergence(set(thread_vars))
    while True:  # a fixpoint: a store late in the body can make an earlier condition divergent
        t = _Taint(d)
        t.visit(body)
        if not t.grew:
            return d
