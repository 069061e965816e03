"""The asynchronous expert tier on an sm_90 GPU against float64: rows gathered with per-thread
T.ptx_cp_async completing on T.cp_async_barrier_noinc, multiplied with T.wgmma_gemm /
T.wait_wgmma on 128-column slices of a 2-stage tile (the sparse MLA examples' shape)."""
import warnings

import pytest
import torch

import tilelang
from tilelang.testing.kernels import gather_gemm

cuda = pytest.mark.cuda
needs_hopper = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                  reason="needs an sm_90 GPU")


@cuda
@needs_hopper
@pytest.mark.parametrize("K, nblk", [(256, 3), (128, 6)])
def test_gather_gemm_matches_float64(K, nblk):
    M, N, R = 64, 64, 1000
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(gather_gemm(M, N, K, R, nblk), target="cuda -arch=sm_90a")
    a = torch.randn(M, K, dtype=torch.float16, device="cuda")
    bg = torch.randn(R, K, dtype=torch.float16, device="cuda")
    idx = torch.randperm(R, device="cuda")[: nblk * N].to(torch.int32)
    out = torch.full((M, nblk * N), float("nan"), device="cuda")
    k(a, bg, idx, out)
    torch.cuda.synchronize()
    ref = a.double() @ bg.double()[idx.long()].T
    err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
    assert err < 1e-3, err
