"""One shared tile feeding a wgmma gemm and an mma.sync gemm (FlashAttention backward: K_shared is
wgmma's K-major A operand for Q.K^T and mma.sync's B operand for dS^T.K). wgmma keeps 16-bit rows
longer than 128 B in 64-column panels, so the mma.sync gemm must read panels too; it read the plain
swizzle, and dQ was wrong in 97 % of elements with no error."""
import pytest
import torch

import tilelang
import tilelang.language as T
import tilelang.testing

M, N, D = 128, 32, 128


@T.prim_func
def mixed(Km: T.Tensor((M, D), "float16"), Q: T.Tensor((N, D), "float16"), S: T.Tensor((M, N), "float32"),
          O: T.Tensor((N, D), "float32")):
    with T.Kernel(1, threads=256) as bx:
        k_sh = T.alloc_shared((M, D), "float16")
        q_sh = T.alloc_shared((N, D), "float16")
        s = T.alloc_fragment((M, N), "float32")
        s_sh = T.alloc_shared((M, N), "float16")
        o = T.alloc_fragment((N, D), "float32")
        T.copy(Km, k_sh)
        T.copy(Q, q_sh)
        T.clear(s)
        T.gemm(k_sh, q_sh, s, transpose_B=True)      # wgmma: k_sh is a K-major A operand (panels)
        T.copy(s, S)
        T.copy(s, s_sh)
        T.clear(o)
        T.gemm(s_sh, k_sh, o, transpose_A=True)      # mma.sync (transposed A): k_sh as B
        T.copy(o, O)


def _reference(k, q):
    s = k.double() @ q.double().T
    return s, s.half().double().T @ k.double()


def test_mma_sync_reads_wgmma_panels():
    pytest.importorskip("cuda.bindings")
    src = tilelang.compile(mixed, target="cuda -arch=sm_90a").get_kernel_source()
    assert "tl::gemm_ss_sm90<" in src
    call = [line for line in src.splitlines() if "tl::gemm_ss<" in line]
    assert len(call) == 1 and f"tl::half_t, 0, {M}>(s_sh, k_sh" in call[0], call


def test_mixed_gemm_cpu():
    k, q = torch.randn(M, D).half(), torch.randn(N, D).half()
    s, o = torch.full((M, N), float("nan")), torch.full((N, D), float("nan"))
    tilelang.compile(mixed, target="cpu")(k, q, s, o)
    s_ref, o_ref = _reference(k, q)
    torch.testing.assert_close(s.double(), s_ref, rtol=1e-3, atol=1e-2)
    torch.testing.assert_close(o.double(), o_ref, rtol=1e-2, atol=5e-1)


@tilelang.testing.requires_cuda
def test_mixed_gemm_cuda():
    k, q = torch.randn(M, D, device="cuda").half(), torch.randn(N, D, device="cuda").half()
    s = torch.full((M, N), float("nan"), device="cuda")
    o = torch.full((N, D), float("nan"), device="cuda")
    tilelang.compile(mixed, target="cuda")(k, q, s, o)
    s_ref, o_ref = _reference(k.cpu(), q.cpu())
    torch.testing.assert_close(s.cpu().double(), s_ref, rtol=1e-3, atol=1e-2)
    torch.testing.assert_close(o.cpu().double(), o_ref, rtol=1e-2, atol=5e-1)
