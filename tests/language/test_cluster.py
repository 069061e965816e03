"""Thread-block clusters: T.ClusterKernel / T.Kernel(cluster_dims=), the cluster barrier and a block's
rank, run on the CPU backend against independent references; launch checks and their errors."""
import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import LoweringError

from ..backend.cuda.test_cluster_codegen import barrier_kernel


def _rank_ref(grid, cluster):
    """rank[bz, by, bx] of every block, x fastest inside the cluster, by plain loops."""
    gx, gy, gz = grid
    cx, cy, cz = cluster
    out = np.zeros((gz, gy, gx), dtype=np.int32)
    for z in range(gz):
        for y in range(gy):
            for x in range(gx):
                out[z, y, x] = (x % cx) + (y % cy) * cx + (z % cz) * cx * cy
    return out


@pytest.mark.parametrize("cluster_size", [1, 2, 4, 8])
def test_rank_is_block_index_modulo_cluster(cluster_size):
    """The public rank test's meaning: A[bx] == bx % cluster_size after arrive / wait."""
    @tilelang.jit(out_idx=-1, target="cpu")
    def rank(cs):
        @T.prim_func
        def main(A: T.Tensor((128,), T.int32)):
            with T.ClusterKernel(128, cluster_dims=(cs, 1, 1)) as bx:
                T.cluster_arrive()
                T.cluster_wait()
                r = T.block_rank_in_cluster()
                if T.get_thread_binding() == 0:
                    A[bx] = r
                T.cluster_sync()
        return main

    out = rank(cluster_size)()
    assert torch.equal(out, torch.from_numpy(_rank_ref((128, 1, 1), (cluster_size, 1, 1))[0, 0]))


@pytest.mark.parametrize("grid,cluster", [((4, 6, 2), (2, 2, 1)), ((6, 4, 4), (1, 2, 2)), ((8, 3, 2), (4, 1, 2))])
def test_rank_of_3d_clusters(grid, cluster):
    gx, gy, gz = grid

    @T.prim_func
    def main(A: T.Tensor((gz, gy, gx), T.int32)):
        with T.Kernel(gx, gy, gz, threads=32, cluster_dims=cluster) as (bx, by, bz):
            A[bz, by, bx] = T.block_rank_in_cluster()

    out = torch.full((gz, gy, gx), -1, dtype=torch.int32)
    tilelang.compile(main, target="cpu")(out)
    assert torch.equal(out, torch.from_numpy(_rank_ref(grid, cluster)))


def _exchange(blocks, cs, n, threads):
    """Each block writes its scaled row to Part; after the cluster barrier it reads the row of the
    next block in its cluster (rank r reads rank (r + 1) % cs) and adds its own."""
    @T.prim_func
    def main(X: T.Tensor((blocks, n), T.float32), Part: T.Tensor((blocks, n), T.float32),
             Out: T.Tensor((blocks, n), T.float32)):
        with T.ClusterKernel(blocks, threads=threads, cluster_dims=cs) as bx:
            mine = T.alloc_fragment((n,), T.float32)
            for i in T.Parallel(n):
                mine[i] = X[bx, i] * 3.0
            for i in T.Parallel(n):
                Part[bx, i] = mine[i]
            T.cluster_sync()
            r = T.block_rank_in_cluster()
            peer = bx - r + (r + 1) % cs
            for i in T.Parallel(n):
                Out[bx, i] = Part[peer, i] + mine[i] * 0.5
    return main


@pytest.mark.parametrize("blocks,cs,n,threads", [(8, 2, 64, 64), (12, 4, 128, 128), (16, 8, 32, 32)])
def test_blocks_exchange_through_global_memory(blocks, cs, n, threads):
    x = torch.randn(blocks, n)
    part = torch.full((blocks, n), float("nan"))
    out = torch.full((blocks, n), float("nan"))
    tilelang.compile(_exchange(blocks, cs, n, threads), target="cpu")(x, part, out)
    xd = x.double().numpy()
    ref = np.empty_like(xd)
    for b in range(blocks):
        r = b % cs
        peer = b - r + (r + 1) % cs
        ref[b] = xd[peer] * 3.0 + xd[b] * 3.0 * 0.5
    np.testing.assert_allclose(out.double().numpy(), ref, rtol=1e-6, atol=1e-6)


def test_ring_rotation_with_barriers_in_a_loop():
    """cs steps of a ring shift inside each cluster, a cluster barrier between the reads and the
    writes of every step (a barrier inside a loop: the blocks run cooperatively)."""
    blocks, cs = 16, 4

    @T.prim_func
    def main(V: T.Tensor((blocks,), T.int32), Out: T.Tensor((cs, blocks), T.int32)):
        with T.ClusterKernel(blocks, threads=1, cluster_dims=(cs, 1, 1)) as bx:
            got = T.alloc_var(T.int32)
            r = T.block_rank_in_cluster()
            for s in T.serial(cs):
                got = V[bx - r + (r + 1) % cs]
                T.cluster_sync()
                V[bx] = got
                Out[s, bx] = got
                T.cluster_sync()

    v0 = torch.randint(-1000, 1000, (blocks,), dtype=torch.int32)
    v = v0.clone()
    out = torch.full((cs, blocks), -7, dtype=torch.int32)
    tilelang.compile(main, target="cpu")(v, out)
    ref = v0.numpy().copy()
    refs = []
    for _ in range(cs):
        ref = np.array([ref[b - b % cs + (b % cs + 1) % cs] for b in range(blocks)], dtype=np.int32)
        refs.append(ref)
    assert torch.equal(out, torch.from_numpy(np.stack(refs)))
    assert torch.equal(v, v0)  # cs shifts of a ring of cs: every value is home again


def test_cluster_barriers_in_a_plain_kernel_are_block_barriers():
    @T.prim_func
    def main(X: T.Tensor((4, 64), T.float32), Out: T.Tensor((4, 64), T.float32)):
        with T.Kernel(4, threads=64) as bx:
            s = T.alloc_shared((64,), T.float32)
            tx = T.get_thread_binding()
            s[tx] = X[bx, tx]
            T.cluster_sync()
            Out[bx, tx] = s[63 - tx] + T.block_rank_in_cluster()

    x = torch.randn(4, 64)
    out = torch.full((4, 64), float("nan"))
    tilelang.compile(main, target="cpu")(x, out)
    assert torch.equal(out, x.flip(1))


def test_grid_not_divisible_by_cluster_raises():
    with pytest.raises(ValueError, match=r"multiple of the cluster's x extent 4 \(.*\); got 6"):
        @T.prim_func
        def main(A: T.Tensor((6,), T.int32)):
            with T.ClusterKernel(6, cluster_dims=4) as bx:
                A[bx] = bx
    with pytest.raises(ValueError, match=r"y extent 2 \(.*\); got 3"):
        @T.prim_func
        def main2(A: T.Tensor((3, 4), T.int32)):
            with T.Kernel(4, 3, cluster_dims=(2, 2)) as (bx, by):
                A[by, bx] = bx


def test_symbolic_grid_checked_at_each_call():
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n,), T.int32)):
        with T.ClusterKernel(n, threads=1, cluster_dims=2) as bx:
            A[bx] = T.block_rank_in_cluster()

    k = tilelang.compile(main, target="cpu")
    a = torch.full((6,), -1, dtype=torch.int32)
    k(a)
    assert a.tolist() == [0, 1, 0, 1, 0, 1]
    with pytest.raises(ValueError, match=r"multiple of the cluster's x extent 2 .*; got n=7"):
        k(torch.zeros(7, dtype=torch.int32))


@pytest.mark.parametrize("dims,match", [((0, 1, 1), "positive integer"), ((2, 1, 1, 1), "1-3"),
                                        ((4, 4, 1), "16 blocks; at most 8"), ("x", "positive integer")])
def test_bad_cluster_dims(dims, match):
    with pytest.raises(ValueError, match=match):
        @T.prim_func
        def main(A: T.Tensor((64,), T.int32)):
            with T.ClusterKernel(64, 4, cluster_dims=dims) as (bx, by):
                A[bx] = by


def test_remote_mbarrier_arrive_is_not_supported_on_cpu():
    """The public cluster-barrier shape (tests/backend/cuda/test_cluster_codegen.py compiles it for sm_90a)."""
    with pytest.raises(NotImplementedError, match="another block's barrier .* not supported on the CPU backend"):
        tilelang.compile(barrier_kernel(), target="cpu")


def test_remote_arrive_needs_a_cluster_barrier():
    with pytest.raises(TypeError, match="needs a barrier from T.alloc_cluster_barrier"):
        @T.prim_func
        def main(A: T.Tensor((8,), T.int32)):
            with T.ClusterKernel(8, threads=32, cluster_dims=(2, 1, 1)) as bx:
                mbar = T.alloc_barrier([32])
                T.mbarrier_arrive(mbar, 1)
                A[bx] = 1


def test_cluster_barrier_on_too_many_blocks_names_it():
    @T.prim_func
    def main(A: T.Tensor((2048,), T.int32)):
        with T.ClusterKernel(2048, threads=1, cluster_dims=2) as bx:
            A[bx] = 1
            T.cluster_sync()
            A[bx] = 2

    with pytest.raises(LoweringError, match="T.cluster_sync / T.cluster_wait in a kernel of 2048 blocks"):
        tilelang.compile(main, target="cpu")
