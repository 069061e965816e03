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

    def __call__(self, shape, dtype="float32", data=None, strides=None, elem_offset=None, **_ignored):
        """A parameter annotation; with `data` (inside a kernel), a buffer over existing storage:
        `T.Tensor((K * C, F), dtype, kernel.data)` is `kernel` seen with another shape of equal
        size, as T.view; an int64 address `data` reads memory there, as T.make_tensor."""
        if data is not None:
            return self.over(data, shape, dtype, strides, elem_offset)
        if isinstance(shape, (int,)) or hasattr(shape, "dtype") and not isinstance(shape, (tuple, list)):
            shape = (shape,)
        if not isinstance(shape, (tuple, list)):
            raise DSLTypeError(f"T.{self.name}: expected a shape tuple such as (M, N), got {shape!r}")
        if getattr(dtype, "tl_pointer_marker", False):
            dtype = dt.int64  # T.Tensor([n], T.ptr): a table of addresses, stored as int64
        return TensorSpec(tuple(shape), dt.as_dtype(dtype), tuple(strides) if strides else None)

    def over(self, data, shape, dtype, strides, elem_offset):
        from .views import make_tensor  # views builds on this module

        if elem_offset is not None and not (isinstance(elem_offset, int) and elem_offset == 0):
            raise DSLTypeError(f"T.{self.name}(..., data, elem_offset={elem_offset!r}): an element offset into "
                               "existing storage is not supported; slice the buffer in T.copy instead")
        return make_tensor(data, shape, dtype, strides)

    def __getitem__(self, item) -> TensorSpec:
        if not isinstance(item, tuple) or len(item) != 2:
            raise DSLTypeError(f"T.{self.name}[shape, dtype] expects two items, got {item!r}")
        return self(item[0], item[1])


TensorType = _TensorType  # for other annotation kinds (views.py)
Tensor = _TensorType("Tensor")
Buffer = _TensorType("Buffer")
StridedTensor = _TensorType("StridedTensor")
