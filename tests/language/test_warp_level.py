"""Warp- and block-level primitives (language/warp.py): lane / warp indices, election, warp
all-reduces, matches, block votes, the one-sided named barrier and PDL. Each kernel runs on the
CPU backend and, as CUDA, on the host emulator (sm_80 and sm_90a), against numpy references on
fresh random inputs; the CUDA source also compiles with NVRTC."""
import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import LoweringError

N = 96  # three warps, so a warp group of 64 splits them 2 + 1


def collectives():
    @T.prim_func
    def k(A: T.Tensor((2, N), "float32"), I: T.Tensor((2, N), "int32"), F: T.Tensor((2, N, 3), "float32"),
          R: T.Tensor((2, N, 8), "int32")):
        with T.Kernel(2, threads=N) as bx:
            tx = T.get_thread_binding()
            a = A[bx, tx]
            F[bx, tx, 0] = T.warp_reduce_sum(a)
            F[bx, tx, 1] = T.warp_reduce_max(a)
            F[bx, tx, 2] = T.warp_reduce_min(a)
            R[bx, tx, 0] = T.warp_reduce_bitor(I[bx, tx])
            R[bx, tx, 1] = T.warp_reduce_bitand(I[bx, tx])
            R[bx, tx, 2] = T.syncthreads_count(a > 0)
            R[bx, tx, 3] = T.syncthreads_and(a > -2.5) + 2 * T.syncthreads_or(a > 2.0)
            R[bx, tx, 4] = T.cast(T.match_any_sync(I[bx, tx] % 5), "int32")
            R[bx, tx, 5] = T.cast(T.match_all_sync(I[bx, tx] // 4096), "int32")
            R[bx, tx, 6] = T.get_lane_idx() * 100 + T.get_warp_idx() * 10 + T.get_warp_group_idx(32, 2)
            R[bx, tx, 7] = (T.cast(T.shuffle_elect(64), "int32") + T.get_thread_extent() * 10
                            + T.get_block_extent() * 10000 + T.get_warp_idx_sync(16) * 100000)
    return k


def inputs():
    a = torch.randn(2, N) * 1.5
    i = torch.randint(0, 1 << 12, (2, N), dtype=torch.int32)
    i[1, 40] = 1 << 12  # one lane of warp 1 of block 1 disagrees for match_all
    return a, i, torch.full((2, N, 3), float("nan")), torch.full((2, N, 8), -7, dtype=torch.int32)


def check(a, i, f, r):
    a64, iv = a.double().numpy(), i.numpy().astype(np.int64)
    tid = np.arange(N)
    for b in range(2):
        for w in range(N // 32):
            s = slice(32 * w, 32 * w + 32)
            np.testing.assert_allclose(f[b, s, 0].double().numpy(), np.full(32, a64[b, s].sum()), rtol=1e-5, atol=1e-5)
            assert (f[b, s, 1].double().numpy() == a64[b, s].astype(np.float32).max()).all()
            assert (f[b, s, 2].double().numpy() == a64[b, s].astype(np.float32).min()).all()
            assert (r[b, s, 0].numpy() == np.bitwise_or.reduce(iv[b, s])).all()
            assert (r[b, s, 1].numpy() == np.bitwise_and.reduce(iv[b, s])).all()
            key = iv[b, s] % 5
            want = [sum(1 << o for o in range(32) if key[o] == key[l]) for l in range(32)]
            assert (r[b, s, 4].numpy().astype(np.int64) & 0xFFFFFFFF).tolist() == want
            agree = len(set((iv[b, s] // 4096).tolist())) == 1
            assert (r[b, s, 5].numpy() == (-1 if agree else 0)).all()
        af = a[b].numpy()
        assert (r[b, :, 2].numpy() == (af > 0).sum()).all()
        assert (r[b, :, 3].numpy() == int((af > -2.5).all()) + 2 * int((af > 2.0).any())).all()
    assert (r[:, :, 6].numpy() == (tid % 32) * 100 + (tid // 32) * 10 + tid // 64).all()
    assert (r[:, :, 7].numpy() == (tid % 64 == 0) + N * 10 + 2 * 10000 + (tid // 16) * 100000).all()


def test_collectives_on_cpu():
    kern = tilelang.compile(collectives(), target="cpu")
    for _ in range(2):
        args = inputs()
        kern(*args)
        check(*args)


def _needs_tools():
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")


def _host():
    host = pytest.importorskip("tilelang.testing.host_cuda")
    if not host.available():
        pytest.skip("g++ not installed")
    return host


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_collectives_compile_and_run_on_host(arch):
    _needs_tools()
    kern = tilelang.compile(collectives(), target=f"cuda -arch={arch}")
    src = kern.get_kernel_source()
    for name in ("tl_warp_reduce_sum", "tl_match_any", "tl_syncthreads_count"):
        assert name in src, src
    args = inputs()
    _host().HostProgram({"k": kern}).run("k", list(args))
    check(*args)


def handoff():
    """A producer warp group writes, arrives on named barrier 5 and goes on; the consumer warp
    group waits there and reads (T.named_barrier_arrive against T.sync_threads(5, 256)). (The
    compiler's own barriers of each warp-group scope take ids other than 5: barrier_ids.py.)"""
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            S = T.alloc_shared((128,), "float32")
            S2 = T.alloc_shared((128,), "float32")
            T.pdl_sync()
            if tx < 128:
                T.copy(A, S)
                S[tx] = S[tx] * 2 + 1
                T.named_barrier_arrive(5, 256)
            else:
                T.sync_threads(5, 256)
                T.copy(S, S2)
                B[tx - 128] = S2[255 - tx] - 3
            T.pdl_trigger()
    return k


def test_named_barrier_arrive_and_pdl_on_cpu():
    kern = tilelang.compile(handoff(), target="cpu")
    a, b = torch.randn(128), torch.full((128,), float("nan"))
    kern(a, b)
    torch.testing.assert_close(b.double(), a.double().flip(0) * 2 - 2, rtol=1e-6, atol=1e-6)


@pytest.mark.nvrtc
def test_named_barrier_arrive_and_pdl_on_host_sm90a():
    _needs_tools()
    kern = tilelang.compile(handoff(), target="cuda -arch=sm_90a")
    src = kern.get_kernel_source()
    assert "tl::named_barrier_arrive(5, 256)" in src and "tl::pdl_sync()" in src and "tl::pdl_trigger()" in src
    a, b = torch.randn(128), torch.full((128,), float("nan"))
    _host().HostProgram({"k": kern}).run("k", [a, b])
    torch.testing.assert_close(b.double(), a.double().flip(0) * 2 - 2, rtol=1e-6, atol=1e-6)


def test_pdl_needs_sm90():
    with pytest.raises(LoweringError, match=r"T.pdl_sync .*needs sm_90"):
        tilelang.compile(handoff(), target="cuda -arch=sm_80").get_kernel_source()


def test_argument_errors():
    with pytest.raises(tilelang.errors.TileLangError, match="warp_reduce_bitor needs an integer"):
        @T.prim_func
        def k(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                A[0] = T.warp_reduce_bitor(A[0])
    with pytest.raises(tilelang.errors.TileLangError, match="give warp_size too"):
        @T.prim_func
        def k2(A: T.Tensor((32,), "int32")):
            with T.Kernel(1, threads=32):
                A[0] = T.get_warp_group_idx(warps_per_group=2)


@pytest.mark.parametrize("name", ["any_sync", "all_sync", "ballot_sync", "ballot", "syncthreads_count",
                                  "syncthreads_and", "syncthreads_or"])
def test_vote_predicate_must_be_integer_or_boolean(name):
    """A float predicate is a TypeError naming the dtype found (the public wording)."""
    with pytest.raises(TypeError, match=r"requires an integer or boolean predicate, got float32"):
        @T.prim_func
        def k(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "int32")):
            with T.Kernel(1, threads=32):
                t = T.get_thread_binding()
                B[t] = T.Cast("int32", getattr(T, name)(A[t]))
