"""T.assume on values the host binds (symbolic dims, scalar parameters) is checked at each call: a
false one raises RuntimeError("Assume: ..."); one that reads device values stays an unchecked promise."""
import pytest
import torch

import tilelang
import tilelang.language as T


def fill_kernel():
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), s: T.int32):
        with T.Kernel(1, threads=32):
            T.assume(N % 4 == 0)
            T.assume(s < N)
            tx = T.get_thread_binding()
            if tx < N:
                A[tx] = T.cast(tx + s, "float32") * 0.5

    return main


def test_true_assumes_run_and_false_ones_raise():
    k = tilelang.compile(fill_kernel(), target="cpu")
    for n in (4, 8, 28):
        s = int(torch.randint(0, n, ()))
        a = torch.full((n,), float("nan"))
        k(a, s)
        torch.testing.assert_close(a.double(), (torch.arange(n, dtype=torch.float64) + s) * 0.5)
    a = torch.full((6,), -3.0)
    with pytest.raises(RuntimeError, match=r"Assume: N % 4 == 0 does not hold .*N=6"):
        k(a, 1)
    assert bool((a == -3.0).all())  # the kernel did not run
    with pytest.raises(RuntimeError, match=r"Assume: s < N does not hold .*"):
        k(torch.zeros(8), 8)


def test_device_assume_is_not_checked_on_the_host():
    """x is a local variable and tx a thread index: the host cannot evaluate these promises."""
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), out: T.Tensor((32,), "float32"), l: T.int32):
        with T.Kernel(1, threads=32):
            x = T.alloc_var("int32")
            x = l
            T.assume(x >= 0 and x < N)
            tx = T.get_thread_binding()
            T.assume(tx < 32)
            out[tx] = A[x] + T.cast(tx, "float32")

    k = tilelang.compile(main, target="cpu")
    assert k.binder.host_checks == ()
    a, out = torch.randn(10), torch.full((32,), float("nan"))
    k(a, out, 3)
    torch.testing.assert_close(out.double(), a[3].double() + torch.arange(32, dtype=torch.float64))
