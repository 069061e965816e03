"""T.sync_grid where the kernel cannot be split into launches (inside a loop, or registers living across
it) is a cooperative launch: on the CPU backend every block gets an OpenMP thread, on CUDA every block is
resident at once (CudaSource.cooperative, CU_LAUNCH_ATTRIBUTE_COOPERATIVE) and the blocks meet at
tl::sync_grid (tl/sync.h). Float64 references on fresh random inputs; the GPU cases also check that a
grid too large to be resident at once is a clear error, not a hang."""
import warnings

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T

from ..codegen.test_c_cooperative import mirror_sum


def smooth(nb, steps):
    """`steps` rounds of X <- 0.5 * X[j - 1] + 0.25 * X[j + 1] (cyclic) over nb blocks of 32, the new
    values held in registers across the grid barriers of a serial loop."""
    N = nb * 32

    @T.prim_func
    def k(X: T.Tensor((N,), T.float32)):
        with T.Kernel(nb, threads=32) as b:
            v = T.alloc_fragment((32,), T.float32)
            for _ in T.serial(steps):
                for i in T.Parallel(32):
                    v[i] = 0.5 * X[(b * 32 + i + N - 1) % N] + 0.25 * X[(b * 32 + i + 1) % N]
                T.sync_grid()
                for i in T.Parallel(32):
                    X[b * 32 + i] = v[i]
                T.sync_grid()
    return k


def smooth_ref(x, steps):
    x = x.double().numpy()
    for _ in range(steps):
        x = 0.5 * np.roll(x, 1) + 0.25 * np.roll(x, -1)
    return torch.from_numpy(x)


def build(func, target):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(func, target=target)


def check_mirror_sum(kernel, device):
    """mirror_sum (tests/codegen/test_c_cooperative.py, the public example's shape): every element N - 1."""
    a = torch.randn(1024, generator=torch.Generator().manual_seed(7)).to(device)
    kernel(a)
    assert torch.equal(a.cpu(), torch.full((1024,), 1023.0))


def check_smooth(kernel, nb, steps, device, seed):
    x0 = torch.randn(nb * 32, generator=torch.Generator().manual_seed(seed))
    x = x0.clone().to(device)
    kernel(x)
    torch.testing.assert_close(x.cpu().double(), smooth_ref(x0, steps), rtol=1e-5, atol=1e-6)


def test_cpu_backend():
    check_mirror_sum(build(mirror_sum(1024, 64), "cpu"), "cpu")
    check_smooth(build(smooth(6, 5), "cpu"), 6, 5, "cpu", seed=3)


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_source_is_cooperative(arch):
    k = build(smooth(6, 5), f"cuda -arch={arch}")
    src = k.get_kernel_source()
    assert k.artifact.csource.cooperative
    assert "__device__ unsigned tl_grid_bar[2];" in src and src.count("tl::sync_grid(tl_grid_bar);") == 2
    split = build(mirror_sum(1024, 64), f"cuda -arch={arch}")  # its first barrier splits the kernel into launches
    assert "tl::sync_grid(tl_grid_bar);" in split.get_kernel_source()



@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("nb,steps", [(6, 5), (132, 9), (264, 3)])
def test_on_the_gpu(nb, steps):
    check_mirror_sum(build(mirror_sum(1024, 64), "cuda"), "cuda")
    k = build(smooth(nb, steps), "cuda")
    for seed in range(3):  # the barrier words are reused across launches
        check_smooth(k, nb, steps, "cuda", seed)
    torch.cuda.synchronize()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_grid_too_large_to_be_resident_is_an_error():
    from tilelang.backend.cuda.driver import CudaDriverError

    k = build(smooth(200000, 1), "cuda")
    x = torch.randn(200000 * 32, device="cuda")
    with pytest.raises(CudaDriverError, match="every block must be resident"):
        k(x)
    check_smooth(build(smooth(6, 2), "cuda"), 6, 2, "cuda", seed=1)  # the process stays usable
