"""make_{quarter,half,full}_bank_swizzled_layout: the XOR swizzle on byte offsets (CUTLASS's
Swizzle<B, 4, 3> written on byte addresses inside one 8-row tile), tiles stacked as
(col_tile, row_tile); usable in T.annotate_layout on the CPU backend and on CUDA."""
import warnings

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.ir.buffer import Buffer
from tilelang.layout import (make_full_bank_swizzled_layout, make_half_bank_swizzled_layout,
                             make_quarter_bank_swizzled_layout, make_swizzled_layout)
from tilelang.errors import DSLTypeError

MAKERS = {32: make_quarter_bank_swizzled_layout, 64: make_half_bank_swizzled_layout,
          128: make_full_bank_swizzled_layout}


def xor_swizzle_bytes(addr, width):
    """Byte address inside a tile of 8 rows x `width` bytes -> swizzled byte address:
    bits [4, 4 + log2(width/16)) ^= bits [7, ...) of the address."""
    bits = {32: 1, 64: 2, 128: 3}[width]
    return addr ^ (((addr >> 7) & ((1 << bits) - 1)) << 4)


@pytest.mark.parametrize("width", [32, 64, 128])
@pytest.mark.parametrize("bits", [8, 16, 32])
@pytest.mark.parametrize("rows,tiles_wide", [(8, 1), (32, 1), (16, 3)])
def test_matches_xor_formula_on_byte_offsets(width, bits, rows, tiles_wide):
    ebytes = bits // 8
    cols = width // ebytes * tiles_wide
    lay = MAKERS[width](rows, cols, bits)
    tile_elems = 8 * width // ebytes
    assert lay.output_shape() == (tiles_wide, rows // 8, tile_elems)
    t = lay.table()
    seen = set()
    for i in range(rows):
        for j in range(cols):
            ct, rt, off = (int(x) for x in t[i, j])
            assert (ct, rt) == (j * ebytes // width, i // 8)
            logical = (i % 8) * width + (j * ebytes) % width  # byte address inside the tile
            assert off * ebytes == xor_swizzle_bytes(logical, width)
            assert off % (16 // ebytes) == j % (16 // ebytes)  # 16-byte chunks move whole
            seen.add((ct, rt, off))
    assert len(seen) == rows * cols  # a bijection onto the stacked tiles
    assert lay.is_bijective()


def test_takes_buffers_with_leading_dims_and_one_tile_equals_make_swizzled_layout():
    buf = Buffer("S", (2, 16, 64), "float16", "shared")
    lay = make_full_bank_swizzled_layout(buf)
    assert lay.shape == (2, 16, 64) and lay.output_shape() == (2, 1, 2, 512)
    assert lay.map(1, 9, 8) == (1, 0, 1, 64 + 0 * 8)  # row 9: s = 1, chunk 1 ^ 1 = 0
    flat = lambda lay: np.ravel_multi_index(tuple(np.moveaxis(lay.table(), -1, 0)), lay.output_shape())
    for width, maker in MAKERS.items():
        b2 = Buffer("S", (32, width // 2), "float16", "shared")
        assert (flat(maker(b2)) == flat(make_swizzled_layout(b2))).all(), width


def test_bad_shapes_raise_naming_the_maker():
    with pytest.raises(DSLTypeError, match="make_half_bank_swizzled_layout.*multiple of 32"):
        make_half_bank_swizzled_layout(8, 16, 16)
    with pytest.raises(DSLTypeError, match="make_full_bank_swizzled_layout.*rows"):
        make_full_bank_swizzled_layout(12, 64, 16)


def annotated(maker, M, N, b):
    @T.prim_func
    def annotated(A: T.Tensor((M, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, b), T.ceildiv(M, b), threads=128) as (bx, by):
            A_s = T.alloc_shared((b, b), "float16")
            T.annotate_layout({A_s: maker(A_s)})
            T.copy(A[by * b, bx * b], A_s)
            for i, j in T.Parallel(b, b):
                A_s[i, j] = A_s[i, j] * 3 - 1
            T.copy(A_s, C[by * b, bx * b])

    return annotated


@pytest.mark.parametrize("width,b", [(128, 64), (64, 32), (32, 16)])
def test_annotate_layout_runs_on_cpu_and_swizzles_on_cuda(width, b):
    func = annotated(MAKERS[width], 64, 96, b)
    k = tilelang.compile(func, target="cpu")
    a = torch.randn(64, 96).half()
    out = torch.full((64, 96), float("nan"), dtype=torch.float16)
    k(a, out)
    assert (out.double() - (a.double() * 3 - 1)).abs().max().item() < 1e-2
    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        src = tilelang.compile(func, target="cuda -arch=sm_90a").get_kernel_source()
    assert f"A_s[tl::swizzle_offset<{b}, sizeof(tl_half)>(" in src
    assert not [str(w.message) for w in rec if "annotate_layout" in str(w.message)]
