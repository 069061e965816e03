"""A T.Parallel loop in a branch on the thread index (`tx = T.get_thread_binding()`; `if tx < 128:
... else: for i in T.Parallel(...)`) runs over that branch's threads (transform/thread_scopes.py),
as a tile op there does. The else branch's loop used to stay an ordinary `if`: on CUDA its
iterations were dealt to threads 0-127, which never take the else branch, so C was never written
(no error); the CPU backend refused it. Both backends against float64 on fresh random inputs."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import host_cuda_or_skip


def branches(threads=256, split=128):
    n_hi = threads - split

    @T.prim_func
    def f(A: T.Tensor((threads,), "float32"), B: T.Tensor((split,), "float32"), C: T.Tensor((n_hi, 2), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            tx = T.get_thread_binding()
            if tx < split:
                B[tx] = A[tx] * 2.0
            else:
                for i, j in T.Parallel(n_hi, 2):
                    C[i, j] = A[split + i] * (j + 1) - 1.0
    return f


def reference(a, threads, split):
    a = a.double()
    c = torch.stack([a[split:] * 1 - 1, a[split:] * 2 - 1], dim=1)
    return a[:split] * 2, c


@pytest.mark.parametrize("threads,split", [(256, 128), (384, 128), (128, 32), (96, 64)])
def test_else_branch_parallel_on_cpu(threads, split):
    a = torch.randn(threads)
    b, c = torch.full((split,), float("nan")), torch.full((threads - split, 2), float("nan"))
    tilelang.compile(branches(threads, split), target="cpu")(a, b, c)
    rb, rc = reference(a, threads, split)
    torch.testing.assert_close(b.double(), rb)
    torch.testing.assert_close(c.double(), rc)


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])  # warp-group branches need no Hopper feature
@pytest.mark.parametrize("threads,split", [(256, 128), (128, 32)])
def test_else_branch_parallel_on_host_emulator(threads, split, arch):
    host = host_cuda_or_skip()
    k = tilelang.compile(branches(threads, split), target=f"cuda -arch={arch}")
    a = torch.randn(threads)
    b, c = torch.full((split,), float("nan")), torch.full((threads - split, 2), float("nan"))
    host.HostProgram({"f": k}).run("f", [a, b, c])
    rb, rc = reference(a, threads, split)
    torch.testing.assert_close(b.double(), rb)
    torch.testing.assert_close(c.double(), rc)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_else_branch_parallel_on_the_gpu():
    a = torch.randn(256, device="cuda")
    b, c = torch.full((128,), float("nan"), device="cuda"), torch.full((128, 2), float("nan"), device="cuda")
    tilelang.compile(branches(), target="cuda")(a, b, c)
    torch.cuda.synchronize()
    rb, rc = reference(a.cpu(), 256, 128)
    torch.testing.assert_close(b.double().cpu(), rb)
    torch.testing.assert_close(c.double().cpu(), rc)
