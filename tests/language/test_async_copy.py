"""T.async_copy: a global -> shared tile copy started with cp.async and committed, with no wait; the
program waits (T.ptx_wait_group) and the compiler puts the barrier before the first read of the tile.
CPU backend, host emulator (sm_80 / sm_90a sources) and GPU against float64 on fresh random inputs."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import DSLTypeError
from tilelang.testing import host_cuda_or_skip

M, N, BM, BN = 96, 128, 32, 64


def two_tiles():
    @T.prim_func
    def f(A: T.Tensor((M, N), "float16"), Bm: T.Tensor((M, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // BN, M // BM, threads=128) as (bx, by):
            As = T.alloc_shared((BM, BN), "float16")
            Bs = T.alloc_shared((BM, BN), "float16")
            T.async_copy(A[by * BM, bx * BN], As)
            T.async_copy(Bm[by * BM:(by + 1) * BM, bx * BN:(bx + 1) * BN], Bs)
            T.ptx_wait_group(0)
            for i, j in T.Parallel(BM, BN):
                C[by * BM + i, bx * BN + j] = T.Cast("float32", As[i, j]) * T.Cast("float32", Bs[BM - 1 - i, j])
    return f


def reference(a, b):
    a, b = a.double(), b.double()
    return a * b.view(M // BM, BM, N).flip(1).reshape(M, N)


def inputs(device="cpu"):
    a, b = torch.randn(M, N, dtype=torch.float16), torch.randn(M, N, dtype=torch.float16)
    return a.to(device), b.to(device), torch.full((M, N), float("nan"), device=device)


def test_async_copy_on_cpu():
    a, b, c = inputs()
    tilelang.compile(two_tiles(), target="cpu")(a, b, c)
    torch.testing.assert_close(c.double(), reference(a, b))


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_async_copy_source_and_host_emulator(arch):
    host = host_cuda_or_skip()
    k = tilelang.compile(two_tiles(), target=f"cuda -arch={arch}")
    src = k.get_kernel_source()
    assert src.count("tl::cp_async_zfill<16>") == 2 and src.count("tl::cp_async_commit();") == 2
    assert "tl::cp_async_wait<0>();" in src and src.count("cp_async_wait") == 1  # the program's wait only
    assert src.index("cp_async_wait") < src.index("__syncthreads();")  # the barrier after the program's wait
    a, b, c = inputs()
    host.HostProgram({"f": k}).run("f", [a, b, c])
    torch.testing.assert_close(c.double(), reference(a, b))


def one_element_copies(dtype):
    @T.prim_func
    def f(A: T.Tensor((16,), dtype), Idx: T.Tensor((4,), "int32"), B: T.Tensor((16,), dtype)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((16,), dtype)
            T.fill(S, 0)
            for k in T.serial(4):
                T.async_copy(A[Idx[k]], S[15 - k], annotations={"note": 1})  # two corners: one element
            T.ptx_wait_group(0)
            T.copy(S, B)
    return f


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_async_copy_of_one_element(dtype):
    tdt = getattr(torch, dtype)
    a = (torch.randn(16) * 100).to(tdt)
    idx = torch.randperm(16)[:4].to(torch.int32)
    b = torch.full((16,), 7, dtype=tdt)
    tilelang.compile(one_element_copies(dtype), target="cpu")(a, idx, b)
    expect = torch.zeros(16, dtype=tdt)
    for k in range(4):
        expect[15 - k] = a[idx[k]]
    assert torch.equal(b, expect)


@pytest.mark.nvrtc
def test_async_copy_of_one_element_host_emulator():
    host = host_cuda_or_skip()
    k = tilelang.compile(one_element_copies("float16"), target="cuda -arch=sm_80")
    a = torch.randn(16, dtype=torch.float16)
    idx = torch.tensor([3, 0, 9, 15], dtype=torch.int32)
    b = torch.full((16,), 7, dtype=torch.float16)
    host.HostProgram({"f": k}).run("f", [a, idx, b])
    expect = torch.zeros(16, dtype=torch.float16)
    expect[[15, 14, 13, 12]] = a[[3, 0, 9, 15]]
    assert torch.equal(b, expect)


def test_async_copy_needs_global_to_shared():
    with pytest.raises(DSLTypeError, match=r"global -> shared.*S \(shared.*\) -> Bm \(global\)"):
        @T.prim_func
        def f(A: T.Tensor((64,), "float32"), Bm: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                S = T.alloc_shared((64,), "float32")
                T.copy(A, S)
                T.async_copy(S, Bm)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_async_copy_on_the_gpu():
    a, b, c = inputs("cuda")
    tilelang.compile(two_tiles(), target="cuda")(a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.double().cpu(), reference(a.cpu(), b.cpu()))
