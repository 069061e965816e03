"""Which values of a kernel differ between its threads.

Takes: a KernelLaunch (tile-op IR). Gives: `ThreadDependence(k).dep(node)`, true when node reads
a thread index, a per-thread buffer (T.alloc_local / T.alloc_var: one copy per thread), or a
let / loop variable computed from them. cpu_threads uses it to find the SIMT code it runs per
thread; thread_branches uses it to find block-level tile ops under control flow that differs
between threads.

    tx = T.get_thread_binding()          dep(tx) = dep(r) = dep(acc[0]) = True
    r = tx // 32                         dep(bx) = dep(S[i]) = False  (S shared)
    acc = T.alloc_local((1,), "float32")
"""
from __future__ import annotations

from ..ir import expr as E
from ..ir import stmt as S
from ..ir.visitor import buffers_used, collect

PER_THREAD_SCOPES = ("local", "local.var")


class ThreadDependence:
    def __init__(self, k: S.KernelLaunch):
        self.local_uids = {a.buffer.uid for a in collect(k.body, lambda n: isinstance(n, S.Allocate))
                           if a.buffer.scope in PER_THREAD_SCOPES}
        self.vars = set(k.thread_vars)
        binds = collect(k.body, lambda n: isinstance(n, (S.LetStmt, S.For)))
        changed = True
        while changed:  # to a fixed point: a binding may read one made later in the walk
            changed = False
            for b in binds:
                if b.var not in self.vars and self.dep(b.value if isinstance(b, S.LetStmt) else (b.start, b.extent)):
                    self.vars.add(b.var)
                    changed = True

    def dep(self, node) -> bool:
        """Does node read a thread index, a per-thread buffer, or a value computed from them?"""
        if any(b.uid in self.local_uids for b in buffers_used(node)):
            return True
        return bool(collect(node, lambda n: isinstance(n, E.Var) and n in self.vars))
