"""Barrier groups of the warp-specialized loop (warp_specialize._barrier_groups): tiles first read
by different statements of the T.Pipelined body get a full / empty barrier pair each.

Attention's K is read by the scores gemm and V by P @ V: the consumers wait for K alone before
the scores gemm and release its stage right after it, then wait for V before P @ V, so the scores
gemm starts before V has landed and the next K loads during this iteration's softmax and P @ V.

Checks: the sm_90a source of a FlashAttention forward (num_stages 1 and 2) has two barrier
groups with the waits and releases in that order; a plain GEMM keeps one; the kernel runs on the
host emulator (TMA, mbarriers, wgmma) and on the CPU backend and matches float64; the same on
the GPU."""
import math

import pytest
import torch

import tilelang
from tilelang.testing.kernels import attention

SM90 = "cuda -arch=sm_90a"
CASE = (1, 2, 256, 64, 64, 64)


def reference(q, k, v):
    qd, kd, vd = (x.double().transpose(1, 2) for x in (q, k, v))
    w = torch.softmax(qd @ kd.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
    return (w @ vd).transpose(1, 2)


def _inputs(seed):
    B, H, S, D = CASE[:4]
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, S, H, D, generator=g).half() for _ in range(3)]


def _close(o, q, k, v):
    ref = reference(q, k, v)
    assert (o.double() - ref).abs().max().item() <= 1e-2


@pytest.mark.nvrtc
@pytest.mark.parametrize("stages", [1, 2])
def test_k_and_v_get_barriers_of_their_own(host, stages):
    src = tilelang.compile(attention(*CASE, stages), target=SM90).get_kernel_source()
    cons = src[src.index("setmaxnreg_inc"):]
    wait_k, wait_v = cons.index("mbarrier_wait(&tl_full[tl_stage]"), cons.index("mbarrier_wait(&tl_full1[tl_stage]")
    scores, pv = cons.index("tl::gemm_ss_sm90<"), cons.index("tl::gemm_rs_sm90<")
    release_k, release_v = cons.index("mbarrier_arrive(&tl_empty[tl_stage])"), cons.index(
        "mbarrier_arrive(&tl_empty1[tl_stage])")
    assert wait_k < scores < release_k < wait_v < pv < release_v
    prod = src[:src.index("setmaxnreg_inc")]
    assert prod.index("tl_full[tl_stage], 8192)") < prod.index("tl_full1[tl_stage], 8192)")  # K's 8 KB, then V's


@pytest.mark.nvrtc
def test_a_gemm_keeps_one_barrier_pair(host):
    from tilelang.testing import kernels as tk
    src = tilelang.compile(tk.gemm(256, 256, 256, 128, 128, 64, 128, 3), target=SM90).get_kernel_source()
    assert "tl_full1" not in src and "tl_full[" in src


@pytest.mark.nvrtc
@pytest.mark.parametrize("stages", [1, 2])
def test_barrier_groups_run_on_host_and_match_float64(run_on_host, stages):
    k = tilelang.compile(attention(*CASE, stages), target=SM90)
    q, kk, v = _inputs(20 + stages)
    o = torch.full_like(q, float("nan"))
    run_on_host(k, [q, kk, v, o])
    _close(o, q, kk, v)


def test_attention_matches_float64_on_cpu():
    k = tilelang.compile(attention(*CASE, 2), target="c")
    q, kk, v = _inputs(23)
    o = torch.full_like(q, float("nan"))
    k(q, kk, v, o)
    _close(o, q, kk, v)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("stages", [1, 2])
def test_barrier_groups_on_gpu(stages):
    k = tilelang.compile(attention(*CASE, stages), target="cuda")
    q, kk, v = _inputs(30 + stages)
    o = torch.full_like(q, float("nan")).cuda()
    k(q.cuda(), kk.cuda(), v.cuda(), o)
    torch.cuda.synchronize()
    _close(o.cpu(), q, kk, v)
