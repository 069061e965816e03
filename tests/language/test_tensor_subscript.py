"""`T.Tensor[...]` subscripts: `[shape, dtype]`, and items that are all dims (`T.Tensor[(n,)]`, `T.Tensor[M, N]`) as
the shape of a float32 tensor, as the public TileLang reads them (the dims-only forms raised 'expects two items')."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import DSLTypeError


def test_subscript_forms():
    assert (T.Tensor[4, 8].shape, T.Tensor[4, 8].dtype) == ((4, 8), "float32")
    assert (T.Tensor[(16,)].shape, T.Tensor[(16,)].dtype) == ((16,), "float32")
    assert (T.Tensor[(4, 8), T.float16].shape, T.Tensor[(4, 8), "float16"].dtype) == ((4, 8), "float16")
    with pytest.raises(DSLTypeError, match="expects two items"):
        T.Tensor[(4, 8), "float16", "x"]


def test_dims_only_annotation_runs_as_float32():
    n = 24

    @T.prim_func
    def f(A: T.Tensor[(n,)], B: T.Tensor[(n,), "float32"]):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(n):
                B[i] = A[i] * 3.0 - 1.0

    a, b = torch.randn(n), torch.zeros(n)
    tilelang.compile(f, target="cpu")(a, b)
    torch.testing.assert_close(b.double(), a.double() * 3 - 1, rtol=1e-6, atol=1e-6)
