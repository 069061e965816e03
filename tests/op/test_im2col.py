"""T.im2col: convolutions through the im2col tile against float64 torch conv2d, on the CPU backend
and (marked cuda) on the GPU; its CUDA forms: vectors of channels moved by cp.async with zero-fill,
pipelined like T.copy stages, and the element loop where channels do not make whole vectors."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T

cuda = pytest.mark.cuda


def conv_kernel(N, H, W, C, F, K, S, D, P, bM, bN, bK, stages, threads, dtype):
    OH, OW = (H + 2 * P - D * (K - 1) - 1) // S + 1, (W + 2 * P - D * (K - 1) - 1) // S + 1
    acc_t = "float32" if dtype != "float64" else "float64"

    @T.prim_func
    def conv(data: T.Tensor((N, H, W, C), dtype), kern: T.Tensor((K * K * C, F), dtype),
             out: T.Tensor((N * OH * OW, F), acc_t)):
        with T.Kernel(T.ceildiv(F, bN), T.ceildiv(N * OH * OW, bM), threads=threads) as (bx, by):
            d_s = T.alloc_shared((bM, bK), dtype)
            k_s = T.alloc_shared((bK, bN), dtype)
            acc = T.alloc_fragment((bM, bN), acc_t)
            T.clear(acc)
            for ki in T.Pipelined(T.ceildiv(K * K * C, bK), num_stages=stages):
                T.im2col(data, d_s, by, ki, K, S, D, P)
                T.copy(kern[ki * bK, bx * bN], k_s)
                T.gemm(d_s, k_s, acc)
            T.copy(acc, out[by * bM, bx * bN])

    return conv, OH, OW


def reference(x, w, S, D, P):
    ref = torch.nn.functional.conv2d(x.double().permute(0, 3, 1, 2), w.double().permute(3, 2, 0, 1),
                                     stride=S, padding=P, dilation=D)
    return ref.permute(0, 2, 3, 1).reshape(-1, w.shape[-1])


CASES = [  # N, H, W, C, F, K, S, D, P, bM, bN, bK
    (2, 9, 7, 16, 32, 3, 1, 1, 1, 32, 32, 16),   # vectors of 8 halves, ragged last row block
    (1, 11, 10, 24, 16, 3, 2, 2, 2, 16, 16, 8),  # stride 2, dilation 2: bK < C
    (2, 6, 6, 3, 16, 3, 1, 1, 0, 16, 16, 16),    # C = 3: no whole vectors, the element loop
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_im2col_conv_cpu_matches_float64(case, dtype):
    N, H, W, C, F, K, S, D, P, bM, bN, bK = case
    fn, OH, OW = conv_kernel(N, H, W, C, F, K, S, D, P, bM, bN, bK, 2, 128, dtype)
    f = tilelang.compile(fn, target="cpu")
    tt = getattr(torch, dtype)
    x, w = torch.randn(N, H, W, C).to(tt), torch.randn(K, K, C, F).to(tt)
    out = torch.full((N * OH * OW, F), float("nan"))
    f(x, w.reshape(K * K * C, F), out)
    tol = 2e-3 if dtype == "float16" else 1e-5
    torch.testing.assert_close(out.double(), reference(x, w, S, D, P), rtol=tol, atol=tol)


def _source(case, dtype, arch, stages=3):
    N, H, W, C, F, K, S, D, P, bM, bN, bK = case
    fn, _, _ = conv_kernel(N, H, W, C, F, K, S, D, P, bM, bN, bK, stages, 128, dtype)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        src = tilelang.compile(fn, target=f"cuda -arch={arch}").get_kernel_source()
    return src, [str(w.message) for w in got]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_im2col_vectors_are_pipelined_cp_async(arch):
    src, msgs = _source(CASES[0], "float16", arch)
    # one 16-byte zero-filling cp.async per 8 channels, written into the pipeline's write stage
    assert "tl::cp_async_zfill<16>(&d_s_w[" in src
    # 3 stages: sm_90 refills before the wait (3 loads in flight), sm_80 after (2)
    assert ("tl::cp_async_wait<2>()" if arch == "sm_90a" else "tl::cp_async_wait<1>()") in src
    if arch == "sm_90a":
        # (a 32x32 tile has no wgmma form: no warp specialization, so no TMA im2col producer)
        assert any("no warp specialization (TMA pipeline): T.gemm d_s x k_s cannot use wgmma" in m for m in msgs), msgs


def test_im2col_without_whole_vectors_warns_and_loops():
    src, msgs = _source(CASES[2], "float16", "sm_90a")
    assert "cp_async_zfill<16>(&d_s" not in src
    assert any("scalar accesses" in m for m in msgs), msgs


@cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("case", CASES)
def test_im2col_conv_cuda_matches_float64(case):
    N, H, W, C, F, K, S, D, P, bM, bN, bK = case
    fn, OH, OW = conv_kernel(N, H, W, C, F, K, S, D, P, bM, bN, bK, 3, 128, "float16")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = tilelang.compile(fn, target="cuda")
    x = torch.randn(N, H, W, C, device="cuda").half()
    w = torch.randn(K, K, C, F, device="cuda").half()
    out = torch.full((N * OH * OW, F), float("nan"), device="cuda")
    f(x, w.reshape(K * K * C, F), out)
    torch.cuda.synchronize()
    torch.testing.assert_close(out.double().cpu(), reference(x.cpu(), w.cpu(), S, D, P), rtol=2e-3, atol=2e-3)
