"""Warp specialization by hand (T.ws + mbarriers + T.tma_copy, the public TileLang's
warp_specialize examples' shape) on the GPU, against a float64 reference."""
import warnings

import pytest
import torch

import tilelang
from tilelang.testing.kernels import ws_gemm

cuda = pytest.mark.cuda
needs_hopper = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                  reason="needs an sm_90 GPU")

VARIANTS = [
    dict(consumer=0),                                   # copy_1_gemm_0 / softpipe_stage2
    dict(consumer=1),                                   # copy_0_gemm_1: fragments on warp group 1
    dict(consumer=0, stages=2, pipelined=False),        # barrierpipe_stage2: full/empty per stage
    dict(consumer=1, stages=2, set_nreg=True),
]
SHAPES = [(1024, 1024, 1024), (300, 264, 448)]  # aligned; ragged M / N tiles (TMA zero-fills)


@cuda
@needs_hopper
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kw", VARIANTS, ids=lambda kw: "-".join(f"{k}{int(v)}" for k, v in kw.items()))
def test_ws_gemm_matches_float64(kw, shape):
    M, N, K = shape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(ws_gemm(M, N, K, **kw), target="cuda")
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    for _ in range(3):  # repeated launches: barrier phases start fresh in every block
        k(a, b, c)
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
        assert err < 1e-2, f"{kw} {shape}: relative error {err}"
