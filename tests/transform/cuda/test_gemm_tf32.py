"""T.gemm on tfloat32 tiles takes the tensor cores: mma.sync m16n8k8 (tl::gemm_ss on float), its
A and B loaded with ldmatrix where the tile is K-contiguous and with 32-bit shared loads where it
is not (ldmatrix's transpose moves 16-bit elements). Checked on the CPU backend and the GPU
against float64 with the tf32 error bound, and in the NVRTC SASS (HMMA...TF32) for sm_80 and
sm_90a. The peer suite's deepseek_mhc pre kernel ran this gemm on CUDA cores."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
import tilelang.testing

M, N, K = 64, 32, 64


def tf32_gemm(ta, tb, threads=128):
    """K in steps of 32 through a 2-stage cp.async pipeline (tl::gemm_ss_pipe's mainloop)."""
    a_shape, b_shape = ((K, M) if ta else (M, K)), ((N, K) if tb else (K, N))
    as_, bs_ = ((32, M) if ta else (M, 32)), ((N, 32) if tb else (32, N))

    @T.prim_func
    def main(A: T.Tensor(a_shape, "float32"), B: T.Tensor(b_shape, "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as _bx:
            a_s = T.alloc_shared(as_, "tfloat32")
            b_s = T.alloc_shared(bs_, "tfloat32")
            c = T.alloc_fragment((M, N), "float32")
            T.clear(c)
            for ko in T.Pipelined(K // 32, num_stages=2):
                T.copy(A[ko * 32, 0] if ta else A[0, ko * 32], a_s)
                T.copy(B[0, ko * 32] if tb else B[ko * 32, 0], b_s)
                T.gemm(a_s, b_s, c, transpose_A=ta, transpose_B=tb)
            T.copy(c, C)

    return main


def whole_tiles(ta, tb):
    """The same gemm over whole tiles (one K step): the form tl::gemm_ss takes."""
    a_shape = (K, M) if ta else (M, K)
    b_shape = (N, K) if tb else (K, N)

    @T.prim_func
    def main(A: T.Tensor(a_shape, "float32"), B: T.Tensor(b_shape, "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            a_s = T.alloc_shared(a_shape, "tfloat32")
            b_s = T.alloc_shared(b_shape, "tfloat32")
            c = T.alloc_fragment((M, N), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.gemm(a_s, b_s, c, transpose_A=ta, transpose_B=tb, clear_accum=True)
            T.copy(c, C)

    return main


def run(kern, ta, tb, device):
    a = torch.randn((K, M) if ta else (M, K))
    b = torch.randn((N, K) if tb else (K, N))
    am, bm = (a.T if ta else a).double(), (b.T if tb else b).double()
    ref, bound = am @ bm, am.abs() @ bm.abs()
    c = torch.full((M, N), float("nan"), device=device)
    kern(a.to(device), b.to(device), c)
    err = (c.cpu().double() - ref).abs()
    assert not torch.isnan(c).any()
    assert (err <= 2e-3 * bound + 1e-6).all(), (err / bound).max()  # tf32: 10 mantissa bits per product
    assert err.max() > 0 or device == "cpu"  # tf32 inputs, not fp32: a float32 gemm would be exact-ish


COMBOS = [(False, True), (False, False), (True, True), (True, False)]


@pytest.mark.parametrize("ta, tb", COMBOS)
def test_tf32_gemm_cpu(ta, tb):
    for f in (whole_tiles(ta, tb), tf32_gemm(ta, tb)):
        run(tilelang.compile(f, target="cpu"), ta, tb, "cpu")


@pytest.mark.parametrize("ta, tb", COMBOS)
def test_tf32_pipelined_gemm_source(ta, tb):
    from tilelang.backend.cuda import nvrtc

    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC not installed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        src = tilelang.compile(tf32_gemm(ta, tb), target="cuda -arch=sm_80").get_kernel_source()
    assert "tl::gemm_ss" in src and ", float" in src and "HMMA" not in src, src


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("ta, tb", COMBOS)
def test_tf32_gemm_takes_mma_sync(arch, ta, tb):
    from tilelang.backend.cuda import nvrtc, sass

    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC not installed")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        k = tilelang.compile(whole_tiles(ta, tb), target=f"cuda -arch={arch}")
    src = k.get_kernel_source()
    assert f"tl::gemm_ss<{M}, {N}, {K}," in src and ", float>(" in src, src
    assert not [w for w in rec if "CUDA cores" in str(w.message)]
    if sass.sass_available():
        text = sass.disassemble(k.artifact.compiled.cubin)
        assert "HMMA.1688.F32.TF32" in text
        assert ("LDSM" in text) == (not ta or tb)  # ldmatrix wherever one operand is K-contiguous


@tilelang.testing.requires_cuda
@pytest.mark.parametrize("ta, tb", COMBOS)
def test_tf32_gemm_gpu(ta, tb):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for f in (whole_tiles(ta, tb), tf32_gemm(ta, tb)):
            run(tilelang.compile(f, target="cuda"), ta, tb, "cuda")
