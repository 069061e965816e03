"""T.reduce_sum / reduce_abssum into a 16-bit float fragment on the CPU backend: the sum accumulates in float32 and
rounds once to the destination's dtype. It rounded every add to bf16 (0.4-0.7 off over 128 values of randn, where
one rounding of the float32 sum is at most half a bf16 ulp of the result)."""
import pytest
import torch

import tilelang
import tilelang.language as T


def program(dtype, kind, clear):
    M = N = 128

    @T.prim_func
    def f(A: T.Tensor((M, N), dtype), B: T.Tensor((M,), dtype)):
        with T.Kernel(1, threads=32):
            src = T.alloc_fragment((M, N), dtype)
            dst = T.alloc_fragment((M,), dtype)
            T.copy(A, src)
            T.copy(B, dst)
            if kind == "sum":
                T.reduce_sum(src, dst, dim=1, clear=clear)
            else:
                T.reduce_abssum(src, dst, dim=1)  # always clears (as the public one: no clear argument)
            T.copy(dst, B)

    return f


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("kind,clear", [("sum", True), ("sum", False), ("abssum", True)])
def test_16_bit_sums_round_once(dtype, kind, clear):
    td = getattr(torch, dtype)
    a = torch.randn(128, 128).to(td)
    b = torch.randn(128).to(td)
    b0 = b.clone()
    tilelang.compile(program(dtype, kind, clear), target="cpu")(a, b)
    terms = a.double() if kind == "sum" else a.double().abs()
    ref = terms.sum(1) + (0 if clear else b0.double())
    # the float32 sum (error ~1e-5 here) rounded once to the dtype: within half an ulp of the result
    torch.testing.assert_close(b.double(), ref, rtol=2 ** -8, atol=1e-3)
