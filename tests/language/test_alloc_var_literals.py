"""T.alloc_var(dtype, init=<Python number>): a float64 initializer keeps its value; a finite literal past
the largest value of a 16/32-bit float dtype is refused with a ValueError (it would silently become
inf), as the public TileLang refuses it. Kernels run on the CPU backend with poisoned outputs."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import DSLTypeError


def var_kernel(dtype, value):
    @T.prim_func
    def k(A: T.Tensor((2,), dtype), X: T.Tensor((1,), dtype)):
        with T.Kernel(1):
            v = T.alloc_var(dtype, init=value)
            A[0] = v
            A[1] = v * X[0]
    return k


@pytest.mark.parametrize("dtype,value", [("float64", 1e300), ("float64", 0.1), ("float32", 3.0e38),
                                         ("float16", 65504.0), ("float16", -1000.5)])
def test_initializer_keeps_its_value(dtype, value):
    tdt = getattr(torch, dtype)
    x = torch.rand(1, dtype=torch.float64).to(tdt) * 0.5
    a = torch.full((2,), float("nan"), dtype=tdt)
    tilelang.compile(var_kernel(dtype, value), target="cpu")(a, x)
    ref = torch.tensor([value, value * float(x[0])], dtype=torch.float64).to(tdt)
    assert a[0].item() == ref[0].item()
    torch.testing.assert_close(a, ref)


@pytest.mark.parametrize("dtype,value", [("float32", 1e300), ("float32", -3.5e38), ("float16", 70000.0),
                                         ("bfloat16", 1e39)])
def test_unrepresentable_literal_refused(dtype, value):
    with pytest.raises(ValueError, match=f"exceeds maximum of {dtype}") as info:
        var_kernel(dtype, value)
    assert isinstance(info.value, DSLTypeError)  # still the DSL's error, at the user's line
    assert "T.alloc_var(dtype, init=value)" in str(info.value)


def test_infinity_is_not_a_literal_overflow():
    a = torch.full((2,), float("nan"))
    x = torch.ones(1)
    tilelang.compile(var_kernel("float32", float("-inf")), target="cpu")(a, x)
    assert a[0].item() == float("-inf") and a[1].item() == float("-inf")
