"""The seed program's configuration (128 threads, 128x128x32, 3 stages) on the GPU: one
consumer warpgroup, the deepened TMA ring and the deferred TMA-store epilogue, against float64,
with ragged tiles, a ragged K tile and several tiles per persistent block (deferred chunks are
stored during the next tile's k-loop and after the last)."""
import warnings

import pytest
import torch

import tilelang
from tilelang.testing import kernels as tk

CASES = [  # M, N, K
    (1024, 1024, 1024),
    (1000, 904, 504),    # ragged M, N and K tiles (rows of 16-byte multiples: TMA)
    (4096, 2048, 1024),  # 512 tiles: ~4 per block of a 132-SM part
    (384, 256, 4096),    # long k-loop, fewer tiles than blocks
]
CONFIGS = {"default": {}, "user_stages": {"tl.disable_deep_ring": True},
           "no_defer": {"tl.disable_deferred_epilogue": True}}


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("configs", sorted(CONFIGS))
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_seed_config_matches_float64(case, configs, dtype):
    M, N, K = case
    f = tk.gemm(M, N, K, 128, 128, 32, 128, 3, dtype, out_dtype=dtype, relu=True, swizzle=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(f, target="cuda", pass_configs=CONFIGS[configs])
    tdt = getattr(torch, dtype)
    a = torch.randn(M, K, device="cuda", dtype=tdt)
    b = torch.randn(K, N, device="cuda", dtype=tdt)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=tdt)
    k(a, b, c)
    torch.cuda.synchronize()
    ref = torch.relu(a.double() @ b.double())
    assert not torch.isnan(c).any(), "unwritten output elements"
    err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
    assert err < 1e-2, f"{case} {configs} {dtype}: relative error {err}"
