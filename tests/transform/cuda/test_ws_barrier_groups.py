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
import tilelang.language as T

SM90 = "cuda -arch=sm_90a"


def attention(B, H, S, D, bM, bN, stages, threads=128):
    scale = 1.0 / math.sqrt(D) * 1.44269504

    @T.prim_func
    def fa(Q: T.Tensor((B, S, H, D), "float16"), K: T.Tensor((B, S, H, D), "float16"),
           V: T.Tensor((B, S, H, D), "float16"), O: T.Tensor((B, S, H, D), "float16")):
        with T.Kernel(T.ceildiv(S, bM), H, B, threads=threads) as (bx, by, bz):
            Qs = T.alloc_shared((bM, D), "float16")
            Ks = T.alloc_shared((bN, D), "float16")
            Vs = T.alloc_shared((bN, D), "float16")
            s = T.alloc_fragment((bM, bN), "float32")
            p = T.alloc_fragment((bM, bN), "float16")
            o = T.alloc_fragment((bM, D), "float32")
            m = T.alloc_fragment((bM,), "float32")
            m_prev = T.alloc_fragment((bM,), "float32")
            r = T.alloc_fragment((bM,), "float32")
            l = T.alloc_fragment((bM,), "float32")
            rs = T.alloc_fragment((bM,), "float32")
            T.copy(Q[bz, bx * bM:(bx + 1) * bM, by, :], Qs)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float32"))
            for k in T.Pipelined(T.ceildiv(S, bN), num_stages=stages):
                T.copy(K[bz, k * bN:(k + 1) * bN, by, :], Ks)
                T.clear(s)
                T.gemm(Qs, Ks, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(bM):
                    r[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(bM, bN):
                    s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                T.reduce_sum(s, rs, dim=1)
                for i in T.Parallel(bM):
                    l[i] = l[i] * r[i] + rs[i]
                T.copy(s, p)
                for i, j in T.Parallel(bM, D):
                    o[i, j] *= r[i]
                T.copy(V[bz, k * bN:(k + 1) * bN, by, :], Vs)
                T.gemm(p, Vs, o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(bM, D):
                o[i, j] /= l[i]
            T.copy(o, O[bz, bx * bM:(bx + 1) * bM, by, :])

    return fa


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
def test_barrier_groups_run_on_host_and_match_float64(host, stages):
    k = tilelang.compile(attention(*CASE, stages), target=SM90)
    q, kk, v = _inputs(20 + stages)
    o = torch.full_like(q, float("nan"))
    prog = host.HostProgram({"k": k})
    try:
        prog.run("k", [q, kk, v, o])
    finally:
        prog.close()
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
