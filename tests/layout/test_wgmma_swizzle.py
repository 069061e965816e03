"""make_wgmma_swizzled_layout: the widest bank swizzle the row divides, row-major otherwise; the
public module path tilelang.layout.swizzle names it and the other layout makers."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import DSLTypeError
from tilelang.layout import (
    make_full_bank_swizzled_layout,
    make_half_bank_swizzled_layout,
    make_linear_layout,
    make_quarter_bank_swizzled_layout,
    make_wgmma_swizzled_layout,
)
from tilelang.layout import swizzle as swizzle_module


def _shared(shape, dtype):
    box = {}

    @T.prim_func
    def probe(A: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=1):
            box["buf"] = T.alloc_shared(shape, dtype)

    assert probe is not None
    return box["buf"]


@pytest.mark.parametrize("shape, dtype, expect", [
    ((64, 64), "float16", make_full_bank_swizzled_layout),
    ((64, 32), "float16", make_half_bank_swizzled_layout),
    ((32, 16), "float16", make_quarter_bank_swizzled_layout),
    ((16, 32), "float32", make_full_bank_swizzled_layout),
    ((16, 16), "float32", make_half_bank_swizzled_layout),
    ((8, 128), "int8", make_full_bank_swizzled_layout),
    ((2, 16, 64), "bfloat16", make_full_bank_swizzled_layout),
    ((4, 64), "float16", make_linear_layout),
    ((16, 8), "float16", make_linear_layout),
    ((12, 8), "float64", make_linear_layout),
    ((16, 8), "float64", make_quarter_bank_swizzled_layout),
])
def test_picks_the_widest_swizzle_the_row_divides(shape, dtype, expect):
    buf = _shared(shape, dtype)
    lay = make_wgmma_swizzled_layout(buf)
    assert lay.is_equal(expect(buf))
    assert lay.is_bijective()
    assert swizzle_module.make_wgmma_swizzled_layout is make_wgmma_swizzled_layout


def test_unsupported_tiles_raise():
    with pytest.raises(DSLTypeError, match="float64 K-major"):
        make_wgmma_swizzled_layout(_shared((16, 16), "float64"))
    with pytest.raises(DSLTypeError, match="16-byte chunks"):
        make_wgmma_swizzled_layout(_shared((16, 12), "float16"))


def test_public_module_path_exports_layout_makers():
    for name in ("make_full_bank_swizzled_layout", "make_half_bank_swizzled_layout",
                 "make_quarter_bank_swizzled_layout", "make_linear_layout", "make_gemm_fragment_8x8",
                 "make_gemm_fragment_8x8_transposed", "make_fully_replicated_layout_fragment",
                 "make_swizzled_layout"):
        assert getattr(swizzle_module, name) is getattr(tilelang.layout, name)


def test_gemm_with_wgmma_layout_tiles_matches_float64():
    M, N, K = 64, 64, 64

    @T.prim_func
    def mm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((M, K), "float16")
            b_s = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.annotate_layout({a_s: make_wgmma_swizzled_layout(a_s),
                               b_s: make_wgmma_swizzled_layout(b_s, k_major=False)})
            T.clear(acc)
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.gemm(a_s, b_s, acc)
            T.copy(acc, C)

    k = tilelang.compile(mm, out_idx=[2], target="cpu")
    a = torch.randn(M, K).half()
    b = torch.randn(K, N).half()
    ref = a.double() @ b.double()
    torch.testing.assert_close(k(a, b).double(), ref, rtol=1e-3, atol=1e-3)
