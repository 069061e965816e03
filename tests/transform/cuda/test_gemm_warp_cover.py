"""Gemm warp counts whose even split would leave rows or columns of the accumulator to no warp
(a 104-column tile over 12 warps, 336 rows over 20, a 16 x 16 tile over 7): the public build rejects
these ("No valid warp partition"); here they compute every element. Fresh small-integer inputs against
float64 on the CPU backend, as sm_80 (mma.sync) and sm_90a CUDA on the host emulator, and on a GPU."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.language import GemmWarpPolicy


def _matmul(M, N, K, threads, policy):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, 1, threads=threads):
            A_shared = T.alloc_shared((M, K), "float16")
            B_shared = T.alloc_shared((K, N), "float16")
            C_frag = T.alloc_fragment((M, N), "float32")
            T.clear(C_frag)
            T.copy(A, A_shared)
            T.copy(B, B_shared)
            T.gemm(A_shared, B_shared, C_frag, policy=policy)
            T.copy(C_frag, C)

    return main


CASES = [
    (16, 104, 32, 384, GemmWarpPolicy.Square),    # 12 warps, 104 columns: 12 * (104 // 12) = 96
    (336, 16, 32, 640, GemmWarpPolicy.FullCol),   # 20 warps, 336 rows: 20 * 16 = 320
    (16, 16, 32, 224, GemmWarpPolicy.Square),     # 7 warps on one 16 x 16 tile
]


def _inputs(M, N, K, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(-2, 3, (M, K), generator=g).half(), torch.randint(-2, 3, (K, N), generator=g).half())


@pytest.mark.parametrize("M,N,K,threads,policy", CASES)
def test_every_element_on_cpu(M, N, K, threads, policy):
    a, b = _inputs(M, N, K, M + N)
    c = tilelang.compile(_matmul(M, N, K, threads, policy), out_idx=[2], target="cpu")(a, b)
    assert torch.equal(c.double(), a.double() @ b.double())


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("M,N,K,threads,policy", CASES)
def test_every_element_on_host(host, arch, M, N, K, threads, policy):
    k = tilelang.compile(_matmul(M, N, K, threads, policy), target=f"cuda -arch={arch}")
    a, b = _inputs(M, N, K, M * N)
    c = torch.full((M, N), float("nan"))
    prog = host.HostProgram({"main": k})
    prog.run("main", [a, b, c])
    prog.close()
    assert torch.equal(c.double(), a.double() @ b.double())


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("wgmma", [True, False])
@pytest.mark.parametrize("M,N,K,threads,policy", CASES)
def test_every_element_on_gpu(wgmma, M, N, K, threads, policy):
    cfg = {} if wgmma else {"tl.disable_wgmma": True}
    k = tilelang.compile(_matmul(M, N, K, threads, policy), out_idx=[2], target="cuda", pass_configs=cfg)
    a, b = _inputs(M, N, K, M - N)
    c = k(a.cuda(), b.cuda()).cpu()
    assert torch.equal(c.double(), a.double() @ b.double())
