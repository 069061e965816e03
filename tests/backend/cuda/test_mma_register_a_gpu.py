"""mhc_pre's gemm_sqrsum on the GPU against float64: the tf32 A tile in registers (tl::gemm_rs, the
sum of squares on each thread's own slice, transform/cuda/offset_slices.py) and, with
`tl.disable_fragment_slice_offsets` / `tl.disable_mma_register_a`, through shared memory."""
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
