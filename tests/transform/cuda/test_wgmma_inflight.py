"""wgmma batches left in flight across a cp.async pipeline's iterations (wgmma_inflight.py):
an im2col convolution on sm_90a (kept off the TMA im2col producer by tl.disable_tma_im2col) issues its
gemm with kWait = 1, refills the stage of the previous iteration after a barrier that follows
the gemm, and waits for the last batch after the loop; run on the host emulator (which
delivers wgmma results only at their wait) against float64 torch conv2d. Gemms whose batch must
finish inside the iteration keep the old order."""
import re
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T

from tests.op.test_im2col import conv_kernel, reference


def _compile(fn, arch="sm_90a", **configs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(fn, target=f"cuda -arch={arch}", pass_configs=configs or None)


def _loop(src: str, var: str) -> str:
    return src.split(f"for (int {var} = 0;")[1]


CONV = (2, 9, 7, 32, 64, 3, 1, 1, 1, 64, 64, 32)  # N, H, W, C, F, K, S, D, P, bM, bN, bK: wgmma m64
CP_ASYNC = {"tl.disable_tma_im2col": True}  # else the loop is warp-specialized (ws_im2col.py)


@pytest.mark.parametrize("stages", [2, 3])
def test_conv_gemm_stays_in_flight(stages, run_on_host):
    N, H, W, C, F, K, S, D, P, bM, bN, bK = CONV
    fn, OH, OW = conv_kernel(N, H, W, C, F, K, S, D, P, bM, bN, bK, stages, 128, "float16")
    kern = _compile(fn, **CP_ASYNC)
    src = kern.get_kernel_source()
    loop = _loop(src, "ki")
    body, after = loop.split("tl::cp_async_commit();\n  }", 1)
    gemm = re.search(r"tl::gemm_ss_sm90<[^>]*, (-?\d+)>\(", body)
    assert gemm and gemm.group(1) == "1", body
    # wait for this stage, gemm, a barrier, then the refill of the previous iteration's stage
    wait = body.index(f"tl::cp_async_wait<{stages - 2}>();")
    refill = body.index("cp_async_zfill")
    assert wait < gemm.start() < body.index("__syncthreads();", gemm.start()) < refill, body
    # the last batch is waited for (and its registers fenced) before anything reads the accumulator
    assert re.match(r"\s*tl::warpgroup_wait<0>\(\); tl::fence_accumulator<\d+>\(acc\);", after), after[:200]
    x = torch.randn(N, H, W, C).half()
    w = torch.randn(K, K, C, F).half()
    out = torch.full((N * OH * OW, F), float("nan"))
    run_on_host(kern, [x, w.reshape(K * K * C, F), out])
    torch.testing.assert_close(out.double(), reference(x, w, S, D, P), rtol=2e-3, atol=2e-3)


def test_switch_off_keeps_the_refill_before_the_wait(run_on_host):
    N, H, W, C, F, K, S, D, P, bM, bN, bK = CONV
    fn, OH, OW = conv_kernel(N, H, W, C, F, K, S, D, P, bM, bN, bK, 3, 128, "float16")
    kern = _compile(fn, **{"tl.disable_wgmma_inflight": True}, **CP_ASYNC)
    src = kern.get_kernel_source()
    assert re.search(r"tl::gemm_ss_sm90<[^>]*, 0>\(", src) and "tl::warpgroup_wait<0>" not in src
    loop = _loop(src, "ki")
    assert loop.index("cp_async_zfill") < loop.index("tl::cp_async_wait<2>();")
    x = torch.randn(N, H, W, C).half()
    w = torch.randn(K, K, C, F).half()
    out = torch.full((N * OH * OW, F), float("nan"))
    run_on_host(kern, [x, w.reshape(K * K * C, F), out])
    torch.testing.assert_close(out.double(), reference(x, w, S, D, P), rtol=2e-3, atol=2e-3)


def scaled_gemm(M=128, N=64, K=256, bM=64, bN=64, bK=32, stages=3, clear_inside=False):
    """C = A @ B with a per-k-tile scale of the accumulator (it is read in every iteration:
    the batch must finish there) or, with clear_inside, a fresh accumulator per k-tile summed
    into a second one."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            a_s = T.alloc_shared((bM, bK), "float16")
            b_s = T.alloc_shared((bK, bN), "float16")
            acc = T.alloc_fragment((bM, bN), "float32")
            tot = T.alloc_fragment((bM, bN), "float32")
            T.clear(acc)
            T.clear(tot)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=stages):
                T.copy(A[by * bM, ko * bK], a_s)
                T.copy(B[ko * bK, bx * bN], b_s)
                if clear_inside:
                    T.clear(acc)
                T.gemm(a_s, b_s, acc)
                for i, j in T.Parallel(bM, bN):
                    tot[i, j] = tot[i, j] * 0.5 + acc[i, j]
            T.copy(tot, C[by * bM, bx * bN])

    return main


@pytest.mark.parametrize("clear_inside", [False, True])
def test_accumulator_read_in_the_loop_keeps_the_batch_waited(clear_inside, run_on_host):
    M, N, K, bK = 128, 64, 256, 32
    kern = _compile(scaled_gemm(M, N, K, clear_inside=clear_inside), **{"tl.disable_warp_specialized": True})
    src = kern.get_kernel_source()
    assert not re.search(r"tl::gemm_ss_sm90<[^>]*, 1>\(", src), src
    A, B = torch.randn(M, K).half(), torch.randn(K, N).half()
    C = torch.full((M, N), float("nan"))
    run_on_host(kern, [A, B, C])
    tot = torch.zeros(M, N, dtype=torch.float64)
    acc = torch.zeros(M, N, dtype=torch.float64)
    for k in range(0, K, bK):
        part = A[:, k:k + bK].double() @ B[k:k + bK].double()
        acc = part if clear_inside else acc + part
        tot = tot * 0.5 + acc
    torch.testing.assert_close(C.double(), tot, rtol=1e-3, atol=1e-3)


def test_plain_gemm_without_warp_specialization(run_on_host):
    """The canonical GEMM with warp specialization off: the same cp.async loop, kWait = 1."""
    from tilelang.testing import kernels as tk

    M = N = K = 256
    kern = _compile(tk.gemm(M, N, K, 128, 128, 32, 128, 3, "float16", out_dtype="float16", relu=True),
                    **{"tl.disable_warp_specialized": True})
    src = kern.get_kernel_source()
    assert re.search(r"tl::gemm_ss_sm90<[^>]*, 1>\(", src), src
    A, B = torch.randn(M, K).half(), torch.randn(K, N).half()
    C = torch.full((M, N), float("nan")).half()
    run_on_host(kern, [A, B, C])
    ref = torch.relu(A.double() @ B.double())
    torch.testing.assert_close(C.double(), ref, rtol=2e-2, atol=2e-2)
