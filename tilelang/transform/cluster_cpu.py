"""Thread-block clusters on the CPU backend: cluster barriers become grid barriers.

Takes tile-level IR whose kernels may carry `cluster` dims (T.ClusterKernel) and the calls of
language/cluster.py. Gives IR without them:

- `T.block_rank_in_cluster()` is the block's rank, x fastest: bx % cx + (by % cy) * cx + ...;
- in a cluster launch, `T.cluster_sync()` / `T.cluster_wait()` become a grid barrier (tl_sync_grid
  with the argument CLUSTER_MARK, so messages can name the cluster barrier): the kernel then runs
  cooperatively, every block on its own OpenMP thread (codegen/c.py), which is stronger than a
  cluster barrier and a valid execution when every block reaches the same cluster barriers, as
  the hardware requires; `T.cluster_arrive()` is nothing (the wait that follows meets everyone);
- in a kernel without clusters (one block per cluster) they are the block barrier and nothing;
- `T.mbarrier_arrive(mbar, cta_id)` on another block's barrier is not supported here (blocks'
  shared memory is private to their thread): NotImplementedError, unless clusters are 1 block.

    with T.ClusterKernel(8, cluster_dims=2) as bx:      with T.Kernel(8) as bx:
        T.cluster_sync()                          ->         T.sync_grid(1)  # CLUSTER_MARK
        A[bx] = T.block_rank_in_cluster()                    A[bx] = bx % 2
"""
from __future__ import annotations

from dataclasses import replace

from .. import dtypes as dt
from ..errors import LoweringError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.visitor import Mutator
from ..op import hopper as H

WAITS = ("tl_cluster_sync", "tl_cluster_wait")
ARRIVES = ("tl_cluster_arrive", "tl_cluster_arrive_relaxed")
CLUSTER_MARK = 1  # tl_sync_grid's argument when the grid barrier stands for a cluster barrier


class ClusterCPUError(LoweringError, NotImplementedError):
    """A cluster feature the CPU backend does not run."""


def rank_expr(k: S.KernelLaunch) -> E.Expr:
    """The block's rank in its cluster (x fastest), an int32 expression of k's block variables."""
    out, stride = E.const(0, dt.int32), 1
    for v, c in zip(k.block_vars, k.cluster):
        if c > 1:
            idx = v if v.dtype == dt.int32 else E.cast(dt.int32, v)
            out = E.binop("+", out, E.binop("*", E.binop("%", idx, E.const(c, dt.int32)), E.const(stride, dt.int32)))
        stride *= c
    return out


class _Cluster(Mutator):
    def __init__(self, k: S.KernelLaunch):
        self.k = k
        self.rank = rank_expr(k)
        self.size = k.cluster[0] * k.cluster[1] * k.cluster[2]

    def visit_Call(self, c: E.Call):
        if c.op == "tl_block_rank_in_cluster":
            return self.rank
        return self.generic(c)

    def visit_Evaluate(self, s: S.Evaluate):
        v = s.value
        if isinstance(v, E.Call) and v.op in ARRIVES:
            return S.seq()
        if isinstance(v, E.Call) and v.op in WAITS:
            if self.size == 1:  # a one-block cluster's barrier is the block's
                return replace(s, value=E.Call("tl_sync_threads", (), dt.int32))
            return replace(s, value=E.Call("tl_sync_grid", (E.const(CLUSTER_MARK, dt.int32),), dt.int32))
        return self.generic(s)

    def visit_BarrierArrive(self, op: H.BarrierArrive):
        if op.cta_id is None or self.size == 1:
            return replace(op, cta_id=None) if op.cta_id is not None else op
        raise ClusterCPUError(f"T.mbarrier_arrive({op.barrier.name}, cta_id): an arrival on another block's "
                              "barrier (a cluster barrier of T.alloc_cluster_barrier) is not supported on the CPU "
                              "backend, whose blocks keep their shared memory private; compile for CUDA "
                              "sm_90a, or exchange data through global memory between T.cluster_sync() calls",
                              op.span or self.k.span)


class _Kernels(Mutator):
    def visit_KernelLaunch(self, k: S.KernelLaunch):
        return replace(_Cluster(k).visit(k), cluster=(1, 1, 1))


def cluster_cpu_pass(func: S.PrimFunc, ctx=None) -> S.PrimFunc:
    return replace(func, body=_Kernels().visit(func.body))
