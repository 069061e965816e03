"""T.StridedTensor parameters: a global tensor addressed through its declared element strides.

Kernels read and write strided torch views (every other column, a transposed tensor, a column
window of a wider tensor) on the CPU backend and, compiled for sm_80 / sm_90a, on the host
emulator of the generated CUDA, checked against float64 torch on fresh random inputs. Also:
the three ways of writing the annotation, strides bound from T.dynamic symbols, the error for a
tensor whose strides differ from the declared ones, and the PerformanceWarnings of the CUDA fast
paths (16-byte vectors, TMA) a strided tensor cannot take.
"""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import DSLTypeError
from tilelang.testing import host_cuda_or_skip

ARCHS = ["sm_80", "sm_90a"]


def scale_kernel(M, N, sa, sb, dtype="float32"):
    """B = A * 2 + 1, element by element in 32x32 blocks."""
    @T.prim_func
    def f(A: T.StridedTensor((M, N), sa, dtype), B: T.StridedTensor[(M, N), sb, dtype]):
        with T.Kernel(T.ceildiv(N, 32), T.ceildiv(M, 32), threads=128) as (bx, by):
            for i, j in T.Parallel(32, 32):
                B[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j] * 2.0 + 1.0
    return f


def tile_kernel(M, N, sa, sb, dtype="float16"):
    """B = A + A through a shared and a register tile (block T.copy in and out)."""
    @T.prim_func
    def f(A: T.StridedTensor((M, N), sa, dtype), B: T.StridedTensor((M, N), sb, dtype)):
        with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
            S = T.alloc_shared((64, 64), dtype)
            F = T.alloc_fragment((64, 64), dtype)
            T.copy(A[by * 64, bx * 64], S)
            T.copy(S, F)
            for i, j in T.Parallel(64, 64):
                F[i, j] = F[i, j] + F[i, j]
            T.copy(F, B[by * 64, bx * 64])
    return f


def gemm_kernel(M, N, K, sa):
    """C = A @ B with A strided: pipelined global -> shared copies (cp.async on sm_80, TMA on sm_90a)."""
    @T.prim_func
    def f(A: T.StridedTensor((M, K), sa, "float16"), B: T.Tensor((K, N), "float16"),
          C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // 64, M // 64, threads=128) as (bx, by):
            As = T.alloc_shared((64, 32), "float16")
            Bs = T.alloc_shared((32, 64), "float16")
            Cl = T.alloc_fragment((64, 64), "float32")
            T.clear(Cl)
            for k in T.Pipelined(K // 32, num_stages=2):
                T.copy(A[by * 64, k * 32], As)
                T.copy(B[k * 32, bx * 64], Bs)
                T.gemm(As, Bs, Cl)
            T.copy(Cl, C[by * 64, bx * 64])
    return f


def compile_quiet(f, target):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        k = tilelang.compile(f, target=target)
    return k, [str(w.message) for w in got]


def launch(target, k, tensors):
    if target == "cpu":
        k(*tensors)
    else:
        host_cuda_or_skip().HostProgram({"k": k}).run("k", tensors)


def scale_cases(M=64, N=64):
    """(strides of A, of B, A view, B view, B's storage) for fresh random inputs."""
    wide = torch.randn(M, 2 * N)
    out_wide = torch.full((M, N + 8), 7.0)
    yield (2 * N, 2), (N + 8, 1), wide[:, ::2], out_wide[:, 4:4 + N], out_wide
    at = torch.randn(N, M).t()  # transposed: strides (1, M)
    yield (1, M), (N, 1), at, torch.zeros(M, N), None


# ----------------------------------------------------------------------------- annotation forms

def test_annotation_forms_agree():
    a = T.StridedTensor((4, 8), (16, 1), T.float32)
    b = T.StridedTensor[(4, 8), (16, 1), T.float32]
    c = T.StridedTensor((4, 8), T.float32, strides=(16, 1))
    assert a == b == c
    assert a.strides == (16, 1) and a.dtype == T.float32 and a.shape == (4, 8)


def test_stride_count_must_match_dims():
    with pytest.raises(DSLTypeError, match="one stride per dim"):
        T.StridedTensor((4, 8), (1,), T.float32)


# ----------------------------------------------------------------------------- CPU backend

def test_strided_views_on_cpu():
    for sa, sb, a, b, _ in scale_cases():
        k = tilelang.compile(scale_kernel(64, 64, sa, sb), target="cpu")
        k(a, b)
        torch.testing.assert_close(b.double(), a.double() * 2 + 1, rtol=1e-6, atol=1e-6)


def test_offsets_use_declared_strides():
    k = tilelang.compile(scale_kernel(64, 64, (200, 3), (64, 1)), target="cpu")
    src = k.get_kernel_source()
    assert "* 200" in src and "* 3" in src


def test_column_window_tile_copy_on_cpu():
    M, N = 128, 128
    src = torch.randn(M, 2 * N).half()
    dst = torch.zeros(M, 2 * N).half()
    k = tilelang.compile(tile_kernel(M, N, (2 * N, 1), (2 * N, 1)), target="cpu")
    k(src[:, N:], dst[:, :N])
    torch.testing.assert_close(dst[:, :N].double(), 2 * src[:, N:].double())
    assert not dst[:, N:].any(), "a write landed outside the view"


def test_gemm_strided_operand_on_cpu():
    M = N = 128
    K = 64
    aw = torch.randn(M, K + 64).half()
    b = torch.randn(K, N).half()
    c = torch.zeros(M, N)
    k = tilelang.compile(gemm_kernel(M, N, K, (K + 64, 1)), target="cpu")
    k(aw[:, 32:32 + K], b, c)
    torch.testing.assert_close(c.double(), aw[:, 32:32 + K].double() @ b.double(), rtol=1e-3, atol=1e-3)


def symbolic_copy(M=64, N=64):
    s = T.dynamic("s")

    @T.prim_func
    def f(A: T.StridedTensor((M, N), (s, 1), T.float16), B: T.Tensor((M, N), T.float16)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((M, N), T.float16)
            T.copy(A[0, 0], S)
            T.copy(S, B[0, 0])
    return f


def test_symbolic_stride_binds_per_call():
    k = tilelang.compile(symbolic_copy(), target="cpu")
    for pad in (0, 8, 24, 3):
        aw = torch.randn(64, 64 + pad).half()
        b = torch.zeros(64, 64).half()
        k(aw[:, :64], b)
        assert torch.equal(b, aw[:, :64])


def test_stride_mismatch_is_an_error():
    k = tilelang.compile(scale_kernel(64, 64, (128, 2), (64, 1)), target="cpu")
    with pytest.raises(ValueError, match=r"'A'.*expected strides \(128, 2\), got strides \(64, 1\)"):
        k(torch.randn(64, 64), torch.zeros(64, 64))
    ks = tilelang.compile(symbolic_copy(), target="cpu")
    with pytest.raises(ValueError, match=r"'A'.*expected strides \(s, 1\), got strides \(1, 64\)"):
        ks(torch.randn(64, 64).half().t(), torch.zeros(64, 64).half())


def test_plain_tensor_still_rejects_noncontiguous():
    @T.prim_func
    def f(A: T.Tensor((8, 8), T.float32), B: T.Tensor((8, 8), T.float32)):
        with T.Kernel(1, threads=8):
            for i, j in T.Parallel(8, 8):
                B[i, j] = A[i, j]

    k = tilelang.compile(f, target="cpu")
    with pytest.raises(ValueError, match="contiguous"):
        k(torch.randn(8, 16)[:, ::2], torch.zeros(8, 8))


def test_fp4_strided_rows_on_cpu():
    s = T.dynamic("s")

    @T.prim_func
    def f(A: T.StridedTensor((4, 16), (s, 1), T.float4_e2m1fn), B: T.Tensor((4, 16), T.float4_e2m1fn)):
        with T.Kernel(1, threads=4):
            for i, j in T.Parallel(4, 16):
                B[i, j] = A[i, j]

    k = tilelang.compile(f, target="cpu")
    raw = torch.randint(0, 256, (4, 24), dtype=torch.uint8)
    b = torch.zeros(4, 8, dtype=torch.uint8)
    k(raw[:, 8:16], b)  # byte strides (24, 1): 48 values a row
    assert torch.equal(b, raw[:, 8:16])


# ----------------------------------------------------------------------------- CUDA on the host emulator

@pytest.mark.parametrize("arch", ARCHS)
def test_strided_views_cuda_host(arch):
    host_cuda_or_skip()
    for sa, sb, a, b, _ in scale_cases():
        k, msgs = compile_quiet(scale_kernel(64, 64, sa, sb), f"cuda -arch={arch}")
        assert any("explicit strides" in m for m in msgs), msgs  # no vectors over a strided tensor
        launch("cuda", k, [a, b])
        torch.testing.assert_close(b.double(), a.double() * 2 + 1, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("arch", ARCHS)
def test_column_window_tile_copy_cuda_host(arch):
    M, N = 128, 128
    src = torch.randn(M, 2 * N).half()
    dst = torch.zeros(M, 2 * N).half()
    k, _ = compile_quiet(tile_kernel(M, N, (2 * N, 1), (2 * N, 1)), f"cuda -arch={arch}")
    launch("cuda", k, [src[:, N:], dst[:, :N]])
    torch.testing.assert_close(dst[:, :N].double(), 2 * src[:, N:].double())
    assert not dst[:, N:].any()


@pytest.mark.parametrize("arch", ARCHS)
def test_gemm_strided_operand_cuda_host(arch):
    """sm_80: the hoisted cp.async source pointer steps by the declared row stride; sm_90a: TMA
    (the tensor map takes the tensor's strides, a multiple of 16 bytes here)."""
    M = N = 128
    K = 64
    aw = torch.randn(M, K + 64).half()
    b = torch.randn(K, N).half()
    c = torch.zeros(M, N)
    k, _ = compile_quiet(gemm_kernel(M, N, K, (K + 64, 1)), f"cuda -arch={arch}")
    launch("cuda", k, [aw[:, 32:32 + K], b, c])
    torch.testing.assert_close(c.double(), aw[:, 32:32 + K].double() @ b.double(), rtol=1e-3, atol=1e-3)


def test_gemm_unaligned_stride_refuses_tma_and_vectors():
    """A row stride of 68 halves (136 bytes) fits neither TMA nor 16-byte vectors: both are refused
    with a PerformanceWarning and the copies move element by element, still correct."""
    M = N = 128
    K = 64
    k, msgs = compile_quiet(gemm_kernel(M, N, K, (K + 4, 1)), "cuda -arch=sm_90a")
    assert any("not all constant multiples of 16 bytes" in m for m in msgs), msgs
    assert any("not provably a multiple of 8" in m for m in msgs), msgs
    aw = torch.randn(M, K + 4).half()
    b = torch.randn(K, N).half()
    c = torch.zeros(M, N)
    launch("cuda", k, [aw[:, :K], b, c])
    torch.testing.assert_close(c.double(), aw[:, :K].double() @ b.double(), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("arch", ARCHS)
def test_symbolic_stride_cuda_host(arch):
    k, msgs = compile_quiet(symbolic_copy(), f"cuda -arch={arch}")
    assert any("declared stride s is not provably a multiple" in m for m in msgs), msgs
    for pad in (0, 8, 24):
        aw = torch.randn(64, 64 + pad).half()
        b = torch.zeros(64, 64).half()
        launch("cuda", k, [aw[:, :64], b])
        assert torch.equal(b, aw[:, :64])


def test_eager_jit_body_declared_strided_tensor():
    """An eager @tilelang.jit kernel declaring a T.StridedTensor in its body keeps the declared strides."""
    S = T.dynamic("S")

    @tilelang.jit
    def scale(A, B):
        M, N = T.const("M, N")
        A: T.StridedTensor[(M, N), (S, 1), T.float32]
        B: T.Tensor((M, N), T.float32)
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(M, N):
                B[i, j] = A[i, j] * 2.0

    wide = torch.randn(8, 24)
    a = wide[:, 3:19]  # strides (24, 1)
    b = torch.zeros(8, 16)
    scale(a, b)
    torch.testing.assert_close(b.double(), a.double() * 2, rtol=1e-6, atol=1e-6)
