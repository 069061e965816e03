"""Helpers public TileLang programs import from `tilelang.utils`: tensor comparison and supply.

    from tilelang.utils.tensor import torch_assert_close, get_tensor_supply, TensorSupplyType
"""
from .tensor import TensorSupplyType, get_tensor_supply, is_float8_dtype, torch_assert_close

__all__ = ["TensorSupplyType", "get_tensor_supply", "is_float8_dtype", "torch_assert_close"]
