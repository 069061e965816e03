"""tvm.tirx.decl_buffer: a buffer outside a kernel for helpers that take one (layout makers); the
layouts built from it equal those built from a kernel's own shared tile, and a gemm whose tiles
carry them matches float64 torch."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang import tvm
from tilelang.errors import DSLTypeError
from tilelang.layout import (
    make_full_bank_swizzled_layout,
    make_half_bank_swizzled_layout,
)


def test_decl_buffer_fields():
    b = tvm.tirx.decl_buffer((8, 64), "float16", name="A", scope="shared")
    assert b.name == "A" and tuple(b.shape) == (8, 64) and str(b.dtype) == "float16" and b.scope == "shared"
    g = tvm.tirx.decl_buffer(16, "int32")
    assert tuple(g.shape) == (16,) and g.scope == "global"


def test_decl_buffer_refuses_views_and_unknown_scopes():
    with pytest.raises(DSLTypeError, match="not supported"):
        tvm.tirx.decl_buffer((4, 4), "float32", elem_offset=4)
    with pytest.raises(DSLTypeError, match="unknown scope"):
        tvm.tirx.decl_buffer((4, 4), "float32", scope="texture")


@pytest.mark.parametrize("maker, rows, cols", [(make_full_bank_swizzled_layout, 32, 64),
                                                (make_half_bank_swizzled_layout, 32, 32)])
def test_layout_from_declared_buffer_runs_in_a_gemm(maker, rows, cols):
    outside = maker(tvm.tirx.decl_buffer((rows, cols), "float16", scope="shared"))
    assert outside.is_bijective()
    M = N = 32

    @T.prim_func
    def mm(A: T.Tensor((M, cols), "float16"), B: T.Tensor((cols, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((rows, cols), "float16")
            b_s = T.alloc_shared((cols, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            assert maker(a_s).is_equal(outside)
            T.annotate_layout({a_s: outside})
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.clear(acc)
            T.gemm(a_s, b_s, acc)
            T.copy(acc, C)

    k = tilelang.compile(mm, out_idx=[2], target="cpu")
    a, b = torch.randn(M, cols).half(), torch.randn(cols, N).half()
    torch.testing.assert_close(k(a, b).double(), a.double() @ b.double(), rtol=1e-3, atol=1e-3)
