"""Run a block's threads on the CPU: SIMT code becomes loops over the thread index.

Takes: a PrimFunc (tile-op IR, after thread_scopes) whose kernels read thread indices
(T.get_thread_binding / T.thread_binding / T.launch_thread), use warp shuffles, votes or
T.tvm_thread_allreduce, or hold an element atomic outside T.Parallel (every thread applies it). Gives: the same kernels with no thread variables left, for
lower_tile_ops_cpu (which still runs a block on one CPU thread):

- scalar statements are SIMT code: every thread runs them. A run of them with no barrier in
  between (a segment) becomes `for thr in serial(lo, hi)`, with tx, ty, tz computed from
  `thr` (x fastest), over the block's threads, or a warp-group scope's (`T.ws` / `if tx < 128`);
- barriers split segments: T.sync_threads, and every block-level tile op (T.copy, T.gemm,
  T.Parallel ... that read no thread index and no per-thread buffer: they run once per block,
  as before, at the point the CUDA path would synchronize around them);
- control flow that depends on no thread holds the segments (a serial loop with a barrier
  stays one loop, its body split); so does a branch on one interval of the linear thread index
  (`if tx < 256:` around `T.sync_threads(3, 256)`, as topk_selector): its body is split over
  its threads, its else branch runs per thread on the others. A race inside a loop of such a branch
  over threads no barrier can join (`if tx < 48:`) is refused as the CUDA path refuses it
  (branch_races.py). Where control flow otherwise
  depends on the thread and holds a barrier, the kernel cannot be split honestly: a
  LoweringError names the construct and the user's line;
- T.alloc_local / T.alloc_var buffers get one copy per thread (a leading thread dim), since
  they live across segments; so do thread-dependent `x = ...` bindings. Shared buffers and
  fragments stay one per block; a fragment store that is the same code in every thread (each CUDA
  thread updates its own replica once: `acc[0] = acc[0] * scale + s[0]`) runs once, at block level
  between the threads' code around it (a serial loop or branch holding one runs at block level);
- a tile op that touches per-thread buffers or reads thread indices is SIMT code (each thread
  runs it whole on its own data); such a T.Parallel loop is split over the segment's threads, each
  iteration once, as the CUDA path partitions it, unless it stores only into T.alloc_local arrays
  (then every thread runs all of it, as in the public TileLang: _SplitParallel); T.copy / T.fill
  and the hopper issue ops (T.tma_copy, barrier arrivals, one arrival per executing thread) may sit
  under thread branches;
- T.ptx_wgmma_rs reads its warps' A registers: a barrier before it (T.ptx_wgmma_ss and the other raw
  Hopper names are SIMT code: each thread computes its own accumulator elements);
- T.ptx_ldmatrix / T.ptx_mma (TensorCoreIntrinEmitter) are warp exchanges between barriers (cpu_warp_mma.py);
- warp shuffles and votes, and T.tvm_thread_allreduce, split their statement at the point:
  every thread stores its value, then each reads its lanes' (a warp is 32 consecutive thread
  ids; a lane outside the segment's threads gives the thread's own value).

    with T.Kernel(4, threads=128) as bx:       for thr in serial(0, 128):          # segment 1
        tx = T.get_thread_binding()                acc[thr, 0] = A[bx, thr]
        acc = T.alloc_local((1,), "f32")       T.copy(S, B[bx, 0])                 # once, a barrier
        acc[0] = A[bx, tx]              ->     for thr in serial(0, 128):          # segment 2
        T.sync_threads()                           S[thr] = acc[thr, 0]
        S[tx] = acc[0]                         (the sync_threads split 1 from 2; so does the copy)
        T.copy(S, B[bx, 0])
"""
from __future__ import annotations

from dataclasses import replace

from .. import dtypes as dt
from ..arith.simplify import const_int, simplify
from ..errors import LoweringError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer, BufferRegion
from ..ir.visitor import Mutator, Visitor, collect, substitute
from ..op import hopper as H
from ..op import hopper_raw as R
from ..op import tile_ops as O
from ..op.ptx import PtxCall
from ..op.thread_ops import DeclBuffer, ThreadAllReduce
from .branch_races import check_branch, unjoinable
from .cpu_activemask import cpu_activemask
from .cpu_lanes import COLLECTIVES
from .cpu_warp_mma import warp_steps
from .thread_dependence import (ISSUE_OPS, SCALAR_OPS, ThreadDependence, is_block_op, op_name, parallel_nest,
                                 thread_local_loop)
from .thread_scopes import thread_axes, thread_interval

WARP = 32
LOOP_MARK = ("tl.cpu_threads", True)  # annotation of a segment loop: lower_tile_ops_cpu counts 1 thread there
SHUFFLES = ("tl_shfl_xor", "tl_shfl_down", "tl_shfl_up", "tl_shfl_idx")
VOTES = ("tl_any_sync", "tl_all_sync", "tl_ballot") + COLLECTIVES
# block-level ops that mean the same when every thread of a branch runs them whole
_PER_THREAD_OK = (O.Copy, O.Fill) + ISSUE_OPS
BAR = ("bar", None)


def _is_sync(e) -> bool:
    return isinstance(e, E.Call) and e.op in ("tl_sync_threads", "tl_sync_grid")


def _exchange(n) -> bool:
    """A point where threads see each other's values: barrier, shuffle, vote, all-reduce, scope, a
    wgmma reading A from the warp's registers (T.ptx_wgmma_rs), an ldmatrix / mma.sync (PtxCall)."""
    if isinstance(n, (ThreadAllReduce, H.WarpGroupScope, PtxCall)) or isinstance(n, R.RawWgmma) and n.rs:
        return True
    return isinstance(n, E.Call) and (n.op in ("tl_sync_threads", "tl_sync_grid") or n.op in SHUFFLES
                                      or n.op in VOTES)


def _where(s, x):
    """The span of the statement holding x (a call inside s, or a statement), else s's."""
    if isinstance(x, E.Expr):
        held = collect(s, lambda n: isinstance(n, S.Stmt) and getattr(n, "span", None) is not None
                       and not isinstance(n, (S.SeqStmt, S.IfThenElse, S.For, S.While, S.LetStmt))
                       and x in collect(n, lambda m: m is x))
        return held[0].span if held else s.span
    return getattr(x, "span", None) or s.span


_SHARED = ("shared", "shared.dyn")


def _fragment_store(n) -> bool:
    return isinstance(n, S.BufferStore) and n.buffer.scope == "fragment"


def _shared_accesses(s) -> tuple[set, set]:
    """(reads, writes): uids of the shared buffers SIMT code s may read and write (an atomic's target, and
    any shared region of a tile op, count as both)."""
    reads, writes = set(), set()
    for n in collect(s, lambda n: isinstance(n, (E.BufferLoad, S.BufferStore, BufferRegion, E.Call))):
        if isinstance(n, E.Call):
            if "atomic" in n.op and n.args and isinstance(n.args[0], E.BufferLoad) \
                    and n.args[0].buffer.scope in _SHARED:
                writes.add(n.args[0].buffer.uid)
            continue
        if n.buffer.scope not in _SHARED:
            continue
        if isinstance(n, BufferRegion):
            reads.add(n.buffer.uid)
            writes.add(n.buffer.uid)
        else:
            (writes if isinstance(n, S.BufferStore) else reads).add(n.buffer.uid)
    return reads, writes


def _races(seen, acc) -> bool:
    """Accesses acc after seen touch one shared buffer, one of them writing."""
    return bool(seen[1] & (acc[0] | acc[1])) or bool(seen[0] & acc[1])


def _self_race(s) -> bool:
    """Two statements (or two passes) of the loop or branch s may race on a shared buffer."""
    body = s.body if isinstance(s, (S.For, S.While)) else S.seq(s.then_case, s.else_case) \
        if s.else_case is not None else s.then_case
    parts = body.stmts if isinstance(body, S.SeqStmt) else (body,)
    if isinstance(s, (S.For, S.While)):  # pass k's accesses against pass k + 1's
        acc = _shared_accesses(body)
        return _races(acc, acc)
    seen = (set(), set())
    for x in parts:
        acc = _shared_accesses(x)
        if _races(seen, acc) or (isinstance(x, (S.For, S.While, S.IfThenElse)) and _self_race(x)):
            return True
        seen = (seen[0] | acc[0], seen[1] | acc[1])
    return False


def _loose_jumps(s) -> list:
    """break/continue statements of s that leave a loop enclosing s (not one inside it)."""
    if isinstance(s, (S.Break, S.Continue)):
        return [s]
    if isinstance(s, (S.For, S.While)) or not isinstance(s, S.Stmt) or isinstance(s, S.TileOp):
        return []
    out = []
    for x in (s.stmts if isinstance(s, S.SeqStmt) else
              (s.then_case, s.else_case) if isinstance(s, S.IfThenElse) else
              (s.body,) if isinstance(s, H.WarpGroupScope) else ()):
        if x is not None:
            out += _loose_jumps(x)
    return out


class _Kernel:
    """The split of one kernel (see the module docstring)."""

    def __init__(self, k: S.KernelLaunch, hazards: bool = True):
        self.k = k
        self.hazards = hazards  # barriers where SIMT code races on shared memory (off: tl.disable_thread_storage_sync)
        self.dims = k.threads
        self.n = k.threads[0] * k.threads[1] * k.threads[2]
        self.thr = E.Var("thr", dt.int32)
        self.per_thread: dict = {}  # uid -> the expanded Buffer
        for a in collect(k.body, lambda n: isinstance(n, S.Allocate)):
            b = a.buffer
            if b.scope in ("local", "local.var") and b.uid not in self.per_thread:
                self.per_thread[b.uid] = Buffer(b.name, (self.n,) + tuple(b.shape), b.dtype, "local")
        self.let_loads: dict = {}  # let Var -> BufferLoad of its per-thread copy
        self.axes = thread_axes(k)  # for thread_interval
        self.deps = ThreadDependence(k)
        self.same = ThreadDependence(k, buffers=False)  # what may really differ between threads

    # ------------------------------------------------------------ dependence
    def dep(self, node) -> bool:
        """Does node read a thread index, a per-thread buffer, or a value computed from them?"""
        return self.deps.dep(node)

    def block_ops(self, s) -> list:
        """Block-level tile ops (and T.Parallel loops) under s: they run once per block. That includes ops
        that read a per-thread buffer holding the same value in every thread (`T.atomic_add(B[v, :], S)`
        with `v = Flag[0]`), but write none: run per thread, an atomic or an accumulation would be
        applied once per thread."""
        return [n for n in collect(s, is_block_op)
                if not isinstance(n, SCALAR_OPS) and (not self.dep(n) or self.uniform_op(n))]

    def uniform_op(self, n) -> bool:
        """n reads per-thread buffers (or values computed from them), all the same in every thread, and
        writes no per-thread buffer: a block-level op reading the first thread's copies."""
        if self.same.dep(n):
            return False
        return not collect(n, lambda m: isinstance(m, (BufferRegion, S.BufferStore))
                           and m.buffer.uid in self.per_thread)

    def first_thread(self, node, rng):
        """node (an op, or a condition) at block level, its per-thread reads those of thread rng[0]
        (they hold the same value in every thread)."""
        if not self.dep(node):
            return node
        return substitute(_Expand(self, self.thread_map()).visit(node), {self.thr: E.as_expr(rng[0])})

    def var_extents(self) -> list:
        """The extent of each thread variable of the kernel (tx: X, ty: Y, tz: Z; another name: the block)."""
        X, Y, Z = self.dims
        ext = {"tx": X if Y * Z > 1 else self.n, "ty": Y, "tz": Z}
        return [ext.get(v.name, self.n) for v in self.k.thread_vars]

    def thread_map(self) -> dict:
        """Thread variable -> its value in thread `thr` (x fastest)."""
        X, Y, Z = self.dims
        t = self.thr
        axes = {"tx": t % X if Y * Z > 1 else t, "ty": (t // X) % Y, "tz": t // (X * Y)}
        return {v: axes[v.name] if v.name in axes else t for v in self.k.thread_vars}

    # ------------------------------------------------------------ splitting
    def split(self, s, rng, structured: bool = False) -> list:
        """s as a list of items: ("s", simt stmt) | ("b", block stmt) | BAR. structured: s is a loop or
        branch that takes the block-level path even with no barrier inside (see `unrolled`)."""
        if isinstance(s, S.SeqStmt):
            return [it for x in s.stmts for it in self.split(x, rng)]
        if isinstance(s, S.Evaluate) and _is_sync(s.value):  # T.sync_grid: the block meets the grid, once
            return [BAR] if s.value.op == "tl_sync_threads" else [BAR, ("b", s)]
        if isinstance(s, S.Allocate):
            return [("b" if getattr(s.buffer, "barrier_counts", None) is not None else "s", s)]
        if isinstance(s, S.LetStmt):
            return self.let(s, rng)
        if isinstance(s, ThreadAllReduce):
            return self.allreduce(s, rng)
        if isinstance(s, PtxCall):  # every thread stores its inputs; after a barrier each computes its outputs
            pre, post = warp_steps(s, self.thr, rng)
            return [BAR] + pre + [BAR] + post + [BAR]
        if isinstance(s, R.RawWgmma) and s.rs:  # every thread's A registers are written before any reads them
            return [BAR, ("s", s)]
        if isinstance(s, H.BarrierWait) and (self.dep(s.index) or self.dep(s.parity)):
            # a wait on a barrier of this thread's own (mbars[tid // 32]): every thread's arrivals before it
            # come first (in thread order the first thread would wait for its warp-mates' arrivals)
            return [BAR, ("s", s)]
        if isinstance(s, H.WarpGroupScope):
            inner = (s.t_lo, s.t_hi)  # in threads: the scope counts warp groups or warps (s.unit)
            return [("b", replace(s, body=self.assemble(self.split(s.body, inner), inner)))]
        sync = collect(s, _exchange)
        jumps = _loose_jumps(s)
        if not sync and not jumps and not self.block_ops(s) and not structured:
            if self.once(s):  # one update of every thread's replica: once, between the threads' code around it
                return [("b", self.first_thread(s, rng))]
            if isinstance(s, (S.While, S.IfThenElse)) or isinstance(s, S.For) and s.kind in ("serial", "unroll"):
                if self.holds_once(s):
                    try:
                        items = self.unrolled(s, rng)
                    except LoweringError:  # refused split of a thread branch: as before, SIMT code
                        items = None
                    if items is not None and items != [("s", s)]:
                        return items
            if self.hazards and (isinstance(s, (S.While, S.IfThenElse)) or isinstance(s, S.For) and s.kind in (
                    "serial", "unroll")) and _self_race(s):
                return self.unrolled(s, rng)
            return [("s", s)]
        if isinstance(s, (S.BufferStore, S.Evaluate)):
            return self.lanes(s, rng)
        if is_block_op(s):
            return [("b", self.first_thread(s, rng))]
        if isinstance(s, (S.Break, S.Continue)):
            return [("b", s)]
        cond = {S.For: lambda: (s.start, s.extent), S.IfThenElse: lambda: s.cond,
                S.While: lambda: s.cond}[type(s)]()
        if isinstance(s, S.IfThenElse) and (sync or structured) and not jumps:
            items = self.interval_branch(s, rng)
            if items is not None:
                return items
        if self.same.dep(cond):
            return self.divergent(s, sync, jumps)
        # the same in every thread (maybe through per-thread buffers that hold one value): block-level control
        if isinstance(s, S.For):
            start, extent = self.first_thread((s.start, s.extent), rng)
            return [("b", replace(s, start=start, extent=extent, body=self.assemble(self.split(s.body, rng), rng)))]
        if isinstance(s, S.While):
            return [("b", replace(s, cond=self.first_thread(s.cond, rng),
                                  body=self.assemble(self.split(s.body, rng), rng)))]
        els = None if s.else_case is None else self.assemble(self.split(s.else_case, rng), rng)
        return [("b", replace(s, cond=self.first_thread(s.cond, rng),
                              then_case=self.assemble(self.split(s.then_case, rng), rng), else_case=els))]

    def once(self, s) -> bool:
        """s (SIMT code) stores into a fragment, and is the same code in every thread: it reads no thread
        index, no per-thread value that may differ, calls nothing that differs between threads (atomics,
        random numbers, shuffles), holds no tile op and writes no per-thread buffer. On CUDA each thread
        runs it on its own replica of the fragment, one update of each; the block's one copy here takes it
        once (run per thread, `acc[0] = acc[0] * scale + s[0]` would be applied once per thread)."""
        if isinstance(s, (S.Allocate, S.Break, S.Continue)) or not collect(s, _fragment_store):
            return False
        if self.same.dep(s) or collect(s, lambda n: n is self.thr or isinstance(n, S.TileOp)):
            return False
        return not collect(s, lambda n: isinstance(n, (S.BufferStore, BufferRegion, S.Allocate))
                           and n.buffer.uid in self.per_thread)

    def holds_once(self, s) -> bool:
        """A loop or branch of SIMT code holding a fragment store that would run once (see `once`): it takes
        the block-level path (as `unrolled`), so that the store runs once and the rest per thread."""
        return any(self.once(x) for x in collect(s, _fragment_store) if x is not s)

    def unrolled(self, s, rng) -> list:
        """s (a loop or branch of SIMT code) touches a shared buffer from two of its statements or
        passes, one a write: the CUDA path puts barriers between them (thread_sync), so here s runs
        statement by statement over the threads, as if it held a barrier: a loop or branch that every
        thread takes the same way at block level, a branch on one interval of threads over those
        threads. Where control flow differs between threads otherwise, no barrier can go inside (CUDA's
        goes before it): s stays SIMT code run whole by each thread."""
        if isinstance(s, S.IfThenElse):
            items = self.interval_branch(s, rng)
            if items is not None:
                return items
        cond = s.cond if not isinstance(s, S.For) else (s.start, s.extent)
        if self.same.dep(cond):
            return [("s", s)]
        try:
            return self.split(s, rng, structured=True)
        except LoweringError:  # a jump or exchange inside that only SIMT code can run
            return [("s", s)]

    def interval_branch(self, s: S.IfThenElse, rng):
        """`if tx < 256:` around barriers (a named barrier of those 256 threads, `T.sync_threads(3, 256)`):
        the branch's body split over its interval of threads; the else branch too where its threads are
        one interval (the branch's lie at one end) and it holds barriers or races, else SIMT code.
        None when the condition is not one interval of the linear thread index (thread_interval), its
        thread-free terms differ between threads, or the else branch holds barriers or block-level ops."""
        iv = thread_interval(s.cond, self.axes)
        if iv is None:
            return None
        lo, hi, rest = iv
        if rest is not None and self.same.dep(rest):
            return None
        t_lo, t_hi = max(lo, rng[0]), min(hi, rng[1])
        # the else branch's threads: one interval when the branch's is at one end of rng
        e_rng = None if rest is not None else (t_hi, rng[1]) if t_lo <= rng[0] else (rng[0], t_lo) \
            if t_hi >= rng[1] else None
        if self.hazards and rng == (0, self.n) and (unjoinable(t_lo, t_hi) or e_rng is None or unjoinable(*e_rng)) \
                and not self.block_ops(s) and not collect(s, _exchange):
            # a race no barrier can order (inside a loop of `if tx < 48:`): refused as the CUDA path refuses it
            check_branch(s, self.k.thread_vars, dict(zip(self.k.thread_vars, self.var_extents())), self.n, self.axes)
        split_else = s.else_case is not None and e_rng is not None and e_rng[0] < e_rng[1] and (
            collect(s.else_case, _exchange) or self.hazards and _self_race(S.IfThenElse(s.cond, s.else_case, None)))
        if s.else_case is not None and not split_else and (
                collect(s.else_case, _exchange) or self.block_ops(s.else_case) or _loose_jumps(s.else_case)):
            return None
        phases = self.paired_phases(s, (t_lo, t_hi), e_rng) if rest is None else None
        if phases is not None:
            return phases
        checks = [(s.then_case, t_lo, t_hi)] + ([(s.else_case, *e_rng)] if split_else else [])
        for body, b_lo, b_hi in checks:
            for c in collect(body, lambda n: _is_sync(n) and len(n.args) == 2):
                count = const_int(c.args[1])
                if b_lo < b_hi and count is not None and count != b_hi - b_lo:
                    raise LoweringError(f"T.sync_threads({c.args[0]}, {count}) inside a branch over the {b_hi - b_lo} "
                                        f"threads [{b_lo}, {b_hi}): the CPU backend runs a named barrier inside such "
                                        "a branch as the branch's threads' barrier, and its thread count must be "
                                        "theirs (or the branch and its else meet at the same barrier ids in order)",
                                        _where(s, c))
        items = []
        if t_lo < t_hi:
            body = self.assemble(self.split(s.then_case, (t_lo, t_hi)), (t_lo, t_hi))
            if rest is not None:
                body = S.IfThenElse(self.first_thread(rest, rng), body, None, span=s.span)
            items.append(("b", body))
        if split_else:
            items.append(("b", self.assemble(self.split(s.else_case, e_rng), e_rng)))
        elif s.else_case is not None:
            items.append(("s", S.IfThenElse(E.logical_not(s.cond), s.else_case, None, span=s.span)))
        return items

    def paired_phases(self, s: S.IfThenElse, t_rng, e_rng):
        """A producer / consumer pair of thread intervals meeting at named barriers (`if tx < 32:` writes,
        T.named_barrier_arrive(10, 64), T.sync_threads(11, 64); else T.sync_threads(10, 64), reads,
        T.named_barrier_arrive(11, 64)): where both branches hold barrier operations (arrive or sync) on
        the same sequence of barrier ids, each counting the threads of both intervals, at their top level
        or at the top level of serial loops of one trip count in both, the branch runs in phases: phase j
        is the then-branch's code between its barrier operations j - 1 and j over its threads, then the
        else-branch's (a loop in both becomes one loop of phases). Code after a thread's j-th operation
        waits (on the GPU) only for arrivals at operations of index j, all in earlier phases, so this
        order is one the GPU may take. None where the pattern does not hold."""
        if s.else_case is None or e_rng is None or e_rng[0] >= e_rng[1] or t_rng[0] >= t_rng[1]:
            return None
        total = (t_rng[1] - t_rng[0]) + (e_rng[1] - e_rng[0])

        def named(n):
            return isinstance(n, E.Call) and n.op in ("tl_sync_threads", "tl_named_barrier_arrive") \
                and len(n.args) == 2

        def cut(st):
            """("bar", id) | ("loop", st) | None (no barrier inside) | False (a barrier this cannot pair)."""
            if isinstance(st, S.Evaluate) and named(st.value):
                bid, count = const_int(st.value.args[0]), const_int(st.value.args[1])
                return ("bar", bid) if bid is not None and count == total else False
            if not collect(st, lambda n: named(n) or _is_sync(n)):
                return None
            if isinstance(st, S.For) and st.kind == "serial" and not self.dep(st.start) and not self.dep(st.extent):
                return ("loop", st)
            return False

        def phases(a_body, b_body):
            xs = [list(x.stmts) if isinstance(x, S.SeqStmt) else [x] for x in (a_body, b_body)]
            items, segs = [], ([], [])
            pos = [0, 0]

            def flush():
                for seg, rng in zip(segs, (t_rng, e_rng)):
                    if seg:
                        items.append(("b", self.assemble(self.split(S.seq(*seg), rng), rng)))
                    seg.clear()

            while True:
                cuts = []
                for i in (0, 1):  # each side's code up to its next barrier operation or loop holding one
                    while pos[i] < len(xs[i]) and cut(xs[i][pos[i]]) is None:
                        segs[i].append(xs[i][pos[i]])
                        pos[i] += 1
                    cuts.append(None if pos[i] == len(xs[i]) else cut(xs[i][pos[i]]))
                    pos[i] += 1
                if cuts == [None, None]:
                    flush()
                    return items
                if None in cuts or False in cuts or cuts[0][0] != cuts[1][0]:
                    return None
                if cuts[0][0] == "bar":
                    if cuts[0][1] != cuts[1][1]:
                        return None
                    flush()
                    continue
                la, lb = cuts[0][1], cuts[1][1]
                if not (E.structurally_equal(la.start, lb.start) and E.structurally_equal(la.extent, lb.extent)):
                    return None
                inner = phases(la.body, substitute(lb.body, {lb.var: la.var}))
                if inner is None:
                    return None
                flush()
                items.append(("b", replace(la, body=self.assemble(inner, t_rng))))

        return phases(s.then_case, s.else_case)

    def divergent(self, s, sync, jumps) -> list:
        """s branches or loops on the thread: all of it is SIMT code, if that is honest."""
        what = {S.For: "a loop whose trip count depends on the thread index",
                S.IfThenElse: "a branch on the thread index (or a per-thread value)",
                S.While: "a while loop whose condition depends on the thread index"}[type(s)]
        if sync:
            x = sync[0]
            name = ("T.tvm_thread_allreduce" if isinstance(x, ThreadAllReduce) else
                    "a warp-group scope" if isinstance(x, H.WarpGroupScope) else
                    "T.ptx_wgmma_rs" if isinstance(x, R.RawWgmma) else
                    (x.what or x.op) if isinstance(x, PtxCall) else
                    "T.sync_threads" if x.op == "tl_sync_threads" else "T.sync_grid" if x.op == "tl_sync_grid" else
                    f"the thread exchange {x.op[3:]}")
            raise LoweringError(f"{name} inside {what}: the CPU backend runs a block's threads one after another "
                                "between barriers, and cannot split control flow that differs between threads at "
                                "a barrier; move the barrier out of the thread-dependent code", _where(s, x))
        if jumps:
            raise LoweringError(f"break/continue inside {what}, in a loop that holds a barrier or a block-level "
                                "tile op: the CPU backend cannot run the loop's iterations per thread there",
                                jumps[0].span or s.span)
        for op in self.block_ops(s):
            if not isinstance(op, _PER_THREAD_OK):
                name = op_name(op)
                raise LoweringError(f"{name} inside {what}: a block-level tile op needs every thread of the block "
                                    "(or of one interval of threads: `if tx < 128`, `if tx == 0`), and on target cpu it "
                                    "would run once per thread that takes the branch", getattr(op, "span", None) or s.span)
        return [("s", s)]

    def let(self, s: S.LetStmt, rng) -> list:
        # (a varying call, `pos = T.atomic_add(c[0], 1, return_prev=True)`, runs in every thread)
        if not self.dep(s.value) and not self.same.dep(s.value) and not collect(s.value, _exchange):
            return [("b", s)]
        buf = Buffer(s.var.name, (self.n,), s.var.dtype, "local")
        self.let_loads[s.var] = E.BufferLoad(buf, (self.thr,), s.var.dtype)
        return [("s", S.Allocate(buf))] + self.lanes(S.BufferStore(buf, (self.thr,), s.value, span=s.span), rng)

    def lanes(self, s, rng) -> list:
        """A statement with warp shuffles or votes: every thread stores its operands, then each
        reads its lanes'."""
        from .cpu_lanes import exchange

        calls = list(dict.fromkeys(collect(s, lambda n: isinstance(n, E.Call) and (n.op in SHUFFLES or
                                                                                   n.op in VOTES))))
        if not calls:
            return [("s", s)]
        if any(collect(c.args[1:], lambda n: isinstance(n, E.Call) and n.op in SHUFFLES + VOTES) for c in calls):
            raise LoweringError("a warp shuffle or vote whose operand holds another one: write the inner one to a "
                                "variable first (target cpu)", s.span)
        pre, post, repl = exchange(calls, self.thr, rng)

        class _R(Mutator):
            def visit_Call(self, c):
                return repl[c] if c in repl else self.generic(c)

        return pre + [BAR] + post + [("s", _R().visit(s))]

    def allreduce(self, s: ThreadAllReduce, rng) -> list:
        from .cpu_lanes import allreduce

        pre, post = allreduce(s, self.thr, self.dims)
        return pre + [BAR] + post

    def assemble(self, items, rng) -> S.Stmt:
        out, cur = [], []
        lo, hi = rng

        def flush():
            if cur:
                body = _SplitParallel(self, lo, hi).visit(S.seq(*cur))
                body = _ThreadRng(self.thr).visit(body)
                out.append(S.For(self.thr, E.as_expr(lo), E.as_expr(hi - lo), "serial", body, (LOOP_MARK,)))
                cur.clear()

        seen = (set(), set())  # shared buffers the segment so far reads, writes
        for kind, st in items:
            if kind == "s":
                acc = _shared_accesses(st) if self.hazards else (set(), set())
                if _races(seen, acc):
                    flush()  # the CUDA path's barrier (thread_sync): every thread's earlier accesses first
                    seen = (set(), set())
                seen = (seen[0] | acc[0], seen[1] | acc[1])
                cur.append(st)
                continue
            flush()
            seen = (set(), set())
            if kind == "b":
                out.append(st)
        flush()
        return S.seq(*out)

    # ------------------------------------------------------------ result
    def lower(self) -> S.KernelLaunch:
        body = self.assemble(self.split(self.k.body, (0, self.n)), (0, self.n))
        body = _Expand(self, self.thread_map()).visit(body)
        return replace(self.k, thread_vars=(), body=body)


class _SplitParallel(Mutator):
    """T.Parallel nests in a segment's SIMT code, under control flow the same in every thread, that
    store to shared or global memory, a fragment or a T.alloc_var: split over the segment's threads
    [lo, hi), each iteration run once, as the CUDA path (and the public TileLang) partitions them.
    Thread thr runs flat iterations k * (hi - lo) + (thr - lo), k = 0, 1, ... (the CUDA order for a
    loop that no fragment drives). A nest that stores only into T.alloc_local arrays stays whole in
    every thread (thread_local_loop); under thread-dependent control flow nests are left as they are."""

    def __init__(self, kern: _Kernel, lo: int, hi: int):
        self.kern, self.lo, self.hi = kern, lo, hi

    def visit(self, node):
        return super().visit(node) if isinstance(node, (S.Stmt, tuple, list)) else node

    def visit_For(self, s: S.For):
        if s.kind != "parallel":
            if s.kind in ("serial", "unroll") and not self.kern.dep((s.start, s.extent)):
                return replace(s, body=self.visit(s.body))
            return s
        vars_, exts, body = [], [], s
        while isinstance(body, S.For) and body.kind == "parallel":
            vars_.append(body.var)
            exts.append(E.as_expr(body.extent))
            body = body.body
        if thread_local_loop(body) or not self.kern.dep(s):
            return s
        nthr = self.hi - self.lo
        total = exts[0]
        for e in exts[1:]:
            total = total * e
        total = simplify(total)
        k = E.Var(f"{vars_[0].name}_k", dt.int32)
        flat = k * nthr + (self.kern.thr - self.lo)
        idx, rest = {}, flat
        for v, e in reversed(list(zip(vars_, exts))):
            idx[v] = simplify(rest % e) if len(vars_) > 1 else rest
            rest = rest // e
        starts = [f.start for f in parallel_nest(s)]
        sub = {v: simplify(E.as_expr(st) + i) for (v, i), st in zip(idx.items(), reversed(starts))}
        inner = S.IfThenElse(flat < total, substitute(body, sub))
        return S.For(k, E.as_expr(0), simplify((total + (nthr - 1)) // nthr), "serial", inner, span=s.span)

    def visit_IfThenElse(self, s: S.IfThenElse):
        if self.kern.dep(s.cond):
            return s
        els = None if s.else_case is None else self.visit(s.else_case)
        return replace(s, then_case=self.visit(s.then_case), else_case=els)

    def visit_While(self, s):
        return s


class _ThreadRng(Mutator):
    """T.rng_* calls of a segment use the running thread's generator state: `thr` as a leading
    argument (codegen/intrinsics.py prints `&tl_rng[thr]`)."""

    RNG = ("tl_rng_init", "tl_rng_rand", "tl_rng_rand_float", "tl_rng_rand_double", "tl_rng_normal",
           "tl_rng_normal_double")

    def __init__(self, thr):
        self.thr = thr

    def visit_Call(self, c: E.Call):
        c = self.generic(c)
        return E.Call(c.op, (self.thr,) + c.args, c.dtype) if c.op in self.RNG else c


class _Expand(Mutator):
    """Per-thread buffers get the thread index as a leading dim; thread variables become `thr`."""

    def __init__(self, kern: _Kernel, tmap: dict):
        self.kern, self.tmap = kern, tmap

    def _buf(self, b):
        return self.kern.per_thread.get(b.uid)

    def _idx(self, b, idx):
        if len(idx) != b.ndim:  # a T.alloc_var read as a scalar
            idx = (E.as_expr(0),) * b.ndim
        return (self.kern.thr,) + tuple(idx)

    def visit_Var(self, v):
        if v in self.kern.let_loads:
            return self.kern.let_loads[v]
        return self.tmap.get(v, v)

    def visit_BufferLoad(self, n: E.BufferLoad):
        idx = self.visit(n.indices)
        nb = self._buf(n.buffer)
        return E.BufferLoad(nb, self._idx(n.buffer, idx), n.dtype) if nb else E.BufferLoad(n.buffer, idx, n.dtype)

    def visit_BufferStore(self, s: S.BufferStore):
        idx, val = self.visit(s.indices), self.visit(s.value)
        nb = self._buf(s.buffer)
        if nb:
            return S.BufferStore(nb, self._idx(s.buffer, idx), val, span=s.span)
        return S.BufferStore(s.buffer, idx, val, span=s.span)

    def visit_BufferRegion(self, r: BufferRegion):
        ranges = self.visit(r.ranges)
        nb = self._buf(r.buffer)
        if nb:
            if len(ranges) != r.buffer.ndim:
                ranges = ((E.as_expr(0), 1),) * r.buffer.ndim
            return BufferRegion(nb, ((self.kern.thr, 1),) + tuple(ranges))
        return BufferRegion(r.buffer, ranges)

    def visit_Allocate(self, s: S.Allocate):
        nb = self._buf(s.buffer)
        if nb is None:
            return s
        if s.init is None:
            return S.Allocate(nb, span=s.span)
        stores = [S.BufferStore(nb, (self.kern.thr, E.as_expr(i)), self.visit(v)) for i, v in enumerate(s.init)]
        return S.seq(S.Allocate(nb, span=s.span), *stores)

    def generic(self, node):
        if isinstance(node, S.TileOp):
            for f in ("src", "dst", "obj", "data", "buffer"):
                b = getattr(node, f, None)
                if isinstance(b, Buffer) and self._buf(b) is not None and not isinstance(node, DeclBuffer):
                    raise LoweringError(f"{type(node).__name__} on the per-thread buffer {b.name} in a kernel that "
                                        "reads thread indices is not supported on target cpu", node.span)
        return super().generic(node)


class _SimtAtomic(Visitor):
    """Finds an element atomic (`T.atomic_add(B[0], x)`) outside T.Parallel loops and tile ops: SIMT code
    that every thread of the block runs, each applying its update (a T.Parallel's element runs once)."""

    found = False

    def visit_For(self, s):
        if s.kind != "parallel":
            self.generic(s)

    def visit_Call(self, c):
        self.found = self.found or c.op.startswith("atomic_")
        self.generic(c)

    def generic(self, node):
        if not self.found and not isinstance(node, S.TileOp):
            super().generic(node)


def _needs_threads(k: S.KernelLaunch) -> bool:
    """k reads thread indices, exchanges values between threads, or holds an atomic that every thread
    applies (in a kernel that reads no thread index too: once per block would add once, not threads-many
    times)."""
    if k.thread_vars or collect(k.body, lambda n: isinstance(n, (ThreadAllReduce, PtxCall)) or (
            isinstance(n, E.Call) and (n.op in SHUFFLES or n.op in VOTES))):
        return True
    v = _SimtAtomic()
    v.visit(k.body)
    return v.found and k.threads[0] * k.threads[1] * k.threads[2] > 1


class _Kernels(Mutator):
    def __init__(self, hazards: bool):
        self.hazards = hazards

    def visit_KernelLaunch(self, k: S.KernelLaunch):
        k = cpu_activemask(k)
        return _Kernel(k, self.hazards).lower() if _needs_threads(k) else k


def cpu_threads_pass(func: S.PrimFunc, ctx=None) -> S.PrimFunc:
    hazards = ctx is None or not ctx.config("tl.disable_thread_storage_sync", False)
    return replace(func, body=_Kernels(hazards).visit(func.body))
