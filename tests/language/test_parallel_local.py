"""A T.Parallel loop that stores only into a thread's T.alloc_local array runs whole in every thread (no
thread shares its iterations), as in the public TileLang; one that stores to global or shared memory or a
T.alloc_var is split over the threads, each iteration once, also when it reads the thread index or a
per-thread value. CPU backend and the host emulator (sm_80 source) against float64 / exact references."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import host_cuda_or_skip

THREADS, PER = 32, 8


def local_rows():
    @T.prim_func
    def f(A: T.Tensor((THREADS * PER,), "float32"), Out: T.Tensor((THREADS * PER,), "float32")):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding()
            loc = T.alloc_local((PER,), "float32")
            for i in T.Parallel(PER):  # every thread fills all PER of its own
                loc[i] = A[tx * PER + i] * 2.0 + 1.0
            for i in T.serial(PER):
                Out[tx * PER + (PER - 1 - i)] = loc[i]
    return f


def local_sums():
    @T.prim_func
    def f(A: T.Tensor((THREADS, 16), "float32"), Out: T.Tensor((THREADS, 4), "float32")):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding()
            part = T.alloc_local((4,), "float32")
            for k in T.serial(4):
                part[k] = 0.0
            for i, k in T.Parallel(4, 4):
                part[k] = part[k] + A[tx, i * 4 + k]
            for k in T.serial(4):
                Out[tx, k] = part[k]
    return f


def global_counts():
    @T.prim_func
    def f(Cnt: T.Tensor((4, 64), "int32")):
        with T.Kernel(4, threads=THREADS) as bx:
            for i in T.Parallel(64):  # a global store: split over the threads, each element once
                Cnt[bx, i] = Cnt[bx, i] + 1
    return f


def reference_rows(a):
    r = (a.double() * 2 + 1).reshape(THREADS, PER)
    return r.flip(1).reshape(-1)


def run_cpu(func, *args):
    tilelang.compile(func, target="cpu")(*args)


def run_emulated(func, *args):
    host = host_cuda_or_skip()
    k = tilelang.compile(func, target="cuda -arch=sm_80")
    host.HostProgram({"f": k}).run("f", list(args))
    return k.get_kernel_source()


@pytest.mark.parametrize("where", ["cpu", pytest.param("emulated", marks=pytest.mark.nvrtc)])
def test_local_array_filled_by_every_thread(where):
    a = torch.randn(THREADS * PER)
    out = torch.zeros(THREADS * PER)
    (run_cpu if where == "cpu" else run_emulated)(local_rows(), a, out)
    torch.testing.assert_close(out.double(), reference_rows(a), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("where", ["cpu", pytest.param("emulated", marks=pytest.mark.nvrtc)])
def test_local_partial_sums_over_all_iterations(where):
    a = torch.randn(THREADS, 16)
    out = torch.zeros(THREADS, 4)
    (run_cpu if where == "cpu" else run_emulated)(local_sums(), a, out)
    ref = a.double().reshape(THREADS, 4, 4).sum(1)
    torch.testing.assert_close(out.double(), ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("where", ["cpu", pytest.param("emulated", marks=pytest.mark.nvrtc)])
def test_global_store_loop_still_split(where):
    base = torch.randint(-50, 50, (4, 64), dtype=torch.int32)
    cnt = base.clone()
    (run_cpu if where == "cpu" else run_emulated)(global_counts(), cnt)
    assert torch.equal(cnt, base + 1)


def thread_reading_loops():
    @T.prim_func
    def f(A: T.Tensor((3, 128), "float32"), Acc: T.Tensor((128,), "float32"), Cnt: T.Tensor((128,), "int32"),
          Part: T.Tensor((THREADS,), "float32")):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding()
            s = T.alloc_var("float32")
            s = 0.0
            for r in T.serial(3):
                for i in T.Parallel(128):  # reads tx: still each element once
                    Acc[i] = Acc[i] + A[r, i] * T.cast(tx - tx + r + 1, "float32")
            for i in T.Parallel(128):
                T.atomic_add(Cnt[i], 1 + tx * 0)
            for i in T.Parallel(128):  # a T.alloc_var sum: each thread adds the iterations it owns
                s = s + A[0, i]
            Part[tx] = s
    return f


@pytest.mark.parametrize("where", ["cpu", pytest.param("emulated", marks=pytest.mark.nvrtc)])
def test_thread_reading_loop_runs_each_iteration_once(where):
    a = torch.randn(3, 128)
    acc0 = torch.randn(128)
    acc, cnt, part = acc0.clone(), torch.zeros(128, dtype=torch.int32), torch.zeros(THREADS)
    (run_cpu if where == "cpu" else run_emulated)(thread_reading_loops(), a, acc, cnt, part)
    ad = a.double()
    torch.testing.assert_close(acc.double(), acc0.double() + ad[0] + 2 * ad[1] + 3 * ad[2], rtol=1e-5, atol=1e-5)
    assert cnt.eq(1).all()
    torch.testing.assert_close(part.double().sum(), ad[0].sum(), rtol=1e-5, atol=1e-5)


@pytest.mark.nvrtc
def test_local_loop_source_is_per_thread():
    src = tilelang.compile(local_rows(), target="cuda -arch=sm_80").get_kernel_source()
    assert f"for (int i = 0; i < {PER}; ++i)" in src  # the whole loop in every thread, no thread split
