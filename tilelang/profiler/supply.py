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
    """How `Profiler` fills the inputs it generates (the public TileLang's distributions).

    Auto     uniform on [-1, 1] for float16 / bfloat16 / float32; whole numbers -128..127 for fp8;
             0..2 for unsigned integers; -2..2 for every other dtype (float64, signed integers)
    Integer  whole numbers: -2..2 (0..2 unsigned; -128..127 for fp8)
    Uniform  uniform on [-1, 1] drawn in float32, then cast (int8: all ones)
    Normal   normal with mean -1 and standard deviation 1 drawn in float32, then cast (int8: all ones)
    Randn    standard normal drawn in float32, then cast
    Zero     all zeros
    One      all ones
    Bool tensors get random bools under Auto and Integer.
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
    if supply in (TensorSupplyType.Auto, TensorSupplyType.Integer):
        if tdt == torch.bool:
            return torch.randint(0, 2, shape, device=device).bool()
        if _unsigned(tdt):
            return torch.randint(0, 3, shape, device=device, dtype=torch.int64).to(tdt)
        if _is_fp8(tdt):
            return torch.randint(-128, 128, shape, device=device, dtype=torch.int64).to(torch.float32).to(tdt)
        if supply is TensorSupplyType.Auto and tdt in (torch.float16, torch.bfloat16, torch.float32):
            return (torch.rand(shape, device=device, dtype=torch.float32) * 2 - 1).to(tdt)
        return torch.randint(-2, 3, shape, device=device, dtype=torch.int64).to(tdt)
    if tdt == torch.int8 and supply in (TensorSupplyType.Uniform, TensorSupplyType.Normal):
        return torch.ones(shape, dtype=tdt, device=device)
    if supply is TensorSupplyType.Uniform:
        vals = torch.rand(shape, device=device, dtype=torch.float32) * 2 - 1
    elif supply is TensorSupplyType.Normal:
        vals = torch.randn(shape, device=device, dtype=torch.float32) - 1
    else:  # Randn
        vals = torch.randn(shape, device=device, dtype=torch.float32)
    if tdt == torch.bool:
        return vals != 0
    return vals.to(tdt)


def _is_fp8(tdt) -> bool:
    return "float8" in str(tdt)


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
