"""T.annotate_layout on a global tensor (transform/global_layouts.py): the tensor's memory is laid
out by the layout, on the CPU backend and in the CUDA source (run on the host), as with the public
TileLang's flash-attention backward (dQ laid out so a warp's atomics hit 32 adjacent floats)."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangError

M, N = 64, 32


def dq_layout(G):
    return T.Layout(G.shape, lambda i, j: [i // 8, j // 8, j % 2, 4 * (i % 8) + (j % 8) // 2])


def phys_flat(i, j):
    p = (i // 8, j // 8, j % 2, 4 * (i % 8) + (j % 8) // 2)
    return ((p[0] * (N // 8) + p[1]) * 2 + p[2]) * 32 + p[3]


def to_phys(x):
    """x (M, N) laid out the way dq_layout stores it, as a flat (M * N,) tensor."""
    out = torch.empty(M * N, dtype=x.dtype)
    for i in range(M):
        for j in range(N):
            out[phys_flat(i, j)] = x[i, j]
    return out.reshape(M, N)


def atomics(annotate=True):
    @T.prim_func
    def k(A: T.Tensor((M, N), T.float32), W: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // 16, threads=64) as bx:
            if annotate:
                T.annotate_layout({W: dq_layout(W)})
            for i, j in T.Parallel(16, N):
                T.atomic_add(W[bx * 16 + i, j], A[bx * 16 + i, j] * 2)
    return k


def tile_ops():
    """T.copy out of, T.fill of and a tile T.atomic_add into laid-out tensors."""
    @T.prim_func
    def k(W: T.Tensor((M, N), T.float32), O: T.Tensor((M, N), T.float32), Z: T.Tensor((M, N), T.float32),
          S: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // 16, threads=64) as bx:
            T.annotate_layout({W: dq_layout(W), Z: dq_layout(Z), S: dq_layout(S)})
            tile = T.alloc_fragment((16, N), T.float32)
            T.copy(W[bx * 16:(bx + 1) * 16, :], tile)
            T.copy(tile, O[bx * 16:(bx + 1) * 16, :])
            T.fill(Z[bx * 16:(bx + 1) * 16, :], 3.0)
            T.atomic_add(S[bx * 16:(bx + 1) * 16, :], tile)
    return k


def inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(M, N, generator=g, dtype=torch.float64).float()


def check_atomics(run):
    A = inputs(1)
    W = torch.zeros(M, N)
    run(A, W)
    want = to_phys(A.double() * 2)
    assert torch.allclose(W.double(), want, atol=1e-6), "W is not 2A in the layout's order"
    assert not torch.allclose(W.double(), A.double() * 2), "W came out row-major"


def check_tile_ops(run):
    X = inputs(2)
    W, S = to_phys(X), to_phys(torch.ones(M, N))
    O, Z = torch.empty(M, N), torch.zeros(M, N)
    run(W, O, Z, S)
    assert torch.allclose(O.double(), X.double()), "T.copy did not read W through the layout"
    assert torch.all(Z == 3.0)
    assert torch.allclose(S.double(), to_phys(X.double() + 1), atol=1e-6), "tile atomic_add missed the layout"


def quiet(func, target, configs=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(func, target=target, pass_configs=configs or {})


def test_cpu_atomics_land_in_the_layouts_order():
    check_atomics(quiet(atomics(), "c"))


def test_cpu_tile_ops_through_the_layout():
    check_tile_ops(quiet(tile_ops(), "c"))


def test_unannotated_stays_row_major():
    A = inputs(3)
    W = torch.zeros(M, N)
    quiet(atomics(annotate=False), "c")(A, W)
    assert torch.allclose(W.double(), A.double() * 2)


def test_a_layout_larger_than_the_tensor_is_an_error():
    @T.prim_func
    def k(W: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            T.annotate_layout({W: T.Layout(W.shape, lambda i, j: [i, j * 2])})
            for i, j in T.Parallel(M, N):
                W[i, j] = 1.0
    with pytest.raises(TileLangError, match="more than the tensor"):
        quiet(k, "c")


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_source_on_the_host(arch):
    host = pytest.importorskip("tilelang.testing.host_cuda")
    if not host.available():
        pytest.skip("g++ not installed")
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")
    cfg = {"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True}
    kernels = {"atomics": quiet(atomics(), f"cuda -arch={arch}", cfg),
               "tiles": quiet(tile_ops(), f"cuda -arch={arch}", cfg)}
    prog = host.HostProgram(kernels)
    check_atomics(lambda *ts: prog.run("atomics", list(ts)))
    check_tile_ops(lambda *ts: prog.run("tiles", list(ts)))
    src = kernels["atomics"].get_kernel_source()
    assert "W_phys" in src
