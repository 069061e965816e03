"""Data types: one interned `DType` per name, a `str` subclass equal to that name.

`T.float16 == "float16"`, it hashes like the string, works as a dict key and in
`getattr(torch, T.float16)`; it also knows its `bits`, `lanes`, `kind` and torch
dtype. `DType(x)` accepts a name ("float16", "float", "float16x4"), a DType, a torch
or numpy dtype, or Python's bool/int/float. Calling one casts: `T.float32(x)`.

Which dtypes our backends compute with is decided in `transform/check_dtypes.py`;
this module only describes them (int4, float6 and friends exist so user code that
names them runs, and kernels that store them fail with a clear message). float4_e2m1fn
is computed: a (..., N) buffer of it is a (..., N // 2) torch.float4_e2m1fn_x2 tensor.
"""
from __future__ import annotations

import re

# name -> (bits per lane, kind, DLPack type code or None for TVM-style custom types).
# Kinds: "int", "uint", "float", "bool".
_SCALARS: dict[str, tuple[int, str, int | None]] = {
    "bool": (8, "bool", 6),
    "int4": (4, "int", 0), "int8": (8, "int", 0), "int16": (16, "int", 0), "int32": (32, "int", 0),
    "int64": (64, "int", 0),
    "uint4": (4, "uint", 1), "uint8": (8, "uint", 1), "uint16": (16, "uint", 1), "uint32": (32, "uint", 1),
    "uint64": (64, "uint", 1),
    "float16": (16, "float", 2), "float32": (32, "float", 2), "float64": (64, "float", 2),
    "bfloat16": (16, "float", 4),
    # NVIDIA TensorFloat-32: float32 storage, values rounded to a 10-bit mantissa.
    "tfloat32": (32, "float", None),
    "float8_e3m4": (8, "float", 7), "float8_e4m3b11fnuz": (8, "float", 9),
    "float8_e4m3fn": (8, "float", 10), "float8_e4m3fnuz": (8, "float", 11), "float8_e5m2": (8, "float", 12),
    "float8_e5m2fnuz": (8, "float", 13), "float8_e8m0fnu": (8, "float", 14),
    "float6_e2m3fn": (6, "float", 15), "float6_e3m2fn": (6, "float", 16),
    "float4_e2m1fn": (4, "float", 17),
    # One FP4 value per byte: the shared-memory layout of tcgen05 f8f6f4 operands.
    "float4_e2m1_unpacked": (8, "float", None),
    # An address (T.access_ptr, T.call_extern results); not storable.
    "handle": (64, "handle", 3),
}
_ALIASES = {
    "float": "float32", "half": "float16", "double": "float64", "int": "int32", "uint": "uint32",
    "long": "int64", "short": "int16", "ulong": "uint64",
    # NOTE: e4m3 is computed as e4m3fn by our backends (as CUDA does); one object for both.
    "float8_e4m3": "float8_e4m3fn", "e4m3_float8": "float8_e4m3fn", "e5m2_float8": "float8_e5m2",
    "e4m3fnuz_float8": "float8_e4m3fnuz",
    "custom[tfloat32]": "tfloat32", "custom[float4_e2m1_unpacked]8": "float4_e2m1_unpacked",
    "bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "tf32": "tfloat32",
}
_LANES = re.compile(r"^(.*?)x(\d+)$")
_CACHE: dict[str, "DType"] = {}


def _parse(name: str) -> tuple[str, str, int]:
    """(canonical name, scalar name, lanes) of a dtype name, or raise TypeError."""
    name = _ALIASES.get(name, name)
    if name in _SCALARS:
        return name, name, 1
    m = _LANES.match(name)
    if m:
        base = _ALIASES.get(m.group(1), m.group(1))
        lanes = int(m.group(2))
        if base in _SCALARS and lanes > 1:
            return f"{base}x{lanes}", base, lanes
    raise TypeError(f"unknown dtype {name!r}; expected a name such as 'float16', 'bfloat16', 'int8', "
                    f"'float8_e4m3fn' or a vector 'float16x4' (known: {', '.join(_SCALARS)})")


class DType(str):
    """A TileLang data type. A `str` equal to its canonical name; see the module docstring.

    Example::

        T.dtype("half") is T.float16          # True: one object per dtype
        T.float16 == "float16"                # True
        T.bfloat16.bits, T.float16x4.lanes    # 16, 4
        T.float8_e4m3fn.as_torch()            # torch.float8_e4m3fn
    """

    def __new__(cls, value):
        if isinstance(value, DType):
            return value
        name = value if isinstance(value, str) else _name_of(value)
        hit = _CACHE.get(name)
        if hit is not None:
            return hit
        canon, scalar, lanes = _parse(name)
        obj = _CACHE.get(canon)
        if obj is None:
            obj = str.__new__(cls, canon)
            bits, kind, code = _SCALARS[scalar]
            obj.__dict__.update(name=canon, bits=bits, kind=kind, lanes=lanes, scalar_name=scalar, _code=code)
            _CACHE[canon] = obj
        _CACHE[name] = obj
        return obj

    def __init__(self, value):
        pass  # everything happens in __new__ (instances are interned)

    def __setattr__(self, key, value):
        raise AttributeError(f"dtype {self} is immutable")

    def __reduce__(self):
        return (DType, (self.name,))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"T.{self.name}"

    @property
    def bytes(self) -> int:
        """Bytes per element (at least 1: sub-byte types report 1)."""
        return max(1, self.bits * self.lanes // 8)

    @property
    def itemsize(self) -> int:
        return self.bytes

    @property
    def type_code(self) -> int:
        """The DLPack type code (0 int, 1 uint, 2 float, 4 bfloat, 6 bool, 7.. float8/6/4)."""
        if self._code is None:
            raise ValueError(f"dtype {self} has no DLPack type code")
        return self._code

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def is_signed(self) -> bool:
        return self.kind in ("int", "float")

    def with_lanes(self, lanes: int) -> "DType":
        """The vector type with `lanes` lanes of this scalar type (1: the scalar)."""
        return DType(self.scalar_name if lanes == 1 else f"{self.scalar_name}x{int(lanes)}")

    def element_of(self) -> "DType":
        return DType(self.scalar_name)

    def is_float4_e2m1fn(self) -> bool:
        return self.scalar_name == "float4_e2m1fn"

    def is_float4_e2m1_unpacked(self) -> bool:
        return self.scalar_name == "float4_e2m1_unpacked"

    def is_float4(self) -> bool:
        return self.is_float4_e2m1fn() or self.is_float4_e2m1_unpacked()

    def as_torch(self):
        """The torch dtype that stores this dtype (int4 -> int8, tfloat32 -> float32 ...)."""
        return to_torch(self)

    def __call__(self, *args, is_size_var=False):
        """`T.float32(x)`: `x` converted to this dtype (a typed constant when `x` is a number);
        `n = T.int32()` (TVM style): a new variable of this dtype, named by the assignment."""
        if self.lanes > 1:  # `T.float32x2(a, b)`: a parse-time vector value
            from .frontend.vector import construct

            return construct(self, args)
        if len(args) > 1:
            raise TypeError(f"T.{self.name}(value) takes one value, got {len(args)}")
        from .ir.expr import Var, cast

        if not args or args[0] is None:
            return Var("", self)
        return cast(self, args[0])


def _name_of(value) -> str:
    """The dtype name of a torch/numpy dtype or Python type, or raise TypeError."""
    tagged = getattr(value, "tl_dtype", None)  # T.handle / T.boolean: functions that also name a dtype
    if isinstance(tagged, str):
        return tagged
    if value is bool:
        return "bool"
    if value is int:
        return "int32"
    if value is float:
        return "float32"
    mod = getattr(value, "__module__", "") if isinstance(value, type) else type(value).__module__
    if mod.startswith("torch"):
        name = str(value).replace("torch.", "")
        return _TORCH_SPECIAL.get(name, name)
    if mod.startswith("numpy"):
        import numpy as np

        return np.dtype(value).name
    raise TypeError(f"expected a dtype (a name such as 'float16', T.<dtype>, a torch or numpy dtype), "
                    f"got {value!r} ({type(value).__name__})")


_TORCH_SPECIAL = {"float4_e2m1fn_x2": "float4_e2m1fnx2", "half": "float16", "float": "float32",
                  "double": "float64", "long": "int64", "int": "int32", "short": "int16"}
# dtypes torch has no type for: the torch dtype that holds their bits.
_TORCH_STORAGE = {"tfloat32": "float32", "int4": "int8", "uint4": "uint8", "float4_e2m1_unpacked": "uint8"}


def as_dtype(value) -> DType:
    """Accept a DType, a name ("float16", "float"), a torch/numpy dtype, or bool/int/float."""
    return DType(value)


def to_torch(dtype):
    """The torch dtype for `dtype` (the storage dtype where torch has no such type)."""
    import torch

    d = as_dtype(dtype)
    if d.scalar_name == "float4_e2m1fn" and d.lanes in (1, 2):  # torch packs two per byte
        return getattr(torch, "float4_e2m1fn_x2", torch.int8)
    if d.lanes != 1:
        raise ValueError(f"vector dtype {d} has no torch equivalent")
    name = _TORCH_STORAGE.get(d.name, d.name)
    t = getattr(torch, name, None)
    if not isinstance(t, torch.dtype):
        raise ValueError(f"dtype {d} has no torch equivalent in torch {torch.__version__}")
    return t


def promote(a: DType, b: DType) -> DType:
    """Result dtype of a binary arithmetic op on two typed operands."""
    if a == b:
        return a
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            if a.bits != b.bits:
                return a if a.bits > b.bits else b
            return float32  # float16 with bfloat16, tfloat32 with float32
        return a if a.is_float else b
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    return a if a.kind == "int" else b


BY_NAME: dict[str, DType] = {n: DType(n) for n in _SCALARS}
bool_ = BY_NAME["bool"]
int8, int16, int32, int64 = (BY_NAME[f"int{b}"] for b in (8, 16, 32, 64))
uint8, uint16, uint32, uint64 = (BY_NAME[f"uint{b}"] for b in (8, 16, 32, 64))
float16, bfloat16, float32, float64 = (BY_NAME[n] for n in ("float16", "bfloat16", "float32", "float64"))
float8_e4m3fn, float8_e5m2 = BY_NAME["float8_e4m3fn"], BY_NAME["float8_e5m2"]
tfloat32 = BY_NAME["tfloat32"]
