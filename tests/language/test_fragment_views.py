"""T.reshape / T.view of register fragments (and shared tiles): the view aliases the source's
storage. CPU runs check values against float64; sm_90a / sm_80 compiles check that the view reads
the source's registers (no copy); the `cuda` test runs the fp8-indexer pattern on the GPU."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.backend.cuda.pipeline import PerformanceWarning

cuda = pytest.mark.cuda
needs_hopper = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                  reason="needs an sm_90 GPU")


def gemm_reshape_reduce(M=64, N=64, K=32, H=16, threads=128):
    """S = relu(A @ B^T) * (h + 1) through a (M, N // H, H) view of the accumulator, summed over h."""
    G = N // H

    @T.prim_func
    def k(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), O: T.Tensor((M, G), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            a = T.alloc_shared((M, K), "float16")
            b = T.alloc_shared((N, K), "float16")
            s = T.alloc_fragment((M, N), "float32")
            sr = T.reshape(s, (M, G, H))
            o = T.alloc_fragment((M, G), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, s, transpose_B=True, clear_accum=True)
            for i, j, h in T.Parallel(M, G, H):
                sr[i, j, h] = T.max(sr[i, j, h], 0) * (h + 1)
            T.reduce_sum(sr, o, dim=-1)
            T.copy(o, O)
    return k


def gemm_reshape_ref(A, B, H):
    M, N = A.shape[0], B.shape[0]
    s = (A.double() @ B.double().T).relu().view(M, N // H, H) * torch.arange(1, H + 1, dtype=torch.float64)
    return s.sum(-1)


def view_write_source_read(M=32, N=64):
    """Writes through a (M, 4, N // 4) view, reads the source (and a max over a 3-d view's middle axis)."""
    @T.prim_func
    def k(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32"), Z: T.Tensor((M, N // 4), "float32")):
        with T.Kernel(1, threads=64) as bx:
            f = T.alloc_fragment((M, N), "float32")
            v = T.reshape(f, (M, 4, N // 4))
            z = T.alloc_fragment((M, N // 4), "float32")
            T.copy(X, f)
            for i, g, c in T.Parallel(M, 4, N // 4):
                v[i, g, c] = v[i, g, c] * (g + 1) + c
            T.reduce_max(v, z, dim=1)
            T.copy(f, Y)
            T.copy(z, Z)
    return k


def view_ref(X):
    M, N = X.shape
    v = X.double().view(M, 4, N // 4) * torch.arange(1, 5, dtype=torch.float64)[None, :, None] \
        + torch.arange(N // 4, dtype=torch.float64)
    return v.reshape(M, N), v.amax(1)


def shared_reshape(M=16, N=32):
    @T.prim_func
    def k(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M * 2, N // 2), "float32")):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared((M, N), "float32")
            r = T.reshape(s, (M * 2, N // 2))
            T.copy(X, s)
            for i, j in T.Parallel(M * 2, N // 2):
                r[i, j] = r[i, j] * 2 + i
            T.copy(r, Y)
    return k


def test_reduce_over_reshaped_accumulator_cpu():
    A, B = torch.randn(64, 32, dtype=torch.float16), torch.randn(64, 32, dtype=torch.float16)
    O = torch.zeros(64, 4)
    tilelang.compile(gemm_reshape_reduce(), target="cpu")(A, B, O)
    torch.testing.assert_close(O.double(), gemm_reshape_ref(A, B, 16), rtol=1e-5, atol=1e-4)


def test_write_through_view_read_source_cpu():
    X = torch.randn(32, 64)
    Y, Z = torch.zeros(32, 64), torch.zeros(32, 16)
    tilelang.compile(view_write_source_read(), target="cpu")(X, Y, Z)
    y, z = view_ref(X)
    torch.testing.assert_close(Y.double(), y, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(Z.double(), z, rtol=1e-6, atol=1e-5)


def test_shared_reshape_cpu():
    X = torch.randn(16, 32)
    Y = torch.zeros(32, 16)
    tilelang.compile(shared_reshape(), target="cpu")(X, Y)
    ref = X.double().view(32, 16) * 2 + torch.arange(32, dtype=torch.float64)[:, None]
    torch.testing.assert_close(Y.double(), ref, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_reshaped_accumulator_aliases_registers(arch):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        src = tilelang.compile(gemm_reshape_reduce(), target=f"cuda -arch={arch}").get_kernel_source()
    assert not [x for x in w if "kept in shared memory" in str(x.message)], [str(x.message) for x in w]
    # the view is the accumulator's registers: no array, pointer or copy of its own
    assert "float s[" in src
    assert "sr[" not in src and "* sr " not in src and "* sr=" not in src
    assert "s[l_1] = fmaxf(s[l_1], 0.0f)" in src or "fmaxf(s[l" in src


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_view_of_flat_fragment_compiles_in_registers(arch):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        src = tilelang.compile(view_write_source_read(), target=f"cuda -arch={arch}").get_kernel_source()
    msgs = [str(x.message) for x in w]
    assert not [m for m in msgs if "fragment f " in m or "fragment v" in m], msgs
    assert "float f[" in src and "float* v " not in src and "float v[" not in src


def test_view_with_other_dtype_goes_through_shared_with_warning():
    @T.prim_func
    def k(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            f = T.alloc_fragment((64,), "float32")
            v = T.view(f, dtype="int32")
            T.copy(X, f)
            T.copy(v, Y)

    with pytest.warns(PerformanceWarning, match="kept in shared memory"):
        tilelang.compile(k, target="cuda -arch=sm_90a").get_kernel_source()
    X = torch.randn(64)
    Y = torch.zeros(64, dtype=torch.int32)
    tilelang.compile(k, target="cpu")(X, Y)
    assert torch.equal(Y, X.view(torch.int32))


@cuda
@needs_hopper
def test_reshaped_accumulator_gpu():
    torch.manual_seed(1)
    A = torch.randn(64, 32, dtype=torch.float16, device="cuda")
    B = torch.randn(64, 32, dtype=torch.float16, device="cuda")
    O = torch.zeros(64, 4, device="cuda")
    tilelang.compile(gemm_reshape_reduce(), target="cuda -arch=sm_90a")(A, B, O)
    torch.testing.assert_close(O.double().cpu(), gemm_reshape_ref(A.cpu(), B.cpu(), 16), rtol=1e-3, atol=1e-2)
    X = torch.randn(32, 64, device="cuda")
    Y, Z = torch.zeros(32, 64, device="cuda"), torch.zeros(32, 16, device="cuda")
    tilelang.compile(view_write_source_read(), target="cuda -arch=sm_90a")(X, Y, Z)
    y, z = view_ref(X.cpu())
    torch.testing.assert_close(Y.double().cpu(), y, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(Z.double().cpu(), z, rtol=1e-5, atol=1e-4)
