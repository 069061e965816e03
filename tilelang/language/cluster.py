"""Thread-block clusters (CUDA sm_90+): `T.ClusterKernel`, the cluster barrier and a block's rank.

A cluster is a group of `cluster_dims` neighbouring blocks of the grid (x fastest) that the GPU
schedules together; its blocks can meet at a cluster barrier and arrive on each other's mbarriers.

    with T.ClusterKernel(128, threads=128, cluster_dims=(4, 1, 1)) as bx:
        T.cluster_arrive()
        T.cluster_wait()                        # every block of the cluster got here
        rank = T.block_rank_in_cluster()       # bx % 4

On CUDA these are `__cluster_dims__(x, y, z)` on the kernel and tl::cluster_* (tl/sync.h). On the
CPU backend a kernel holding cluster barriers runs its blocks at once (one OpenMP thread each) and a
cluster barrier is a whole-grid barrier: stronger than needed, and a valid execution when every
block reaches the same cluster barriers, as the hardware requires anyway.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..frontend import builder as B
from ..ir import expr as E
from ..ir import stmt as S
from .kernel import Kernel

MAX_CLUSTER_BLOCKS = 8  # the portable cluster size: larger needs a non-portable opt-in at launch


def ClusterKernel(*blocks, cluster_dims, threads=None, prelude=None):
    """`T.Kernel` launched as thread-block clusters of `cluster_dims` blocks (an int n for (n, 1, 1),
    or 1-3 extents, x first); every grid extent must be a multiple of its cluster extent. Needs a
    CUDA target of sm_90 or newer (the CPU backend runs it too, see the module docstring).

    Example::

        with T.ClusterKernel(T.ceildiv(N, 128), T.ceildiv(M, 128), threads=128, cluster_dims=(2, 1, 1)) as (bx, by):
            ...
    """
    return Kernel(*blocks, threads=threads, prelude=prelude, cluster_dims=cluster_dims)


def _emit(op, what):
    B.in_kernel(what)
    B.current().emit(S.Evaluate(E.Call(op, (), dt.int32)))


def cluster_arrive():
    """Arrive at the cluster barrier without waiting (`barrier.cluster.arrive.aligned`): every
    thread of every block of the cluster runs it, then `T.cluster_wait()`. Writes before the arrive
    are visible to the cluster's blocks after their wait."""
    _emit("tl_cluster_arrive", "T.cluster_arrive")


def cluster_arrive_relaxed():
    """`T.cluster_arrive` without release ordering (`barrier.cluster.arrive.relaxed.aligned`): it
    orders no memory, only execution. The CPU backend treats it as `T.cluster_arrive`."""
    _emit("tl_cluster_arrive_relaxed", "T.cluster_arrive_relaxed")


def cluster_wait():
    """Wait until every thread of the cluster has arrived (`barrier.cluster.wait.aligned`)."""
    _emit("tl_cluster_wait", "T.cluster_wait")


def cluster_sync():
    """`T.cluster_arrive()` then `T.cluster_wait()`: a barrier of all the cluster's threads.

    Example::

        Part[bx] = ...
        T.cluster_sync()
        Out[bx] = Part[bx ^ 1]        # the partner block of a 2-block cluster
    """
    _emit("tl_cluster_sync", "T.cluster_sync")


def block_rank_in_cluster():
    """This block's rank inside its cluster, an int32 in [0, cluster size): for cluster dims
    (cx, cy, cz), `bx % cx + (by % cy) * cx + (bz % cz) * cx * cy`; 0 outside a cluster launch."""
    B.in_kernel("T.block_rank_in_cluster")
    return E.Call("tl_block_rank_in_cluster", (), dt.int32)


def alloc_cluster_barrier(arrive_count):
    """mbarriers in shared memory that the blocks of a cluster arrive on: `T.alloc_barrier`'s
    counts (`[256]` or `256`), and `T.mbarrier_arrive(mbar, cta_id)` arrives on block cta_id's
    copy. The barrier is initialised before the kernel body runs; call `T.cluster_sync()` before
    another block arrives on it, so that its initialisation is visible cluster-wide."""
    from .alloc import alloc_barrier

    buf = alloc_barrier(arrive_count)
    buf.cluster_barrier = True
    return buf
