"""The DeepSeek mHC pre kernel's two silent errors (96 threads, `if T.get_thread_binding() < 32`).

1. A branch on whole warps that are not whole warp groups stayed an ordinary `if`: its tile ops
   were laid out over all 96 threads (T.Parallel(4) in the else branch was owned by threads 0-3,
   which never take it, so pre_mix_shared was never written), and its __syncthreads() ran in
   divergent code. It is now a scope of unit 32: threads [32, 96) lay out over 64 threads with
   tid - 32 and synchronise with a named barrier of 64.
2. `r = T.alloc_fragment(1)`; `r[0] = 0; r[0] += S[b]` (scalar code run by every thread) went
   to one shared copy, and the read-modify-writes raced. Each thread now keeps its own copy.
"""
import pytest
import torch

import tilelang
import tilelang.language as T
import tilelang.testing

N, H = 8, 256


@T.prim_func
def branches(X: T.Tensor((N, 4, H), "float32"), S: T.Tensor((N,), "float32"), W: T.Tensor((4,), "float32"),
             Y: T.Tensor((N, H), "float32"), P: T.Tensor((N, 4), "float32")):
    with T.Kernel(N, threads=96) as b:
        r = T.alloc_fragment(1, "float32")
        r[0] = 0
        for _ in T.serial(3):
            r[0] += S[b]
        r[0] = T.rsqrt(r[0] + 1)
        w_sh = T.alloc_shared(4, "float32")
        if T.get_thread_binding() < 32:
            for j in T.Parallel(4):
                P[b, j] = W[j] * r[0]
        else:
            for j in T.Parallel(4):
                w_sh[j] = W[j] * r[0] + 1
            acc = T.alloc_fragment(H, "float32")
            T.clear(acc)
            for c in T.serial(4):
                for h in T.Parallel(H):
                    acc[h] += w_sh[c] * X[b, c, h]
            T.copy(acc, Y[b, 0])


def _reference(x, s, w):
    r = 1 / torch.sqrt(3 * s.double() + 1)
    p = w.double()[None, :] * r[:, None]
    y = torch.einsum("nc,nch->nh", p + 1, x.double())
    return y, p


def _source():
    pytest.importorskip("cuda.bindings")
    return tilelang.compile(branches, target="cuda -arch=sm_90a").get_kernel_source()


def test_branch_on_warps_is_a_scope_over_its_threads():
    src = _source()
    body = src[src.index("if (tid < 32)"):]
    # (masked to the branch's 64 threads unless tl.disable_thread_range_folding)
    assert "if (tid >= 32 && tid < 96) {" in body and ("tid_wg = ((tid - 32) & 63)" in body or "tid_wg = (tid - 32)" in body)
    assert "__syncthreads" not in body  # the other branch never reaches a block barrier
    assert "tl::barrier_sync<2, 64>();" in body
    assert "(l * 96)" not in body  # no layout over the block's 96 threads inside a branch


def test_scalar_written_fragment_is_per_thread():
    src = _source()
    assert "float r[1];" in src
    assert not [line for line in src.splitlines() if "float* r =" in line]  # not a shared copy


def test_fragment_written_in_a_parallel_loop_is_not_per_thread():
    from tilelang.transform.cuda.layout_inference import per_thread_fragments
    from tilelang.ir import stmt as S
    from tilelang.ir.visitor import collect

    @T.prim_func
    def f(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32):
            a = T.alloc_fragment(4, "float32")
            c = T.alloc_fragment(1, "float32")
            a[0] = 1
            for i in T.Parallel(4):
                a[i] = A[i]
            c[0] = 2
            T.copy(a, A)

    frags = {x.buffer.uid: x.buffer for x in collect(f.body, lambda n: isinstance(n, S.Allocate))}
    names = {frags[u].name for u in per_thread_fragments(f.body, frags)}
    assert names == {"c"}


@tilelang.testing.requires_cuda
def test_branches_cuda():
    x = torch.randn(N, 4, H, device="cuda")
    s, w = torch.rand(N, device="cuda"), torch.randn(4, device="cuda")
    y = torch.full((N, H), float("nan"), device="cuda")
    p = torch.full((N, 4), float("nan"), device="cuda")
    tilelang.compile(branches, target="cuda")(x, s, w, y, p)
    y_ref, p_ref = _reference(x.cpu(), s.cpu(), w.cpu())
    torch.testing.assert_close(p.cpu().double(), p_ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(y.cpu().double(), y_ref, rtol=1e-4, atol=1e-4)
