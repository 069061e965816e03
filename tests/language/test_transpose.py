"""T.transpose(src, dst): dst[..., j, i] = src[..., i, j] between on-chip tiles, with slices, a leading
dim and a cast. CPU backend, host emulator and GPU against float64 on fresh random inputs."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import ShapeMismatchError
from tilelang.testing import host_cuda_or_skip

M, N = 64, 96


def program():
    @T.prim_func
    def f(A: T.Tensor((2, M, N), "float16"), Bt: T.Tensor((2, N, M), "float32"), C: T.Tensor((32, 16), "float16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((2, M, N), "float16")
            St = T.alloc_shared((2, N, M), "float32")
            F = T.alloc_fragment((32, 16), "float16")
            T.copy(A, S)
            T.transpose(S, St)                                # 3-d, float16 -> float32
            T.copy(St, Bt)
            T.transpose(S[1, 8:24, 40:72], F)                 # a (16, 32) slice of stage 1 into a fragment
            T.copy(F, C)
    return f


def reference(a):
    a = a.double()
    return a.transpose(1, 2), a[1, 8:24, 40:72].t()


def run_and_check(run, device="cpu"):
    a = torch.randn(2, M, N, dtype=torch.float16)
    bt, c = torch.full((2, N, M), float("nan")), torch.full((32, 16), float("nan"), dtype=torch.float16)
    outs = [x.to(device) for x in (a, bt, c)]
    run(*outs)
    rb, rc = reference(a)
    torch.testing.assert_close(outs[1].double().cpu(), rb)
    torch.testing.assert_close(outs[2].double().cpu(), rc)


def test_transpose_on_cpu():
    run_and_check(tilelang.compile(program(), target="cpu"))


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_transpose_on_host_emulator(arch):
    host = host_cuda_or_skip()
    k = tilelang.compile(program(), target=f"cuda -arch={arch}")
    run_and_check(lambda *xs: host.HostProgram({"f": k}).run("f", list(xs)))


def test_transpose_checks_shapes_and_scopes():
    with pytest.raises(ShapeMismatchError, match=r"dst must be \(32, 16\); got F \(16, 32\)"):
        @T.prim_func
        def f(A: T.Tensor((16, 32), "float32")):
            with T.Kernel(1, threads=32):
                S = T.alloc_shared((16, 32), "float32")
                F = T.alloc_fragment((16, 32), "float32")
                T.transpose(S, F)


def global_program(m, n):
    """Global tensors on both sides, with slices that run past the edges: src elements outside X
    read as 0, dst elements outside Y are not written."""
    @T.prim_func
    def g(X: T.Tensor((3, m, n), "float32"), Y: T.Tensor((3, n, m), "float16"), Z: T.Tensor((n, m), "float32"),
          W: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=64):
            T.transpose(X, Y)                                     # whole tensors, a cast to float16
            T.transpose(X[1, 0:m, 4:n + 4], Z[0:n, 2:m + 2])      # src past its last column, dst past its last
            F = T.alloc_fragment((16, 16), "float32")
            T.transpose(X[2, m - 8:m + 8, 0:16], F)               # global -> fragment, rows past the edge
            T.copy(F, W)
    return g


def run_global_and_check(run, m=24, n=20, device="cpu"):
    x = torch.randn(3, m, n)
    y = torch.full((3, n, m), float("nan"), dtype=torch.float16)
    z = torch.full((n, m), -7.0)
    w = torch.full((16, 16), float("nan"))
    outs = [t.to(device) for t in (x, y, z, w)]
    run(*outs)
    xd = x.double()
    zr = torch.full((n, m), -7.0, dtype=torch.float64)
    src = torch.zeros(m, n, dtype=torch.float64)
    src[:, :n - 4] = xd[1, :, 4:]                                 # columns n..n+3 are outside X: 0
    zr[:, 2:] = src.t()[:, :m - 2]                                # dst columns m, m+1 are skipped
    wr = torch.zeros(16, 16, dtype=torch.float64)
    wr[:8, :] = xd[2, m - 8:, :16]                                # rows m..m+7 are outside X: 0
    torch.testing.assert_close(outs[1].double().cpu(), xd.transpose(1, 2).half().double())
    torch.testing.assert_close(outs[2].double().cpu(), zr)
    torch.testing.assert_close(outs[3].double().cpu(), wr.t())


def test_transpose_global_tensors_on_cpu():
    run_global_and_check(tilelang.compile(global_program(24, 20), target="cpu"))


@pytest.mark.nvrtc
def test_transpose_global_tensors_on_host_emulator():
    host = host_cuda_or_skip()
    k = tilelang.compile(global_program(24, 20), target="cuda -arch=sm_90a")
    run_global_and_check(lambda *xs: host.HostProgram({"g": k}).run("g", list(xs)))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_transpose_on_the_gpu():
    k = tilelang.compile(program(), target="cuda")

    def run(*xs):
        k(*xs)
        torch.cuda.synchronize()
    run_and_check(run, "cuda")
