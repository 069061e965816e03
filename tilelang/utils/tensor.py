"""Tensors for tests and benchmarks: `torch_assert_close`, `get_tensor_supply`, `TensorSupplyType`.

`get_tensor_supply(kind)` returns a function that makes a fresh tensor for a kernel
parameter (anything with a static `shape` and a `dtype`, e.g. `kernel.prim_func.params[i]`),
on the current CUDA device when torch has one, else on the CPU:

    supply = get_tensor_supply(TensorSupplyType.Integer)
    a = supply(kernel.prim_func.params[0])      # small whole numbers, the parameter's dtype
"""
from __future__ import annotations

from typing import Callable

from ..profiler.compare import torch_assert_close
from ..profiler.supply import TensorSupplyType, as_supply_type, make_tensor

__all__ = ["TensorSupplyType", "get_tensor_supply", "is_float8_dtype", "torch_assert_close"]

_FLOAT8 = ("float8_e5m2", "float8_e5m2fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e8m0fnu")


def is_float8_dtype(dtype) -> bool:
    """True for torch's 8-bit float dtypes (those this torch build has)."""
    import torch

    return any(getattr(torch, n, None) == dtype for n in _FLOAT8)


def _device() -> str:
    import torch

    return f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cpu"


def get_tensor_supply(supply_type: TensorSupplyType = TensorSupplyType.Integer) -> Callable:
    """A function `param -> torch.Tensor` filling a new tensor of param's shape and dtype per
    `supply_type` (see TensorSupplyType). Raises ValueError for a symbolic (dynamic) shape."""
    kind = as_supply_type(supply_type)

    def supply(param):
        shape = getattr(param, "shape", None)
        if shape is None or len(shape) == 0:
            raise ValueError(f"get_tensor_supply: {getattr(param, 'name', param)!r} has no shape; "
                             "only tensor parameters can be supplied")
        dims = []
        for d in shape:
            value = getattr(d, "value", d)
            if not isinstance(value, int):
                raise ValueError(f"get_tensor_supply: {getattr(param, 'name', param)!r} has the dynamic dimension "
                                 f"{d}; give the tensor yourself (or a dynamic_symbolic_constraints value)")
            dims.append(value)
        return make_tensor(dims, param.dtype, _device(), kind)

    return supply
