"""One cp.async wait for back-to-back copies outside a pipeline (cp_async_waits.py): a serial
chunk loop (linear attention's shape) copying K and V tiles with T.copy and Q through a scaled
element copy issues both cp.async copies first, waits once before the barrier that guards
the first reader; run on the host emulator against float64."""
import re
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T


def chunks(S, D=64, C=64):
    """O[c] = (0.5 * Q[c]) @ K[c]^T @ V[c] per chunk c of C rows, chunks in a serial loop."""

    @T.prim_func
    def main(Q: T.Tensor((S, D), "float16"), K: T.Tensor((S, D), "float16"), V: T.Tensor((S, D), "float16"),
             O: T.Tensor((S, D), "float32")):
        with T.Kernel(1, threads=128) as bx:
            q = T.alloc_shared((C, D), "float16")
            k = T.alloc_shared((C, D), "float16")
            v = T.alloc_shared((C, D), "float16")
            s = T.alloc_fragment((C, C), "float32")
            s_h = T.alloc_shared((C, C), "float16")
            o = T.alloc_fragment((C, D), "float32")
            for c in T.serial(S // C):
                for i, j in T.Parallel(C, D):
                    q[i, j] = Q[c * C + i, j] * T.float16(0.5)
                T.copy(K[c * C, 0], k)
                T.copy(V[c * C, 0], v)
                T.clear(s)
                T.gemm(q, k, s, transpose_B=True)
                T.copy(s, s_h)
                T.clear(o)
                T.gemm(s_h, v, o)
                T.copy(o, O[c * C, 0])

    return main


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_one_wait_for_both_copies(arch, run_on_host):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kern = tilelang.compile(chunks(192), target=f"cuda -arch={arch}")
    src = kern.get_kernel_source()
    loop = src.split("for (int c = 0;")[1]
    assert loop.count("tl::cp_async_wait<0>();") == 1 and loop.count("tl::cp_async_commit();") == 2, loop
    # both copies go out before the element copy's loads, and the wait comes after them
    first_cp, q_load = loop.index("cp_async_zfill"), loop.index("&Q[")
    wait = loop.index("tl::cp_async_wait<0>();")
    assert first_cp < q_load < wait < loop.index("__syncthreads")
    S, D = 192, 64
    Q, K, V = (torch.randn(S, D, dtype=torch.float16) for _ in range(3))
    O = torch.full((S, D), float("nan"))
    run_on_host(kern, [Q, K, V, O])
    ref = torch.cat([((0.5 * Q[c:c + 64].double()) @ K[c:c + 64].double().T).half().double() @ V[c:c + 64].double()
                     for c in range(0, S, 64)])
    torch.testing.assert_close(O.double(), ref, rtol=2e-2, atol=2e-2)


def barrier_between():
    """Fuzz seed 2199 (shrunk): the wait sinks past a row reduction through shared memory whose own
    barrier sits between the copy and its wait; the reader of S needs a barrier after the wait,
    since each thread's wait covers only its own cp.async vectors."""
    m = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((m, 8), "float32"), O: T.Tensor((m, 8), "float32"), R: T.Tensor((m,), "float32"),
             W: T.Tensor((m, 8), "float32")):
        with T.Kernel(1, T.ceildiv(m, 32), threads=128) as (bx, by):
            S = T.alloc_shared((32, 8), "float32")
            F = T.alloc_fragment((32, 8), "float32")
            Rs = T.alloc_fragment((32,), "float32")
            G = T.alloc_fragment((32, 8), "float32")
            S2 = T.alloc_shared((32, 8), "float32")
            T.clear(F)
            T.reduce_sum(F, Rs, dim=1, clear=True)
            T.copy(A[by * 32, 0], S)
            for i, j in T.Parallel(32, 8):
                G[i, j] = S[i, j]
            for i, j in T.Parallel(32, 8):
                S2[i, j] = S[i, j] + Rs[i]
            T.copy(G, O[by * 32:by * 32 + 32, :])
            T.copy(Rs, R[by * 32])
            T.copy(S2, W[by * 32:by * 32 + 32, :])

    return main


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_sunk_wait_gets_its_own_barrier(arch, run_on_host):
    kern = tilelang.compile(barrier_between(), target=f"cuda -arch={arch}")
    src = kern.get_kernel_source()
    body = src[src.index("tl::cp_async_wait<0>();"):]
    assert body.index("__syncthreads();") < body.index("&S["), body[:600]
    m = 61
    A = torch.randn(m, 8)
    O, W = torch.full((m, 8), float("nan")), torch.full((m, 8), float("nan"))
    R = torch.full((m,), float("nan"))
    run_on_host(kern, [A, O, R, W])
    torch.testing.assert_close(O.double(), A.double(), rtol=0, atol=0)
    assert torch.equal(R, torch.zeros(m))
    torch.testing.assert_close(W.double(), A.double(), rtol=0, atol=0)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
def test_sunk_wait_gets_its_own_barrier_on_gpu():
    kern = tilelang.compile(barrier_between(), target="cuda")
    m = 4001
    A = torch.randn(m, 8, device="cuda")
    O, W = torch.full((m, 8), float("nan"), device="cuda"), torch.full((m, 8), float("nan"), device="cuda")
    R = torch.full((m,), float("nan"), device="cuda")
    kern(A, O, R, W)
    torch.testing.assert_close(O.double(), A.double(), rtol=0, atol=0)
    assert torch.equal(R, torch.zeros(m, device="cuda"))
    torch.testing.assert_close(W.double(), A.double(), rtol=0, atol=0)


def flat_view_conv(N=2, H=6, W=5, C=32, F=64, K=3, bM=64, bN=64, bK=32, stages=3):
    """The peer convolution's shape: the filter is read through a 2-d T.Tensor view of the 4-d
    parameter, declared in the kernel body after the accumulator; a pipeline's first stage is a
    cp.async copy from that view that the wait merging moves up past the accumulator's clear."""
    OH, OW = H, W

    @T.prim_func
    def main(data: T.Tensor((N, H, W, C), "float16"), kern: T.Tensor((K, K, C, F), "float16"),
             out: T.Tensor((N * OH * OW, F), "float32")):
        with T.Kernel(T.ceildiv(F, bN), T.ceildiv(N * OH * OW, bM), threads=128) as (bx, by):
            d_s = T.alloc_shared((bM, bK), "float16")
            k_s = T.alloc_shared((bK, bN), "float16")
            acc = T.alloc_fragment((bM, bN), "float32")
            kern_flat = T.Tensor((K * K * C, F), "float16", kern.data)
            T.clear(acc)
            for ki in T.Pipelined(T.ceildiv(K * K * C, bK), num_stages=stages):
                T.im2col(data, d_s, by, ki, K, 1, 1, 1)
                T.copy(kern_flat[ki * bK, bx * bN], k_s)
                T.gemm(d_s, k_s, acc)
            T.copy(acc, out[by * bM, bx * bN])

    return main


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_copy_stays_below_the_view_it_reads(arch, run_on_host):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kern = tilelang.compile(flat_view_conv(), target=f"cuda -arch={arch}")  # NVRTC: kern_flat undefined before
    src = kern.get_kernel_source()
    decl = "tl_half* kern_flat = "
    assert src.index("kern_flat") == src.index(decl) + len("tl_half* "), src  # declared before any use
    N, H, W, C, F, K = 2, 6, 5, 32, 64, 3
    x, w = torch.randn(N, H, W, C).half(), torch.randn(K, K, C, F).half()
    out = torch.full((N * H * W, F), float("nan"))
    run_on_host(kern, [x, w, out])
    ref = torch.nn.functional.conv2d(x.double().permute(0, 3, 1, 2), w.double().permute(3, 2, 0, 1), padding=1)
    torch.testing.assert_close(out.double(), ref.permute(0, 2, 3, 1).reshape(-1, F), rtol=2e-3, atol=2e-3)
