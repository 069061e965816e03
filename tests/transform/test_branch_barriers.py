"""The compiler's barriers for SIMT code that races on shared memory, inside and outside thread branches.

TileLang inserts the barriers a program's shared-memory accesses need. Two gaps, both silently wrong:
- CPU backend: SIMT code between two barriers ran thread by thread, so `S[tx] = A[tx]` then
  `B[tx] = S[63 - tx]` read elements other threads had not written yet (the CUDA path put a
  __syncthreads between them). cpu_threads now splits SIMT code where CUDA's thread_sync would
  put a barrier: between statements, and inside loops and branches every thread takes alike.
- Both, for `c = tx < 64` then `if c:`: the condition was opaque (no barrier at all); thread_scopes now reads
  an if's condition through the lets it names.
- CUDA: inside `if tx < 64:` no barrier was put (threads that skip the branch never arrive), so the
  same two statements raced. The public TileLang gives such a branch partial barriers of its threads;
  thread_sync now does (a named barrier of whole warps, __syncwarp for lanes of one warp; a branch
  over other threads, `if tx < 48:`, is cut into two ifs around a __syncthreads, as the public build
  cuts it), and the CPU backend runs the branch's statements over its threads in order.
Each program runs on the CPU backend and on the host emulator (sm_90a and sm_80) against float64.
"""
import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import host_cuda_or_skip

N = 64


def program(case):
    threads = 64 if case in ("top_level", "top_level_loop", "branch_all_but_one") else 128

    @T.prim_func
    def f(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((2 * N,), "float32")
            v = T.alloc_var("float32")
            if case == "top_level":
                S[tx] = A[tx]
                B[tx] = S[N - 1 - tx]
            elif case == "top_level_loop":  # prefix sums: a read and a write of S in every pass
                S[tx] = A[tx]
                for r in T.serial(6):
                    if tx >= (1 << r):
                        v = S[tx] + S[tx - (1 << r)]
                    if tx >= (1 << r):
                        S[tx] = v
                B[tx] = S[tx]
            elif case == "branch":
                if tx < N:
                    S[tx] = A[tx]
                    B[tx] = S[N - 1 - tx]
            elif case == "branch_not_warps":  # 48 threads: no barrier joins them; the if is cut instead
                if tx < 48:
                    S[tx] = A[tx]
                    B[tx] = S[47 - tx]
            elif case == "branch_all_but_one":  # its else side is one lane: the if is still cut (fuzz seed 16)
                if tx < N - 1:
                    S[tx] = A[tx]
                    B[tx] = S[N - 2 - tx]
            elif case == "let_condition":  # the condition through a let: the same branch as "branch"
                c = tx < N
                if c:
                    S[tx] = A[tx]
                    B[tx] = S[N - 1 - tx]
            elif case == "branch_mid":
                if tx >= 32 and tx < 32 + N:
                    S[tx - 32] = A[tx - 32]
                    B[tx - 32] = S[N + 31 - tx]
            elif case == "branch_loop":
                if tx >= N:
                    S[tx - N] = A[tx - N]
                    for r in T.serial(6):
                        if tx - N >= (1 << r):
                            v = S[tx - N] + S[tx - N - (1 << r)]
                        if tx - N >= (1 << r):
                            S[tx - N] = v
                    B[tx - N] = S[tx - N]
            elif case == "branch_else":
                if tx < N:
                    S[tx] = A[tx]
                    B[tx] = S[N - 1 - tx]
                else:
                    S[tx] = A[tx - N] * 2.0
                    C[tx - N] = S[3 * N - 1 - tx]
            elif case == "overlapping_scopes":  # warps 0-2, then warp group 0: default barrier 1 both
                if tx < 96:
                    for i in T.Parallel(N):
                        S[i] = A[i] * 2.0
                    for i in T.Parallel(N):
                        B[i] = S[N - 1 - i]
                if tx < 128:
                    T.sync_threads()
                    if tx < N:
                        C[tx] = A[tx] * 3.0
            elif case == "lane_scopes_overlap":  # lane 31 alone, then lanes 16-31: two __syncwarp masks
                if tx == 31:
                    for i in T.Parallel(N):
                        S[N + i] = A[i] * 2.0
                    for i in T.Parallel(N):
                        B[i] = S[2 * N - 1 - i]
                if tx >= 16 and tx < 32:
                    S[tx - 16] = A[tx - 16]
                    C[tx - 16] = S[31 - tx]
            elif case == "lanes":
                if tx >= 40 and tx < 56:
                    S[tx - 40] = A[tx - 40]
                    B[tx - 40] = S[55 - tx]
    return f


CASES = ["top_level", "top_level_loop", "branch", "let_condition", "branch_not_warps", "branch_all_but_one", "branch_mid", "branch_loop", "branch_else", "lanes",
         "overlapping_scopes", "lane_scopes_overlap"]


def reference(case, a):
    a = a.double()
    b = torch.full((N,), -1.0, dtype=torch.float64)
    c = torch.full((N,), -1.0, dtype=torch.float64)
    if case in ("top_level", "branch", "let_condition", "branch_mid"):
        b = a.flip(0)
    elif case in ("top_level_loop", "branch_loop"):
        b = torch.from_numpy(np.cumsum(a.numpy()))
    elif case == "branch_else":
        b, c = a.flip(0), 2 * a.flip(0)
    elif case == "lanes":
        b[:16] = a[:16].flip(0)
    elif case == "branch_not_warps":
        b[:48] = a[:48].flip(0)
    elif case == "branch_all_but_one":
        b[:N - 1] = a[:N - 1].flip(0)
    elif case == "overlapping_scopes":
        b, c = 2 * a.flip(0), 3 * a
    elif case == "lane_scopes_overlap":  # (fuzz branch family seed 138: the host emulator took the two
        b = 2 * a.flip(0)               # masks' __syncwarp for divergent code; PTX meets each mask apart)
        c[:16] = a[:16].flip(0)
    return b, c


def inputs():
    return torch.randn(N), torch.full((N,), -1.0), torch.full((N,), -1.0)


def check(run, case):
    a, b, c = inputs()
    run(a, b, c)
    rb, rc = reference(case, a)
    torch.testing.assert_close(b.double(), rb, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(c.double(), rc, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", CASES)
def test_races_get_barriers_on_cpu(case):
    check(tilelang.compile(program(case), target="cpu"), case)


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("case", CASES)
def test_races_get_barriers_on_host_emulator(case, arch):
    host = host_cuda_or_skip()
    k = tilelang.compile(program(case), target=f"cuda -arch={arch}")
    check(lambda *args: host.HostProgram({"f": k}).run("f", list(args)), case)


@pytest.mark.nvrtc
@pytest.mark.parametrize("case,barrier", [("branch", "tl::barrier_sync<1, 64>();"),
                                          ("branch_mid", "tl::barrier_sync<2, 64>();"),
                                          ("lanes", "__syncwarp(0xffff00u);")])
def test_branch_barrier_joins_the_branch_threads(case, barrier):
    src = tilelang.compile(program(case), target="cuda -arch=sm_90a").get_kernel_source()
    assert barrier in src
    assert src.count("__syncthreads()") == 0
    off = tilelang.compile(program(case), target="cuda -arch=sm_90a",
                           pass_configs={"tl.disable_branch_barriers": True}).get_kernel_source()
    assert barrier not in off


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("case", CASES)
def test_races_get_barriers_on_the_gpu(case):
    k = tilelang.compile(program(case), target="cuda")
    a, b, c = (x.cuda() for x in inputs())
    k(a, b, c)
    rb, rc = reference(case, a.cpu())
    torch.testing.assert_close(b.cpu().double(), rb, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(c.cpu().double(), rc, rtol=1e-5, atol=1e-5)


@pytest.mark.nvrtc
def test_scopes_over_different_threads_get_different_barriers():
    """`if tx < 96:` and `if tx < 128:` both defaulted to named barrier 1 (warp 0, warp group 0): threads
    96-127 reached the second one's `bar.sync 1, 128` while 0-95 waited at `bar.sync 1, 96` (a hang on
    the host emulator; fuzz seed 40 of the branch family). Codegen gives the later range a free id."""
    import re

    src = tilelang.compile(program("overlapping_scopes"), target="cuda -arch=sm_90a").get_kernel_source()
    ids = {}
    for i, n in re.findall(r"barrier_sync<(\d+), (\d+)>", src):
        ids.setdefault(i, set()).add(n)
    assert ids and all(len(n) == 1 for n in ids.values()), ids


@pytest.mark.nvrtc
def test_branch_over_part_of_a_warp_is_cut_around_a_block_barrier():
    src = tilelang.compile(program("branch_not_warps"), target="cuda -arch=sm_90a").get_kernel_source()
    assert src.count("if ((tid < 48)) {") == 2 and src.count("__syncthreads();") == 1


def loop_in_unjoinable_branch(own: bool):
    """A loop inside `if tx < 48:` (no barrier joins 48 threads, and a loop cannot be cut around): a race
    across its passes is refused on CUDA, as the public TileLang refuses it; a loop where each thread only
    touches its own elements of S needs no barrier and compiles."""

    @T.prim_func
    def f(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((N,), "float32")
            if tx < 48:
                S[tx] = 0.0
                for k in T.serial(4):
                    if own:
                        S[tx] = S[tx] + A[tx] * k
                    else:
                        S[tx] = A[tx] + k
                        B[tx] = B[tx] + S[47 - tx]
                B[tx] = S[tx]
    return f


@pytest.mark.parametrize("target", ["cuda -arch=sm_90a", "cpu"])
def test_race_in_a_loop_in_an_unjoinable_branch_is_refused(target):
    """Refused on both backends alike (the CPU backend, which runs a block's threads one after another
    between barriers, ran it before: the backends disagreed)."""
    with pytest.raises(tilelang.errors.LoweringError, match=r"barrier inside `if .*tx < 48.*threads \[0, 48\)"):
        tilelang.compile(loop_in_unjoinable_branch(own=False), target=target)


@pytest.mark.nvrtc
def test_own_elements_in_a_loop_in_an_unjoinable_branch_compile():
    host = host_cuda_or_skip()
    k = tilelang.compile(loop_in_unjoinable_branch(own=True), target="cuda -arch=sm_90a")
    a, b = torch.randn(N), torch.full((N,), -1.0)
    host.HostProgram({"f": k}).run("f", [a, b])
    ref = torch.full((N,), -1.0, dtype=torch.float64)
    ref[:48] = a[:48].double() * 6
    torch.testing.assert_close(b.double(), ref, rtol=1e-5, atol=1e-5)
    c = torch.full((N,), -1.0)
    tilelang.compile(loop_in_unjoinable_branch(own=True), target="cpu")(a, c)
    torch.testing.assert_close(c.double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.nvrtc
@pytest.mark.parametrize("step,trips,ok", [(4, 4, True), (4, 5, False)])
def test_own_element_runs_in_a_loop_in_an_unjoinable_branch(step, trips, ok):
    """`S[tx * 4 + k]` for k < 4 inside `if tx < 48:`: each thread's elements lie apart from the others', so the
    loop needs no barrier and compiles; with k < 5 thread t's last element is thread t + 1's first: refused."""

    @T.prim_func
    def f(A: T.Tensor((48 * step,), "float32"), B: T.Tensor((48 * step + trips,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((48 * step + trips,), "float32")
            if tx < 48:
                for k in T.serial(trips):
                    S[tx * step + k] = A[tx * step + k % step] * 2.0
                    B[tx * step + k] = S[tx * step + k] + 1.0

    if not ok:
        for target in ("cuda -arch=sm_90a", "cpu"):
            with pytest.raises(tilelang.errors.LoweringError, match="barrier inside"):
                tilelang.compile(f, target=target)
        return
    c = torch.zeros(48 * step + trips)
    a = torch.randn(48 * step)
    tilelang.compile(f, target="cpu")(a, c)
    ref = torch.zeros(48 * step + trips, dtype=torch.float64)
    ref[:48 * step] = a.double() * 2 + 1
    torch.testing.assert_close(c.double(), ref, rtol=1e-6, atol=1e-6)
    host = host_cuda_or_skip()
    k = tilelang.compile(f, target="cuda -arch=sm_90a")
    a, b = torch.randn(48 * step), torch.zeros(48 * step + trips)
    host.HostProgram({"f": k}).run("f", [a, b])
    ref = torch.zeros(48 * step + trips, dtype=torch.float64)
    ref[:48 * step] = a.double() * 2 + 1
    torch.testing.assert_close(b.double(), ref, rtol=1e-6, atol=1e-6)


@pytest.mark.nvrtc
@pytest.mark.parametrize("gap,ok", [(1, True), (2, False)])
def test_two_index_forms_of_own_elements_in_a_loop_in_an_unjoinable_branch(gap, ok):
    """`S[2 * tx]` written and `S[2 * tx + 1]` read in a loop inside `if tx < 48:`: two index forms of one
    buffer, both thread t's own elements (2t and 2t + 1), need no barrier and compile, on both backends alike;
    with `S[2 * tx + 2]` thread t reads thread t + 1's element: a race no barrier can fix there, refused."""

    @T.prim_func
    def f(A: T.Tensor((100,), "float32"), B: T.Tensor((100,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((100,), "float32")
            if tx < 48:
                S[2 * tx + gap] = 1.0
                for k in T.serial(3):
                    S[2 * tx] = A[2 * tx] * k
                    S[2 * tx + gap] = S[2 * tx + gap] + S[2 * tx]
                B[2 * tx + gap] = S[2 * tx + gap]

    if not ok:
        for target in ("cuda -arch=sm_90a", "cpu"):
            with pytest.raises(tilelang.errors.LoweringError, match=r"barrier inside `if .*tx < 48"):
                tilelang.compile(f, target=target)
        return
    a = torch.randn(100)
    ref = torch.zeros(100, dtype=torch.float64)
    ref[1:96:2] = 1 + 3 * a[0:96:2].double()
    c = torch.zeros(100)
    tilelang.compile(f, target="cpu")(a, c)
    torch.testing.assert_close(c.double(), ref, rtol=1e-5, atol=1e-5)
    host = host_cuda_or_skip()
    b = torch.zeros(100)
    host.HostProgram({"f": tilelang.compile(f, target="cuda -arch=sm_90a")}).run("f", [a, b])
    torch.testing.assert_close(b.double(), ref, rtol=1e-5, atol=1e-5)
