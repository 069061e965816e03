"""Which values of a kernel differ between its threads.

Takes: a KernelLaunch (tile-op IR). Gives: `ThreadDependence(k).dep(node)`, true when node reads
a thread index, a per-thread buffer (T.alloc_local / T.alloc_var: one copy per thread), or a
let / loop variable computed from them; `.block_ops(s)`, the block-level tile ops under s (those
that read nothing per-thread), and the op classes both backends treat alike. cpu_threads uses it
to find the SIMT code it runs per thread; thread_branches uses it to find block-level tile ops under
control flow that differs between threads.

    tx = T.get_thread_binding()          dep(tx) = dep(r) = dep(acc[0]) = True
    r = tx // 32                         dep(bx) = dep(S[i]) = False  (S shared)
    acc = T.alloc_local((1,), "float32")
"""
from __future__ import annotations

from ..ir import expr as E
from ..ir import stmt as S
from ..ir.visitor import Visitor, buffers_used, collect
from ..op import hopper as H
from ..op import hopper_raw as R
from ..op import tile_ops as O
from ..op.thread_ops import DeclBuffer, ImportSource

PER_THREAD_SCOPES = ("local", "local.var")
SCALAR_OPS = (O.DeviceAssert, O.Print, DeclBuffer, ImportSource, O.Swizzle, O.AnnotateLayout)
# tile ops that each executing thread issues on its own (TMA, barriers, cp.async, raw wgmma): any thread may run them
ISSUE_OPS = (H.TmaCopy, H.TmaStore, H.BarrierArrive, H.BarrierExpectTx, H.BarrierWait, H.CpAsync, H.CpAsyncBarrierArrive,
             H.CpAsyncCommit, H.CpAsyncWait, H.FenceProxyAsync, H.SetMaxNReg, H.WaitWgmma, H.AsyncStep,
             R.BarrierInit, R.TmaLoad, R.BulkCopy, R.RawWgmma, R.FenceOperand)
_NAMES = {"Copy": "T.copy", "Fill": "T.fill / T.clear", "Gemm": "T.gemm", "Reduce": "a T.reduce_* op",
          "CumSum": "T.cumsum", "AtomicTile": "a tile T.atomic_*", "GemmSp": "T.gemm_sp"}


def parallel_nest(s) -> list:
    """The T.Parallel loops of a nest starting at `s`, outermost first."""
    out = []
    while isinstance(s, S.For) and s.kind == "parallel":
        out.append(s)
        s = s.body
    return out


def thread_local_loop(body) -> bool:
    """Whether a T.Parallel body stores only into T.alloc_local arrays and touches no fragment, tile op,
    atomic or other call statement: then each thread runs every iteration over its own array, as the
    public TileLang leaves such a loop unpartitioned (`for i in T.Parallel(8): loc[i] = A[tx * 8 + i]`
    fills all 8 of each thread's). A store to a T.alloc_var scalar keeps the loop split over the
    threads, as there."""
    stores = collect(body, lambda n: isinstance(n, S.BufferStore))
    if not stores or not all(st.buffer.scope == "local" for st in stores):
        return False
    return not collect(body, lambda n: isinstance(n, (S.TileOp, S.Evaluate))
                       or isinstance(n, (E.BufferLoad, S.BufferStore)) and n.buffer.scope == "fragment"
                       or isinstance(n, E.Call) and ("atomic" in n.op or n.op in ("address_of", "access_ptr",
                                                                                     "tvm_access_ptr")))


def is_block_op(n) -> bool:
    """A tile op or a T.Parallel loop (block-level unless it reads something per-thread)."""
    return isinstance(n, S.TileOp) or isinstance(n, S.For) and n.kind == "parallel"


def op_name(op) -> str:
    """How an error names a block-level op: `T.copy`, `a T.Parallel loop` ..."""
    return "a T.Parallel loop" if isinstance(op, S.For) else _NAMES.get(type(op).__name__, type(op).__name__)


def _varying_call(n) -> bool:
    """A call whose value may differ between threads for equal arguments (atomics' old values, shuffles,
    votes, random numbers, lane ids, extern functions) or that may write through a pointer."""
    if not isinstance(n, E.Call):
        return False
    op = n.op
    return op.startswith(("tl_", "extern:")) or "atomic" in op or op in ("address_of", "mma", "ldmatrix")


class ThreadDependence:
    """buffers=True: every per-thread buffer counts as differing between threads. buffers=False: only
    those that may differ, by a conservative analysis: a per-thread buffer is the same in every thread
    when every write to it stores a value that reads no thread index, no differing buffer and no
    varying call (atomics' old values, shuffles, votes ...), at a point every thread reaches (not under
    a condition or loop bound that differs between threads, not inside a thread-branch scope), and
    no tile op writes it from differing data, and its address is never taken. `n = s_count[0]` is
    then the same in every thread; `pos = T.atomic_add(..., return_prev=True)` is not."""

    def __init__(self, k: S.KernelLaunch, buffers: bool = True):
        local = {a.buffer.uid for a in collect(k.body, lambda n: isinstance(n, S.Allocate))
                 if a.buffer.scope in PER_THREAD_SCOPES}
        self.local_uids = set(local) if buffers else set()
        self.vars = set(k.thread_vars)
        self.calls = not buffers  # varying calls count only in the finer analysis (as before otherwise)
        if not buffers:
            taken = {b.uid for c in collect(k.body, lambda n: isinstance(n, E.Call) and _varying_call(n))
                     for b in buffers_used(c.args) if b.uid in local}
            self.local_uids |= taken
        binds = collect(k.body, lambda n: isinstance(n, (S.LetStmt, S.For)))
        changed = True
        while changed:  # to a fixed point: a binding may read one made later in the walk
            changed = False
            for b in binds:
                if b.var not in self.vars and self.dep(b.value if isinstance(b, S.LetStmt) else (b.start, b.extent)):
                    self.vars.add(b.var)
                    changed = True
            if not buffers:
                marked = set()
                _Writes(self, local, marked).visit(k.body)
                if marked - self.local_uids:
                    self.local_uids |= marked
                    changed = True

    def dep(self, node) -> bool:
        """Does node read a thread index, a per-thread buffer, or a value computed from them?"""
        if any(b.uid in self.local_uids for b in buffers_used(node)):
            return True
        return bool(collect(node, lambda n: isinstance(n, E.Var) and n in self.vars
                            or self.calls and _varying_call(n)))

    def block_ops(self, s) -> list:
        """Block-level tile ops (and T.Parallel loops) under s: they run once per block, not per thread."""
        return [n for n in collect(s, is_block_op) if not isinstance(n, SCALAR_OPS) and not self.dep(n)]


class _Writes(Visitor):
    """The per-thread buffers (of `local`) that a write may leave differing between threads."""

    def __init__(self, deps: ThreadDependence, local: set, marked: set):
        self.deps, self.local, self.marked = deps, local, marked
        self.ctl = False  # under control flow that differs between threads, or inside a thread-branch scope

    def under(self, differs: bool, body):
        outer, self.ctl = self.ctl, self.ctl or differs
        try:
            self.visit(body)
        finally:
            self.ctl = outer

    def visit_IfThenElse(self, s):
        self.under(self.deps.dep(s.cond), (s.then_case, s.else_case))

    def visit_While(self, s):
        self.under(self.deps.dep(s.cond) or self.exits_apart(s.body), s.body)

    def visit_For(self, s):
        self.under(self.deps.dep((s.start, s.extent)) or self.exits_apart(s.body), s.body)

    def exits_apart(self, body, differs=False) -> bool:
        """A break / continue of this loop under a differing condition: threads leave it at different iterations."""
        if isinstance(body, (S.Break, S.Continue)):
            return differs
        if isinstance(body, (S.For, S.While)) or not isinstance(body, S.Stmt):
            return False  # an inner loop's jumps are its own
        if isinstance(body, S.IfThenElse):
            d = differs or self.deps.dep(body.cond)
            return self.exits_apart(body.then_case, d) or self.exits_apart(body.else_case, d)
        if isinstance(body, S.SeqStmt):
            return any(self.exits_apart(x, differs) for x in body.stmts)
        inner = getattr(body, "body", None)
        return self.exits_apart(inner, differs) if isinstance(inner, S.Stmt) else False

    def visit_WarpGroupScope(self, s):
        self.under(True, s.body)

    def visit_BufferStore(self, s):
        if s.buffer.uid in self.local and (self.ctl or self.deps.dep((s.value, s.indices))):
            self.marked.add(s.buffer.uid)
        self.generic(s)

    def visit_Allocate(self, s):
        if s.buffer.uid in self.local and s.init is not None and self.deps.dep(s.init):
            self.marked.add(s.buffer.uid)

    def generic(self, node):
        if isinstance(node, S.TileOp):  # a tile op writing a per-thread buffer: taken as differing if anything is
            touched = {b.uid for b in buffers_used(node)} & self.local
            if touched and (self.ctl or self.deps.dep(node)):
                self.marked |= touched
        super().generic(node)
