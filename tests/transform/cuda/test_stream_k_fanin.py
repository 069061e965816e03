"""Stream-K's fan-in limit (stream_k.MAX_FANIN, `tl.stream_k_max_fanin`): the last wave's tiles are cut
into at most that many k-ranges, and every partial is added once. A persistent sm_90a GEMM with 4 tiles
on 132 blocks (all stream-K) runs on the host emulator against float64 at the default limit: 24 ranges
of the 32 the 8-k-step minimum allows (test_warp_specialize.py's units test checks each tile's cut)."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.transform.cuda import stream_k

M = N = 256
K = 2048  # 64 k-steps of 32 a tile: 4 tiles make 256 k-steps, 32 ranges at the 8-step minimum


def _gemm(M=M, N=N, K=K, out="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), out)):
        with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 128), threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 32), "float16")
            B_s = T.alloc_shared((32, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(K // 32, num_stages=3):
                T.copy(A[by * 128, ko * 32], A_s)
                T.copy(B[ko * 32, bx * 128], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 128, bx * 128])

    return main


@pytest.mark.nvrtc
@pytest.mark.parametrize("fanin,ranges", [(None, 24)])
def test_stream_k_fanin_limit_adds_every_partial_once(host, fanin, ranges):
    conf = {} if fanin is None else {"tl.stream_k_max_fanin": fanin}
    k = tilelang.compile(_gemm(), target="cuda -arch=sm_90a", pass_configs=conf)
    assert "tl_sk_ws" in k.get_kernel_source()
    assert stream_k.ranges(4, K // 32, 132, stream_k.MAX_FANIN if fanin is None else fanin) == ranges
    g = torch.Generator().manual_seed(ranges)
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
        k = tilelang.compile(_gemm(8192, 8192, 8192, "float16"), target="cuda -arch=sm_90a")
    src = k.get_kernel_source()
    assert "tl_sk_ws" in src and "for (int ko_n = 0; ko_n < (tl_k1 - tl_k0); ++ko_n) {" in src
    assert "are serialized" not in (k.artifact.compiled.log or "")
