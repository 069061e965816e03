"""T.atomic_add / max / min on one element: SIMT code that every thread reaching it runs, and
`return_prev=True` (the element's previous value). CPU float64 references, NVRTC compile-only
checks of the CUDA (no `tid == 0` guard, no barrier inside a thread-dependent branch), and
cuda-marked GPU tests of the split-K gemv pattern the peer gemv example uses."""
import re

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
import tilelang.testing


def _compact(N, nb):
    @T.prim_func
    def k(A: T.Tensor((nb, N), "float64"), Out: T.Tensor((nb, N), "float64"), Cnt: T.Tensor((nb,), "int32"),
          Prev: T.Tensor((nb, N), "int32")):
        with T.Kernel(nb, threads=1) as bx:
            pos = T.alloc_var("int32")
            for i in T.serial(N):
                if A[bx, i] > 0:
                    pos = T.atomic_add(Cnt[bx], 1, return_prev=True)
                    Out[bx, pos] = A[bx, i]
                Prev[bx, i] = T.atomic_max(Cnt[bx], 0, return_prev=True)  # reads, changes nothing
    return k


def test_return_prev_gives_the_old_value_for_a_stream_compaction():
    N, nb = 37, 3
    a = torch.randn(nb, N, dtype=torch.float64)
    out = torch.full((nb, N), float("nan"), dtype=torch.float64)
    cnt = torch.zeros(nb, dtype=torch.int32)
    prev = torch.full((nb, N), -7, dtype=torch.int32)
    tilelang.compile(_compact(N, nb), target="cpu")(a, out, cnt, prev)
    for b in range(nb):
        keep = a[b][a[b] > 0]
        assert cnt[b].item() == keep.numel()
        torch.testing.assert_close(out[b, :keep.numel()], keep, rtol=0, atol=0)
        running = np.cumsum((a[b] > 0).numpy())
        assert prev[b].tolist() == running.tolist()


def test_element_atomic_in_a_parallel_loop_with_return_prev():
    N = 64

    @T.prim_func
    def k(A: T.Tensor((N,), "float64"), Hist: T.Tensor((4,), "int32"), Rank: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=1):
            for i in T.Parallel(N):
                Rank[i] = T.atomic_add(Hist[T.cast(A[i], "int32")], 1, return_prev=True)

    a = torch.randint(0, 4, (N,)).double()
    hist = torch.zeros(4, dtype=torch.int32)
    rank = torch.full((N,), -1, dtype=torch.int32)
    tilelang.compile(k, target="cpu")(a, hist, rank)
    assert hist.tolist() == [int((a == v).sum()) for v in range(4)]
    for v in range(4):  # within one bin the ranks are 0..count-1, each once
        assert sorted(rank[a == v].tolist()) == list(range(int((a == v).sum())))


def test_return_prev_of_a_tile_is_an_error():
    with pytest.raises(tilelang.errors.TileLangError, match="return_prev"):
        @T.prim_func
        def k(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=1):
                T.atomic_add(B, A, return_prev=True)


def _splitk(N, K, BN, BK, dtype="float32"):
    @T.prim_func
    def k(A: T.Tensor((K,), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, BN), threads=(BN, BK)) as bn:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            acc = T.alloc_local((1,), "float32")
            C_shared = T.alloc_shared((BN,), "float32")
            if tk == 0:
                C_shared[tn] = 0
            T.clear(acc)
            for bk in T.serial(T.ceildiv(K, BK)):
                acc[0] += A[bk * BK + tk].astype("float32") * B[bn * BN + tn, bk * BK + tk].astype("float32")
            T.atomic_add(C_shared[tn], acc[0])  # every thread adds its own partial sum
            C[bn * BN + tn] = C_shared[tn]
    return k


def _branch_bodies(src):
    """The text of every `if (...) {...}` body that tests a thread index."""
    out = []
    for m in re.finditer(r"if \(\(*(tid|tx|ty)\b[^\n]*\{\n", src):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(src[i], 0)
            i += 1
        out.append(src[m.end():i])
    return out


def test_splitk_cuda_adds_every_threads_partial_and_syncs_outside_branches():
    pytest.importorskip("tilelang.backend.cuda.nvrtc")
    src = tilelang.compile(_splitk(64, 256, 32, 32), target="cuda -arch=sm_90a").get_kernel_source()
    at = src.index("tl_atomic_add_f32(&C_shared[")
    assert "tid == 0" not in src
    assert src[:at].rstrip().endswith("__syncthreads();"), src  # the zeroing by the ty == 0 threads
    assert src[at:].split("\n")[1].strip() == "__syncthreads();", src  # before other threads read
    bodies = _branch_bodies(src)
    assert bodies and not any("__syncthreads" in b for b in bodies), bodies


def test_return_prev_and_reinterpret_compile_for_cuda():
    pytest.importorskip("tilelang.backend.cuda.nvrtc")

    @T.prim_func
    def k(A: T.Tensor((1024,), "float32"), Idx: T.Tensor((1024,), "int32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            hist = T.alloc_shared((257,), "int32")
            pos = T.alloc_var("int32")
            T.fill(hist, 0)
            T.sync_threads()
            for j in T.serial(4):
                bits = T.reinterpret(A[tx * 4 + j], "uint32") >> 24
                pos = T.atomic_add(hist[T.cast(bits, "int32")], 1, return_prev=True)
                Idx[tx * 4 + j] = pos

    src = tilelang.compile(k, target="cuda -arch=sm_90a").get_kernel_source()
    assert re.search(r"pos\[0\] = tl_atomic_add_i32\(&hist\[", src), src
    assert "TL_BITCAST(" in src and "union" not in src  # NVRTC rejects C compound literals


@tilelang.testing.requires_cuda
def test_splitk_gemv_on_gpu_matches_float64():
    N, K = 96, 1024  # K a multiple of BK: the kernel has no guard on its element loads
    a, b = torch.randn(K, device="cuda"), torch.randn(N, K, device="cuda")
    c = torch.full((N,), float("nan"), device="cuda")
    tilelang.compile(_splitk(N, K, 32, 32), target="cuda")(a, b, c)
    torch.testing.assert_close(c.double(), b.double() @ a.double(), rtol=1e-4, atol=1e-3)


@tilelang.testing.requires_cuda
def test_histogram_ranks_on_gpu():
    N = 4096

    @T.prim_func
    def k(A: T.Tensor((N,), "int32"), Hist: T.Tensor((16,), "int32"), Rank: T.Tensor((N,), "int32")):
        with T.Kernel(N // 256, threads=256) as bx:
            tx = T.get_thread_binding()
            Rank[bx * 256 + tx] = T.atomic_add(Hist[A[bx * 256 + tx]], 1, return_prev=True)

    a = torch.randint(0, 16, (N,), device="cuda", dtype=torch.int32)
    hist = torch.zeros(16, device="cuda", dtype=torch.int32)
    rank = torch.full((N,), -1, device="cuda", dtype=torch.int32)
    tilelang.compile(k, target="cuda")(a, hist, rank)
    for v in range(16):
        sel = rank[a == v].sort().values.cpu().tolist()
        assert hist[v].item() == len(sel) and sel == list(range(len(sel)))


def _column_atomics(dtype, op):
    @T.prim_func
    def f(A: T.Tensor((64, 32), dtype), B: T.Tensor((32,), dtype)):
        with T.Kernel(2, threads=32) as bx:
            for i, j in T.Parallel(32, 32):
                if op == "add":
                    T.atomic_add(B[j], A[bx * 32 + i, j])
                elif op == "max":
                    T.atomic_max(B[j], A[bx * 32 + i, j])
                else:
                    T.atomic_min(B[j], A[bx * 32 + i, j])
    return f


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("op", ["add", "max", "min"])
def test_16_bit_element_atomics_on_the_cpu(dtype, op):
    """A 16-bit destination takes the value in its own storage type: the CPU backend passed a float to
    tl_atomic_add_bf16 (a C compile error, "incompatible type for argument 2")."""
    td = getattr(torch, dtype)
    # quarters in [-1, 1]: every partial sum of 64 of them is a multiple of 1/4 within [-64, 64], exact in bf16
    # and fp16 whatever order the atomics land in, so the sum is exact too
    a = (torch.randint(-4, 5, (64, 32)) * 0.25).to(td)
    b = torch.zeros(32, dtype=td)
    tilelang.compile(_column_atomics(dtype, op), target="cpu")(a, b)
    ad = a.double()
    ref = ad.sum(0) if op == "add" else ad.max(0).values.clamp(min=0) if op == "max" else ad.min(0).values.clamp(max=0)
    torch.testing.assert_close(b.double(), ref, rtol=0, atol=0)


def test_atomic_addx2_adds_both_lanes():
    """`T.atomic_addx2(B[i, 2 * j], A[i, 2 * j])` adds elements 2j and 2j + 1 (it added only 2j)."""

    @T.prim_func
    def f(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
        with T.Kernel(2, threads=32) as bx:
            for i, j in T.Parallel(4, 4):
                T.atomic_addx2(B[i, j * 2], A[i, j * 2])

    a, b = torch.randn(4, 8), torch.randn(4, 8)
    ref = b.double() + 2 * a.double()  # two blocks add
    tilelang.compile(f, target="cpu")(a, b)
    torch.testing.assert_close(b.double(), ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_16_bit_return_prev(dtype):
    """The previous value of a bf16 element (a C compile error on the CPU backend before) and of an fp16 one."""

    @T.prim_func
    def f(A: T.Tensor((8,), dtype), B: T.Tensor((8,), dtype), Old: T.Tensor((8,), dtype)):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(8):
                Old[i] = T.atomic_add(B[i], A[i], return_prev=True)

    td = getattr(torch, dtype)
    a, b = torch.randn(8).to(td), torch.randn(8).to(td)
    old = torch.zeros(8, dtype=td)
    b0 = b.clone()
    tilelang.compile(f, target="cpu")(a, b, old)
    torch.testing.assert_close(old, b0, rtol=0, atol=0)
    torch.testing.assert_close(b.double(), (b0.double() + a.double()).to(td).double(), rtol=0, atol=0)
