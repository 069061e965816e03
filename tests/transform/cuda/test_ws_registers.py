"""The consumers' setmaxnreg budget in warp-specialized kernels (warp_specialize.consumer_registers).

setmaxnreg moves registers within the block's launch allocation: the 128-thread producer's decrease
to 40 frees (R - 40) x 128 registers, and a consumer increase that needs more waits forever. The
fp8 lighting indexer (4 consumer warpgroups, R = 96) asked for 112 and hung on the H200. Checked here
with the formula and with ptxas's own register count of compiled kernels (NVRTC, no GPU)."""
import re
import warnings

import pytest

import tilelang
import tilelang.language as T
from tilelang.transform.cuda.warp_specialize import consumer_registers


def fits(T_, inc, r):
    return (inc - r) * T_ <= (r - 40) * 128


@pytest.mark.parametrize("T_, want", [(128, 240), (256, 232), (384, 152), (512, 104)])
def test_budget_at_the_launch_bound(T_, want):
    r = min(255, 65536 // (T_ + 128)) // 8 * 8
    assert consumer_registers(T_) == want
    assert fits(T_, want, r) and (want == 240 or not fits(T_, want + 8, r))  # 240: the most asked for


@pytest.mark.parametrize("r", [64, 80, 96, 120, 168])
@pytest.mark.parametrize("T_", [128, 256, 384, 512])
def test_budget_from_a_smaller_launch_count(T_, r):
    if r * (T_ + 128) > 65536:
        pytest.skip("more registers than the register file")
    inc = consumer_registers(T_, r)
    assert fits(T_, inc, r) and inc % 8 == 0


def gemm(threads, bm, bn):
    @T.prim_func
    def main(A: T.Tensor((512, 512), T.float16), B: T.Tensor((512, 512), T.float16), C: T.Tensor((512, 512), T.float16)):
        with T.Kernel(512 // bn, 512 // bm, threads=threads) as (bx, by):
            a_s = T.alloc_shared((bm, 64), T.float16)
            b_s = T.alloc_shared((64, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(8, num_stages=3):
                T.copy(A[by * bm, k * 64], a_s)
                T.copy(B[k * 64, bx * bn], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("threads, bm, bn", [(128, 128, 128), (256, 128, 256), (512, 256, 128)])
def test_compiled_kernels_stay_within_their_launch_allocation(threads, bm, bn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(gemm(threads, bm, bn), target="cuda -arch=sm_90a")
    src = k.get_kernel_source()
    inc = [int(x) for x in re.findall(r"setmaxnreg_inc<(\d+)>", src)]
    assert inc, "expected a warp-specialized kernel"
    r = k.artifact.compiled.ptxas_info()["registers"]
    assert fits(threads, inc[0], r), (inc, r)
