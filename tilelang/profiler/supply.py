"""Fresh input tensors for a kernel's parameters: `TensorSupplyType` and `make_tensor`.

Why several distributions: a GEMM checked with `Normal` inputs exercises rounding, while
`Integer` inputs (small whole numbers) make fp16/fp32 results exact, so any mismatch is a
real bug and not accumulated rounding; `Zero`/`One` help when debugging by hand.

Example::

    t = make_tensor((128, 64), "float16", "cpu", TensorSupplyType.Integer)
    # values in {-2, -1, 0, 1, 2}, dtype torch.float16
"""
from __future__ import annotations

from enum import Enum


class TensorSupplyType(Enum):
    """How `Profiler` fills the inputs it generates.

    Auto     normal(0, 1) for floats, small integers for integer dtypes, random bools
    Integer  small whole numbers (-2..2; 0..3 for unsigned), in the tensor's dtype
    Uniform  uniform on [-1, 1] for floats (1 only by rounding to the dtype; integers as for Integer)
    Normal   normal(0, 1) for floats (integers as for Integer)
    Randn    same as Normal (kept for source compatibility)
    Zero     all zeros
    One      all ones
    """

    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


def as_supply_type(value) -> TensorSupplyType:
    """Accept a member, its name ("normal", "Integer"), or None (Auto)."""
    if value is None:
        return TensorSupplyType.Auto
    if isinstance(value, TensorSupplyType):
        return value
    if isinstance(value, str):
        for member in TensorSupplyType:
            if member.name.lower() == value.lower():
                return member
    raise ValueError(f"tensor_supply_type: expected a tilelang.TensorSupplyType member such as "
                     f"TensorSupplyType.Normal, got {value!r}")


def torch_dtype(dtype):
    """The torch dtype of a TileLang dtype (name or DType)."""
    from ..dtypes import as_dtype

    return as_dtype(dtype).as_torch()


def make_tensor(shape, dtype, device, supply: TensorSupplyType):
    """A new tensor of `shape`/`dtype` on `device` filled per `supply`."""
    import torch

    tdt = torch_dtype(dtype)
    shape = tuple(int(s) for s in shape)
    if supply is TensorSupplyType.Zero:
        return torch.zeros(shape, dtype=tdt, device=device)
    if supply is TensorSupplyType.One:
        return torch.ones(shape, dtype=tdt, device=device)
    if tdt == torch.bool:
        return torch.randint(0, 2, shape, device=device).bool()
    is_float = tdt.is_floating_point
    if not is_float or supply is TensorSupplyType.Integer:
        low, high = (0, 4) if _unsigned(tdt) else (-2, 3)
        vals = torch.randint(low, high, shape, device=device, dtype=torch.int64)
        return vals.to(tdt)
    if supply is TensorSupplyType.Uniform:
        vals = torch.rand(shape, device=device, dtype=torch.float32) * 2 - 1
    else:  # Auto, Normal, Randn
        vals = torch.randn(shape, device=device, dtype=torch.float32)
    return vals.to(tdt)


def _unsigned(tdt) -> bool:
    import torch

    return tdt in (torch.uint8, getattr(torch, "uint16", None), getattr(torch, "uint32", None),
                   getattr(torch, "uint64", None))


def random_scalar(dtype, supply: TensorSupplyType):
    """A Python scalar for a scalar (non-dim) parameter."""
    from ..dtypes import as_dtype

    d = as_dtype(dtype)
    t = make_tensor((), d, "cpu", supply)
    return bool(t.item()) if d.is_bool else (float(t.item()) if d.is_float else int(t.item()))
