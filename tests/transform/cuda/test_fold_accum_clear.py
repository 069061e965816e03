"""fold_accum_clear: a zero fill of a wgmma accumulator right before the gemm that overwrites it
becomes the gemm's first k-step with scale-d = 0 (`tl::gemm_ss_sm90<...>(A, B, C, true)`).

Checks: FlashAttention's `T.clear(s); T.gemm(Q_s, K_s, s)` loses the fill and still matches
float64 on the host emulator (the loop reuses `s`, so a gemm that accumulated onto last
iteration's scores would be wrong); `clear_accum=True` takes the same path; a fill with a
reader of C before the gemm, and a non-zero fill keep the fill."""
import re

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import kernels as tk
from tilelang.transform.cuda.fold_accum_clear import wgmma_elems

SM90 = "cuda -arch=sm_90a"


def _fills(src, name):
    return re.findall(rf"\b{name}\[\w+\] = 0\.0f;", src)


def _attention_ref(q, k, v):
    q, k, v = (x.double().transpose(1, 2) for x in (q, k, v))  # (B, H, S, D)
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    return (torch.softmax(s, -1) @ v).transpose(1, 2)


def test_wgmma_elems_reads_the_per_thread_accumulator_size():
    assert wgmma_elems("tl::gemm_ss_sm90<128, 128, 64, 2, 1, true, 64, 64, tl::half_t, 0>({0}, {1}, {2});") == 64
    assert wgmma_elems("tl::gemm_rs_sm90<128, 64, 128, 2, false, 64, tl::half_t, 0>({0}, {1}, {2});") == 32
    assert wgmma_elems("tl::gemm_ss_sm90<64, 256, 64, 1, 2, true, 64, 64, tl::half_t, 0>({0}, {1}, {2});") == 64
    assert wgmma_elems("tl::gemm_ss<64, 64, 64, 2, 2, false, false, 64, 64, true, true, tl::half_t>({0}, {1}, {2});") \
        is None


@pytest.mark.nvrtc
def test_attention_scores_gemm_clears_instead_of_a_fill():
    k = tilelang.compile(tk.attention(1, 2, 256, 64, 64, 64, stages=2), target=SM90)
    src = k.get_kernel_source()
    assert re.search(r"tl::gemm_ss_sm90<[^;]*>\(Qs, Ks, s, true\);", src)
    assert not _fills(src, "s")
    assert re.search(r"tl::gemm_rs_sm90<[^;]*>\(p, Vs, o\);", src)  # o accumulates over the loop
    assert _fills(src, "o")  # ... from the one fill before it


@pytest.mark.nvrtc
def test_attention_with_folded_clear_matches_float64_on_host(run_on_host):
    B, S, H, D = 1, 256, 2, 64
    k = tilelang.compile(tk.attention(B, H, S, D, 64, 64, stages=2), target=SM90)
    g = torch.Generator().manual_seed(11)
    q, kk, v = (torch.randn(B, S, H, D, generator=g).half() for _ in range(3))
    o = torch.full((B, S, H, D), float("nan")).half()
    run_on_host(k, [q, kk, v, o])
    ref = _attention_ref(q, kk, v)
    assert (o.double() - ref).abs().max().item() < 2e-2


def two_step(M=64, N=64, K=64, mode="clear"):
    """C = A1 @ B1 (fill folded) then, in a second loop iteration, C = A2 @ B2 again from zero;
    `mode` varies what comes between the fill and the gemm."""

    @T.prim_func
    def f(A: T.Tensor((2, M, K), "float16"), B: T.Tensor((2, N, K), "float16"), C: T.Tensor((2, M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((N, K), "float16")
            C_l = T.alloc_fragment((M, N), "float32")
            for t in T.serial(2):
                T.copy(A[t, :, :], A_s)
                T.copy(B[t, :, :], B_s)
                if mode == "clear":
                    T.clear(C_l)
                    T.gemm(A_s, B_s, C_l, transpose_B=True)
                elif mode == "clear_accum":
                    T.gemm(A_s, B_s, C_l, transpose_B=True, clear_accum=True)
                elif mode == "reader":  # C = 1 + A @ B: the fill's zeros are read before the gemm
                    T.clear(C_l)
                    for i, j in T.Parallel(M, N):
                        C_l[i, j] = C_l[i, j] + 1.0
                    T.gemm(A_s, B_s, C_l, transpose_B=True)
                else:  # "nonzero": C = 2 + A @ B
                    T.fill(C_l, 2.0)
                    T.gemm(A_s, B_s, C_l, transpose_B=True)
                T.copy(C_l, C[t, :, :])

    return f


@pytest.mark.nvrtc
@pytest.mark.parametrize("mode, folded, bias", [("clear", True, 0.0), ("clear_accum", True, 0.0),
                                                 ("reader", False, 1.0), ("nonzero", False, 2.0)])
def test_fold_only_when_nothing_reads_the_zeros(mode, folded, bias, run_on_host):
    k = tilelang.compile(two_step(mode=mode), target=SM90)
    src = k.get_kernel_source()
    call = re.search(r"tl::gemm_ss_sm90<[^;]*>\(A_s, B_s, C_l(, true)?\);", src)
    assert call is not None and bool(call.group(1)) == folded
    assert bool(re.search(r"\bC_l\[\w+\] = (0\.0f|2\.0f);", src)) != folded
    g = torch.Generator().manual_seed(12)
    a, b = torch.randn(2, 64, 64, generator=g).half(), torch.randn(2, 64, 64, generator=g).half()
    c = torch.full((2, 64, 64), float("nan"))
    run_on_host(k, [a, b, c])
    ref = a.double() @ b.double().transpose(-1, -2) + bias
    assert (c.double() - ref).abs().max().item() < 1e-3
