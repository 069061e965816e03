"""make_gemm_fragment_8x8 (and transposed), make_linear_layout, make_fully_replicated_layout_fragment:
their maps against the ldmatrix lane table written out by hand, and kernels on the CPU backend that
annotate them against exact references."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.layout import (
    make_fully_replicated_layout_fragment,
    make_gemm_fragment_8x8,
    make_gemm_fragment_8x8_transposed,
    make_linear_layout,
)


def ldmatrix_lane_table():
    """{(row, col): (lane, slot)} of one 8x8 ldmatrix matrix of 16-bit values: each lane's 32-bit
    register holds two neighbouring columns, four lanes per row."""
    table = {}
    for lane in range(32):
        for slot in range(2):
            table[(lane // 4, (lane % 4) * 2 + slot)] = (lane, slot)
    return table


def test_gemm_fragment_8x8_is_the_ldmatrix_table():
    f = make_gemm_fragment_8x8()
    assert f.shape == (8, 8) and f.threads() == 32 and f.locals_per_thread() == 2
    for (r, c), (lane, slot) in ldmatrix_lane_table().items():
        assert (f.thread(r, c), f.index(r, c)) == (lane, slot)


def test_gemm_fragment_8x8_transposed_swaps_rows_and_columns():
    f = make_gemm_fragment_8x8_transposed()
    assert f.is_bijective()
    for (r, c), (lane, slot) in ldmatrix_lane_table().items():
        assert (f.thread(c, r), f.index(c, r)) == (lane, slot)


def test_repeated_transposed_fragment_stacks_matrices_in_registers():
    f = make_gemm_fragment_8x8_transposed().repeat([2, 1], repeat_on_thread=False)
    assert f.shape == (16, 8) and f.threads() == 32 and f.locals_per_thread() == 4
    for (r, c), (lane, slot) in ldmatrix_lane_table().items():
        for half in range(2):
            assert f.thread(half * 8 + c, r) == lane
            assert f.index(half * 8 + c, r) == half * 2 + slot


def test_linear_layout_is_row_major():
    buf_shape = (3, 4, 5)
    lay = make_linear_layout(buf_shape)
    assert lay.shape == buf_shape
    assert lay.map(2, 1, 3) == (2, 1, 3)
    with pytest.raises(Exception, match="constant shape"):
        make_linear_layout(object())


def test_fully_replicated_fragment_owners():
    f = make_fully_replicated_layout_fragment((2, 3), 8)
    assert f.threads() == 8 and f.locals_per_thread() == 6
    assert sorted(t for t, _ in f.owners(1, 2)) == list(range(8))
    assert {s for _, s in f.owners(1, 2)} == {5}
    with pytest.raises(Exception, match="positive int"):
        make_fully_replicated_layout_fragment((2, 3), 0)


@pytest.mark.parametrize("layout", ["8x8", "8x8_t", "8x8_t_rep", "linear_shared"])
def test_annotated_layouts_compute_exactly_on_cpu(layout):
    rows = 16 if layout == "8x8_t_rep" else 8

    @T.prim_func
    def main(A: T.Tensor((rows, 8), T.int32), B: T.Tensor((rows, 8), T.int32)):
        with T.Kernel(1, threads=32):
            frag = T.alloc_fragment((rows, 8), T.int32)
            smem = T.alloc_shared((rows, 8), T.int32)
            if layout == "8x8":
                T.annotate_layout({frag: make_gemm_fragment_8x8()})
            elif layout == "8x8_t":
                T.annotate_layout({frag: make_gemm_fragment_8x8_transposed()})
            elif layout == "8x8_t_rep":
                T.annotate_layout({frag: make_gemm_fragment_8x8_transposed().repeat([2, 1], repeat_on_thread=False)})
            else:
                T.annotate_layout({smem: make_linear_layout(smem)})
            for i, j in T.Parallel(rows, 8):
                frag[i, j] = A[i, j] * 3 - j
            T.copy(frag, smem)
            T.copy(smem, B)

    a = torch.randint(-1000, 1000, (rows, 8), dtype=torch.int32)
    b = torch.zeros(rows, 8, dtype=torch.int32)
    tilelang.compile(main, target="cpu")(a, b)
    expect = a.long() * 3 - torch.arange(8).long()
    assert torch.equal(b.long(), expect)


def test_replicated_fragment_annotation_reduces_on_cpu():
    @T.prim_func
    def main(A: T.Tensor((4, 64), T.float32), Out: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=64):
            tile = T.alloc_fragment((4, 64), T.float32)
            total = T.alloc_fragment((4,), T.float32)
            T.annotate_layout({total: make_fully_replicated_layout_fragment(total, 64)})
            T.copy(A, tile)
            T.reduce_sum(tile, total, dim=1)
            T.copy(total, Out)

    a = torch.randn(4, 64)
    out = torch.zeros(4)
    tilelang.compile(main, target="cpu")(a, out)
    torch.testing.assert_close(out.double(), a.double().sum(1), rtol=1e-5, atol=1e-5)
