"""Stream-K's fan-in limit (stream_k.MAX_FANIN, `tl.stream_k_max_fanin`): the last wave's tiles are cut
into at most that many k-ranges, and every partial is added once. A persistent sm_90a GEMM with 4 tiles
on 132 blocks (all stream-K) runs on the host emulator against float64 at the default limit: 24 ranges
of the 32 the 8-k-step minimum allows (test_warp_specialize.py's units test checks each tile's cut)."""
import pytest
import torch

import tilelang
from tilelang.testing import kernels
from tilelang.transform.cuda import stream_k

M = N = 256
K = 2048  # 64 k-steps of 32 a tile: 4 tiles make 256 k-steps, 32 ranges at the 8-step minimum


@pytest.mark.nvrtc
def test_stream_k_fanin_limit_adds_every_partial_once(host):
    k = tilelang.compile(kernels.gemm(M, N, K, 128, 128, 32), target="cuda -arch=sm_90a")
    assert "tl_sk_ws" in k.get_kernel_source()
    assert stream_k.ranges(4, K // 32, 132) == 24 == 4 * stream_k.MAX_FANIN
    g = torch.Generator().manual_seed(24)
    a = torch.randint(-2, 3, (M, K), generator=g).half()
    b = torch.randint(-2, 3, (K, N), generator=g).half()
    c = torch.full((M, N), float("nan"))
    prog = host.HostProgram({"main": k})
    try:
        prog.run("main", [a, b, c])
    finally:
        prog.close()
    assert torch.equal(c.double(), a.double() @ b.double())


@pytest.mark.nvrtc
def test_stream_k_unit_loop_keeps_wgmma_pipelined():
    """The seed GEMM's tiles at 8192^3 (128 threads, 128x128x32, 3 stages: 4 tiles left for stream-K): its
    consumers' loop over a unit's [k0, k1) is printed counting from 0, and ptxas pipelines its wgmma
    (printed from k0, ptxas serialized them: C7515, 397 against 620 TFLOP/s on an H100)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(kernels.gemm(8192, 8192, 8192, 128, 128, 32, out_dtype="float16"), target="cuda -arch=sm_90a")
    src = k.get_kernel_source()
    assert "tl_sk_ws" in src and "for (int ko_n = 0; ko_n < (tl_k1 - tl_k0); ++ko_n) {" in src
    assert "are serialized" not in (k.artifact.compiled.log or "")
