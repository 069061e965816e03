"""T.sync_grid at the top level of a kernel (transform/grid_barrier.py): the kernel is split into
launches there, as the public deepseek_mla/example_mla_decode_persistent.py needs (a persistent
split-KV pass over waves of tiles, a grid barrier, then a combine pass). Here: per-(row, split)
partial sums and maxima over waves of a small persistent grid, then a combine of the partials,
against float64 on the CPU backend and on the host emulator (sm_80, sm_90a)."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import host_cuda_or_skip

R, C, SPLIT, BLOCKS, BC = 10, 256, 4, 3, 64  # 40 (row, split) tiles over 3 blocks: 14 waves


def persistent():
    CS = C // SPLIT

    @T.prim_func
    def k(X: T.Tensor((R, C), T.float32), Part: T.Tensor((R, SPLIT, 2), T.float32), Out: T.Tensor((R, 2), T.float32)):
        with T.Kernel(BLOCKS, threads=64) as b:
            tile = T.alloc_fragment((BC,), T.float32)
            s = T.alloc_fragment((1,), T.float32)
            mx = T.alloc_fragment((1,), T.float32)
            acc = T.alloc_var(T.float32)
            best = T.alloc_var(T.float32)
            waves = T.ceildiv(R * SPLIT, BLOCKS)
            for w in T.serial(waves):
                t = w * BLOCKS + b
                if t < R * SPLIT:
                    T.clear(s)
                    T.fill(mx, -T.infinity(T.float32))
                    for c in T.serial(CS // BC):
                        T.copy(X[t // SPLIT, (t % SPLIT) * CS + c * BC:(t % SPLIT) * CS + (c + 1) * BC], tile)
                        T.reduce_sum(tile, s, dim=0, clear=False)
                        T.reduce_max(tile, mx, dim=0, clear=False)
                    Part[t // SPLIT, t % SPLIT, 0] = s[0]
                    Part[t // SPLIT, t % SPLIT, 1] = mx[0]
            T.sync_grid()
            for w in T.serial(T.ceildiv(R, BLOCKS)):
                r = w * BLOCKS + b
                if r < R:
                    acc = 0.0
                    best = -T.infinity(T.float32)
                    for p in T.serial(SPLIT):
                        acc += Part[r, p, 0]
                        best = T.max(best, Part[r, p, 1])
                    Out[r, 0] = acc
                    Out[r, 1] = best
    return k


def check(x, part, out):
    x64 = x.double().view(R, SPLIT, C // SPLIT)
    torch.testing.assert_close(part[..., 0].double(), x64.sum(-1), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(part[..., 1].double(), x64.amax(-1), rtol=0, atol=0)
    torch.testing.assert_close(out[:, 0].double(), x.double().sum(-1), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(out[:, 1].double(), x.double().amax(-1), rtol=0, atol=0)


def fresh():
    return torch.randn(R, C), torch.full((R, SPLIT, 2), float("nan")), torch.full((R, 2), float("nan"))


def test_split_and_cpu_backend():
    from tilelang.transform.grid_barrier import split_grid_barriers
    from tilelang.ir import stmt as S
    from tilelang.ir.visitor import collect

    f = split_grid_barriers(persistent())
    launches = collect(f.body, lambda n: isinstance(n, S.KernelLaunch))
    assert len(launches) == 2 and launches[0].block_vars[0] is not launches[1].block_vars[0]
    x, part, out = fresh()
    tilelang.compile(persistent(), target="cpu")(x, part, out)
    check(x, part, out)


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_on_host(arch):
    host = host_cuda_or_skip()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kern = tilelang.compile(persistent(), target=f"cuda -arch={arch}")
    assert "sync_grid" not in kern.get_kernel_source() and len(kern.artifact.kernels) == 2
    x, part, out = fresh()
    host.HostProgram({"k": kern}).run("k", [x, part, out])
    check(x, part, out)


@pytest.mark.nvrtc
def test_register_buffer_across_the_barrier():
    """The kernel stays whole: a cooperative launch on CUDA (tl::sync_grid, checked on the GPU by
    tests/language/test_sync_grid_cooperative.py); the CPU backend runs its blocks at once."""
    @T.prim_func
    def k(X: T.Tensor((64,), T.float32), F: T.Tensor((2,), T.float32), Out: T.Tensor((64,), T.float32)):
        with T.Kernel(2, threads=64) as b:
            tile = T.alloc_fragment((32,), T.float32)
            T.copy(X[b * 32:b * 32 + 32], tile)
            F[b] = tile[0] * 3.0  # read by the other block after the barrier
            T.sync_grid()
            for i in T.Parallel(32):
                Out[b * 32 + i] = tile[i] + F[1 - b]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cuda = tilelang.compile(k, target="cuda -arch=sm_80")
    assert cuda.artifact.csource.cooperative and "tl::sync_grid(tl_grid_bar);" in cuda.get_kernel_source()
    x = torch.randn(64)
    ref = x.double().clone()
    ref[:32] += 3 * x.double()[32]
    ref[32:] += 3 * x.double()[0]
    f, out = torch.full((2,), float("nan")), torch.full((64,), float("nan"))
    tilelang.compile(k, target="cpu")(x, f, out)
    torch.testing.assert_close(out.double(), ref, rtol=1e-6, atol=1e-6)


@pytest.mark.nvrtc
def test_barrier_inside_a_loop_is_a_cooperative_launch_on_cuda():
    @T.prim_func
    def k(X: T.Tensor((64,), T.float32)):
        with T.Kernel(2, threads=64):
            for _ in T.serial(2):
                T.sync_grid()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cuda = tilelang.compile(k, target="cuda -arch=sm_80")
    assert cuda.artifact.csource.cooperative and "tl::sync_grid(tl_grid_bar);" in cuda.get_kernel_source()
