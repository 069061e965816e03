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
        dtype = dt.as_dtype(dtype)
        strides = _strides(self.name, shape, strides)
        if strides is not None and dtype.bits < 8 and _const(strides[-1]) != 1:
            raise DSLTypeError(f"T.{self.name}: a {dtype} tensor packs {8 // dtype.bits} values per byte along "
                               f"its last dim, whose stride must be 1; got strides {strides}")
        return TensorSpec(tuple(shape), dtype, strides)

    def over(self, data, shape, dtype, strides, elem_offset):
        from .views import make_tensor  # views builds on this module

        if elem_offset is not None and not (isinstance(elem_offset, int) and elem_offset == 0):
            raise DSLTypeError(f"T.{self.name}(..., data, elem_offset={elem_offset!r}): an element offset into "
                               "existing storage is not supported; slice the buffer in T.copy instead")
        return make_tensor(data, shape, dtype, strides)

    def __getitem__(self, item) -> TensorSpec:
        """`T.Tensor[shape, dtype]`; items that are all dims (`T.Tensor[(n,)]`, `T.Tensor[M, N]`) are the shape
        of a float32 tensor, as in the public TileLang."""
        if not isinstance(item, tuple):
            item = (item,)
        if all(not isinstance(x, (tuple, list, str)) for x in item):
            return self(item)
        if len(item) != 2:
            raise DSLTypeError(f"T.{self.name}[shape, dtype] expects two items, got {item!r}")
        return self(item[0], item[1])


def _strides(name, shape, strides):
    """The declared element strides as ints / integer expressions (T.dynamic symbols), one per dim."""
    if strides is None:
        return None
    if not isinstance(strides, (tuple, list)):
        strides = (strides,)
    if len(strides) != len(shape):
        raise DSLTypeError(f"T.{name}: {len(strides)} strides {tuple(strides)!r} for the {len(shape)} dims "
                           f"of shape {tuple(shape)!r}; give one stride per dim")
    from ..ir.buffer import _dim

    return tuple(_dim(s) for s in strides)


def _const(x):
    from ..arith.simplify import const_int

    return x if isinstance(x, int) else const_int(x)


def _is_dtype(x) -> bool:
    if isinstance(x, (dt.DType, str)):
        return True
    try:
        dt.as_dtype(x)
    except Exception:  # noqa: BLE001 -- anything that is not a dtype
        return False
    return not isinstance(x, (tuple, list, int))


class _StridedTensorType(_TensorType):
    """`T.StridedTensor(shape, strides, dtype)` or `T.StridedTensor[shape, strides, dtype]`: a global
    tensor parameter whose element (i, j, ...) lies at i * strides[0] + j * strides[1] + ... elements
    from its start; a stride may be a T.dynamic symbol, bound from the tensor's strides at call time.
    (`T.StridedTensor(shape, dtype, strides=...)` is read the same way.)"""

    def __call__(self, shape, *args, data=None, **kw):
        args = list(args)
        if "strides" in kw and args and _is_dtype(args[0]):  # (shape, dtype, strides=...): dtype second
            kw.setdefault("dtype", args.pop(0))
        names = ("strides", "dtype", "scope")
        if len(args) > len(names):
            raise DSLTypeError(f"T.{self.name}(shape, strides, dtype, scope): {1 + len(args)} positional arguments")
        for n, v in zip(names, args):
            if n in kw:
                raise DSLTypeError(f"T.{self.name}: {n} given twice")
            kw[n] = v
        strides, dtype, scope = kw.pop("strides", None), kw.pop("dtype", "float32"), kw.pop("scope", None)
        if scope not in (None, "global"):
            raise DSLTypeError(f"T.{self.name}: only global tensors take strides here, got scope={scope!r}")
        if strides is None and data is None:
            raise DSLTypeError(f"T.{self.name}(shape, strides, dtype) needs strides")
        return super().__call__(shape, dtype, data=data, strides=strides, **kw)

    def __getitem__(self, item) -> TensorSpec:
        if not isinstance(item, tuple) or len(item) not in (2, 3):
            raise DSLTypeError(f"T.{self.name}[shape, strides, dtype] expects three items, got {item!r}")
        return self(*item)


TensorType = _TensorType  # for other annotation kinds (views.py)
Tensor = _TensorType("Tensor")
Buffer = _TensorType("Buffer")
StridedTensor = _StridedTensorType("StridedTensor")
