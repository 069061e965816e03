"""Type annotations users write: `T.Tensor((M, K), "float16")`, `T.Tensor[(M, K), dtype]`, `T.int32`."""
from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as dt
from ..errors import DSLTypeError


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple
    dtype: dt.DType
    strides: tuple | None = None


class _TensorType:
    """`T.Tensor(shape, dtype)` or `T.Tensor[shape, dtype]`: a global tensor parameter."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, shape, dtype="float32", strides=None, **_ignored) -> TensorSpec:
        if isinstance(shape, (int,)) or hasattr(shape, "dtype") and not isinstance(shape, (tuple, list)):
            shape = (shape,)
        if not isinstance(shape, (tuple, list)):
            raise DSLTypeError(f"T.{self.name}: expected a shape tuple such as (M, N), got {shape!r}")
        if getattr(dtype, "tl_pointer_marker", False):
            dtype = dt.int64  # T.Tensor([n], T.ptr): a table of addresses, stored as int64
        return TensorSpec(tuple(shape), dt.as_dtype(dtype), tuple(strides) if strides else None)

    def __getitem__(self, item) -> TensorSpec:
        if not isinstance(item, tuple) or len(item) != 2:
            raise DSLTypeError(f"T.{self.name}[shape, dtype] expects two items, got {item!r}")
        return self(item[0], item[1])


TensorType = _TensorType  # for other annotation kinds (views.py)
Tensor = _TensorType("Tensor")
Buffer = _TensorType("Buffer")
StridedTensor = _TensorType("StridedTensor")
