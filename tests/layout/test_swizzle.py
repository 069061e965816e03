"""The 16-byte-chunk XOR swizzle equals the device header's and is bank-conflict-free."""
import itertools
import re
from pathlib import Path

import pytest

from tilelang.ir.buffer import Buffer
from tilelang.layout import Layout, make_swizzled_layout
from tilelang.layout.swizzle import (conflict_free, ldmatrix_offsets, vector_store_offsets)

HEADER = Path(__file__).resolve().parents[2] / "tilelang/include/tl/gemm_sm80.h"


def device_swizzle_offset(k_row, k_bytes, row, col):
    """tl::swizzle_offset<kRow, kBytes>(row, col), transcribed from gemm_sm80.h."""
    per = 16 // k_bytes
    chunks = k_row // per
    if k_row % per != 0:
        return row * k_row + col
    if chunks % 8 == 0:
        f = row % 8
    elif chunks == 4:
        f = (row // 2) % 4
    elif chunks == 2:
        f = (row // 4) % 2
    else:
        return row * k_row + col
    return row * k_row + ((col // per) ^ f) * per + col % per


def test_header_still_has_the_transcribed_cases():
    src = HEADER.read_text()
    for case in ("kChunks % 8 == 0", "kChunks == 4", "kChunks == 2",
                 "(col / kPer) ^ (row % 8)", "(col / kPer) ^ ((row / 2) % 4)", "(col / kPer) ^ ((row / 4) % 2)"):
        assert case in re.sub(r"\s+", " ", src), case


SHAPES = [(rows, cols, b) for b in (1, 2, 4, 8) for cols in (8, 16, 24, 32, 48, 64, 128, 192)
          for rows in (8, 32) if cols * b >= 16]


@pytest.mark.parametrize("rows,cols,nbytes", SHAPES)
def test_matches_device_and_is_bijective(rows, cols, nbytes):
    L = make_swizzled_layout(rows, cols, nbytes)
    assert L.is_bijective() and L.output_shape() == (rows, cols)
    for r, c in itertools.product(range(rows), range(cols)):
        pr, pc = L.map(r, c)
        assert pr * cols + pc == device_swizzle_offset(cols, nbytes, r, c)


# Row widths the swizzle handles: 16, 32, 64 bytes and multiples of 128 bytes.
SWIZZLED = [(32, w // b, b) for b in (1, 2, 4) for w in (16, 32, 64, 128, 256, 384)]


@pytest.mark.parametrize("rows,cols,nbytes", SWIZZLED)
def test_ldmatrix_rows_are_conflict_free(rows, cols, nbytes):
    L = make_swizzled_layout(rows, cols, nbytes)
    for row0 in range(0, rows, 8):
        for chunk in range(cols * nbytes // 16):
            offs = ldmatrix_offsets(L, row0, chunk, nbytes)
            assert len({(o // 16) % 8 for o in offs}) == 8
            assert conflict_free(offs), (row0, chunk, offs)


@pytest.mark.parametrize("rows,cols,nbytes", SWIZZLED)
def test_warp_vector_stores_are_conflict_free(rows, cols, nbytes):
    L = make_swizzled_layout(rows, cols, nbytes)
    total = rows * cols * nbytes // 16
    for first in range(0, total, 32):           # one warp: 32 x 16 B = 4 phases of 8 threads
        for phase in range(4):
            offs = vector_store_offsets(L, first + phase * 8, nbytes)
            assert conflict_free(offs), (first, phase, offs)


def test_unswizzled_ldmatrix_conflicts_so_the_check_can_fail():
    ident = make_swizzled_layout(8, 60, 2)       # 120-byte rows: left unswizzled
    plain = ldmatrix_offsets(Layout.identity((8, 64)), 0, 0, 2)
    assert not conflict_free(plain)              # identity on 128-byte rows: 8-way conflict
    assert not conflict_free(ldmatrix_offsets(ident, 0, 0, 2))
    assert ident.map(3, 17) == (3, 17)


def test_picture_in_docstring_and_buffer_form():
    L = make_swizzled_layout(Buffer("A_shared", (16, 64), "float16", "shared"))
    assert L == make_swizzled_layout(16, 64, "float16")
    chunks = {r: [L.map(r, c * 8)[1] // 8 for c in range(8)] for r in (0, 1, 2, 7)}
    doc = re.sub(r"\s+", " ", make_swizzled_layout.__doc__)
    for r, row in chunks.items():
        assert f"row {r}: " + " ".join(map(str, row)) in doc
