"""Thread-level CUDA code: compile-only checks of the emitted source (NVRTC, sm_80 and sm_90a)
and GPU runs against float64 / numpy references (marked `cuda`)."""
import re

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.backend.cuda import nvrtc

nvrtc_only = pytest.mark.skipif(not nvrtc.nvrtc_available(), reason="NVRTC not found")
cuda = pytest.mark.cuda
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
ARCHS = ["sm_80", "sm_90a"]


def allreduce_gemv(N, K, BLOCK_N, reduce_threads, dtype="float16", accum="float32"):
    """The peer suite's splitk_gemv_vectorized_tvm (gemv/example_gemv.py)."""
    TILE_K = 8
    BLOCK_K = reduce_threads * TILE_K

    @T.prim_func
    def main(A: T.Tensor((K,), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, BLOCK_N), threads=(BLOCK_N, reduce_threads)) as bn:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            A_local = T.alloc_local((TILE_K,), dtype)
            B_local = T.alloc_local((TILE_K,), dtype)
            C_accum = T.alloc_local((1,), accum)
            T.clear(C_accum)
            for bk in T.serial(T.ceildiv(K, BLOCK_K)):
                for k in T.vectorized(TILE_K):
                    A_local[k] = A[bk * BLOCK_K + tk * TILE_K + k]
                    B_local[k] = B[bn * BLOCK_N + tn, bk * BLOCK_K + tk * TILE_K + k]
                for k in T.serial(TILE_K):
                    C_accum[0] += A_local[k].astype(accum) * B_local[k].astype(accum)
            C_reduced = T.alloc_local((1,), accum)
            with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, accum)]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), C_accum[0], True, C_reduced[0], tk, dtype="handle"))
            C[bn * BLOCK_N + tn] = C_reduced[0]
    return main


def warp_ops():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), R: T.Tensor((64,), "int32"), U: T.Tensor((64,), "uint32")):
        with T.Kernel(1, threads=64):
            tx = T.thread_binding(0, 64, thread="threadIdx.x")
            s = T.alloc_var("float32")
            s = A[tx]
            for o in T.unroll(5):
                s = s + T.shfl_xor(s, 1 << (4 - o))  # butterfly: every lane holds its warp's sum
            T.sync_threads()
            A[tx] = s
            R[tx] = T.cast(T.ballot(tx % 3 == 0), "int32") + T.any_sync(tx == 40) * 1000
            T.rng_init(5, 0, tx * 4)
            U[tx] = T.rng_rand()
    return main


@nvrtc_only
@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_allreduce_and_warp_ops_compile(arch):
    src = tilelang.compile(allreduce_gemv(256, 512, 2, 32), target=f"cuda -arch={arch}").get_kernel_source()
    assert "tl_red_scratch1[tid] = C_accum[0];" in src and "__syncthreads();" in src
    src = tilelang.compile(warp_ops(), target=f"cuda -arch={arch}").get_kernel_source()
    for text in ("tl_shfl_xor(4294967295u", "tl_ballot(", "tl_any_sync(", "tl_rng_init_state(&tl_rng", "tl_philox tl_rng;"):
        assert text in src, text


@nvrtc_only
@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_views_pointer_tables_and_local_fill_compile(arch):
    G, M, N = 3, 64, 64

    @T.prim_func
    def k(P: T.Tensor([G], T.ptr), O: T.Tensor((G, M, N), "float32"), V: T.Tensor((G, M * N), "int32")):
        with T.Kernel(G, threads=128) as g:
            A = T.make_tensor(P[g], (M, N), "float32")
            S = T.alloc_shared((M, N), "float32")
            T.copy(A, S)
            Bits = T.view(S, (M * N,), "int32")
            acc = T.alloc_local((4,), "float32")
            T.clear(acc)
            for i, j in T.Parallel(M, N):
                O[g, i, j] = S[i, j] * 2
            for i in T.Parallel(M * N):
                V[g, i] = Bits[i] + T.cast(acc[i % 4], "int32")

    src = tilelang.compile(k, target=f"cuda -arch={arch}",
                           pass_configs={"tl.disable_warp_specialized": True}).get_kernel_source()
    assert "reinterpret_cast" in src or "(float*)((uintptr_t)(P[g]))" in src
    # every thread clears its own whole local array (an unrolled loop over its 4 elements)
    assert re.search(r"#pragma unroll\n\s*for \(int (\w+) = 0; \1 < 4; \+\+\1\) \{\n\s*acc\[\1\] = 0\.0f;", src), src


@cuda
@needs_gpu
def test_allreduce_gemv_runs():
    N, K = 256, 512
    k = tilelang.compile(allreduce_gemv(N, K, 2, 32), target="cuda")
    a = torch.randn(K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16)
    c = torch.empty(N, device="cuda", dtype=torch.float16)
    k(a, b, c)
    torch.testing.assert_close(c.double(), b.double() @ a.double(), rtol=1e-2, atol=5e-2)


@cuda
@needs_gpu
def test_warp_ops_run():
    k = tilelang.compile(warp_ops(), target="cuda")
    a = torch.randn(64, device="cuda")
    r = torch.zeros(64, device="cuda", dtype=torch.int32)
    u = torch.zeros(64, device="cuda", dtype=torch.uint32)
    ref = a.double().reshape(2, 32).sum(1).repeat_interleave(32)
    k(a, r, u)
    torch.testing.assert_close(a.double(), ref, rtol=1e-5, atol=1e-5)
    masks = [sum(1 << la for la in range(32) if (32 * w + la) % 3 == 0) for w in (0, 1)]
    want_r = [int(np.uint32(masks[t // 32]).astype(np.int32)) + (1000 if t >= 32 else 0) for t in range(64)]
    assert r.cpu().tolist() == want_r
    cpu = tilelang.compile(_rng_cpu(), target="cpu")
    want = torch.zeros(64, dtype=torch.uint32)
    cpu(want)
    assert torch.equal(u.cpu(), want)


def _rng_cpu():
    @T.prim_func
    def main(U: T.Tensor((64,), "uint32")):
        with T.Kernel(64, threads=1) as bx:
            T.rng_init(5, 0, bx * 4)
            U[bx] = T.rng_rand()
    return main
