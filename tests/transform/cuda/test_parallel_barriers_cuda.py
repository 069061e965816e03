"""A barrier in a T.Parallel body on CUDA (transform/parallel_barriers.py in the CUDA pipeline): the loop
is split there, so every thread reaches one __syncthreads between the parts. Before, the barrier stayed
inside the per-thread loop, under the guard of a loop with fewer elements than threads (or more elements
than threads: some threads ran it twice), which the host emulator reports as a divergent barrier. The
host emulator runs the NVRTC-compiled sm_80 / sm_90a source against float64 on fresh inputs."""
import warnings

import pytest
import torch

import tilelang

from ..parallel_barrier_kernels import reverse_add, two_dim
from .conftest import nvrtc_or_skip


def build(func, arch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(func, target=f"cuda -arch={arch}")


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("N,threads", [(64, 128), (200, 128), (256, 64)])
def test_reverse_add_on_host(run_on_host, arch, N, threads):
    nvrtc_or_skip()
    k = build(reverse_add(N, threads), arch)
    body = k.get_kernel_source().split("__global__", 1)[1]
    assert body.count("__syncthreads()") >= 1
    a = torch.randn(N, generator=torch.Generator().manual_seed(N + threads))
    ref = a.double() + a.double().flip(0)
    run_on_host(k, [a])
    torch.testing.assert_close(a.double(), ref, rtol=1e-6, atol=1e-6)


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_two_barriers_through_shared_on_host(run_on_host, arch):
    nvrtc_or_skip()
    M, N = 6, 10
    a = torch.randn(M, N, generator=torch.Generator().manual_seed(61))
    b = torch.full((M, N), float("nan"))
    run_on_host(build(two_dim(M, N, 32), arch), [a, b])
    ref = (a.double() + a.double().flip(0).flip(1)).flip(0) * 2
    torch.testing.assert_close(b.double(), ref, rtol=1e-6, atol=1e-6)
