"""The dtype names users write: `T.float16`, `T.int`, `T.tfloat32`, `T.float16x4`, `T.dtype(x)` ...

Each is the interned `tilelang.dtypes.DType` of that name (a `str` subclass), so
`T.float16 == "float16"` and `getattr(torch, T.bfloat16)` work. What each means on
our backends (see `transform/check_dtypes.py`):

- int8..64, uint8..64, bool, float16/32/64: native C/CUDA types.
- bfloat16, float8_e4m3fn (= float8_e4m3), float8_e5m2: stored as bits, computed in float32.
- tfloat32: float32 storage; every store rounds to a 10-bit mantissa (nearest, ties away from
  zero), like CUDA's cvt.rna.tf32.f32. Torch tensors for it are float32.
- float4_e2m1fn: packed two per byte (element k in byte k // 2, the even element in the low
  nibble), computed in float32; a store rounds to nearest, ties to even, saturates at +-6 and
  turns NaN into +6 (as CUDA's __nv_fp4_e2m1(float)). A (..., N) buffer is a torch
  float4_e2m1fn_x2 (or uint8) tensor of shape (..., N // 2).
- float8_e8m0fnu (MX scales): a byte e is 2^(e - 127), 0xFF is NaN; computed in float32. A store
  rounds |x| UP to a power of two, |x| <= 2^-127 (0 too) gives 2^-127, |x| > 2^127 and inf give
  2^127 (as CUDA's __nv_cvt_float_to_e8m0 with satfinite / round-up, which the public TileLang
  uses; torch's own cast rounds to nearest instead); float64 converts from the double.
- int4, uint4 ("uint4": the public surface has no T.uint4): packed two per byte as float4_e2m1fn
  is; an int4 load sign-extends its nibble, a store keeps the low 4 bits, arithmetic and casts
  wrap to 4 bits. A (..., N) buffer is an int8 (uint4: uint8) tensor of shape (..., N // 2).
  T.gemm of int4 / uint4 tiles into int32 takes mma.sync m16n8k64 on CUDA.
- float6_*, float8_e4m3fnuz/e5m2fnuz/e3m4/e4m3b11fnuz,
  float4_e2m1_unpacked and vector (`x2`..`x64`) types: names only for now; a kernel that
  stores or computes them fails to compile with a message naming the dtype and target.
  `.as_torch()` gives their torch storage type (int4 -> int8, float4_e2m1fn -> float4_e2m1fn_x2;
  resolve_torch_storage_dtype gives it as a dtype).

Example::

    T.dtype("half") is T.float16, T.dtype(torch.bfloat16) is T.bfloat16   # True, True
    T.float32(1.5)          # a float32 constant
    T.int4.bits, T.float16x4.lanes, T.tfloat32.as_torch()   # 4, 4, torch.float32
"""
from __future__ import annotations

from typing import Union

from ..dtypes import BY_NAME, DType, as_dtype

dtype = DType
AnyDType = Union[DType, str, type]  # or a torch/numpy dtype

_ALIAS_NAMES = {"bool": "bool", "short": "int16", "int": "int32", "uint": "uint32", "long": "int64",
                "half": "float16", "float": "float32", "double": "float64", "float8_e4m3": "float8_e4m3fn"}
_VECTOR_BASES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                 "bfloat16", "float32", "float64", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
                 "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float6_e2m3fn",
                 "float6_e3m2fn", "float4_e2m1fn", "tfloat32")
_SCALAR_NAMES = [n for n in BY_NAME if n not in ("uint4",)]  # the public surface has no T.uint4

_all_dtypes: list[str] = []


def _export(name: str, value: DType) -> None:
    globals()[name] = value
    _all_dtypes.append(name)


for _n in _SCALAR_NAMES:
    _export(_n, BY_NAME[_n])
for _n, _target in _ALIAS_NAMES.items():
    _export(_n, BY_NAME[_target])
for _n in _VECTOR_BASES:
    for _lanes in (2, 4, 8, 16, 32, 64):
        _export(f"{_n}x{_lanes}", DType(f"{_n}x{_lanes}"))
del _n, _target, _lanes


def get_tvm_dtype(value) -> DType:
    """`value` as a DType (the public TileLang name of `T.dtype(value)`)."""
    return as_dtype(value)


def resolve_torch_storage_dtype(value) -> DType:
    """The dtype of the torch tensors that store `value`'s values: int4 -> int8, uint4 -> uint8,
    float4_e2m1fn -> float4_e2m1fnx2 (int8 where torch lacks it), tfloat32 -> float32, others themselves."""
    return as_dtype(as_dtype(value).as_torch())


def is_float4_e2m1fn(value) -> bool:
    """Packed 4-bit FP4 (E2M1)."""
    return as_dtype(value).is_float4_e2m1fn()


def is_float4_e2m1_unpacked(value) -> bool:
    """FP4 (E2M1) stored one value per byte."""
    return as_dtype(value).is_float4_e2m1_unpacked()


def is_float4(value) -> bool:
    """Either FP4 variant."""
    return as_dtype(value).is_float4()


def is_f8f6f4_family(value) -> bool:
    """An 8-, 6- or 4-bit float: the operand family of Blackwell's f8f6f4 MMA kinds."""
    d = as_dtype(value)
    return d.is_float4() or (d.is_float and d.bits in (8, 6) and d.scalar_name.startswith(("float8", "float6")))


def validate_gemm_ab_dtypes(a_dtype, b_dtype, *, a_in_tmem: bool = False, allow_f8f6f4_mixed: bool = False) -> None:
    """Raise ValueError unless A and B may differ in a GEMM: equal dtypes, A in tensor memory, or
    (with allow_f8f6f4_mixed) two members of the f8f6f4 family."""
    if a_in_tmem or as_dtype(a_dtype) == as_dtype(b_dtype):
        return
    if allow_f8f6f4_mixed and is_f8f6f4_family(a_dtype) and is_f8f6f4_family(b_dtype):
        return
    raise ValueError(f"a GEMM needs A and B of one dtype (mixed A/B is only for the f8f6f4 family), "
                     f"got A={as_dtype(a_dtype)}, B={as_dtype(b_dtype)}")


def __getattr__(name):
    # torch-keyed tables load torch on first use only: `import tilelang.language` stays light.
    if name == "_TORCH_DTYPE_TO_STR":
        import torch

        table = {}
        for n in BY_NAME:
            t = getattr(torch, n, None)
            if isinstance(t, torch.dtype):
                table[t] = n
        if hasattr(torch, "float4_e2m1fn_x2"):
            table[torch.float4_e2m1fn_x2] = "float4_e2m1fnx2"
        globals()[name] = table
        return table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = list(_all_dtypes) + ["dtype", "AnyDType", "get_tvm_dtype", "resolve_torch_storage_dtype",
                               "is_float4_e2m1fn", "is_float4_e2m1_unpacked",
                               "is_float4", "is_f8f6f4_family", "validate_gemm_ab_dtypes"]
