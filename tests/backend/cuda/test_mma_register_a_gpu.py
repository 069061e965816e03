"""mhc_pre's gemm_sqrsum on the GPU against float64: the tf32 A tile in registers (tl::gemm_rs, the
sum of squares on each thread's own slice, transform/cuda/offset_slices.py) and, with
`tl.disable_fragment_slice_offsets` / `tl.disable_mma_register_a`, through shared memory.
FlashAttention on mma.sync (tl.disable_wgmma on sm_90): its fp16 P in registers (tl::gemm_rs, the
accumulator layout of S) and, with `tl.disable_mma_register_a16`, through shared memory."""
import warnings

import pytest
import torch

import tilelang
from tilelang.testing import kernels

cuda = pytest.mark.cuda
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 8,
                               reason="needs an sm_80+ GPU")


@cuda
@needs_gpu
@pytest.mark.parametrize("cfg", [None, {"tl.disable_fragment_slice_offsets": True},
                                 {"tl.disable_mma_register_a": True}])
@pytest.mark.parametrize("hidden,hb", [(1024, 256), (512, 64)])
def test_gemm_sqrsum_matches_float64(cfg, hidden, hb):
    tokens = 256
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(kernels.gemm_sqrsum(tokens, hidden, 32, hb), pass_configs=cfg)
    assert ("tl::gemm_rs<" in k.get_kernel_source()) == (cfg is None)
    x, fn, out, sq = (t.cuda() for t in kernels.gemm_sqrsum_inputs(tokens, hidden, 41))
    k(x, fn, out, sq)
    torch.cuda.synchronize()
    kernels.gemm_sqrsum_check(x.cpu(), fn.cpu(), out.cpu(), sq.cpu())


@cuda
@needs_gpu
@pytest.mark.parametrize("a16_off", [False, True])
def test_mma_attention_p_in_registers_matches_float64(a16_off):
    B, S, H, D = 2, 512, 2, 64
    cfg = {"tl.disable_wgmma": True, "tl.disable_mma_register_a16": a16_off}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(kernels.attention(B, H, S, D, 64, 64, stages=2), pass_configs=cfg)
    src = k.get_kernel_source()
    assert ("tl::gemm_rs<64, 64, 64, 4, 1," in src) == (not a16_off), src[-2000:]
    g = torch.Generator().manual_seed(5)
    q, kk, v = (torch.randn(B, S, H, D, generator=g).half() for _ in range(3))
    o = torch.full((B, S, H, D), float("nan")).half().cuda()
    k(q.cuda(), kk.cuda(), v.cuda(), o)
    torch.cuda.synchronize()
    p = torch.softmax(torch.einsum("bqhd,bkhd->bhqk", q.double(), kk.double()) / D ** 0.5, -1)
    ref = torch.einsum("bhqk,bkhd->bqhd", p, v.double())
    assert (o.cpu().double() - ref).abs().max().item() < 2e-2
