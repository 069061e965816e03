"""A launch whose grid has an extent of 0 (T.Kernel(0), or a dynamic extent that is 0 for the arguments) is
a ValueError naming the kernel and its grid, as in the public TileLang, on the CPU backend and on CUDA (the
GPU tier); the output is left untouched and the next call with a real grid runs."""
import pytest
import torch

import tilelang
import tilelang.language as T


def dynamic_fill():
    n = T.dynamic("n")

    @T.prim_func
    def k(out: T.Tensor[(n,), T.float32], x: T.Tensor[(n,), T.float32]):
        with T.Kernel(n, threads=1) as b:
            out[b] = x[b] * 2.0
    return k


def static_zero():
    @T.prim_func
    def k(out: T.Tensor[(4,), T.float32]):
        with T.Kernel(0, threads=1) as b:
            out[b] = T.float32(1.0)
    return k


def run(target, device):
    dyn = tilelang.compile(dynamic_fill(), target=target)
    x = torch.randn(5, device=device)
    out = torch.zeros(5, device=device)
    dyn(out, x)
    torch.testing.assert_close(out.cpu().double(), x.cpu().double() * 2)
    with pytest.raises(ValueError, match=r"grid .*at least one block"):
        dyn(torch.zeros(0, device=device), torch.zeros(0, device=device))
    st = tilelang.compile(static_zero(), target=target)
    out = torch.zeros(4, device=device)
    for _ in range(2):
        with pytest.raises(ValueError, match=r"grid .*at least one block"):
            st(out)
    assert out.eq(0).all()
    y = torch.randn(3, device=device)
    dyn(out[:3], y)  # still usable
    torch.testing.assert_close(out[:3].cpu().double(), y.cpu().double() * 2)


def test_cpu():
    run("cpu", "cpu")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_cuda():
    run("cuda", "cuda")
