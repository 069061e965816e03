"""The consumers' setmaxnreg budget in warp-specialized kernels (warp_specialize.consumer_registers).

setmaxnreg moves registers within the block's launch allocation: the 128-thread producer's decrease
to 40 frees (R - 40) x 128 registers, and a consumer increase that needs more waits forever. The
fp8 lighting indexer (4 consumer warpgroups, R = 96) asked for 112 and hung on the H200. Checked here
with the formula and on compiled kernels (NVRTC, no GPU); ptxas's fatal C7406 (a producer decrease
to more registers than the program uses, seen with --Ofast-compile) drops setmaxnreg instead."""
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
    r = min(255, 65536 // (threads + 128)) // 8 * 8  # the block's allocation under __launch_bounds__(n, 1)
    assert f"__launch_bounds__({threads + 128}, 1)" in src
    assert fits(threads, inc[0], r), (inc, r)


def test_fast_compile_small_kernel_drops_setmaxnreg():
    """fuzz (pipe seed 4): a 128x16 accumulator on 128 threads under --Ofast-compile=mid. ptxas
    reports 34 registers for it; a rebuild sized to that report (since removed: the block's pool is
    what __launch_bounds__ gives) asked setmaxnreg_dec<40> of a 24-register program, which ptxas
    refuses (C7406). It compiles warp-specialized with the usual 40 / 240."""
    M, N, K = 256, 24, 8

    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((N, K), T.bfloat16), O: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, 16), T.ceildiv(M, 128), threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 64), T.bfloat16)
            B_s = T.alloc_shared((16, 64), T.bfloat16)
            C = T.alloc_fragment((128, 16), T.float32)
            T.clear(C)
            for k in T.Pipelined(T.ceildiv(K, 64), num_stages=1):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[bx * 16, k * 64], B_s)
                T.gemm(A_s, B_s, C, transpose_B=True)
            T.copy(C, O[by * 128:by * 128 + 128, bx * 16:bx * 16 + 16])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(main, target="cuda -arch=sm_90a",
                             pass_configs={"tl.device_compile_flags": ["--Ofast-compile=mid"]})
    src = k.get_kernel_source()
    assert "tma_load" in src and "setmaxnreg_inc<240>" in src


def test_ptxas_c7406_drops_setmaxnreg(monkeypatch):
    """Where ptxas refuses the producer's decrease (C7406), the kernel is built again without
    setmaxnreg and stays warp-specialized (ptxas's refusal is simulated here)."""
    from tilelang.backend.cuda import pipeline
    from tilelang.errors import CompileError

    real = pipeline.compile_cached

    def refusing(source, arch, options=()):
        if "setmaxnreg_dec" in source:
            raise CompileError("ptxas fatal   : (C7406) setmaxnreg.dec has register count (40) which is larger "
                               "than the largest temporal register count in the program (24)")
        return real(source, arch, options)

    monkeypatch.setattr(pipeline, "compile_cached", refusing)
    monkeypatch.setenv("TILELANG_KERNEL_CACHE", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(gemm(128, 128, 128), target="cuda -arch=sm_90a")
    src = k.get_kernel_source()
    assert "tma_load" in src and "setmaxnreg" not in src
