"""Refuse block-level tile ops under control flow that differs between threads (target cuda).

Expects: tile-op IR after thread_scopes, which has turned branches on one interval of threads
(`if tx < 128`, `if tx == 0`) into WarpGroupScope statements. Guarantees: no T.copy, T.fill,
T.gemm, reduction or T.Parallel loop that reads nothing per-thread, and no T.sync_threads(), sits
under an `if`, loop or while whose condition reads the thread index (`if tx % 2 == 0`, `if A[tx] > 0`,
`for k in range(tx)`, or a T.alloc_var a store fills from tx; one set from shared or global values,
as topk_selector's `l_num_input = s_num_input[r]`, is the same in every thread): the CUDA
lowering spreads such an op over all the block's threads, so the threads that skip the branch
would leave their part undone. A LoweringError names the op and the user's line. Ops that each
thread issues alone (T.tma_copy, barriers, cp.async, the raw Hopper names) and per-thread code
(reading tx, or T.alloc_local buffers) pass; the CPU backend refuses the same programs
(cpu_threads), except T.copy / T.fill, which it runs whole on each thread that takes the branch.

    if tx % 2 == 0:                      ->   LoweringError at the T.copy: "T.copy inside a branch on
        T.copy(S, B[bx, :])                    the thread index ... branch on one interval of threads"
"""
from __future__ import annotations

from ...errors import LoweringError
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import Visitor, collect
from ..thread_dependence import ISSUE_OPS, ThreadDependence, op_name

_WHAT = {S.For: "a loop whose trip count depends on the thread index",
         S.IfThenElse: "a branch on the thread index (or a per-thread value)",
         S.While: "a while loop whose condition depends on the thread index"}


class _Check(Visitor):
    def __init__(self, k: S.KernelLaunch):
        self.deps = ThreadDependence(k)
        self.index = ThreadDependence(k, buffers=False)

    def check(self, s, cond):
        # conditions on the thread index, not on every T.alloc_var: topk_selector's
        # `for s in T.serial(T.ceildiv(l_num_input, ...))` holds T.sync_threads() and is the same in all threads
        if not self.index.dep(cond):
            return
        sync = collect(s, lambda n: isinstance(n, E.Call) and n.op == "tl_sync_threads" and not n.args)
        if sync:
            raise LoweringError(f"T.sync_threads() inside {_WHAT[type(s)]}: only some of the block's threads reach "
                                "it, and __syncthreads there hangs or races; branch on one interval of whole warps "
                                "(`if tx < 128`: the barrier is then those threads'), or move it out", s.span)
        for op in self.deps.block_ops(s):
            if not isinstance(op, ISSUE_OPS):
                raise LoweringError(f"{op_name(op)} inside {_WHAT[type(s)]}: on target cuda a block-level tile op is "
                                    "spread over all the block's threads, and the threads that skip the branch would "
                                    "leave their part undone; branch on one interval of threads instead (`if tx < 128`, "
                                    "`if tx == 0`: the op then runs over those threads), or move the op out",
                                    getattr(op, "span", None) or s.span)

    def visit_IfThenElse(self, s: S.IfThenElse):
        self.check(s, s.cond)
        self.generic(s)

    def visit_For(self, s: S.For):
        self.check(s, (s.start, s.extent))
        self.generic(s)

    def visit_While(self, s: S.While):
        self.check(s, s.cond)
        self.generic(s)


class _Kernels(Visitor):
    def visit_KernelLaunch(self, k: S.KernelLaunch):
        _Check(k).visit(k.body)


def thread_branches_pass(func: S.PrimFunc, ctx=None) -> S.PrimFunc:
    """Checks only: the function comes back unchanged."""
    _Kernels().visit(func.body)
    return func
