"""tilelang.language.dtypes (every public dtype name) and tilelang.language.fp8 (platform FP8
choice), with an FP8 round trip on the CPU backend checked against torch's conversion."""
import pytest
import torch

import tilelang
import tilelang.language as T
import tilelang.language.dtypes as D
from tilelang.language.fp8 import determine_fp8_type, determine_torch_fp8_type


def test_every_exported_name_is_a_dtype_on_T():
    assert len(D.__all__) > 150
    for name in D._all_dtypes:
        d = getattr(D, name)
        # T.handle is TVM's function (a parameter annotation, a new address variable), naming the dtype
        on_t = T.dtype(T.handle) if name == "handle" else getattr(T, name)
        assert isinstance(d, T.dtype) and on_t is d, name
    assert (T.int, T.uint, T.long, T.short, T.half, T.double) == ("int32", "uint32", "int64", "int16", "float16",
                                                                 "float64")
    assert T.float8_e4m3 is T.float8_e4m3fn and T.tfloat32x4.lanes == 4 and T.bfloat16x2.bits == 16


def test_torch_table_and_helpers():
    from tilelang.language.dtypes import _TORCH_DTYPE_TO_STR, dtype

    assert dtype(_TORCH_DTYPE_TO_STR[torch.float16]) is T.float16
    assert _TORCH_DTYPE_TO_STR[torch.float8_e4m3fn] == "float8_e4m3fn"
    assert D.get_tvm_dtype("half") is T.float16
    assert D.is_f8f6f4_family(T.float8_e5m2) and D.is_f8f6f4_family(T.float4_e2m1fn)
    assert not D.is_f8f6f4_family(T.float16) and D.is_float4(T.float4_e2m1_unpacked)
    D.validate_gemm_ab_dtypes(T.float16, "float16")
    D.validate_gemm_ab_dtypes(T.float8_e4m3fn, T.float4_e2m1fn, allow_f8f6f4_mixed=True)
    with pytest.raises(ValueError, match="one dtype"):
        D.validate_gemm_ab_dtypes(T.float16, T.bfloat16)


def test_determine_fp8_type():
    assert determine_fp8_type() is T.float8_e4m3fn and determine_fp8_type("e5m2") is T.float8_e5m2
    assert determine_torch_fp8_type() is torch.float8_e4m3fn and determine_torch_fp8_type("e5m2") is torch.float8_e5m2
    with pytest.raises(ValueError, match="e4m3"):
        determine_fp8_type("e3m4")


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_fp8_roundtrip_with_chosen_type(fmt):
    fp8 = determine_fp8_type(fmt)
    n = 128

    @T.prim_func
    def k(X: T.Tensor((n,), T.float32), Q: T.Tensor((n,), fp8), Y: T.Tensor((n,), T.float64)):
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(n):
                Q[i] = X[i]
                Y[i] = T.cast(T.cast(X[i], fp8), T.float64)

    kern = tilelang.compile(k, target="cpu")
    x = torch.randn(n, generator=torch.Generator().manual_seed(5)) * 40
    q = torch.zeros(n, dtype=fp8.as_torch())
    y = torch.full((n,), float("nan"), dtype=torch.float64)
    kern(x, q, y)
    ref = x.to(fp8.as_torch())
    assert torch.equal(q.view(torch.uint8), ref.view(torch.uint8))
    assert torch.equal(y, ref.double())


def test_resolve_torch_storage_dtype_names_the_tensors_that_hold_a_dtype():
    # sub-byte integers live in bytes, tf32 in float32, the rest in their own torch dtype
    want = {T.int4: T.int8, "uint4": T.uint8, T.tfloat32: T.float32, T.float16: T.float16, T.int32: T.int32,
            T.float8_e4m3fn: T.float8_e4m3fn,
            T.float4_e2m1fn: T.float4_e2m1fnx2 if hasattr(torch, "float4_e2m1fn_x2") else T.int8}
    for logical, storage in want.items():
        got = D.resolve_torch_storage_dtype(logical)
        assert got == storage and isinstance(got, T.dtype), (logical, got)
        assert got.as_torch() == T.dtype(logical).as_torch()  # a fixed point: storage of storage
