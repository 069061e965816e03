"""check_dtypes: a kernel that stores or computes a dtype our backends lack fails at compile with
UnsupportedDTypeError naming the dtype, the use and the target (CPU and CUDA targets)."""
import pytest

import tilelang
import tilelang.language as T
from tilelang.transform.check_dtypes import UnsupportedDTypeError

TARGETS = ["cpu", "cuda -arch=sm_90a"]


def f6_param():
    @T.prim_func
    def k(A: T.Tensor((64,), T.float6_e3m2fn), B: T.Tensor((64,), T.int8)):
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(64):
                B[i] = A[i]

    return k


def f6_shared():
    @T.prim_func
    def k(A: T.Tensor((64,), T.int8), B: T.Tensor((64,), T.int8)):
        with T.Kernel(1, threads=32) as _:
            s = T.alloc_shared((64,), T.float6_e2m3fn)
            T.copy(A, s)
            T.copy(s, B)

    return k


def e5m2fnuz_cast():
    @T.prim_func
    def k(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(64):
                B[i] = T.cast(T.cast(A[i], T.float8_e5m2fnuz), T.float32)

    return k


def vector_local():
    @T.prim_func
    def k(A: T.Tensor((64,), T.float16), B: T.Tensor((64,), T.float16)):
        with T.Kernel(1, threads=32) as _:
            v = T.alloc_local((4,), T.float16x2)
            T.copy(A, B)
            _ = v

    return k


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("make, dtype, where, reason", [
    (f6_param, "float6_e3m2fn", "parameter A", "sub-byte"),
    (f6_shared, "float6_e2m3fn", "buffer s (shared", "sub-byte"),
    (e5m2fnuz_cast, "float8_e5m2fnuz", "expression", "float8 format"),
    (vector_local, "float16x2", "buffer v (local", "vector dtypes"),
])
def test_unsupported_dtype_is_named_with_target(make, dtype, where, reason, target):
    with pytest.raises(UnsupportedDTypeError) as info:
        tilelang.compile(make(), target=target)
    msg = str(info.value)
    kind = target.split()[0]
    assert f"dtype {dtype} is not supported by the {kind} backend" in msg, msg
    assert where in msg and reason in msg, msg


def test_error_points_at_the_allocation_line():
    with pytest.raises(UnsupportedDTypeError) as info:
        tilelang.compile(f6_shared(), target="cpu")
    assert "T.alloc_shared((64,), T.float6_e2m3fn)" in str(info.value)
    assert f"{__file__}:" in str(info.value)


def test_supported_dtypes_compile():
    # the same kernels with a supported dtype go through (the check does not reject everything)
    @T.prim_func
    def k(A: T.Tensor((64,), T.int8), B: T.Tensor((64,), T.tfloat32)):
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(64):
                B[i] = T.cast(T.cast(A[i], T.float8_e5m2), T.float32)

    for target in TARGETS:
        tilelang.compile(k, target=target)
