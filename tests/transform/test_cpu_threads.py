"""cpu_threads: a block's threads on the CPU backend (SIMT segments split at barriers),
checked against float64 references on fresh random inputs."""
import importlib.util
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import LoweringError


def test_splitk_gemv_local_partials_atomically_added():
    """Each of 128 threads accumulates a local partial over its k slice and atomically adds it."""
    M, K = 48, 1024

    @T.prim_func
    def gemv(A: T.Tensor((M, K), "float32"), x: T.Tensor((K,), "float32"), y: T.Tensor((M,), "float32")):
        with T.Kernel(M, threads=128) as bx:
            tx = T.get_thread_binding()
            part = T.alloc_local((1,), "float32")
            T.clear(part)
            for k in T.serial(K // 128):
                part[0] += A[bx, k * 128 + tx] * x[k * 128 + tx]
            T.atomic_add(y[bx], part[0])

    k = tilelang.compile(gemv, target="cpu")
    a, x = torch.randn(M, K), torch.randn(K)
    y = torch.zeros(M)
    k(a, x, y)
    torch.testing.assert_close(y.double(), a.double() @ x.double(), rtol=0, atol=1e-4)


def test_block_reduction_through_shared_memory_two_barriers():
    """Tree reduction: write shared, barrier, halve in a uniform loop with a barrier, read."""
    N = 128

    @T.prim_func
    def red(A: T.Tensor((6, N), "float32"), O: T.Tensor((6, N), "float32")):
        with T.Kernel(6, threads=N) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((N,), "float32")
            S[tx] = A[bx, tx]
            T.sync_threads()
            for step in T.serial(7):
                half = 64 >> step
                if tx < half:
                    S[tx] = S[tx] + S[tx + half]
                T.sync_threads()
            O[bx, tx] = A[bx, tx] - S[0]  # every thread reads the block's sum

    k = tilelang.compile(red, target="cpu")
    a = torch.randn(6, N)
    o = torch.full((6, N), float("nan"))
    k(a, o)
    ref = a.double() - a.double().sum(1, keepdim=True)
    torch.testing.assert_close(o.double(), ref, rtol=0, atol=1e-4)
    src = k.get_kernel_source()
    assert src.count("for (int32_t thr") >= 3  # segments: before the loop, in it, after it


def test_alloc_var_per_thread_across_a_barrier():
    """A T.alloc_var set before a barrier keeps each thread's own value after it."""

    @T.prim_func
    def f(A: T.Tensor((4, 64), "float32"), O: T.Tensor((4, 64), "float32")):
        with T.Kernel(4, threads=64) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((64,), "float32")
            v = T.alloc_var("float32", init=1.0)
            v = A[bx, tx] * 2 + v
            S[tx] = A[bx, tx]
            T.sync_threads()
            O[bx, tx] = v + S[63 - tx]  # a neighbour's value: needs the barrier

    k = tilelang.compile(f, target="cpu")
    a = torch.randn(4, 64)
    o = torch.zeros(4, 64)
    k(a, o)
    ref = a.double() * 2 + 1 + a.double().flip(1)
    torch.testing.assert_close(o.double(), ref, rtol=0, atol=1e-5)


def test_two_dim_threads_tile_ops_once_and_allreduce():
    """threads=(8, 16): T.copy of a shared tile runs once per block; T.tvm_thread_allreduce over ty."""

    @T.prim_func
    def f(A: T.Tensor((8, 16), "float32"), O: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=(8, 16)) as bx:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            S = T.alloc_shared((8, 16), "float32")
            T.copy(A, S)
            r = T.alloc_local((1,), "float32")
            with T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]), "reduce_scope", 0):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), S[tn, tk] * S[tn, tk], True, r[0], tk,
                                                  dtype="handle"))
            if tk == 15:
                O[tn] = r[0]

    k = tilelang.compile(f, target="cpu")
    a = torch.randn(8, 16)
    o = torch.zeros(8)
    k(a, o)
    torch.testing.assert_close(o.double(), (a.double() ** 2).sum(1), rtol=0, atol=1e-5)


def test_warp_shuffle_butterfly_and_ballot():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32"), O: T.Tensor((64,), "float32"), B: T.Tensor((64,), "int64")):
        with T.Kernel(1, threads=64):
            t = T.get_thread_binding()
            v = T.alloc_local((1,), "float32")
            v[0] = A[t]
            for s in T.unroll(5):
                v[0] = v[0] + T.shfl_xor(v[0], 16 >> s)
            O[t] = v[0] + T.shfl_down(A[t], 1)
            B[t] = T.ballot(A[t] > 0)

    k = tilelang.compile(f, target="cpu")
    a = torch.randn(64)
    o, b = torch.zeros(64), torch.zeros(64, dtype=torch.int64)
    k(a, o, b)
    ad = a.double()
    warp_sum = ad.view(2, 32).sum(1).repeat_interleave(32)
    down = torch.cat([ad.view(2, 32)[:, 1:], ad.view(2, 32)[:, 31:]], 1).reshape(64)
    torch.testing.assert_close(o.double(), warp_sum + down, rtol=0, atol=1e-5)
    bits = (a.view(2, 32) > 0).long() << torch.arange(32)
    assert b.tolist() == bits.sum(1).repeat_interleave(32).tolist()


def test_barrier_under_a_thread_branch_is_a_clear_error():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            if tx % 2 == 0:  # (`if tx < 32:` is a branch of whole warps: its T.sync_threads() is their barrier)
                A[tx] = 0
                T.sync_threads()

    with pytest.raises(LoweringError, match="T.sync_threads inside a branch on the thread index") as e:
        tilelang.compile(f, target="cpu")
    assert "T.sync_threads()\n" in str(e.value)  # the caret excerpt of the user's line


def test_loop_with_barrier_and_thread_trip_count_is_a_clear_error():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            for i in T.serial(tx):
                A[tx] = A[tx] + 1
                T.sync_threads()

    with pytest.raises(LoweringError, match="a loop whose trip count depends on the thread index"):
        tilelang.compile(f, target="cpu")


@pytest.mark.parametrize("case,match", [
    ("odd", "T.gemm inside a branch on the thread index"),          # not an interval: a per-thread branch
    ("48", r"branch over threads \[0, 48\): such a branch must cover whole warps"),  # an interval of no whole warps
])
def test_gemm_under_a_thread_branch_is_a_clear_error(case, match):
    @T.prim_func
    def f(A: T.Tensor((16, 16), "float32"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            S = T.alloc_shared((16, 16), "float32")
            F = T.alloc_fragment((16, 16), "float32")
            T.copy(A, S)
            T.clear(F)
            if case == "odd":
                if tx % 2 == 1:
                    T.gemm(S, S, F)
            else:
                if tx < 48:
                    T.gemm(S, S, F)
            T.copy(F, C)

    with pytest.raises(LoweringError, match=match):
        tilelang.compile(f, target="cpu")


def test_warp_group_scope_with_per_thread_cp_async():
    """`if tx >= 128` stays a warp-group scope; inside it each thread copies its own row."""

    @T.prim_func
    def f(A: T.Tensor((128, 64), "float32"), B: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=256) as bx:
            S_ = T.alloc_shared((128, 64), "float32")
            F = T.alloc_fragment((128, 64), "float32")
            full = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            if tx >= 128:
                for c in T.serial(16):
                    T.ptx_cp_async(S_[tx - 128, c * 4], A[tx - 128, c * 4], 4)
                T.cp_async_barrier_noinc(full)
            else:
                T.barrier_wait(full, 0)
                T.copy(S_, F)
                for i, j in T.Parallel(128, 64):
                    F[i, j] = F[i, j] * 2 + 1
                T.copy(F, B)

    a, b = torch.randn(128, 64), torch.zeros(128, 64)
    tilelang.compile(f, target="cpu")(a, b)
    torch.testing.assert_close(b.double(), a.double() * 2 + 1, rtol=0, atol=1e-6)


def test_warp_branch_in_a_small_block_runs_its_own_threads():
    """Fuzz seed 25: `if tx < 32` in a 64-thread block is a warp scope; the CPU model ran it over 128
    threads (warp-group units), wrote past the per-thread arrays and corrupted the heap. It also
    compiles for sm_80 (named barriers), where it was refused as Hopper-only."""
    M = 62

    @T.prim_func
    def f(A: T.Tensor((M, 1), "float32"), O: T.Tensor((M, 1), "float32")):
        with T.Kernel(1, T.ceildiv(M, 32), threads=64) as (bx, by):
            tx = T.get_thread_binding()
            S_ = T.alloc_shared((32, 1), "float32")
            loc = T.alloc_local((1,), "float32")
            T.copy(A[by * 32, bx], S_)
            if tx < 32:
                T.copy(S_[tx:tx + 1, 0:1], loc)
                loc[0] = 3.0 - loc[0] * loc[0]
                T.copy(loc, O[by * 32 + tx:by * 32 + tx + 1, bx:bx + 1])

    a = torch.randn(M, 1)
    o = torch.full((M, 1), float("nan"))
    tilelang.compile(f, target="cpu")(a, o)
    torch.testing.assert_close(o.double(), 3.0 - a.double() ** 2, rtol=1e-6, atol=1e-6)
    if importlib.util.find_spec("cuda") is not None:
        src = tilelang.compile(f, target="cuda -arch=sm_80").get_kernel_source()
        assert "__global__" in src


def thread_invariant_atomic_old_value():
    @T.prim_func
    def k(Cnt: T.Tensor((1,), "int32"), P: T.Tensor((128,), "int32")):
        with T.Kernel(2, threads=64) as bx:
            t = T.get_thread_binding()
            pos = T.atomic_add(Cnt[0], 1, return_prev=True)  # reads no thread index, still per thread
            P[bx * 64 + t] = pos
    return k


def test_an_atomic_bound_to_a_name_runs_in_every_thread():
    cnt, p = torch.zeros(1, dtype=torch.int32), torch.full((128,), -1, dtype=torch.int32)
    tilelang.compile(thread_invariant_atomic_old_value(), target="cpu")(cnt, p)
    assert cnt.item() == 128  # it ran once per block
    assert sorted(p.tolist()) == list(range(128))  # every thread its own old value
