"""tilelang.utils.tensor: get_tensor_supply over our kernel parameters, and the re-exports."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.utils.tensor import TensorSupplyType, get_tensor_supply, is_float8_dtype, torch_assert_close


def _params():
    @T.prim_func
    def f(A: T.Tensor((4, 6), "float16"), B: T.Tensor((8,), "int32"), C: T.Tensor((3, 5), "uint8")):
        with T.Kernel(1, threads=1):
            A[0, 0] = A[0, 0]

    return f.params


def test_integer_supply_gives_small_whole_numbers_of_the_param_dtype():
    a, b, c = (get_tensor_supply(TensorSupplyType.Integer)(p) for p in _params())
    assert a.shape == (4, 6) and a.dtype == torch.float16
    assert b.shape == (8,) and b.dtype == torch.int32 and c.dtype == torch.uint8
    assert torch.equal(a, a.round()) and a.abs().max() <= 2
    assert c.min() >= 0 and c.max() <= 3


def test_other_supplies():
    p = _params()[0]
    assert torch.count_nonzero(get_tensor_supply(TensorSupplyType.Zero)(p)) == 0
    assert torch.all(get_tensor_supply(TensorSupplyType.One)(p) == 1)
    x = get_tensor_supply(TensorSupplyType.Uniform)(p).float()
    assert x.abs().max() <= 1 and x.std() > 0.1
    y, z = get_tensor_supply(TensorSupplyType.Auto)(p), get_tensor_supply(TensorSupplyType.Auto)(p)
    assert not torch.equal(y, z)  # fresh random values each call


def test_dynamic_shape_is_refused():
    @T.prim_func
    def g(A: T.Tensor((T.dynamic("n"), 4), "float32")):
        with T.Kernel(1, threads=1):
            A[0, 0] = 1.0

    with pytest.raises(ValueError, match="dynamic dimension"):
        get_tensor_supply()(g.params[0])


def test_reexports_and_float8():
    assert tilelang.utils.torch_assert_close is torch_assert_close is tilelang.testing.torch_assert_close
    assert tilelang.utils.TensorSupplyType is tilelang.TensorSupplyType
    assert is_float8_dtype(torch.float8_e4m3fn) and not is_float8_dtype(torch.float16)
