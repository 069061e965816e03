"""Which values of a kernel differ between its threads.

Takes: a KernelLaunch (tile-op IR). Gives: `ThreadDependence(k).dep(node)`, true when node reads
a thread index, a per-thread buffer (T.alloc_local / T.alloc_var: one copy per thread), or a
let / loop variable computed from them; `.block_ops(s)`, the block-level tile ops under s (those
that read nothing per-thread), and the op classes both backends treat alike. cpu_threads uses it to find the SIMT code it runs per
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
from ..op import hopper as H
from ..op import hopper_raw as R
from ..op import tile_ops as O
from ..op.thread_ops import DeclBuffer, ImportSource

PER_THREAD_SCOPES = ("local", "local.var")
SCALAR_OPS = (O.DeviceAssert, O.Print, DeclBuffer, ImportSource, O.Swizzle, O.AnnotateLayout)
# tile ops that each executing thread issues on its own (TMA, barriers, cp.async, raw wgmma): any thread may run them
ISSUE_OPS = (H.TmaCopy, H.BarrierArrive, H.BarrierExpectTx, H.BarrierWait, H.CpAsync, H.CpAsyncBarrierArrive,
             H.CpAsyncCommit, H.CpAsyncWait, H.FenceProxyAsync, H.SetMaxNReg, H.WaitWgmma, H.AsyncStep,
             R.BarrierInit, R.TmaLoad, R.BulkCopy, R.RawWgmma, R.FenceOperand)
_NAMES = {"Copy": "T.copy", "Fill": "T.fill / T.clear", "Gemm": "T.gemm", "Reduce": "a T.reduce_* op",
          "CumSum": "T.cumsum", "AtomicTile": "a tile T.atomic_*", "GemmSp": "T.gemm_sp"}


def op_name(op) -> str:
    """How an error names a block-level op: `T.copy`, `a T.Parallel loop` ..."""
    return "a T.Parallel loop" if isinstance(op, S.For) else _NAMES.get(type(op).__name__, type(op).__name__)


class ThreadDependence:
    """buffers=True: every per-thread buffer counts as differing between threads. buffers=False: only
    those a store fills from the thread index (or from another such buffer): a T.alloc_var that every
    thread sets from shared or global values, as `n = s_count[0]`, is then the same in every thread."""

    def __init__(self, k: S.KernelLaunch, buffers: bool = True):
        local = {a.buffer.uid for a in collect(k.body, lambda n: isinstance(n, S.Allocate))
                 if a.buffer.scope in PER_THREAD_SCOPES}
        self.local_uids = set(local) if buffers else set()
        self.vars = set(k.thread_vars)
        binds = collect(k.body, lambda n: isinstance(n, (S.LetStmt, S.For)))
        stores = [] if buffers else collect(k.body, lambda n: isinstance(n, S.BufferStore) and n.buffer.uid in local)
        changed = True
        while changed:  # to a fixed point: a binding may read one made later in the walk
            changed = False
            for b in binds:
                if b.var not in self.vars and self.dep(b.value if isinstance(b, S.LetStmt) else (b.start, b.extent)):
                    self.vars.add(b.var)
                    changed = True
            for st in stores:
                if st.buffer.uid not in self.local_uids and self.dep((st.value, st.indices)):
                    self.local_uids.add(st.buffer.uid)
                    changed = True

    def dep(self, node) -> bool:
        """Does node read a thread index, a per-thread buffer, or a value computed from them?"""
        if any(b.uid in self.local_uids for b in buffers_used(node)):
            return True
        return bool(collect(node, lambda n: isinstance(n, E.Var) and n in self.vars))

    def block_ops(self, s) -> list:
        """Block-level tile ops (and T.Parallel loops) under s: they run once per block, not per thread."""
        return [n for n in collect(s, lambda n: isinstance(n, S.TileOp) or isinstance(n, S.For) and n.kind == "parallel")
                if not isinstance(n, SCALAR_OPS) and not self.dep(n)]
