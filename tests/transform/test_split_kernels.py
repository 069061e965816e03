"""prim_funcs with several `with T.Kernel` blocks and T.alloc_global workspaces: the launch plan,
split-then-combine on the CPU backend against float64 torch, and the CUDA module (NVRTC,
compile-only: one __global__ per kernel, each with its own threads and shared memory)."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangError
from tilelang.transform.split_kernels import is_multi_kernel, split_kernels


def split_rowsum(N, S, block=8, threads_split=128, threads_combine=64):
    """Out[m] = sum_n A[m, n]: kernel 0 reduces each of S column chunks into part[m, s] (a
    workspace), kernel 1 adds the S partials. M is symbolic: part's shape follows it."""
    M = T.dynamic("M")
    chunk = N // S

    @T.prim_func
    def rowsum(A: T.Tensor((M, N), "float64"), Out: T.Tensor((M,), "float64")):
        part = T.alloc_global((M, S), "float64")
        with T.Kernel(T.ceildiv(M, block), S, threads=threads_split) as (bx, s):
            tile = T.alloc_shared((block, chunk), "float64")
            acc = T.alloc_fragment((block,), "float64")
            T.copy(A[bx * block, s * chunk], tile)
            T.reduce_sum(tile, acc, dim=1)
            for i in T.Parallel(block):
                if bx * block + i < M:
                    part[bx * block + i, s] = acc[i]
        with T.Kernel(T.ceildiv(M, block), threads=threads_combine) as bx:
            total = T.alloc_fragment((block,), "float64")
            T.clear(total)
            for s in T.serial(S):
                for i in T.Parallel(block):
                    if bx * block + i < M:
                        total[i] += part[bx * block + i, s]
            for i in T.Parallel(block):
                if bx * block + i < M:
                    Out[bx * block + i] = total[i]
    return rowsum


def chain(M):
    """Three kernels in order, each reading what the one before wrote: B = A + 1, C = 2B, B = C - A."""
    @T.prim_func
    def chain3(A: T.Tensor((M,), "float64"), B: T.Tensor((M,), "float64"), C: T.Tensor((M,), "float64")):
        with T.Kernel(T.ceildiv(M, 32), threads=32) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < M:
                    B[bx * 32 + i] = A[bx * 32 + i] + 1.0
        with T.Kernel(T.ceildiv(M, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < M:
                    C[bx * 64 + i] = B[(M - 1) - (bx * 64 + i)] * 2.0
        with T.Kernel(1, threads=128) as _:
            for i in T.serial(M):
                B[i] = C[i] - A[i]
    return chain3


def test_launch_plan():
    f = split_rowsum(24, 3)
    assert is_multi_kernel(f) and is_multi_kernel(chain(8))

    @T.prim_func
    def one(A: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as _:
            A[0] = 1.0

    assert not is_multi_kernel(one) and [k.name for k in split_kernels(one).kernels] == ["one"]
    plan = split_kernels(f)
    assert [k.name for k in plan.kernels] == ["rowsum_kernel_0", "rowsum_kernel_1"]
    assert [b.name for b in plan.workspaces] == ["part"] and plan.workspaces[0].scope == "global"
    for k in plan.kernels:
        assert k.params == f.params + plan.workspaces
    assert "workspaces: part(M, 3):float64" in str(plan)
    assert "T.alloc_global" in str(f)


@pytest.mark.parametrize("m", [37, 8])
def test_split_then_combine_cpu(m):
    k = tilelang.compile(split_rowsum(24, 3), target="cpu")
    a = torch.randn(m, 24, dtype=torch.float64)
    out = torch.full((m,), float("nan"), dtype=torch.float64)
    k(a, out)
    torch.testing.assert_close(out, a.sum(1), rtol=1e-12, atol=1e-12)


def test_kernels_run_in_order_cpu():
    m = 50
    k = tilelang.compile(chain(m), out_idx=[1, 2], target="cpu")
    a = torch.randn(m, dtype=torch.float64)
    b, c = k(a)
    c_ref = (a + 1).flip(0) * 2
    torch.testing.assert_close(c, c_ref, rtol=0, atol=0)
    torch.testing.assert_close(b, c_ref - a, rtol=0, atol=0)


@tilelang.jit(target="cpu")
def eager_scale_by_mean(X, block: int = 16):
    """Two kernels in eager mode: column means into a workspace, then X / mean."""
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.float64)
    Y = T.empty((M, N), T.float64)
    mean = T.alloc_global((N,), T.float64)
    with T.Kernel(N, threads=32) as j:
        acc = T.alloc_var(T.float64, init=0.0)
        for i in T.serial(M):
            acc += X[i, j]
        mean[j] = acc / M
    with T.Kernel(T.ceildiv(M, block), threads=64) as bx:
        for i, j in T.Parallel(block, N):
            if bx * block + i < M:
                Y[bx * block + i, j] = X[bx * block + i, j] / mean[j]
    return Y


def test_eager_two_kernels_with_workspace_cpu():
    x = torch.rand(21, 6, dtype=torch.float64) + 0.5
    torch.testing.assert_close(eager_scale_by_mean(x), x / x.mean(0), rtol=1e-12, atol=1e-12)
    src = eager_scale_by_mean.get_kernel_source(x)
    assert src.count("#pragma omp parallel\n") == 2


def test_alloc_global_misuse():
    with pytest.raises(TileLangError, match="outside `with T.Kernel"):
        @T.prim_func
        def inside(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as _:
                T.alloc_global((8,), "float32")
    with pytest.raises(TileLangError, match="scope must be 'global'"):
        @T.prim_func
        def scoped(A: T.Tensor((8,), "float32")):
            T.alloc_global((8,), "float32", scope="shared")
            with T.Kernel(1, threads=32) as _:
                A[0] = 1.0


def _nvrtc():
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")


@pytest.mark.nvrtc
def test_two_kernels_are_two_globals_in_one_module_sm90a():
    _nvrtc()
    k = tilelang.compile(split_rowsum(64, 2, block=16, threads_split=128, threads_combine=64),
                         target="cuda -arch=sm_90a")
    src = k.get_kernel_source()
    assert src.count('extern "C" __global__') == 2 and src.count('#include "tl/tl.h"') == 1
    assert "__launch_bounds__(128, 1) rowsum_kernel_0(" in src and "__launch_bounds__(64, 1) rowsum_kernel_1(" in src
    k0, k1 = k.artifact.kernels
    assert (k0.csource.threads, k1.csource.threads) == (128, 64)
    assert k0.csource.smem_bytes >= 16 * 32 * 8 and k1.csource.smem_bytes < k0.csource.smem_bytes
    assert k0.compiled is k1.compiled  # one NVRTC module
    for kk in (k0, k1):  # both take A, Out, the workspace (and the symbolic dim)
        assert [kind for kind, _ in kk.csource.arg_kinds] == ["buffer", "buffer", "buffer", "dim"]


def _gpu():
    return torch.cuda.is_available()


@pytest.mark.cuda
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA GPU")
def test_split_then_combine_cuda():
    k = tilelang.compile(split_rowsum(64, 4, block=16), target="cuda")
    a = torch.randn(45, 64, dtype=torch.float64, device="cuda")
    out = torch.full((45,), float("nan"), dtype=torch.float64, device="cuda")
    k(a, out)
    torch.testing.assert_close(out, a.sum(1), rtol=1e-12, atol=1e-12)
    x = torch.randn(300, dtype=torch.float64, device="cuda")
    b, c = tilelang.compile(chain(300), out_idx=[1, 2], target="cuda")(x)
    torch.testing.assert_close(c, (x + 1).flip(0) * 2, rtol=0, atol=0)
    torch.testing.assert_close(b, c - x, rtol=0, atol=0)
