"""tilelang.dtypes: DType objects behave as the public TileLang's (a str subclass), and kernels
written with T.dtype(...) values compute the right numbers on the CPU backend."""
import copy
import pickle

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.dtypes import DType, as_dtype, promote


def test_dtype_is_its_name():
    assert T.float16 == "float16" and "bfloat16" == T.bfloat16 and T.float16 != "float32"
    assert isinstance(T.float16, str) and str(T.float16) == "float16" and type(str(T.float16)) is str
    assert f"{T.int8}" == "int8" and repr(T.int8) == "T.int8"
    assert {T.float16: 1}["float16"] == 1 and {"int32": 2}[T.int32] == 2
    assert getattr(torch, T.bfloat16) is torch.bfloat16
    assert T.float32.name == "float32" and type(T.float32.name) is str


@pytest.mark.parametrize("value, expect", [
    ("float16", "float16"), ("half", "float16"), ("float", "float32"), ("double", "float64"),
    ("int", "int32"), ("uint", "uint32"), ("long", "int64"), ("short", "int16"),
    ("float8_e4m3", "float8_e4m3fn"), ("custom[tfloat32]", "tfloat32"),
    (torch.bfloat16, "bfloat16"), (torch.float8_e5m2, "float8_e5m2"), (torch.int64, "int64"),
    (np.float32, "float32"), (np.dtype("uint8"), "uint8"), (bool, "bool"), (int, "int32"), (float, "float32"),
])
def test_constructor_accepts_names_and_foreign_dtypes(value, expect):
    d = T.dtype(value)
    assert d == expect and d is T.dtype(expect) and T.dtype(d) is d


def test_interned_across_copy_and_pickle():
    for d in (T.float16, T.tfloat32, T.float16x4):
        assert copy.copy(d) is d and copy.deepcopy(d) is d and pickle.loads(pickle.dumps(d)) is d
    with pytest.raises(AttributeError):
        T.float16.bits = 8


@pytest.mark.parametrize("name, bits, lanes, nbytes, torch_dtype", [
    ("float16", 16, 1, 2, torch.float16), ("bfloat16", 16, 1, 2, torch.bfloat16),
    ("tfloat32", 32, 1, 4, torch.float32), ("int4", 4, 1, 1, torch.int8), ("uint4", 4, 1, 1, torch.uint8),
    ("float8_e4m3fn", 8, 1, 1, torch.float8_e4m3fn), ("float8_e8m0fnu", 8, 1, 1, torch.float8_e8m0fnu),
    ("float16x4", 16, 4, 8, None), ("int8x16", 8, 16, 16, None), ("bool", 8, 1, 1, torch.bool),
])
def test_attributes(name, bits, lanes, nbytes, torch_dtype):
    d = T.dtype(name)
    assert (d.bits, d.lanes, d.bytes, d.itemsize) == (bits, lanes, nbytes, nbytes)
    if torch_dtype is None:
        with pytest.raises(ValueError, match="vector dtype"):
            d.as_torch()
    else:
        assert d.as_torch() is torch_dtype


def test_lanes_and_codes():
    assert T.float16x4.with_lanes(1) is T.float16 and T.float16.with_lanes(8) is T.float16x8
    assert T.float16x4.element_of() is T.float16
    assert (T.int8.type_code, T.uint8.type_code, T.float32.type_code, T.bfloat16.type_code) == (0, 1, 2, 4)
    assert T.float4_e2m1fn.type_code == 17 and T.float4_e2m1fn.is_float4() and not T.float8_e5m2.is_float4()
    with pytest.raises(ValueError, match="no DLPack type code"):
        T.tfloat32.type_code
    assert T.float4_e2m1fn.as_torch() is getattr(torch, "float4_e2m1fn_x2", torch.int8)


def test_unknown_names_raise():
    for bad in ("float17", "floaty", "float16x1", "int32x"):
        with pytest.raises(TypeError, match="unknown dtype"):
            T.dtype(bad)
    with pytest.raises(TypeError, match="expected a dtype"):
        T.dtype(3.5)


def test_promote():
    assert promote(T.tfloat32, T.float32) is T.float32 and promote(T.tfloat32, T.tfloat32) is T.tfloat32
    assert promote(T.float16, T.bfloat16) is T.float32 and promote(T.int8, T.uint32) is T.uint32
    assert as_dtype("float") is T.float32 and DType("half") is T.float16


def test_calling_a_dtype_makes_a_typed_constant():
    c = T.float32(1.5)
    assert c.dtype is T.float32 and c.value == 1.5
    assert T.int8(300).value == 44 and T.int8(300).dtype is T.int8  # wraps like a C cast
    with pytest.raises(TypeError, match="takes one value"):
        T.float16(1.0, 2.0)
    v = T.float16x2(1.0, 2.0)  # a vector built from its lanes (frontend/vector.py)
    assert v.dtype is T.float16x2 and [x.value for x in v.values] == [1.0, 2.0]


def axpb_factory(n, dtype: T.dtype = T.float32):
    dtype = T.dtype(dtype)

    @T.prim_func
    def axpb(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype), a: dtype):
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(n):
                Y[i] = X[i] * a + 0.25

    return axpb


def test_kernel_with_dtype_from_torch_and_scalar_param_of_that_dtype():
    n = 64
    k = tilelang.compile(axpb_factory(n, torch.float64), target="cpu")
    x = torch.randn(n, dtype=torch.float64)
    y = torch.full((n,), float("nan"), dtype=torch.float64)
    k(x, y, 1.75)
    torch.testing.assert_close(y, x * 1.75 + 0.25, rtol=0, atol=0)
