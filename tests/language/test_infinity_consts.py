"""`T.infinity(dtype)` and other non-finite constants stored into 16- and 8-bit float tensors.

float8_e5m2 has an infinity: `T.fill(A, T.infinity("float8_e5m2"))` stores it. The constant used to go
through the saturating float -> e5m2 conversion (the one runtime values take, as CUDA's satfinite one) and
became 57344, the largest finite e5m2 value. float8_e4m3fn has no infinity: the constant saturates to 448,
as torch converts it."""
import pytest
import torch

import tilelang
import tilelang.language as T


def program(dtype):
    @T.prim_func
    def main(A: T.Tensor((8,), dtype), B: T.Tensor((8,), dtype), C: T.Tensor((8,), dtype)):
        with T.Kernel(1, threads=8):
            F = T.alloc_fragment((8,), dtype)
            T.fill(F, -T.infinity(dtype))
            T.copy(F, A)
            for i in T.Parallel(8):
                B[i] = T.infinity(dtype)
                C[i] = T.max(F[i], T.Cast(dtype, 3.0))  # -inf as a max reduction's start

    return main


@pytest.mark.parametrize("dtype", ["float8_e5m2", "float8_e4m3fn", "float16", "bfloat16", "float32"])
def test_non_finite_constants_on_the_cpu(dtype):
    td = getattr(torch, dtype)
    a, b, c = (torch.zeros(8, dtype=td) for _ in range(3))
    tilelang.compile(program(dtype), target="cpu")(a, b, c)
    inf = torch.tensor(float("inf")).to(td).double()  # e4m3fn: 448
    torch.testing.assert_close(a.double(), (-inf).expand(8), equal_nan=True)
    torch.testing.assert_close(b.double(), inf.expand(8), equal_nan=True)
    torch.testing.assert_close(c.double(), torch.full((8,), 3.0, dtype=torch.float64))


@pytest.mark.nvrtc
def test_e5m2_infinity_is_stored_unsaturated_on_cuda():
    src = tilelang.compile(program("float8_e5m2"), target="cuda -arch=sm_90a").get_kernel_source()
    assert "tl_f32_to_fp8e5m2_nosat((float)(INFINITY))" in src
