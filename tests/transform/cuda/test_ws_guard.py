"""A T.Pipelined body under `if frag[k] != 0:` where `frag` is a fragment a T.copy from global
filled before the loop (block-sparse attention's per-row block mask) is warp-specialized
(ws_guard.py): the producer thread reads the global elements the fragment holds, the consumers
keep their fragment. Before, such a loop took the cp.async pipeline (the K tile waited for,
then V, one load in flight per iteration). Run on the host emulator against float64; with
tl.disable_ws_fragment_guard the loop keeps the cp.async pipeline."""
import math
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T

B, H, S, D, BLK = 1, 2, 192, 64, 64
NB = S // BLK


def sparse_attention(mask_dtype="bool", write_mask=False):
    scale = (1.0 / D) ** 0.5 * 1.44269504

    @T.prim_func
    def main(Q: T.Tensor((B, H, S, D), "float16"), K: T.Tensor((B, H, S, D), "float16"),
             V: T.Tensor((B, H, S, D), "float16"), Mask: T.Tensor((B, H, NB, NB), mask_dtype),
             O: T.Tensor((B, H, S, D), "float16")):
        with T.Kernel(NB, H, B, threads=128) as (bx, by, bz):
            q_s = T.alloc_shared((BLK, D), "float16")
            k_s = T.alloc_shared((BLK, D), "float16")
            v_s = T.alloc_shared((BLK, D), "float16")
            s = T.alloc_fragment((BLK, BLK), "float32")
            p = T.alloc_fragment((BLK, BLK), "float16")
            acc = T.alloc_fragment((BLK, D), "float32")
            m = T.alloc_fragment((BLK,), "float32")
            m_prev = T.alloc_fragment((BLK,), "float32")
            r = T.alloc_fragment((BLK,), "float32")
            l = T.alloc_fragment((BLK,), "float32")
            total = T.alloc_fragment((BLK,), "float32")
            live = T.alloc_fragment((NB,), mask_dtype)
            T.copy(Q[bz, by, bx * BLK:(bx + 1) * BLK, :], q_s)
            T.fill(acc, 0)
            T.fill(total, 0)
            T.fill(m, -T.infinity("float32"))
            T.copy(Mask[bz, by, bx, :], live)
            if write_mask:
                live[0] = 1
            for k in T.Pipelined(bx + 1, num_stages=1):
                if live[k] != 0:
                    T.copy(K[bz, by, k * BLK:(k + 1) * BLK, :], k_s)
                    for i, j in T.Parallel(BLK, BLK):
                        s[i, j] = T.if_then_else(bx * BLK + i >= k * BLK + j, 0, -T.infinity("float32"))
                    T.gemm(q_s, k_s, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                    T.copy(m, m_prev)
                    T.reduce_max(s, m, dim=1, clear=False)
                    for i, j in T.Parallel(BLK, BLK):
                        s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                    T.reduce_sum(s, l, dim=1)
                    for i in T.Parallel(BLK):
                        r[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                        total[i] = total[i] * r[i] + l[i]
                    T.copy(s, p)
                    for i, j in T.Parallel(BLK, D):
                        acc[i, j] *= r[i]
                    T.copy(V[bz, by, k * BLK:(k + 1) * BLK, :], v_s)
                    T.gemm(p, v_s, acc, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(BLK, D):
                acc[i, j] /= total[i]
            T.copy(acc, O[bz, by, bx * BLK:(bx + 1) * BLK, :])

    return main


def reference(q, k, v, mask):
    full = torch.kron(mask.double(), torch.ones(BLK, BLK, dtype=torch.float64)).bool()
    full &= torch.ones(S, S, dtype=torch.bool).tril()
    a = torch.einsum("bhsd,bhtd->bhst", q.double(), k.double()) / math.sqrt(D)
    return torch.einsum("bhst,bhtd->bhsd", a.masked_fill(~full, float("-inf")).softmax(-1), v.double())


def _compile(fn, **configs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(fn, target="cuda -arch=sm_90a", pass_configs=configs or None)


def _masks(g):
    rnd = (torch.rand(B, H, NB, NB, generator=g) > 0.5).tril()
    rnd[..., 0] = True  # every row keeps a block (else its softmax is 0 / 0)
    first = torch.zeros(B, H, NB, NB, dtype=torch.bool)
    first[..., 0] = True  # every later iteration skipped
    return [rnd, first, torch.ones(B, H, NB, NB, dtype=torch.bool).tril()]


def _run(kern, run_on_host, mask_dtype, seed):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, S, D, generator=g).half() for _ in range(3))
    for mask in _masks(g):
        out = torch.full((B, H, S, D), float("nan")).half()
        run_on_host(kern, [q, k, v, mask.to(getattr(torch, mask_dtype)), out])
        torch.testing.assert_close(out.double(), reference(q, k, v, mask), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("mask_dtype", ["bool", "int8"])
def test_fragment_guard_is_warp_specialized(mask_dtype, run_on_host):
    kern = _compile(sparse_attention(mask_dtype))
    src = kern.get_kernel_source()
    producer = src.split("if (tid >= 128)")[1].split("tl::setmaxnreg_inc")[0]
    assert "tl::tma_load(" in producer and "tl::mbarrier_arrive(&tl_full[" in producer, src
    assert "Mask[" in producer and "live[" not in producer, producer  # the producer reads the global mask
    assert "cp_async_zfill<16>(&k_s" not in src and "cp_async_zfill<16>(&v_s" not in src, src
    _run(kern, run_on_host, mask_dtype, 3)


def test_switch_off_keeps_the_cp_async_pipeline(run_on_host):
    kern = _compile(sparse_attention(), **{"tl.disable_ws_fragment_guard": True})
    src = kern.get_kernel_source()
    # the cp.async destination: a shared-address slot, or &k_s[...] with tl.disable_shared_address_slots
    assert "tl::tma_load(" not in src and ("cp_async_zfill<16>((tl::smem_addr(k_s)" in src
                                           or "cp_async_zfill<16>(&k_s" in src), src
    _run(kern, run_on_host, "bool", 4)


def test_a_fragment_the_kernel_writes_is_no_producer_guard():
    src = _compile(sparse_attention(write_mask=True)).get_kernel_source()
    assert "tl::tma_load(" not in src, src
