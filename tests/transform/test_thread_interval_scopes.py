"""Tile ops in a branch on one interval of threads (transform/thread_scopes.py) run over those threads:
`if tx == 0: T.copy(S, B)` copies all of S from thread 0, `if 8 <= tx < 24:` spreads a T.Parallel loop
over 16 lanes of one warp (barriers between its tile ops are `__syncwarp(mask)`), and
`if tx < 32 and bx == 0:` keeps the thread-free test inside the scope. On CUDA these used to be
dealt over all the block's threads, so the threads that skip the branch left their part unwritten
(no error). A branch that is neither whole warps nor inside one warp, and a tile op under a branch
that is not one interval (`if tx % 2 == 0`), are LoweringErrors (transform/cuda/thread_branches.py).
Each case runs on the CPU backend and on the host emulator (sm_90a and sm_80 sources) against float64."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import LoweringError
from tilelang.testing import host_cuda_or_skip

N = 256


def program(case):
    @T.prim_func
    def f(A: T.Tensor((N,), "float32"), B: T.Tensor((2, N), "float32")):
        with T.Kernel(2, threads=64) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((N,), "float32")
            S2 = T.alloc_shared((N,), "float32")
            F = T.alloc_fragment((N,), "float32")
            R = T.alloc_fragment((1,), "float32")
            T.copy(A, S)
            if case == "one_thread_copy":
                if tx == 0:
                    T.copy(S, B[bx, :])
            elif case == "lanes_two_ops":
                if tx >= 8 and tx < 24:
                    for i in T.Parallel(N):
                        S2[i] = S[i] * 3.0
                    for i in T.Parallel(N):
                        B[bx, i] = S2[N - 1 - i] + bx
            elif case == "nested":
                if tx >= 40:
                    if tx < 48:
                        for i in T.Parallel(N):
                            B[bx, i] = S[i] * 3.0 + bx
            elif case == "thread_free_term":
                if tx < 32 and bx == 0:
                    for i in T.Parallel(N):
                        B[bx, i] = S[i] * 3.0
            elif case == "fragment_reduce":
                if tx >= 16 and tx < 32:
                    T.copy(S, F)
                    T.reduce_sum(F, R, dim=0)
                    for i in T.Parallel(N):
                        B[bx, i] = R[0] + S[i]
            elif case == "odd_lanes":  # 7 lanes of warp 1: loops and the reduction over 7 threads
                if tx >= 37 and tx < 44:
                    T.copy(S, F)
                    T.reduce_sum(F, R, dim=0)
                    for i in T.Parallel(N):
                        B[bx, i] = R[0] + S[i]
            elif case == "else_lanes":
                if tx < 48:
                    B[bx, tx] = S[tx] + 1.0
                else:
                    for i in T.Parallel(N - 48):
                        B[bx, 48 + i] = S[48 + i] * 2.0
            elif case == "across_warps":
                if tx >= 16 and tx < 48:
                    for i in T.Parallel(N):
                        B[bx, i] = S[i]
            elif case == "not_an_interval":
                if tx % 2 == 0:
                    T.copy(S, B[bx, :])
    return f


def reference(case, a):
    a = a.double()
    rows = {
        "one_thread_copy": (a, a),
        "lanes_two_ops": ((a * 3).flip(0), (a * 3).flip(0) + 1),
        "nested": (a * 3, a * 3 + 1),
        "thread_free_term": (a * 3, torch.zeros_like(a)),
        "fragment_reduce": (a.sum() + a, a.sum() + a),
        "odd_lanes": (a.sum() + a, a.sum() + a),
    }.get(case)
    if case == "else_lanes":
        row = torch.cat([a[:48] + 1, a[48:] * 2])
        rows = (row, row)
    return torch.stack(rows)


CASES = ["one_thread_copy", "lanes_two_ops", "nested", "thread_free_term", "fragment_reduce", "odd_lanes", "else_lanes"]


def inputs(case):
    a = torch.randn(N)
    b = torch.zeros(2, N) if case == "thread_free_term" else torch.full((2, N), float("nan"))
    return a, b


@pytest.mark.parametrize("case", CASES)
def test_interval_branch_on_cpu(case):
    a, b = inputs(case)
    tilelang.compile(program(case), target="cpu")(a, b)
    torch.testing.assert_close(b.double(), reference(case, a), rtol=1e-5, atol=1e-4)


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("case", CASES)
def test_interval_branch_on_host_emulator(case, arch):
    host = host_cuda_or_skip()
    k = tilelang.compile(program(case), target=f"cuda -arch={arch}")
    a, b = inputs(case)
    host.HostProgram({"f": k}).run("f", [a, b])
    torch.testing.assert_close(b.double(), reference(case, a), rtol=1e-5, atol=1e-4)


@pytest.mark.nvrtc
def test_lanes_of_one_warp_synchronize_with_syncwarp():
    src = tilelang.compile(program("lanes_two_ops"), target="cuda -arch=sm_90a").get_kernel_source()
    assert "if (tid >= 8 && tid < 24) {" in src
    assert "__syncwarp(0xffff00u);" in src  # lanes 8-23 between the two loops, not __syncthreads


@pytest.mark.parametrize("target", ["cpu", "cuda -arch=sm_90a"])
def test_branch_across_warps_is_refused(target):
    with pytest.raises(LoweringError, match=r"threads \[16, 48\).*whole warps"):
        tilelang.compile(program("across_warps"), target=target)


def test_tile_op_under_a_branch_that_is_no_interval_is_refused_on_cuda():
    with pytest.raises(LoweringError, match=r"T\.copy inside a branch on the thread index.*one interval of threads"):
        tilelang.compile(program("not_an_interval"), target="cuda -arch=sm_90a")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("case", CASES)
def test_interval_branch_on_the_gpu(case):
    a, b = inputs(case)
    a, b = a.cuda(), b.cuda()
    tilelang.compile(program(case), target="cuda")(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(b.double().cpu(), reference(case, a.cpu()), rtol=1e-5, atol=1e-4)


def synced(case):
    """The program's own T.sync_threads() inside a thread branch: a barrier of that branch's threads."""
    @T.prim_func
    def f(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((256,), "float32")
            if case == "warp_groups":
                if tx < 128:
                    S[tx] = A[tx] * 2.0
                    T.sync_threads()
                    B[tx] = S[127 - tx]
                else:
                    B[tx] = A[tx]
            elif case == "lanes":
                if tx >= 32 and tx < 40:
                    S[tx] = A[tx] * 2.0
                    T.sync_threads()
                    B[tx] = S[71 - tx]
            else:
                if tx % 2 == 0:
                    T.sync_threads()
    return f


def synced_reference(case, a):
    a = a.double()
    if case == "warp_groups":
        return torch.cat([(a[:128] * 2).flip(0), a[128:]])
    out = torch.full((256,), float("nan"), dtype=torch.float64)
    out[32:40] = (a[32:40] * 2).flip(0)
    return out


@pytest.mark.nvrtc
@pytest.mark.parametrize("case,barrier", [("warp_groups", "tl::barrier_sync<1, 128>();"), ("lanes", "__syncwarp(0xffu);")])
def test_sync_threads_in_a_branch_is_the_branch_barrier(case, barrier):
    a = torch.randn(256)
    b = torch.full((256,), float("nan"))
    tilelang.compile(synced(case), target="cpu")(a, b)
    torch.testing.assert_close(b.double(), synced_reference(case, a), equal_nan=True)
    k = tilelang.compile(synced(case), target="cuda -arch=sm_90a")
    assert barrier in k.get_kernel_source() and "__syncthreads" not in k.get_kernel_source()
    host = host_cuda_or_skip()
    b = torch.full((256,), float("nan"))
    host.HostProgram({"f": k}).run("f", [a, b])
    torch.testing.assert_close(b.double(), synced_reference(case, a), equal_nan=True)


@pytest.mark.parametrize("target", ["cpu", "cuda -arch=sm_90a"])
def test_sync_threads_under_a_branch_that_is_no_interval_is_refused(target):
    with pytest.raises(LoweringError, match=r"T\.sync_threads.* inside a branch on the thread index"):
        tilelang.compile(synced("odd"), target=target)


def flagged(case):
    @T.prim_func
    def f(A: T.Tensor((64,), "float32"), Flag: T.Tensor((1,), "int32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            v = T.alloc_var("int32")
            S = T.alloc_shared((64,), "float32")
            T.copy(A, S)
            if case == "uniform":
                v = Flag[bx]
            else:
                v = tx
            if v > 0:
                for i in T.Parallel(64):
                    B[i] = S[i] * 2.0
    return f


@pytest.mark.nvrtc
@pytest.mark.parametrize("flag", [0, 1])
def test_tile_op_under_a_uniform_alloc_var_runs_over_all_threads(flag):
    a, fl = torch.randn(64), torch.tensor([flag], dtype=torch.int32)
    want = a.double() * 2 if flag else torch.full((64,), float("nan"), dtype=torch.float64)
    b = torch.full((64,), float("nan"))
    tilelang.compile(flagged("uniform"), target="cpu")(a, fl, b)
    torch.testing.assert_close(b.double(), want, equal_nan=True)
    k = tilelang.compile(flagged("uniform"), target="cuda -arch=sm_90a")
    b = torch.full((64,), float("nan"))
    host_cuda_or_skip().HostProgram({"f": k}).run("f", [a, fl, b])
    torch.testing.assert_close(b.double(), want, equal_nan=True)


def test_tile_op_under_an_alloc_var_set_from_tx_is_refused_on_cuda():
    with pytest.raises(LoweringError, match=r"a T\.Parallel loop inside a branch on the thread index"):
        tilelang.compile(flagged("per_thread"), target="cuda -arch=sm_90a")


def rows_of_threads(X, part="row"):
    """A 2-d block: `if ty == 1` is the linear threads [X, 2X) (whole warps for X = 32, 16 lanes for X = 16);
    `if ty == 1 and tx < 4` is [X, X + 4); `if tx < 4` is four pieces of 4 threads, no interval."""
    @T.prim_func
    def f(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=(X, 4)) as bx:
            tx, ty, tz = T.get_thread_bindings()
            S = T.alloc_shared((64,), "float32")
            T.copy(A, S)
            if part == "row":
                if ty == 1:
                    for i in T.Parallel(64):
                        B[i] = S[63 - i] * 2.0
            elif part == "row_start":
                if ty == 1 and tx < 4:
                    for i in T.Parallel(64):
                        B[i] = S[63 - i] * 2.0
            else:
                if tx < 4:
                    for i in T.Parallel(64):
                        B[i] = S[63 - i] * 2.0
    return f


@pytest.mark.nvrtc
@pytest.mark.parametrize("X", [32, 16])
@pytest.mark.parametrize("part", ["row", "row_start"])
def test_branch_on_ty_runs_over_its_row_of_threads(X, part):
    a = torch.randn(64)
    want = (a.double() * 2).flip(0)
    b = torch.full((64,), float("nan"))
    tilelang.compile(rows_of_threads(X, part), target="cpu")(a, b)
    torch.testing.assert_close(b.double(), want)
    hi = 2 * X if part == "row" else X + 4
    for arch in ("sm_90a", "sm_80"):
        k = tilelang.compile(rows_of_threads(X, part), target=f"cuda -arch={arch}")
        assert f"if (tid >= {X} && tid < {hi}) {{" in k.get_kernel_source()
        b = torch.full((64,), float("nan"))
        host_cuda_or_skip().HostProgram({"f": k}).run("f", [a, b])
        torch.testing.assert_close(b.double(), want)


@pytest.mark.parametrize("target", ["cpu", "cuda -arch=sm_90a"])
def test_branch_on_tx_in_a_2d_block_is_refused(target):
    with pytest.raises(LoweringError, match=r"a T\.Parallel loop inside a branch on the thread index"):
        tilelang.compile(rows_of_threads(32, "pieces"), target=target)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("X", [32, 16])
def test_branch_on_ty_on_the_gpu(X):
    a, b = torch.randn(64, device="cuda"), torch.full((64,), float("nan"), device="cuda")
    tilelang.compile(rows_of_threads(X), target="cuda")(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(b.double().cpu(), (a.double().cpu() * 2).flip(0))


def atomic_at_a_flag():
    """A tile atomic at a row a T.alloc_var picks (the same in every thread): one block-level op. The CPU
    backend used to run it once per thread (64 times the sum), the generated CUDA once."""
    @T.prim_func
    def f(A: T.Tensor((64,), "float32"), Flag: T.Tensor((1,), "int32"), B: T.Tensor((2, 64), "float32")):
        with T.Kernel(3, threads=64) as bx:
            tx = T.get_thread_binding()
            v = T.alloc_var("int32")
            S = T.alloc_shared((64,), "float32")
            T.copy(A, S)
            v = Flag[0]
            T.atomic_add(B[v, :], S)
            if tx == 0 and bx == 0:
                B[1 - v, 0] = B[1 - v, 0] + 1.0
    return f


@pytest.mark.nvrtc
@pytest.mark.parametrize("flag", [0, 1])
def test_tile_atomic_at_a_uniform_alloc_var_row_runs_once_per_block(flag):
    a, fl = torch.randn(64), torch.tensor([flag], dtype=torch.int32)
    want = torch.zeros(2, 64, dtype=torch.float64)
    want[flag] = a.double() * 3
    want[1 - flag, 0] = 1.0
    b = torch.zeros(2, 64)
    tilelang.compile(atomic_at_a_flag(), target="cpu")(a, fl, b)
    torch.testing.assert_close(b.double(), want, rtol=1e-5, atol=1e-5)
    k = tilelang.compile(atomic_at_a_flag(), target="cuda -arch=sm_90a")
    b = torch.zeros(2, 64)
    host_cuda_or_skip().HostProgram({"f": k}).run("f", [a, fl, b])
    torch.testing.assert_close(b.double(), want, rtol=1e-5, atol=1e-5)


def scopes_in_a_row(case):
    """Two branches over the same threads, one writing a tile in an order the other does not read it in:
    a barrier of those threads between them (thread_sync). There was none: scopes were taken to be
    ordered by the program's own barriers, as T.ws producers and consumers over other threads are."""
    @T.prim_func
    def f(A: T.Tensor((32, 32), "float16"), Bm: T.Tensor((32, 32), "float16"), C: T.Tensor((32, 32), "float32"),
          R: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            As = T.alloc_shared((32, 32), "float16")
            Bs = T.alloc_shared((32, 32), "float16")
            S2 = T.alloc_shared((32, 32), "float32")
            Cf = T.alloc_fragment((32, 32), "float32")
            Rf = T.alloc_fragment((32,), "float32")
            T.copy(A, As)
            T.copy(Bm, Bs)
            if case == "loop":  # the gemm's accumulator lives in shared memory (used inside and outside branches)
                T.clear(Cf)
                for k in T.serial(3):
                    if tx < 32:
                        T.gemm(As, Bs, Cf)
                if tx < 32:
                    T.reduce_sum(Cf, Rf, dim=1)
                    T.copy(Cf, C)
                    T.copy(Rf, R)
            else:
                if tx >= 64 and tx < 96:
                    for i, j in T.Parallel(32, 32):
                        S2[i, j] = T.Cast("float32", As[i, j]) * 3.0
                if tx >= 64 and tx < 96:
                    for i, j in T.Parallel(32, 32):
                        C[i, j] = S2[j, i]
                    for i in T.Parallel(32):
                        R[i] = S2[i, 31 - i]
    return f


def scopes_reference(case, a, b):
    a, b = a.double(), b.double()
    if case == "loop":
        c = 3 * (a @ b)
        return c, c.sum(dim=1)
    s2 = a * 3
    return s2.t(), s2[torch.arange(32), 31 - torch.arange(32)]


@pytest.mark.nvrtc
@pytest.mark.parametrize("case", ["loop", "transpose"])
def test_branches_over_the_same_threads_are_ordered(case):
    a, b = torch.randn(32, 32, dtype=torch.float16), torch.randn(32, 32, dtype=torch.float16)
    rc, rr = scopes_reference(case, a, b)
    c, r = torch.full((32, 32), float("nan")), torch.full((32,), float("nan"))
    tilelang.compile(scopes_in_a_row(case), target="cpu")(a, b, c, r)
    torch.testing.assert_close(c.double(), rc, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(r.double(), rr, rtol=1e-4, atol=1e-3)
    for arch in ("sm_80", "sm_90a"):
        k = tilelang.compile(scopes_in_a_row(case), target=f"cuda -arch={arch}")
        c, r = torch.full((32, 32), float("nan")), torch.full((32,), float("nan"))
        host_cuda_or_skip().HostProgram({"f": k}).run("f", [a, b, c, r])
        torch.testing.assert_close(c.double(), rc, rtol=1e-4, atol=1e-3)
        torch.testing.assert_close(r.double(), rr, rtol=1e-4, atol=1e-3)


def test_gemm_on_lanes_of_one_warp_is_refused_on_cuda():
    @T.prim_func
    def f(A: T.Tensor((16, 16), "float16"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((16, 16), "float16")
            F = T.alloc_fragment((16, 16), "float32")
            T.copy(A, S)
            if tx >= 8 and tx < 24:
                T.clear(F)
                T.gemm(S, S, F)
                T.copy(F, C)

    with pytest.raises(LoweringError, match=r"T\.gemm in the branch on threads \[8, 24\): a gemm needs whole warps"):
        tilelang.compile(f, target="cuda -arch=sm_90a")
