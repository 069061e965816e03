"""TVM-style launches: `for v in T.thread_binding(n, thread="blockIdx.x" / "threadIdx.x")` at the top of a
prim_func with no `with T.Kernel` (frontend/binding_launch.py), and `T.unroll(step=, unroll_factor=)`.

Each kernel runs on the CPU backend and, compiled for sm_90a by NVRTC, on the host emulator, against a
float64 reference on fresh random inputs with poisoned outputs.
"""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import DSLSyntaxError, DSLTypeError
from tilelang.testing import host_cuda_or_skip


def scale_rows(M, N, TX, TY):
    """A 2-d grid of 2-d blocks: B[r, c] = A[r, c] * 3 + by - bx, guarded where the tile passes the end."""

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        for bx in T.thread_binding(T.ceildiv(N, TX), thread="blockIdx.x"):
            for by in T.thread_binding(T.ceildiv(M, TY), thread="blockIdx.y"):
                r0 = by * TY  # a statement between the binding loops runs on every thread
                for ty in T.thread_binding(TY, thread="threadIdx.y"):
                    for tx in T.thread_binding(0, TX, thread="threadIdx.x"):
                        if r0 + ty < M and bx * TX + tx < N:
                            B[r0 + ty, bx * TX + tx] = A[r0 + ty, bx * TX + tx] * 3.0 + by - bx
    return k


def scale_rows_ref(a, TX, TY):
    M, N = a.shape
    by = (torch.arange(M) // TY).double()[:, None]
    bx = (torch.arange(N) // TX).double()[None, :]
    return a.double() * 3 + by - bx


def unrolled(N):
    """T.unroll with a step and with an unroll_factor, in a one-block launch over a T.handle parameter."""

    @T.prim_func
    def k(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (4, N), dtype=T.float32)
        B = T.match_buffer(B_ptr, (4, N), dtype=T.float32)
        for _b in T.thread_binding(1, thread="blockIdx.x"):
            for tx in T.thread_binding(4, "threadIdx.x"):  # the thread as the second positional argument
                for i in T.unroll(0, N, unroll_factor=4):
                    B[tx, i] = A[tx, i] + 1.0
                for i in T.unroll(1, N, step=3):
                    B[tx, i] = A[tx, i] * -2.0
    return k


def unrolled_ref(a):
    out = a.double() + 1
    out[:, 1::3] = a.double()[:, 1::3] * -2
    return out


@pytest.mark.parametrize("M,N,TX,TY", [(37, 50, 16, 4), (8, 128, 32, 1)])
def test_grid_and_threads_from_bindings_cpu(M, N, TX, TY):
    k = tilelang.compile(scale_rows(M, N, TX, TY), target="cpu")
    a = torch.randn(M, N)
    b = torch.full((M, N), float("nan"))
    k(a, b)
    torch.testing.assert_close(b.double(), scale_rows_ref(a, TX, TY), rtol=1e-6, atol=1e-6)


def test_grid_and_threads_from_bindings_host_cuda():
    host = host_cuda_or_skip()
    M, N, TX, TY = 37, 50, 16, 4
    k = tilelang.compile(scale_rows(M, N, TX, TY), target="cuda -arch=sm_90a")
    a = torch.randn(M, N)
    b = torch.full((M, N), float("nan"))
    prog = host.HostProgram({"k": k})
    try:
        prog.run("k", [a, b])
    finally:
        prog.close()
    torch.testing.assert_close(b.double(), scale_rows_ref(a, TX, TY), rtol=1e-6, atol=1e-6)


def test_unroll_step_and_factor_cpu():
    N = 22
    k = tilelang.compile(unrolled(N), target="cpu")
    a = torch.randn(4, N)
    b = torch.full((4, N), float("nan"))
    k(a, b)
    torch.testing.assert_close(b.double(), unrolled_ref(a), rtol=1e-6, atol=1e-6)


def test_unroll_step_and_factor_host_cuda():
    host = host_cuda_or_skip()
    N = 22
    k = tilelang.compile(unrolled(N), target="cuda -arch=sm_90a")
    assert "#pragma unroll 4" in k.get_kernel_source()
    a = torch.randn(4, N)
    b = torch.full((4, N), float("nan"))
    prog = host.HostProgram({"k": k})
    try:
        prog.run("k", [a, b])
    finally:
        prog.close()
    torch.testing.assert_close(b.double(), unrolled_ref(a), rtol=1e-6, atol=1e-6)


def test_eager_jit_binding_launch():
    @tilelang.jit
    def shift(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
        for bx in T.thread_binding(2, thread="blockIdx.x"):
            for tx in T.thread_binding(32, thread="threadIdx.x"):
                B[bx * 32 + tx] = A[63 - bx * 32 - tx]

    a = torch.randn(64)
    b = torch.full((64,), float("nan"))
    shift(a, b)
    torch.testing.assert_close(b, a.flip(0))


def test_unroll_explicit_and_factor_exclusive():
    with pytest.raises(ValueError, match="mutually exclusive"):
        T.unroll(0, 8, explicit=True, unroll_factor=2)


def test_binding_errors():
    with pytest.raises(DSLTypeError, match="threadIdx.x is bound twice"):
        @T.prim_func
        def twice(A: T.Tensor((64,), "float32")):
            for bx in T.thread_binding(2, thread="blockIdx.x"):
                for tx in T.thread_binding(32, thread="threadIdx.x"):
                    A[tx] = 1.0
                for tx in T.thread_binding(16, thread="threadIdx.x"):
                    A[tx] = 2.0


def test_binding_name_checked():
    with pytest.raises(DSLTypeError, match="thread= must be one of"):
        @T.prim_func
        def bad(A: T.Tensor((64,), "float32")):
            for bx in T.thread_binding(2, thread="warpIdx.x"):
                A[bx] = 1.0


def test_binding_loop_in_kernel_must_match_grid():
    with pytest.raises(DSLTypeError, match="the kernel grid is"):
        @T.prim_func
        def bad(A: T.Tensor((64,), "float32")):
            with T.Kernel(4, threads=16):
                for bx in T.thread_binding(2, thread="blockIdx.x"):
                    A[bx] = 1.0

    @T.prim_func
    def nested(A: T.Tensor((64,), "float32")):
        with T.Kernel(4, threads=16):
            for bx in T.thread_binding(4, thread="blockIdx.x"):
                for tx in T.thread_binding(16, thread="threadIdx.x"):
                    A[bx * 16 + tx] = bx * 100 + tx

    a = torch.full((64,), float("nan"))
    tilelang.compile(nested, target="cpu")(a)
    ref = (torch.arange(64) // 16 * 100 + torch.arange(64) % 16).float()
    torch.testing.assert_close(a, ref)


def test_kernel_inside_binding_launch_refused():
    with pytest.raises(DSLSyntaxError, match="nested T.Kernel"):
        @T.prim_func
        def bad(A: T.Tensor((64,), "float32")):
            for bx in T.thread_binding(2, thread="blockIdx.x"):
                with T.Kernel(2, threads=32):
                    A[bx] = 1.0


def test_threads_only_launch():
    @T.prim_func
    def k(A: T.Tensor((48,), "float32"), B: T.Tensor((48,), "float32")):
        for tx in T.thread_binding(48, thread="threadIdx.x"):
            B[tx] = A[47 - tx] + tx

    a = torch.randn(48)
    b = torch.full((48,), float("nan"))
    tilelang.compile(k, target="cpu")(a, b)
    torch.testing.assert_close(b.double(), a.double().flip(0) + torch.arange(48).double())
