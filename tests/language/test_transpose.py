"""T.transpose(src, dst): dst[..., j, i] = src[..., i, j] between on-chip tiles, with slices, a leading
dim and a cast. CPU backend, host emulator and GPU against float64 on fresh random inputs."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import DSLTypeError, ShapeMismatchError
from tilelang.testing import host_cuda_or_skip

M, N = 64, 96


def program():
    @T.prim_func
    def f(A: T.Tensor((2, M, N), "float16"), Bt: T.Tensor((2, N, M), "float32"), C: T.Tensor((32, 16), "float16")):
        with T.Kernel(1, threads=128) as bx:
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
            with T.Kernel(1, threads=32) as bx:
                S = T.alloc_shared((16, 32), "float32")
                F = T.alloc_fragment((16, 32), "float32")
                T.transpose(S, F)
    with pytest.raises(DSLTypeError, match=r"A is a global tensor"):
        @T.prim_func
        def g(A: T.Tensor((16, 32), "float32")):
            with T.Kernel(1, threads=32) as bx:
                F = T.alloc_fragment((32, 16), "float32")
                T.transpose(A, F)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_transpose_on_the_gpu():
    k = tilelang.compile(program(), target="cuda")

    def run(*xs):
        k(*xs)
        torch.cuda.synchronize()
    run_and_check(run, "cuda")
