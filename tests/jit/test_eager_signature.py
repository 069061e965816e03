"""Eager @tilelang.jit functions whose tensors are annotated in the signature
(`def f(A: T.Tensor(shape, dtype), ...)`), and eager bodies that only call a @T.macro.
CPU target; results checked against float64 torch on fresh random inputs."""
import pytest
import torch

import tilelang
import tilelang.language as T

R, C = 24, 20


@tilelang.jit(target="cpu")
def shifted_axpy(X: T.Tensor((R, C), T.float32), Y: T.Tensor((R, C), T.float32), Z: T.Tensor((R, C), T.float32),
                 alpha: float = 2.0):
    with T.Kernel(T.ceildiv(R, 8), threads=32) as bx:
        for i, j in T.Parallel(8, C):
            if bx * 8 + i < R:
                Z[bx * 8 + i, j] = X[bx * 8 + i, j] * alpha + Y[bx * 8 + i, (j + 1) % C]


@tilelang.jit(target="cpu")
def staged_bias(A: T.Tensor[[64], T.float16], B: T.Tensor[[64], T.float16]):
    """A pipelined stage through shared memory, reading A at a scalar corner (`A[k * 16]`)."""
    with T.Kernel(1, threads=16):
        stage = T.alloc_shared((16,), T.float16)
        for k in T.Pipelined(4, num_stages=2):
            T.copy(A[k * 16], stage)
            for i in T.Parallel(16):
                B[k * 16 + i] = stage[i] * 0.5 + 1.0


@T.macro
def transpose_into(src, dst):
    rows, cols = src.shape
    with T.Kernel(T.ceildiv(rows, 4), threads=16) as bx:
        for i, j in T.Parallel(4, cols):
            if bx * 4 + i < rows:
                dst[j, bx * 4 + i] = src[bx * 4 + i, j] - 1.0


@tilelang.jit(target="cpu")
def transpose_sig(A: T.Tensor[[10, 6], T.float32], B: T.Tensor[[6, 10], T.float32]):
    transpose_into(A, B)


@tilelang.jit(target="cpu")
def transpose_decl(A, B):
    n, m = T.const("n, m")
    A: T.Tensor((n, m), T.float64)
    B: T.Tensor((m, n), T.float64)
    transpose_into(A, B)


def test_signature_annotations_bind_tensors():
    assert not shifted_axpy.is_lazy_mode()
    x, y, z = torch.randn(R, C), torch.randn(R, C), torch.zeros(R, C)
    want = x.double() * 3.0 + y.double().roll(-1, dims=1)
    shifted_axpy(x, y, z, 3.0)
    torch.testing.assert_close(z.double(), want, rtol=1e-6, atol=1e-6)


def test_signature_annotations_with_a_scalar_corner_copy():
    a = torch.randn(64, dtype=torch.float16)
    b = torch.empty(64, dtype=torch.float16)
    staged_bias(a, b)
    torch.testing.assert_close(b.double(), a.double() * 0.5 + 1.0, rtol=2e-3, atol=2e-3)


def test_signature_annotations_give_a_static_kernel_without_args():
    k = staged_bias.compile()
    assert [tuple(p.shape) for p in k.params] == [(64,), (64,)]
    assert "stage" in staged_bias.get_kernel_source()
    a = torch.randn(64, dtype=torch.float16)
    b = torch.zeros(64, dtype=torch.float16)
    k(a, b)
    torch.testing.assert_close(b.double(), a.double() * 0.5 + 1.0, rtol=2e-3, atol=2e-3)


def test_signature_annotated_parameter_rejects_a_non_tensor():
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        shifted_axpy([1.0], torch.zeros(R, C), torch.zeros(R, C))


@pytest.mark.parametrize("fn, shape, dtype", [(transpose_sig, (10, 6), torch.float32),
                                              (transpose_decl, (9, 5), torch.float64)])
def test_body_that_only_calls_a_macro_is_eager(fn, shape, dtype):
    assert not fn.is_lazy_mode()
    a = torch.randn(*shape, dtype=dtype)
    b = torch.zeros(shape[1], shape[0], dtype=dtype)
    fn(a, b)
    torch.testing.assert_close(b.double(), a.double().T - 1.0, rtol=1e-6, atol=1e-6)


def test_factory_returning_a_prim_func_stays_lazy():
    @tilelang.jit(target="cpu")
    def negate(n):
        @T.prim_func
        def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
            with T.Kernel(1, threads=8):
                for i in T.Parallel(n):
                    B[i] = -A[i]
        return main

    assert negate.is_lazy_mode()
    a, b = torch.randn(12), torch.zeros(12)
    negate(12)(a, b)
    torch.testing.assert_close(b.double(), -a.double(), rtol=0, atol=0)


@tilelang.jit(target="cpu")
def head_scale(A: T.Tensor((32,), T.float32), B: T.Tensor((32,), T.float32), n: T.int32, s: T.float32):
    """`n: T.int32`, `s: T.float32` in the signature: scalar arguments of the kernel."""
    with T.Kernel(1, threads=8):
        for i in T.serial(n):
            B[i] = A[i] * s


def test_dtype_annotated_scalars_are_kernel_arguments():
    a = torch.randn(32)
    for n, s in [(5, 1.5), (32, -0.25), (0, 3.0)]:
        b = torch.zeros(32)
        head_scale(a, b, n, s)
        want = torch.zeros(32, dtype=torch.float64)
        want[:n] = a.double()[:n] * s
        torch.testing.assert_close(b.double(), want, rtol=1e-6, atol=1e-6)
    assert len(head_scale._cache) == 1  # one kernel for every (n, s)
    k = head_scale.compile()
    assert [getattr(p, "name", None) for p in k.params] == ["A", "B", "n", "s"]
    b = torch.zeros(32)
    k(a, b, 7, 2.0)
    torch.testing.assert_close(b.double()[:7], a.double()[:7] * 2.0, rtol=1e-6, atol=1e-6)
    assert not b[7:].any()
