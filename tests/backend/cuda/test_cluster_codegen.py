"""Thread-block clusters on CUDA, compile only (no GPU): __cluster_dims__ on the kernel, the cluster
intrinsics in the source and their instructions in the sm_90a cubin; sm_80 and unsupported
combinations raise; the host emulator refuses cluster kernels."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.backend.cuda import nvrtc, sass
from tilelang.errors import LoweringError

pytestmark = [
    pytest.mark.nvrtc,
    pytest.mark.skipif(not nvrtc.nvrtc_available(),
                       reason="NVRTC not found (pip install cuda-bindings nvidia-cuda-nvrtc)"),
]


def rank_kernel(cs=4):
    @T.prim_func
    def main(A: T.Tensor((128,), T.int32)):
        with T.ClusterKernel(128, cluster_dims=(cs, 1, 1)) as bx:
            T.cluster_arrive()
            T.cluster_wait()
            r = T.block_rank_in_cluster()
            if T.get_thread_binding() == 0:
                A[bx] = r
            T.cluster_arrive_relaxed()
            T.cluster_wait()
            T.cluster_sync()
    return main


def barrier_kernel():
    @T.prim_func
    def main(A: T.Tensor((128,), T.int32)):
        with T.ClusterKernel(128, threads=128, cluster_dims=(4, 1, 1)) as bx:
            mbar = T.alloc_cluster_barrier([512])
            T.cluster_sync()
            T.mbarrier_arrive(mbar, 0)
            if T.block_rank_in_cluster() == 0:
                T.mbarrier_wait_parity(mbar, 0)
            A[bx] = 1
            T.cluster_sync()
    return main


def _ops(cubin):
    if not sass.sass_available():
        pytest.skip("cuobjdump/nvdisasm not found")
    return sass.opcodes(sass.disassemble(cubin))


def test_cluster_kernel_source_and_cubin():
    src = tilelang.lower(rank_kernel(4), target="cuda -arch=sm_90a").kernel_source
    assert "__cluster_dims__(4, 1, 1)" in src
    for call in ("tl::cluster_arrive();", "tl::cluster_arrive_relaxed();", "tl::cluster_wait();",
                 "tl::cluster_sync();", "tl::block_rank_in_cluster()"):
        assert call in src, call
    assert src.index("tl::cluster_arrive();") < src.index("tl::cluster_wait();") < src.index("block_rank_in_cluster")
    ops = _ops(nvrtc.compile_cuda(src, "sm_90a").cubin)
    assert any(op.startswith("UCGABAR_ARV") for op in ops) and any(op.startswith("UCGABAR_WAIT") for op in ops), ops


@pytest.mark.parametrize("grid,cluster,text", [((8, 4), (2, 2), "__cluster_dims__(2, 2, 1)"),
                                               ((4, 2, 6), (1, 1, 2), "__cluster_dims__(1, 1, 2)")])
def test_kernel_cluster_dims_reach_the_source(grid, cluster, text):
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32)):
        with T.Kernel(*grid, threads=64, cluster_dims=cluster):
            A[T.get_thread_binding()] = 1.0

    src = tilelang.lower(main, target="cuda -arch=sm_90a").kernel_source
    assert text in src
    nvrtc.compile_cuda(src, "sm_90a")


def test_remote_mbarrier_arrive_compiles():
    src = tilelang.lower(barrier_kernel(), target="cuda -arch=sm_90a").kernel_source
    assert "__cluster_dims__(4, 1, 1)" in src
    assert "tl::mbarrier_init(&mbar[0], 512)" in src and "tl::fence_barrier_init()" in src
    assert "tl::mbarrier_arrive_cluster(mbar, (uint32_t)(0));" in src
    ops = _ops(nvrtc.compile_cuda(src, "sm_90a").cubin)
    assert any("SYNCS" in op for op in ops), ops


def test_plain_kernel_has_no_cluster_dims():
    @T.prim_func
    def main(A: T.Tensor((128,), T.int32)):
        with T.Kernel(128, threads=32) as bx:
            A[bx] = bx
    assert "__cluster_dims__" not in tilelang.lower(main, target="cuda -arch=sm_90a").kernel_source


@pytest.mark.parametrize("make,what", [(lambda: rank_kernel(2), "cluster launch"),
                                       (barrier_kernel, "cluster launch")])
def test_sm80_refuses_clusters(make, what):
    with pytest.raises(LoweringError, match=f"{what}.*needs sm_90 or newer; the target is sm_80"):
        tilelang.lower(make(), target="cuda -arch=sm_80")


def test_sm80_refuses_cluster_calls_without_cluster_launch():
    @T.prim_func
    def main(A: T.Tensor((4,), T.int32)):
        with T.Kernel(4, threads=32) as bx:
            T.cluster_sync()
            A[bx] = T.block_rank_in_cluster()

    with pytest.raises(LoweringError, match="T.cluster_sync .*needs sm_90 or newer"):
        tilelang.lower(main, target="cuda -arch=sm_80")


def test_grid_barrier_in_a_cluster_launch_is_refused():
    @T.prim_func
    def main(A: T.Tensor((8,), T.int32)):
        with T.ClusterKernel(8, threads=32, cluster_dims=2) as bx:
            for i in T.serial(2):
                A[bx] = A[bx] + i
                T.sync_grid()

    with pytest.raises(LoweringError, match="T.sync_grid in a thread-block cluster launch"):
        tilelang.lower(main, target="cuda -arch=sm_90a")


def test_host_emulator_refuses_cluster_kernels():
    from tilelang.testing import host_cuda

    if not host_cuda.available():
        pytest.skip("g++ not installed")
    k = tilelang.compile(rank_kernel(4), target="cuda -arch=sm_90a")
    with pytest.raises(NotImplementedError, match="uses .*cluster_"):
        prog = host_cuda.HostProgram({"k": k})
        prog.run("k", [torch.zeros(128, dtype=torch.int32)])
