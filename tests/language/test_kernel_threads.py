"""T.Kernel(threads=...): non-positive extents are a ValueError saying threads must be positive;
one to three positive extents make the block (checked by running it on the CPU backend against a
float64 reference on fresh random inputs)."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import NonConstantShapeError


def _kernel(threads, n=96):
    @T.prim_func
    def k(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=threads):
            for i in T.Parallel(n):
                B[i] = A[i] * 3.0 - 1.0

    return k


@pytest.mark.parametrize("threads", [-1, 0, [-1], [128, 0], (128, 1, -2)])
def test_non_positive_threads_are_value_errors(threads):
    with pytest.raises(ValueError, match="threads must be positive"):
        _kernel(threads)


def test_symbolic_threads_stay_a_constant_shape_error():
    n = T.dynamic("n")
    with pytest.raises(NonConstantShapeError, match="positive integer constants"):
        @T.prim_func
        def k(A: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=n):
                A[0] = 1.0


@pytest.mark.parametrize("threads", [None, 64, [32, 4], (32, 2, 2)])
def test_positive_threads_run(threads):
    a = torch.randn(96)
    out = tilelang.compile(_kernel(threads), out_idx=[1], target="cpu")(a)
    torch.testing.assert_close(out.double(), a.double() * 3.0 - 1.0, rtol=1e-6, atol=1e-6)
