"""The public TileLang's raw Hopper names (T.ptx_arrive_barrier, T.ptx_wait_barrier,
T.warpgroup_arrive, T.tma_store_wait, ...; language/hopper.py): NVRTC sm_90a compiles with the
PTX each stands for, runs on the host emulator and the CPU backend against float64, and a clear
error below sm_90."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import LoweringError

M, N, K = 128, 64, 64


def raw_gemm():
    """One k-step C = A @ B: warp group 1 loads A, B by TMA onto a barrier, warp group 0 waits on
    it (first phase: parity 0), runs an async wgmma fenced, committed and waited by the raw names."""
    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=256) as bx:
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            C_l = T.alloc_fragment((M, N), "float32")
            bars = T.alloc_barrier([128, 128])
            T.ptx_fence_barrier_init()
            with T.ws(1):
                T.tma_copy(A[0, 0], A_s, barrier=bars[0])
                T.tma_copy(B[0, 0], B_s, barrier=bars[0])
                T.ptx_arrive_barrier(bars[0])
                T.ptx_arrive_barrier_expect_tx(bars[1], 0)
            with T.ws(0):
                T.clear(C_l)
                T.ptx_wait_barrier(bars[0])
                T.ptx_wait_barrier(bars[1])
                T.warpgroup_arrive()
                T.wgmma_gemm(A_s, B_s, C_l)
                T.warpgroup_commit_batch()
                T.warpgroup_wait(0)
                T.copy(C_l, C[0, 0])
                T.tma_store_arrive()
                T.tma_store_wait()
                T.tma_store_wait(0, read=False)
    return f


def compile_(f, target):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(f, target=target)


def inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(M, K, generator=g).half(), torch.randn(K, N, generator=g).half()


def _needs_nvrtc():
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")


@pytest.mark.nvrtc
def test_sm90a_source_has_the_raw_instructions():
    _needs_nvrtc()
    src = compile_(raw_gemm(), "cuda -arch=sm_90a").get_kernel_source()
    for call in ("tl::fence_barrier_init();", "tl::mbarrier_arrive(", "tl::mbarrier_arrive_expect_tx(",
                 "tl::warpgroup_arrive();", "tl::warpgroup_commit_batch();", "tl::warpgroup_wait<0>();",
                 "tl::tma_store_arrive();", "tl::tma_store_wait<0, true>();", "tl::tma_store_wait<0, false>();"):
        assert call in src, call
    waits = [ln for ln in src.splitlines() if "tl::mbarrier_wait(" in ln]
    assert len(waits) == 2 and all(ln.rstrip().endswith(", 0);") for ln in waits), waits


@pytest.mark.nvrtc
def test_runs_on_the_host_emulator():
    _needs_nvrtc()
    host = pytest.importorskip("tilelang.testing.host_cuda")
    if not host.available():
        pytest.skip("g++ not installed")
    a, b = inputs(11)
    c = torch.full((M, N), float("nan"))
    host.HostProgram({"f": compile_(raw_gemm(), "cuda -arch=sm_90a")}).run("f", [a, b, c])
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-4, atol=1e-3)


def test_runs_on_cpu():
    a, b = inputs(12)
    c = torch.full((M, N), float("nan"))
    compile_(raw_gemm(), "cpu")(a, b, c)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-4, atol=1e-3)


def test_below_sm90_is_an_error():
    @T.prim_func
    def f(X: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            T.tma_store_arrive()
            X[T.get_thread_binding()] = 1.0

    with pytest.raises(LoweringError, match=r"cp\.async\.bulk\.commit_group needs sm_90a"):
        compile_(f, "cuda -arch=sm_80")


def test_bfloat16_vector_names():
    for lanes in (4, 8, 16, 32, 64):
        d = getattr(T, f"bfloat16x{lanes}")
        assert d == f"bfloat16x{lanes}" and d.lanes == lanes and d.bits == 16


def cp_async_copy():
    """Each of 128 threads cp.asyncs 8 halves of X into a tile tracked by T.ptx_cp_async_barrier
    (no arrival counted), then arrives itself; warp group 0 waits (parity 0) and writes 2 X."""
    @T.prim_func
    def f(X: T.Tensor((128, 8), "float16"), Y: T.Tensor((128, 8), "float32")):
        with T.Kernel(1, threads=256) as bx:
            X_s = T.alloc_shared((128, 8), "float16")
            bar = T.alloc_barrier(128)
            tx = T.get_thread_binding()
            with T.ws(1):
                T.ptx_cp_async(T.access_ptr(X_s[tx - 128, 0], "w", 8), T.access_ptr(X[tx - 128, 0], "r", 8), 8)
                T.ptx_cp_async_barrier(bar)
                T.ptx_arrive_barrier(bar)
            with T.ws(0):
                T.ptx_wait_barrier(bar)
                for j in T.serial(8):
                    Y[tx, j] = X_s[tx, j] * 2.0
    return f


@pytest.mark.nvrtc
def test_cp_async_barrier_on_host_emulator_and_cpu():
    _needs_nvrtc()
    x = torch.randn(128, 8, generator=torch.Generator().manual_seed(13)).half()
    src = compile_(cp_async_copy(), "cuda -arch=sm_90a")
    assert "tl::cp_async_mbarrier_arrive_inc(" in src.get_kernel_source()
    y = torch.full((128, 8), float("nan"))
    compile_(cp_async_copy(), "cpu")(x, y)
    torch.testing.assert_close(y.double(), 2 * x.double())
    host = pytest.importorskip("tilelang.testing.host_cuda")
    if not host.available():
        pytest.skip("g++ not installed")
    y = torch.full((128, 8), float("nan"))
    host.HostProgram({"f": src}).run("f", [x, y])
    torch.testing.assert_close(y.double(), 2 * x.double())
