"""Scalar data types: one `DType` object per name, convertible from strings and torch dtypes.

`T.float16` and friends are these objects; calling one casts a value (`T.float32(x)`).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    name: str
    bits: int
    kind: str  # "float", "int", "uint", "bool"

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"T.{self.name}"

    @property
    def bytes(self) -> int:
        return max(1, self.bits // 8)

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

    def __call__(self, value):
        """Cast `value` to this dtype: `T.float32(x)`."""
        from .ir.expr import cast

        return cast(self, value)


_ALL = [
    DType("bool", 8, "bool"),
    DType("int8", 8, "int"), DType("int16", 16, "int"), DType("int32", 32, "int"), DType("int64", 64, "int"),
    DType("uint8", 8, "uint"), DType("uint16", 16, "uint"), DType("uint32", 32, "uint"), DType("uint64", 64, "uint"),
    DType("float16", 16, "float"), DType("bfloat16", 16, "float"),
    DType("float32", 32, "float"), DType("float64", 64, "float"),
    DType("float8_e4m3fn", 8, "float"), DType("float8_e5m2", 8, "float"),
    DType("handle", 64, "handle"),  # an address (T.access_ptr, T.call_extern results); not storable
]
BY_NAME: dict[str, DType] = {d.name: d for d in _ALL}
_ALIASES = {
    "float": "float32", "half": "float16", "double": "float64", "int": "int32",
    "float8_e4m3": "float8_e4m3fn", "e4m3_float8": "float8_e4m3fn", "e5m2_float8": "float8_e5m2",
    "bf16": "bfloat16", "fp16": "float16", "fp32": "float32",
}

bool_ = BY_NAME["bool"]
int8, int16, int32, int64 = (BY_NAME[f"int{b}"] for b in (8, 16, 32, 64))
uint8, uint16, uint32, uint64 = (BY_NAME[f"uint{b}"] for b in (8, 16, 32, 64))
float16, bfloat16, float32, float64 = (BY_NAME[n] for n in ("float16", "bfloat16", "float32", "float64"))
float8_e4m3fn, float8_e5m2 = BY_NAME["float8_e4m3fn"], BY_NAME["float8_e5m2"]


def as_dtype(value) -> DType:
    """Accept a DType, a name ("float16", "float"), or a torch dtype."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        name = _ALIASES.get(value, value)
        if name in BY_NAME:
            return BY_NAME[name]
        raise TypeError(f"unknown dtype {value!r}; expected one of {sorted(BY_NAME)}")
    mod = type(value).__module__
    if mod == "torch":
        name = str(value).replace("torch.", "")
        return as_dtype(name)
    if value is bool:
        return bool_
    if value is int:
        return int32
    if value is float:
        return float32
    raise TypeError(f"expected a dtype (name, T.<dtype> or torch dtype), got {value!r}")


def to_torch(dtype: DType):
    import torch

    return getattr(torch, dtype.name)


def promote(a: DType, b: DType) -> DType:
    """Result dtype of a binary arithmetic op on two typed operands."""
    if a == b:
        return a
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            if a.bits != b.bits:
                return a if a.bits > b.bits else b
            return float32  # float16 with bfloat16
        return a if a.is_float else b
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    return a if a.kind == "int" else b
