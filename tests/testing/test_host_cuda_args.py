"""host_cuda's hidden kernel arguments: the T.device_assert flag (a failed assert raises, as the
CUDA launcher does) and zeroed workspaces (the debug timeline's records here; stream-K partials
take the same path)."""
import pytest
import torch

import tilelang
import tilelang.language as T


@pytest.fixture(scope="module")
def nvrtc_ok():
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")


def doubled_with_assert():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            T.device_assert(A[tx] < 100.0)
            B[tx] = A[tx] * 2

    return f


@pytest.mark.nvrtc
def test_device_assert_flag_raises_only_when_an_assert_fails(host, nvrtc_ok):
    k = tilelang.compile(doubled_with_assert(), target="cuda -arch=sm_90a")
    assert any(kind == "assert_flag" for kind, _ in k.artifact.csource.arg_kinds)
    prog = host.HostProgram({"f": k})
    a, b = torch.randn(64), torch.zeros(64)
    prog.run("f", [a, b])
    assert torch.equal(b, a * 2)
    a[5] = 1000.0
    with pytest.raises(AssertionError, match="T.device_assert number 1 failed"):
        prog.run("f", [a, b])
    prog.close()


def gemm(M, N, K):
    @T.prim_func
    def g(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 128), threads=256) as (bx, by):
            As = T.alloc_shared((128, 64), "float16")
            Bs = T.alloc_shared((128, 64), "float16")
            Cl = T.alloc_fragment((128, 128), "float32")
            T.clear(Cl)
            for k in T.Pipelined(T.ceildiv(K, 64), num_stages=3):
                T.copy(A[by * 128, k * 64], As)
                T.copy(B[bx * 128, k * 64], Bs)
                T.gemm(As, Bs, Cl, transpose_B=True)
            T.copy(Cl, C[by * 128, bx * 128])

    return g


@pytest.mark.nvrtc
def test_a_workspace_argument_runs_zeroed(host, nvrtc_ok):
    k = tilelang.compile(gemm(256, 256, 128), target="cuda -arch=sm_90a", pass_configs={"tl.debug_timeline": True})
    assert any(kind == "workspace" for kind, _ in k.artifact.csource.arg_kinds)
    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(256, 128, generator=g).half(), torch.randn(256, 128, generator=g).half()
    c = torch.full((256, 256), float("nan")).half()
    prog = host.HostProgram({"g": k})
    prog.run("g", [a, b, c])
    prog.close()
    ref = a.double() @ b.double().T
    assert (c.double() - ref).abs().max().item() <= 2e-3 * ref.abs().max().item()
